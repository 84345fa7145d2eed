"""The flow kind of LearnedAction: a group action by construction (issue 17, item 3).

References are independent of the code under test: ``scipy.linalg.logm``/``expm``, central
finite differences in float64, ``torch.func.jvp`` of the whole action (the generic
:class:`GroupAction` paths), autograd against finite differences, and the convergence order of
RK4 (a first-order integrator would fail it).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from paramsym.actions import flow as FL
from paramsym.actions.base import GroupAction
from paramsym.actions.learned import LearnedAction
from paramsym.cli import main
from paramsym.config import apply_overrides
from paramsym.discovery import objectives as O
from paramsym.discovery.config import DiscoverConfig
from paramsym.discovery.problems import build_problem
from paramsym.discovery.reload import load_learned_action
from paramsym.discovery.train import Trainer, training_memory
from paramsym.errors import ConfigError
from paramsym.groups.lie import MatrixLieGroup
from paramsym.testing import check_action

sl = pytest.importorskip("scipy.linalg")
DT = torch.float64


def _expm(m: torch.Tensor) -> torch.Tensor:
    """``exp`` by scipy (float64 accurate; torch's matrix_exp is off by ~5e-12 for small norms)."""
    return torch.stack([torch.from_numpy(sl.expm(x.numpy())) for x in m.reshape(-1, *m.shape[-2:])]).reshape(m.shape)


def _flow_action(p: int = 6, r: int = 1, steps: int = 8, out_scale: float = 30.0, seed: int = 0) -> LearnedAction:
    """An untrained flow action in float64 whose fields move points by ~10 % (nonlinear enough
    for RK4's truncation error to show); ``out_scale · √p`` undoes the flow kind's ``1/√p`` output
    initialisation, so the fields are those of the direct kind's scale."""
    gen = torch.Generator().manual_seed(seed)
    group = MatrixLieGroup(2, r, generator=gen)
    return LearnedAction(group, p, theta_center=torch.zeros(p), theta_scale=1.0, out_scale=out_scale * p ** 0.5, width=32,
                         generator=gen, kind="flow", flow_steps=steps).double()


def _one_param(a: LearnedAction, t: torch.Tensor, index: int = 0) -> torch.Tensor:
    return _expm(t.to(DT)[:, None, None] * a.group.generators().detach().to(DT)[index])


def _points(n: int, p: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(n, p, generator=torch.Generator().manual_seed(seed), dtype=DT)


def _times(n: int, seed: int, scale: float = 0.5) -> torch.Tensor:
    return scale * (2 * torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=DT) - 1)


# -- the matrix logarithm and the algebra coordinates -------------------------------------------

@pytest.mark.parametrize("s", [2, 3, 4])
def test_matrix_log_matches_scipy_and_inverts_expm(s: int) -> None:
    gen = torch.Generator().manual_seed(s)
    for radius in (0.05, 0.7, 3.0):
        m = torch.randn(8, s, s, generator=gen, dtype=DT)
        m = m / torch.linalg.matrix_norm(m, 2)[:, None, None] * radius * (0.5 + 0.5 * torch.rand(8, 1, 1, generator=gen, dtype=DT))
        g = _expm(m)
        log = FL.matrix_log(g)
        ref = torch.stack([torch.from_numpy(np.real(sl.logm(x.numpy()))) for x in g])
        # conditioning: exp(m) rounded at ~1e-16 in ‖g‖; log near I amplifies by ~1/‖m‖ at most
        tol = 1e-13 * max(1.0, 1.0 / radius)
        assert float(((log - ref).norm(dim=(-2, -1)) / ref.norm(dim=(-2, -1))).max()) < tol
        assert float(((log - m).norm(dim=(-2, -1)) / m.norm(dim=(-2, -1))).max()) < tol
    eye = torch.eye(s, dtype=DT).expand(3, s, s)
    assert torch.equal(FL.matrix_log(eye), torch.zeros(3, s, s, dtype=DT))  # log I = 0 bitwise


def test_matrix_log_tangent_equals_finite_differences() -> None:
    """The hand-written forward mode of the logarithm (the whole action's tangent is compared with
    ``torch.func.jvp`` in the transport test)."""
    gen = torch.Generator().manual_seed(0)
    m = 0.8 * torch.randn(5, 3, 3, generator=gen, dtype=DT)
    g, dg = _expm(m), torch.randn(5, 3, 3, generator=gen, dtype=DT)
    log, dlog = FL.matrix_log_dual(g, dg)
    torch.testing.assert_close(log, FL.matrix_log(g), rtol=0, atol=0)
    eps = 1e-5
    fd = (FL.matrix_log(g + eps * dg) - FL.matrix_log(g - eps * dg)) / (2 * eps)
    torch.testing.assert_close(dlog, fd, rtol=1e-7, atol=1e-8)


def test_algebra_coordinates_recover_the_coefficients() -> None:
    """``ξ(exp(Σ t_i h_i)) = t`` for non-orthonormal generators (the Gram matrix is solved)."""
    gen = torch.Generator().manual_seed(3)
    gens = torch.randn(3, 3, 3, generator=gen, dtype=DT)
    t = 0.4 * torch.randn(7, 3, generator=gen, dtype=DT)
    g = _expm(torch.einsum("nr,rab->nab", t, gens))
    xi, _ = FL.algebra_coordinates(g, gens)
    torch.testing.assert_close(xi, t, rtol=1e-11, atol=1e-12)
    # commuting (diagonal) generators: the coordinates of a product add
    diag = torch.diag_embed(torch.randn(2, 3, generator=gen, dtype=DT))
    t1, t2 = 0.3 * torch.randn(4, 2, generator=gen, dtype=DT), 0.3 * torch.randn(4, 2, generator=gen, dtype=DT)
    g1, g2 = (_expm(torch.einsum("nr,rab->nab", t, diag)) for t in (t1, t2))
    torch.testing.assert_close(FL.algebra_coordinates(g2 @ g1, diag)[0], t1 + t2, rtol=1e-11, atol=1e-12)


# -- the group laws -------------------------------------------------------------------------------

def test_identity_is_exact_and_the_action_moves_points() -> None:
    a = _flow_action()
    th = _points(32, a.p)
    eye = torch.eye(2, dtype=DT).expand(32, 2, 2)
    assert torch.equal(a.act_many(eye, th), th)
    with torch.no_grad():
        moved = a.act_many(_one_param(a, _times(32, 2).sign() * 0.3), th)
    rel = (moved - th).norm(dim=-1) / th.norm(dim=-1)
    assert float(rel.median()) > 0.03 and float(rel.min()) > 1e-3


def test_composition_and_inverse_to_1e6_relative_in_float64() -> None:
    """``Φ^s ∘ Φ^t = Φ^{s+t}`` and ``Φ^{−t} ∘ Φ^t = id`` for a random (untrained) field, through the
    action's matrix interface (``g = exp(t h)``, coordinates by the matrix logarithm)."""
    a = _flow_action(steps=8)
    th = _points(64, a.p)
    t, s = _times(64, 2), _times(64, 3)
    one = a.act_many(_one_param(a, t), th)
    two = a.act_many(_one_param(a, s), one)
    direct = a.act_many(_one_param(a, s + t), th)
    motion = (one - th).norm(dim=-1) + (two - one).norm(dim=-1)
    assert float(((one - th).norm(dim=-1) / th.norm(dim=-1)).median()) > 0.03  # the test is not vacuous
    comp = (two - direct).norm(dim=-1) / motion
    assert float(comp.max()) < 1e-6
    back = a.act_many(_one_param(a, -t), one)
    inv = (back - th).norm(dim=-1) / (one - th).norm(dim=-1)
    assert float(inv.max()) < 1e-6
    # the same through group elements: g2 g1 and g⁻¹ as matrices
    g1, g2 = _one_param(a, t), _one_param(a, s)
    comp_m = (a.act_many(g2, one) - a.act_many(g2 @ g1, th)).norm(dim=-1) / motion
    assert float(comp_m.max()) < 1e-6
    assert float(((a.act_many(torch.linalg.inv(g1), one) - th).norm(dim=-1) / (one - th).norm(dim=-1)).max()) < 1e-6


def test_composition_error_is_rk4_truncation_fourth_order() -> None:
    """The composition defect is the solver's: halving the step divides it by ~2⁴ (a first-order
    method would divide by 2), with strong nonlinearity so truncation dominates rounding."""
    th = _points(32, 6)
    t, s = _times(32, 4), _times(32, 5)
    errs = []
    for steps in (2, 4, 8):
        a = _flow_action(steps=steps, out_scale=100.0)
        one = a.act_many(_one_param(a, t), th)
        two = a.act_many(_one_param(a, s), one)
        direct = a.act_many(_one_param(a, s + t), th)
        errs.append(float(((two - direct).norm(dim=-1) / ((one - th).norm(dim=-1) + (two - one).norm(dim=-1))).median()))
    assert errs[0] > 1e-6  # strong enough nonlinearity that the order is visible
    assert errs[0] / errs[1] > 8 and errs[1] / errs[2] > 8, errs


def test_generator_is_the_network_field_by_finite_differences() -> None:
    """``d/dt a(exp(t h), θ)|₀ = V(θ)``: central differences of the action against the network's
    field evaluated directly; the overridden field equals the generic ``torch.func.jvp`` one."""
    a = _flow_action(r=2)
    th = _points(8, a.p)
    gens = a.group.generators().detach().to(DT)
    v = a.fields_all(th)
    assert v.shape == (8, 2, a.p) and float(v.norm(dim=-1).min()) > 0
    eps = 1e-4
    for i in range(2):
        fd = (a.act_many(_expm((eps * gens[i]).expand(8, 2, 2)), th)
              - a.act_many(_expm((-eps * gens[i]).expand(8, 2, 2)), th)) / (2 * eps)
        # central difference error O(eps²·‖D²a‖) ≈ 1e-8 of the field
        torch.testing.assert_close(fd, v[:, i], rtol=1e-6, atol=1e-7 * float(v.abs().max()))
        h = gens[i].expand(8, 2, 2)
        torch.testing.assert_close(a.field_many(h, th), v[:, i], rtol=1e-12, atol=1e-13)
        torch.testing.assert_close(GroupAction.field_many(a, h, th), v[:, i], rtol=1e-10, atol=1e-12)


def test_transported_field_dual_numbers_equal_jvp_and_obey_transport() -> None:
    a = _flow_action(steps=8)
    th = _points(16, a.p)
    g = _one_param(a, _times(16, 6))
    h = a.group.generators().detach().to(DT)[0].expand(16, 2, 2)
    tr = a.transported_many(g, h, th)
    torch.testing.assert_close(tr, GroupAction.transported_many(a, g, h, th), rtol=1e-10, atol=1e-12)
    eps = 1e-5
    fd = (a.act_many(_expm(eps * h) @ g, th) - a.act_many(_expm(-eps * h) @ g, th)) / (2 * eps)
    torch.testing.assert_close(tr, fd, rtol=1e-6, atol=1e-7 * float(tr.abs().max()))
    # one generator: D_g a[h g] = v_h(a(g, θ)) up to the solver (eq. 4 holds by construction)
    rhs = a.field_many(h, a.act_many(g, th))
    assert float(((tr - rhs).norm(dim=-1) / rhs.norm(dim=-1)).max()) < 1e-6


def test_gradients_reach_every_field_parameter_and_match_finite_differences() -> None:
    a = _flow_action(steps=4)
    th = _points(8, a.p)
    g1, g2 = _one_param(a, _times(8, 7)), _one_param(a, _times(8, 8))
    h = a.group.generators().to(DT)[0].expand(8, 2, 2)

    def loss() -> torch.Tensor:
        moved = a.act_many(g1, th)
        return (a.transported_many(g1, h, th) - a.field_many(h, moved)).pow(2).sum() \
            + (a.act_many(g2 @ g1, th) - a.act_many(g2, moved)).pow(2).sum() + moved.pow(2).sum()

    a.zero_grad()
    loss().backward()
    for name, prm in a.net.named_parameters():
        assert prm.grad is not None and torch.isfinite(prm.grad).all() and float(prm.grad.abs().max()) > 0, name
    w = a.net[0].weight
    idx = (3, 1)
    eps = 1e-6
    with torch.no_grad():
        w[idx] += eps
        up = float(loss())
        w[idx] -= 2 * eps
        down = float(loss())
        w[idx] += eps
    assert abs(w.grad[idx].item() - (up - down) / (2 * eps)) <= 1e-6 * max(1.0, abs(w.grad[idx].item()))


def test_several_noncommuting_fields_are_not_an_action_as_documented() -> None:
    """r = 2 with random (non-commuting) fields: the coordinates are exact, but the flow of
    ``Σ ξ_i V_i`` does not compose (far above the solver floor): the docstring's caveat, measured."""
    a = _flow_action(r=2, steps=8)
    th = _points(32, a.p)
    gens = a.group.generators().detach().to(DT)
    t1 = 0.3 * torch.randn(32, 2, generator=torch.Generator().manual_seed(9), dtype=DT)
    t2 = 0.3 * torch.randn(32, 2, generator=torch.Generator().manual_seed(10), dtype=DT)
    g1, g2 = (_expm(torch.einsum("nr,rab->nab", t, gens)) for t in (t1, t2))
    one = a.act_many(g1, th)
    two = a.act_many(g2, one)
    comp = (two - a.act_many(g2 @ g1, th)).norm(dim=-1) / ((one - th).norm(dim=-1) + (two - one).norm(dim=-1))
    assert float(comp.median()) > 1e-4


# -- it plugs into training, the verdict and check_action unchanged -------------------------------

@pytest.mark.parametrize("preset, r", [("sigmoid-scalar", 1), ("linear2x2", 3)])
@pytest.mark.parametrize("inf, fin", [(True, True), (True, False), (False, True)])
def test_fused_flow_step_equals_generic(preset: str, r: int, inf: bool, fin: bool) -> None:
    torch.set_num_threads(1)
    pr = build_problem(preset)
    cfg = apply_overrides(DiscoverConfig.for_preset(preset),
                          [f"group.generators={r}", "action.width=32", "action.kind=flow"])
    tr = Trainer(pr, cfg, pr.scales(cfg.objective.beta, torch.Generator().manual_seed(0)))
    a = tr.action.double()
    assert a.kind == "flow"
    gen = torch.Generator().manual_seed(1)
    th, mu = pr.sample(6, gen, DT), pr.sample(5, gen, DT)
    g1 = a.group.matrices(a.group.sample(6, 0.8, 3, generator=gen)).double()
    g2 = a.group.matrices(a.group.sample(6, 0.8, 3, generator=gen)).double()
    h = a.group.generators().double()[torch.randint(0, r, (6,), generator=gen)]
    fused = a.step_quantities(th, mu, g1, g2, h, infinitesimal=inf, finite=fin)
    generic = O.step_quantities(a, th, mu, g1, g2, h, infinitesimal=inf, finite=fin)
    for name in ("fields_mu", "moved", "fields", "direct", "two_step", "transported", "field_at_moved"):
        x, y = getattr(fused, name), getattr(generic, name)
        assert (x is None) == (y is None), name
        if x is not None:
            torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-14, msg=name)
    assert (fused.moved - th).norm(dim=-1).min() > 0


def test_check_action_accepts_the_flow_kind() -> None:
    problem = build_problem("linear2x2")
    gen = torch.Generator().manual_seed(0)
    action = LearnedAction(MatrixLieGroup(2, 1, generator=gen), 8, theta_center=problem.theta_base,
                           theta_scale=0.2, out_scale=0.5 * 8 ** 0.5, width=16, generator=gen, kind="flow", flow_steps=8)
    sc = problem.scales(0.3, torch.Generator().manual_seed(1))
    check = check_action(action, problem.target, lambda n, g: problem.sample(n, g, DT), s_F=sc.s_F,
                         s_theta=sc.s_theta, samples=40, seed=9)
    cell = check.cells[0]
    # an untrained field is no symmetry, but it is a group action: composition, inverse and
    # subdivision sit at the solver floor while the block moves
    assert cell["composition_err_p95"] < 1e-6 and cell["inverse_err_p95"] < 1e-6
    assert cell["subdivision_err_p95"] < 1e-6 and cell["transport_err_p95"] < 1e-6
    assert cell["motion_median"] > 1e-3 and cell["output_err_p95"] > 1e-3


def test_config_refuses_bad_kind_and_steps() -> None:
    cfg = DiscoverConfig.for_preset("relu242")
    with pytest.raises(ConfigError, match="action.kind"):
        apply_overrides(cfg, ["action.kind=spline"])
    with pytest.raises(ConfigError, match="action.flow_steps"):
        apply_overrides(cfg, ["action.flow_steps=0"])
    group = MatrixLieGroup(2, 1)
    with pytest.raises(ConfigError, match="kind"):
        LearnedAction(group, 3, theta_center=torch.zeros(3), theta_scale=1.0, out_scale=1.0, kind="spline")
    flow_cfg = apply_overrides(cfg, ["action.kind=flow", "action.flow_steps=8"])
    assert training_memory(8, 4, flow_cfg) > training_memory(8, 4, apply_overrides(flow_cfg, ["action.flow_steps=1"]))


def test_discover_cli_trains_and_reloads_a_flow_action(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    tiny = ["--set", "action.width=16", "--set", "verdict.samples=20", "--set", "verdict.rhos=[0.5]",
            "--set", "verdict.factors=[1,2]", "--set", "verdict.curve_points=2", "--set", "verdict.curve_times=3"]
    assert main(["discover", "--preset", "relu242", "--steps", "4", "--set", "action.kind=flow", *tiny,
                 "--out", str(out), "--quiet", "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    cell = metrics["verdict"]["cells"][-1]
    assert cell["factors"] == 2 and cell["composition_err_p95"] < 1e-4  # float32 evaluation floor
    assert json.loads((out / "config.json").read_text())["action"]["kind"] == "flow"
    action = load_learned_action(out).double()
    assert action.kind == "flow"
    th = torch.randn(4, action.p, dtype=DT)
    g = _one_param(action, torch.full((4,), 0.3))
    assert float((action.act_many(g, th) - th).norm()) > 0
    # refused before anything is written
    bad = tmp_path / "bad"
    assert main(["discover", "--preset", "relu242", "--steps", "4", "--set", "action.kind=spline",
                 "--out", str(bad), "--quiet"]) == 2
    assert not bad.exists()
