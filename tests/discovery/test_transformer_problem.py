"""The FFN-unit discovery problem on a BERT encoder, the chunked output scale and the memory guard.

Fast: a small BERT built from a config object (random weights, the real ``transformers`` code);
the real all-MiniLM-L6-v2 runs in the slow test of ``tests/e2e/test_transformer_discovery.py``.
References are independent: the parent :class:`BoundaryTarget` (weights scattered into the full
matrices), the closed-form compensation written out here with a float64 pseudo-inverse, and the
whole model rerun with the edit installed.
"""

from __future__ import annotations

import copy

import pytest
import torch
from tiny_hf import tiny_bert, tiny_ids

from paramsym.discovery.problem import DiscoveryProblem
from paramsym.discovery.transformer import block_layout, ffn_unit_problem
from paramsym.errors import AttentionImplementationError, ShapeError, TooLargeError
from paramsym.targets import BoundaryTarget, FFNBoundaryTarget, Target
from paramsym.verdict import output_scale

transformers = pytest.importorskip("transformers")

N = 6


def ids() -> torch.Tensor:
    return tiny_ids(N)




@pytest.fixture(scope="module")
def problem() -> DiscoveryProblem:
    return ffn_unit_problem(tiny_bert(), ids(), layer=1, unit=5, name="tiny")


def _scattering_reference(problem) -> BoundaryTarget:
    """The parent :class:`BoundaryTarget` (θ scattered into the full weight matrices) in float64, on
    the same cached FFN input (a float32 forward pass differs in the last bits with the thread count)."""
    t = problem.target
    L = "encoder.layer.1"
    j, B = problem.info["unit"], problem.info["compensators"]
    model = t.model
    mask = torch.zeros(16, 32, dtype=torch.bool)
    mask[:, B] = True
    block = [f"{L}.intermediate.dense.weight[{j}]", f"{L}.intermediate.dense.bias[{j}]", (f"{L}.output.dense.weight", mask)]
    ref = BoundaryTarget(model, block, t.batch, in_layer=f"{L}.intermediate.dense", out_layer=f"{L}.output.dense",
                          units=[j, *B], activation=torch.nn.functional.gelu).to(torch.float64)
    assert (ref.h.reshape(t.h.shape) - t.h).abs().max() <= 1e-6
    ref.h = t.h.reshape(ref.h.shape).clone()
    return ref


def test_block_layout_and_cached_target_equal_the_scattering_boundary_target(problem) -> None:
    t = problem.target
    assert isinstance(t, FFNBoundaryTarget) and t.units == [5, *problem.info["compensators"]]
    B = problem.info["compensators"]
    assert len(B) == N and 5 not in B and problem.info["feature_condition"] < 1e4
    assert t.p == 16 + 1 + 16 * N and t.q == N * 16
    assert block_layout(problem) == {"incoming": 17, "outgoing": 16 * N}
    ref = _scattering_reference(problem)
    assert torch.equal(ref.theta0, t.theta0)  # the same coordinates in the same order
    th = t.theta0 + 0.05 * torch.randn(t.p, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert torch.allclose(t(th), ref(th), atol=1e-12, rtol=0)
    uo = problem.unit_outputs(th)
    assert torch.allclose(uo["moving"] + uo["compensators"], ref(th), atol=1e-12, rtol=0)
    both = problem.unit_outputs(torch.stack([th, t.theta0]))  # batched as the verdict calls it
    assert torch.allclose(both["moving"][0], uo["moving"], atol=1e-12, rtol=0)


def test_closed_form_compensation_preserves_boundary_and_whole_model_and_moves_weights(problem) -> None:
    """The known symmetry of the problem (Corollary 4.6), written out independently here."""
    t = problem.target
    model = copy.deepcopy(t.model).double()
    L = "encoder.layer.1"
    W_in, b_in = model.get_parameter(f"{L}.intermediate.dense.weight"), model.get_parameter(f"{L}.intermediate.dense.bias")
    W_out = model.get_parameter(f"{L}.output.dense.weight")
    h = t.h.reshape(N, -1)
    j, B = 5, problem.info["compensators"]
    S_B = torch.nn.functional.gelu(h @ W_in[B].T + b_in[B]).T  # (k, N)
    dw = 0.05 * torch.randn(16, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    s_old = torch.nn.functional.gelu(h @ W_in[j] + b_in[j])
    s_new = torch.nn.functional.gelu(h @ (W_in[j] + dw) + b_in[j])
    U_B = W_out[:, B] + torch.outer(W_out[:, j], s_old - s_new) @ torch.linalg.pinv(S_B)
    theta = torch.cat([W_in[j] + dw, b_in[j:j + 1], U_B.reshape(-1)]).detach()
    assert (theta - t.theta0).norm() > 1e-3 * t.theta0.norm()  # it moves
    assert (t(theta) - t(t.theta0)).norm() <= 1e-10 * t(t.theta0).norm()

    def hidden(batch, th=None):
        old = None if th is None else t.write(model, th)
        with torch.no_grad():
            out = model(**batch).last_hidden_state
        if old is not None:
            t.restore(model, old)
        return out

    # the whole model, rerun in float64 with the edit installed (round-off amplified by the LayerNorms)
    assert (hidden(t.batch, theta) - hidden(t.batch)).norm() <= 1e-8 * hidden(t.batch).norm()
    other = {"input_ids": torch.arange(20, 20 + N)[None]}  # data-dependent: other inputs change
    assert (hidden(other, theta) - hidden(other)).norm() > 1e-6 * hidden(other).norm()


def test_bad_inputs_are_named_errors() -> None:
    m = tiny_bert()
    with pytest.raises(ShapeError, match=r"layer 2 is out of range.*0\.\.1"):
        ffn_unit_problem(m, ids(), layer=2)
    with pytest.raises(ShapeError, match=r"unit .* is out of range.*0\.\.31"):
        ffn_unit_problem(m, ids(), layer=0, unit=32)
    with pytest.raises(ShapeError, match="cannot absorb a change"):
        ffn_unit_problem(m, ids(), layer=0, compensators=N - 1)
    with pytest.raises(ShapeError, match=r"shape \(1, N\)"):
        ffn_unit_problem(m, ids()[0], layer=0)


def test_fused_attention_models_are_switched_to_eager_for_forward_mode_ad() -> None:
    m = tiny_bert("sdpa")
    assert m.config._attn_implementation == "sdpa"
    pb = DiscoveryProblem(name="w", description="", target=Target(m, ["encoder.layer.0.output.dense.bias"], {"input_ids": ids()}),
                          perturb_std=0.01)
    assert pb.target.model.config._attn_implementation == "eager"
    assert m.config._attn_implementation == "sdpa"  # the user's model is untouched
    th = pb.target.theta0
    v = torch.randn(th.shape, generator=torch.Generator().manual_seed(0))  # (a constant shift is removed by LayerNorm)
    _, tangent = torch.func.jvp(pb.target, (th,), (v,))
    assert torch.isfinite(tangent).all() and tangent.abs().max() > 0


def test_unswitchable_model_gets_a_named_error(monkeypatch) -> None:
    m = tiny_bert("sdpa")
    target = Target(m, ["encoder.layer.0.output.dense.bias"], {"input_ids": ids()})

    def refuse(*_a, **_k):
        raise ValueError("cannot switch")

    monkeypatch.setattr(type(target.model), "set_attn_implementation", refuse)
    with pytest.raises(AttentionImplementationError, match="attn_implementation='eager'"):
        DiscoveryProblem(name="w", description="", target=target, perturb_std=0.01)


def test_chunked_output_scale_equals_the_one_shot_scale_on_the_same_points(problem) -> None:
    per_point, fixed = problem.scale_memory()
    n, chunk = 40, 7
    got = problem.scales(0.3, torch.Generator().manual_seed(3), n=n, memory_bytes=fixed + chunk * per_point + 1)
    gen = torch.Generator().manual_seed(3)
    pts = torch.cat([problem.sample(min(chunk, n - i), gen, torch.float64) for i in range(0, n, chunk)])
    F = torch.func.vmap(problem.target.to(torch.float64))(pts)
    assert got.s_F == pytest.approx(output_scale(F), rel=1e-10)
    assert got.s_theta == pytest.approx(float(pts.pow(2).sum(-1).mean().sqrt()), rel=1e-12)
    one = problem.scales(0.3, torch.Generator().manual_seed(3), n=n)
    assert one.s_F == pytest.approx(output_scale(torch.func.vmap(problem.target.to(torch.float64))(
        problem.sample(n, torch.Generator().manual_seed(3), torch.float64))), rel=1e-12)


def test_scale_over_budget_refuses_with_the_estimate(problem) -> None:
    with pytest.raises(TooLargeError, match=r"GiB per point.*memory budget"):
        problem.scales(0.3, torch.Generator().manual_seed(0), memory_bytes=1000)


def test_discover_on_a_block_too_large_for_the_budget_refuses_before_writing(tmp_path) -> None:
    from paramsym.discovery import DiscoverConfig, discover
    from paramsym.discovery.config import with_overrides

    m = tiny_bert()
    target = Target(m, ["encoder.layer.1.intermediate.dense.weight", "encoder.layer.1.output.dense.weight"], {"input_ids": ids()})
    out = tmp_path / "run"
    with pytest.raises(TooLargeError, match=r"needs about .* GiB .*train.max_memory = 1 MiB"):
        discover(target, 0.01, cfg=with_overrides(DiscoverConfig(), {"train.max_memory": "1MiB"}), out=out, progress=False)
    assert not out.exists()


def test_anchored_mu_keeps_a_share_of_points_at_the_real_weights(problem) -> None:
    assert problem.anchor == 0.9
    pts = problem.sample(2000, torch.Generator().manual_seed(4), torch.float64)
    th0 = problem.target.theta0
    at = (pts == th0).all(-1)
    assert 0.87 < float(at.double().mean()) < 0.93  # Binomial(2000, 0.9): ± 3 % is > 4 standard deviations
    off = pts[~at] - th0
    assert (off != 0).all()  # the others are Gaussian in every coordinate
    assert float(off.std()) == pytest.approx(problem.perturb_std, rel=0.02)
    again = problem.sample(2000, torch.Generator().manual_seed(4), torch.float64)
    assert torch.equal(pts, again)  # reproducible from the generator
