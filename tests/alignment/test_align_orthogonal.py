"""The ``orthogonal`` and ``refined`` stages of ``align`` (issue 35, item 2) on a tiny GPT-2.

B is a scrambled copy of A — a random element of the whole group of the canonical form: a Haar
rotation of the residual stream applied by the census's model transformation
(:func:`paramsym.census.rotation.rotate_residual`, independent of the alignment's parameter-dict
map), random FFN-unit and head permutations (the census's spec, :func:`paramsym.census.permspec.apply_spec`),
random per-head GL(d_k) and GL(d_v) (the catalogue actions). References: the real HF forward
pass, the planted rotation, A's canonical weights.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from paramsym.alignment.align import align
from paramsym.alignment.arch import hf_architecture
from paramsym.alignment.matching import rotate_axes
from paramsym.alignment.refine import RefineConfig, _shrink, refine, transform
from paramsym.census.canonical import canonical_form
from paramsym.census.permspec import apply_spec, random_perms, spec_from_spaces
from paramsym.census.rotation import rotate_canonical, rotate_residual
from paramsym.census.spaces import derive_spaces
from paramsym.census.walk import _output
from paramsym.kinds.canonical_pair import canonical_pair
from paramsym.models.datasets import modular_addition

transformers = pytest.importorskip("transformers")

P = 17  # vocabulary P + 1 = 18 > n_embd = 16: the embedding alone fixes the rotation


def _gpt2(seed: int, tie: bool = True, n_embd: int = 16):
    conf = transformers.GPT2Config(vocab_size=P + 1, n_positions=3, n_embd=n_embd, n_layer=2, n_head=2, n_inner=24,
                                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=P, eos_token_id=P,
                                   tie_word_embeddings=tie, attn_implementation="eager")
    model = transformers.GPT2LMHeadModel(conf).eval().double()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # non-trivial norm gains and biases: the canonical form has something to fold
        for n, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * (0.3 if p.ndim > 1 else 0.1)
                    + (1.0 if (".ln_" in n or "ln_f" in n) and n.endswith("weight") else 0.0))
    return model


def _params(model):
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def _load(model, params):
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(params[k])
    return model


def _gl(d, n, gen):
    return torch.block_diag(*[torch.eye(d, dtype=torch.float64) + 0.25 * torch.randn(d, d, generator=gen,
                                                                                    dtype=torch.float64) / d ** 0.5
                              for _ in range(n)])


def _scramble(model, ids, seed=3):
    """(A's canonical model, B = g·A as a canonical model, the planted rotation M)."""
    from paramsym.actions.attention import QueryKeyAction, ValueOutputAction

    gen = torch.Generator().manual_seed(seed)
    inputs = {"input_ids": ids}
    a_can = canonical_form(model, inputs, _output, untie=True)
    b_model, M = rotate_residual(model, inputs, _output, gen)  # canonical, untied, stream rotated by Haar M
    sp = derive_spaces(b_model, inputs, _output)
    spec = spec_from_spaces(sp, _params(b_model), sub_blocks=True)
    perms = {k: v for k, v in random_perms(spec, gen).items() if k != "P_res"}  # O(D) holds the stream's permutations
    theta = apply_spec(_params(b_model), spec, perms)
    for layout in hf_architecture(b_model).attention:
        for cls in (QueryKeyAction, ValueOutputAction):
            block = cls.block_for(theta, layout)
            theta = block.scatter(cls(block, layout).act(_gl(layout.head_dim, layout.num_kv_heads, gen),
                                                         block.gather(theta)), theta)
    return a_can, _load(b_model, theta), M


@pytest.fixture(scope="module")
def scrambled():
    model = _gpt2(0)
    data = modular_addition(P, 0, 0.5)
    a_can, b_model, M = _scramble(model, data.x_train[:32])
    return model, a_can, b_model, M, data


def _rel(x, y):
    return float((x - y).norm() / y.norm())


def test_scramble_is_a_symmetry_and_moves_the_weights(scrambled):
    """The planted element moves every tensor it acts on, and B computes A's function (real forward)."""
    _, a_can, b_model, _, data = scrambled
    a, b = _params(a_can), _params(b_model)
    assert min(_rel(b[k], a[k]) for k in a if "wte" in k or "c_attn" in k or "c_fc" in k) > 0.3
    with torch.no_grad():
        assert _rel(b_model(data.x_test).logits, a_can(data.x_test).logits) <= 1e-12


def test_orthogonal_stage_recovers_the_planted_rotation_and_weights(scrambled):
    """Aligned back: Q equals the planted rotation's inverse Mᵀ (the census drew M), the canonical
    weights of A are recovered, the barrier is ≈ 0 and B's function is unchanged."""
    _, a_can, b_model, M, data = scrambled
    pair = canonical_pair(a_can, b_model, data.x_train[:32], n_classes=P)
    arch = hf_architecture(a_can, n_classes=P)
    res = align(arch, _params(a_can), _params(b_model), data, points=5,
                stages=("before", "permutation", "full", "canonical", "orthogonal"), canonical=pair)
    Q = res.elements["Q"]
    assert float((Q - M.T).abs().max()) <= 1e-9
    got = res.stages["orthogonal"]
    for k, v in pair.a.items():
        assert float((got[k] - v).norm()) <= 1e-9 * max(float(v.norm()), 1.0), k
    assert res.function_error["orthogonal"] <= 1e-12 and res.function_error["canonical"] <= 1e-12
    s = res.summary()
    assert abs(s["barrier_orthogonal"]) <= 1e-9

    def gap(c):  # the largest |loss − the line through the end losses| on the path (random models: either sign)
        return max(abs(v - ((1 - al) * c.test_loss[0] + al * c.test_loss[-1])) for al, v in zip(c.alphas, c.test_loss))

    assert gap(res.curves["orthogonal"]) <= 1e-9 and gap(res.curves["canonical"]) > 1e-2  # the scramble mattered
    assert res.details["orthogonal"]["kept"] == "attention"


def _variables(arch, D, gen, scale=0.3):
    out = {"S": scale * torch.randn(D, D, generator=gen, dtype=torch.float64)}
    for i, layout in enumerate(arch.attention):
        shape = (layout.num_kv_heads, layout.head_dim, layout.head_dim)
        out[f"X{i}"] = scale * torch.randn(shape, generator=gen, dtype=torch.float64)
        out[f"Y{i}"] = scale * torch.randn(shape, generator=gen, dtype=torch.float64)
    return out


def test_refinement_transform_is_the_exact_group_action(scrambled):
    """``transform`` with random S, X, Y moves every tensor it acts on and leaves B's function
    unchanged in float32 (≤ 1e-5 relative, the real HF forward of the float32 model); its rotation
    equals the census's model transformation ``rotate_canonical`` by ``exp(S − Sᵀ)``."""
    _, a_can, b_model, _, data = scrambled
    pair = canonical_pair(a_can, b_model, data.x_train[:32], n_classes=P)
    D = pair.info["hidden_size"]
    var = _variables(pair.arch, D, torch.Generator().manual_seed(9))
    b32 = {k: v.float() for k, v in pair.b.items()}
    moved = transform(pair.arch, b32, pair.axes, {k: v.float() for k, v in var.items()})
    assert min(_rel(moved[k], b32[k]) for k in b32 if k.endswith(("wte.weight", "c_attn.weight", "c_proj.weight"))) > 0.05
    m32 = copy.deepcopy(b_model).float()
    with torch.no_grad():
        ref = _load(copy.deepcopy(m32), b32)(data.x_test).logits
        got = _load(m32, moved)(data.x_test).logits
    assert _rel(got, ref) <= 1e-5
    # the rotation alone against the census's in-place model transformation (float64)
    Q = torch.linalg.matrix_exp(var["S"] - var["S"].T)
    rot = transform(pair.arch, pair.b, pair.axes, {"S": var["S"]} | {k: torch.zeros_like(v) for k, v in var.items()
                                                                      if k[0] == "Y"})
    sp = derive_spaces(b_model, {"input_ids": data.x_train[:32]}, _output)
    census = _params(rotate_canonical(_load(copy.deepcopy(b_model), pair.b), sp, Q))
    assert max(float((rot[k] - census[k]).abs().max()) for k in census) <= 1e-12
    assert torch.allclose(rotate_axes(pair.b, pair.axes, Q)["lm_head.weight"], census["lm_head.weight"], atol=1e-12)


@pytest.fixture(scope="module")
def unrelated():
    """Two independently drawn models (not one orbit): refinement has something to lower."""
    data = modular_addition(P, 0, 0.5)
    ma, mb = _gpt2(0), _gpt2(1)
    return ma, mb, canonical_pair(ma, mb, data.x_train[:32], n_classes=P), data


def test_refined_stage_lowers_the_midpoint_loss_and_keeps_the_function(unrelated):
    """The refined stage keeps B's function at float64 rounding, never raises the midpoint training
    loss above its start (the orthogonal stage), lowers it here, and moves B."""
    ma, mb, pair, data = unrelated
    arch = hf_architecture(ma, n_classes=P)
    cfg = RefineConfig(steps=30, lr=3e-2, batch=64, eval_every=10)
    res = align(arch, _params(ma), _params(mb), data, points=5, canonical=pair, refine=cfg,
                stages=("before", "permutation", "full", "orthogonal", "refined"),
                generator=torch.Generator().manual_seed(1))
    info = res.details["refined"]
    assert res.function_error["refined"] <= 1e-12 and res.function_error["orthogonal"] <= 1e-12
    assert info["mid_loss"] <= info["mid_loss_start"]
    assert info["mid_loss"] < info["mid_loss_start"] - 1e-3 and info["step_kept"] > 0
    # the start is the orthogonal stage's midpoint training loss (independently: the path's curve at α = ½)
    assert abs(info["mid_loss_start"] - res.curves["orthogonal"].train_loss[2]) <= 1e-4
    assert abs(info["mid_loss"] - res.curves["refined"].train_loss[2]) <= 1e-4
    assert _rel(torch.cat([v.flatten() for v in res.stages["refined"].values()]),
                torch.cat([v.flatten() for v in res.stages["orthogonal"].values()])) > 1e-3
    s = res.summary()
    assert {"barrier_orthogonal", "barrier_refined", "function_error_refined"} <= set(s)


def test_refinement_keeps_head_maps_well_conditioned(unrelated):
    """With a large step the head maps are held to ‖X_h‖₂ ≤ log(κ)/2, so cond(exp X_h) ≤ κ."""
    _, _, pair, data = unrelated
    kappa = 4.0
    _, info = refine(pair.arch, pair.a, pair.b, pair.axes, data, RefineConfig(steps=5, lr=2.0, batch=32, eval_every=5,
                                                                               max_condition=kappa),
                     generator=torch.Generator().manual_seed(0))
    radius = math.log(kappa) / 2
    assert info["max_head_norm"] <= info["max_head_norm_seen"] <= radius + 1e-6
    assert info["max_head_norm_seen"] > 0.9 * radius  # the bound was reached, not idle
    # the bound's consequence, checked directly: random large X shrunk, then cond(exp X) by SVD
    X = {"Y0": 3.0 * torch.randn(4, 8, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)}
    _shrink(X, radius)
    assert float(torch.linalg.cond(torch.linalg.matrix_exp(X["Y0"])).max()) <= kappa * (1 + 1e-9)


def test_bad_pairs_are_refused_by_name():
    """Different widths, tied vs untied heads, different classes, NaN weights, post-norm models: named
    errors before any work (canonical_pair returns nothing and writes nothing)."""
    from paramsym.census.zoo import tiny_model
    from paramsym.errors import (
        ArchitectureMismatchError,
        NonFiniteError,
        SymmetryNotApplicableError,
    )

    ids = modular_addition(P, 0, 0.5).x_train[:8]
    a = _gpt2(0)
    with pytest.raises(ArchitectureMismatchError, match="different shapes"):
        canonical_pair(a, _gpt2(1, n_embd=24), ids)
    with pytest.raises(ArchitectureMismatchError, match="tied"):
        canonical_pair(a, _gpt2(1, tie=False), ids)
    with pytest.raises(ArchitectureMismatchError, match="GPTNeoXForCausalLM"):
        canonical_pair(a, tiny_model("gpt_neox", causal_lm=True), ids)
    bad = _gpt2(1)
    with torch.no_grad():
        bad.transformer.h[1].mlp.c_fc.weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteError, match="model B holds NaN"):
        canonical_pair(a, bad, ids)
    bert = tiny_model("bert", cls="BertForMaskedLM")
    with pytest.raises(SymmetryNotApplicableError, match="post-norm"):
        canonical_pair(bert, copy.deepcopy(bert), {"input_ids": torch.randint(0, 20, (2, 5))})


def test_stage_requests_are_checked_before_work(unrelated):
    """Unknown stages, refined without orthogonal, canonical stages without a pair, a bad refine
    budget and a non-finite canonical pair are named errors; the default stages are unchanged."""
    from paramsym.errors import ConfigError, NonFiniteError

    ma, mb, pair, data = unrelated
    arch = hf_architecture(ma, n_classes=P)
    a, b = _params(ma), _params(mb)
    for stages, match in ((("before", "rotated"), "unknown stage"), (("orthogonal", "refined"), None),
                          (("refined",), "refines the 'orthogonal'"), ("orthogonal", "list of stage names")):
        kw = {"canonical": pair} if match is None else {}
        with pytest.raises(ConfigError, match=match or "refine.steps"):
            align(arch, a, b, data, points=3, stages=stages, refine=RefineConfig(steps=-1), **kw)
    with pytest.raises(ConfigError, match="pass canonical="):
        align(arch, a, b, data, points=3, stages=("orthogonal",))
    with pytest.raises(ConfigError, match="CanonicalPair"):
        align(arch, a, b, data, points=3, stages=("orthogonal",), canonical={"a": pair.a})
    nan = copy.copy(pair)
    nan.b = dict(pair.b) | {"lm_head.weight": torch.full_like(pair.b["lm_head.weight"], float("nan"))}
    with pytest.raises(NonFiniteError):
        align(arch, a, b, data, points=3, stages=("orthogonal",), canonical=nan)
    res = align(arch, a, b, data, points=3)  # backward compatible: three stages, no canonical ones
    assert list(res.stages) == ["before", "permutation", "full"] and not res.elements


def test_orthogonal_and_refined_stages_on_a_rotary_grouped_query_model():
    """Llama (RMSNorm, rotary, grouped-query heads): a Haar stream rotation (census), FFN
    permutations and per-key/value-head GL(d_v) are undone by the orthogonal stage (Q = Mᵀ, A's
    canonical weights); the refined stage leaves query/key alone under rotary and keeps B's function."""
    from paramsym.actions.attention import ValueOutputAction
    from paramsym.census.zoo import tiny_model
    from paramsym.models.datasets import Split

    model = tiny_model("llama", causal_lm=True).double()
    gen = torch.Generator().manual_seed(4)
    ids = torch.randint(0, model.config.vocab_size, (48, 5), generator=gen)
    labels = torch.randint(0, 10, (48,), generator=gen)
    data = Split(ids[:32], labels[:32], ids[32:], labels[32:])
    inputs = {"input_ids": ids[:16]}
    a_can = canonical_form(model, inputs, _output, untie=True)
    b_model, M = rotate_residual(model, inputs, _output, gen)
    sp = derive_spaces(b_model, inputs, _output)
    spec = spec_from_spaces(sp, _params(b_model), sub_blocks=True)
    theta = apply_spec(_params(b_model), spec, {k: v for k, v in random_perms(spec, gen).items() if k != "P_res"})
    arch_b = hf_architecture(b_model)
    assert all(layout.rotary_dim for layout in arch_b.attention)
    for layout in arch_b.attention:
        block = ValueOutputAction.block_for(theta, layout)
        theta = block.scatter(ValueOutputAction(block, layout).act(_gl(layout.head_dim, layout.num_kv_heads, gen),
                                                                   block.gather(theta)), theta)
    _load(b_model, theta)
    pair = canonical_pair(a_can, b_model, ids[:16], n_classes=10)
    res = align(hf_architecture(a_can, n_classes=10), _params(a_can), _params(b_model), data, points=3,
                canonical=pair, refine=RefineConfig(steps=4, batch=16, eval_every=2),
                stages=("before", "permutation", "full", "orthogonal", "refined"))
    assert float((res.elements["Q"] - M.T).abs().max()) <= 1e-9
    for k, v in pair.a.items():
        assert float((res.stages["orthogonal"][k] - v).norm()) <= 1e-8 * max(float(v.norm()), 1.0), k
    # HF's Llama RMSNorm computes in float32 inside: rounding 10·(L+1)·√D·ε₃₂ (the canonical form's bound)
    tol = 10 * (model.config.num_hidden_layers + 1) * model.config.hidden_size ** 0.5 * torch.finfo(torch.float32).eps
    assert res.function_error["orthogonal"] <= tol and res.function_error["refined"] <= tol
    assert res.details["refined"]["query_key_refined"] == 0
