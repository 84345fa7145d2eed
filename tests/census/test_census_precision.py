"""Verification tolerances from what the model computes in (issue 34).

HF models run parts of a float64 forward in float32 (softmax, RMSNorm); the census measures that
rounding at both points of each check (``paramsym.census.precision``) instead of a fixed
tolerance, so its verdicts must not depend on the seed. References here are independent of the
census: ``torch.softmax`` in float64, the models' own forward passes, configs.
"""

import pytest
import torch

from paramsym.census import census
from paramsym.census.base import Candidate
from paramsym.census.precision import Float64Throughout, float64_throughout
from paramsym.census.zoo import MORE, TINY, tiny_model

transformers = pytest.importorskip("transformers")

ENCODERS = {"bert", "roberta", "distilbert"}


def test_float64_throughout_removes_float32_islands_and_nothing_else():
    x = torch.randn(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 30
    island = torch.softmax(x, -1, dtype=torch.float32).to(x.dtype)
    with Float64Throughout():
        y = torch.softmax(x, -1, dtype=torch.float32)
        assert y.dtype == torch.float64 and x.float().dtype == torch.float64
        assert x.to(torch.float32).dtype == torch.float64 and x.to(dtype=torch.float32).dtype == torch.float64
        assert torch.zeros(2, dtype=torch.float32).dtype == torch.float64
        assert x.type(torch.float32).dtype == torch.float64
        assert x.type_as(torch.ones(1, dtype=torch.float32)).dtype == torch.float64
        assert x.to(torch.int64).dtype == torch.int64 and x.type_as(torch.ones(1, dtype=torch.int32)).dtype == torch.int32
    ref = torch.exp(x - x.max(-1, keepdim=True).values)
    ref = ref / ref.sum(-1, keepdim=True)
    assert float((y - ref).abs().max()) < 1e-15 < float((island - ref).abs().max())
    assert x.float().dtype == torch.float32  # the mode is gone afterwards
    assert float64_throughout(lambda: torch.ones(1, dtype=torch.float32)).dtype == torch.float64


@pytest.mark.parametrize("name", TINY + MORE)
def test_census_verdicts_do_not_depend_on_the_seed(name):
    """Seeds 0-2 (weights and inputs and group elements): every entry verified, the same total
    dimension, and in float64 throughout every error at float64 rounding."""
    totals = set()
    for seed in range(3):
        model = tiny_model(name, seed=seed, causal_lm=name not in ENCODERS)
        r = census(model, layout="derived", seed=seed)
        assert r.all_verified, (seed, [(e.module, e.kind, e.verified_error, e.tolerance) for e in r.entries
                                      if not e.verified])
        assert all(e.motion > 1e-3 for e in r.entries)
        assert all(e.exact_error is None or e.exact_error < 1e-12 for e in r.entries), seed
        totals.add(r.total_dimension)
    assert len(totals) == 1, totals


@pytest.mark.parametrize("name", ["gpt_bigcode", "starcoder2"])
def test_float32_softmax_sets_the_floor_and_it_is_measured_not_assumed(name):
    """The bias shifts change the as-computed output by more than the float64 tolerance (the float32
    softmax rounds the shifted logits), while in float64 throughout they are exact; the tolerance of
    those entries is the measured rounding, far below what a broken shift gives."""
    model = tiny_model(name, seed=0, causal_lm=True)
    r = census(model, layout="derived", seed=0)
    shifts = [e for e in r.entries if e.kind in ("key_bias_translation", "value_bias_shift")]
    assert shifts and all(e.verified for e in shifts)
    assert max(e.verified_error for e in shifts) > r.tolerance  # the old fixed 1e-9 refuted a true symmetry
    assert all(e.exact_error < 1e-12 for e in shifts)
    assert all(r.tolerance < e.tolerance < 1e-5 for e in shifts)


def test_a_wrong_claim_on_a_model_with_float32_islands_is_refuted():
    """Shifting the value bias without the output bias's compensation is not a symmetry: refuted
    under the derived tolerance (and in float64 throughout)."""
    model = tiny_model("starcoder2", seed=1, causal_lm=True)
    b_v = "model.layers.0.self_attn.v_proj.bias"

    class Broken:
        name = "broken"

        def find(self, ctx):
            def t(p, gen):
                return {**p, b_v: p[b_v] + torch.randn(p[b_v].shape, generator=gen, dtype=p[b_v].dtype)}
            return [Candidate("model.layers.0.self_attn", "value_bias_shift", 64, {b_v: 64}, t)]

    r = census(model, layout="derived", finders=[Broken()])
    (e,) = r.entries
    assert not e.verified and e.verified_error > 1e-3 and e.exact_error > 1e-3 and e.tolerance < 1e-5


def test_old_falcon_shared_input_norm_scale_is_counted_and_needs_both_readers():
    """Old-architecture Falcon (parallel attention and FFN) feeds q/k/v and the FFN's up projection
    from one ``input_layernorm``: its scale is a symmetry when *both* readers absorb it (checked
    here by hand on the real forward pass), and the census counts it (width per layer)."""
    model = tiny_model("falcon_old", seed=0, causal_lm=True).double()
    D, L = model.config.hidden_size, model.config.num_hidden_layers
    r = census(model, layout="derived")
    norms = [e for e in r.entries if e.kind == "norm_scale"]
    assert [(e.module, e.dimension, e.verified) for e in norms] == [
        (f"transformer.h.{i}.input_layernorm", D, True) for i in range(L)]
    params = {k: v.detach() for k, v in model.named_parameters()}
    d = torch.exp(torch.randn(D, generator=torch.Generator().manual_seed(3), dtype=torch.float64))
    pre = "transformer.h.0."

    def scaled(readers):
        new = dict(params)
        new[pre + "input_layernorm.weight"] = params[pre + "input_layernorm.weight"] * d
        new[pre + "input_layernorm.bias"] = params[pre + "input_layernorm.bias"] * d
        for w in readers:
            new[pre + w] = params[pre + w] / d
        return new

    from output_change import relative_output_change

    both = ["self_attention.query_key_value.weight", "mlp.dense_h_to_4h.weight"]
    assert relative_output_change(model, scaled(both)) < 1e-12
    assert relative_output_change(model, scaled(both[:1])) > 1e-3  # the FFN must absorb it too


QK = {"gptj": ("transformer.h.0.attn.", "rotary_dim"), "qwen3": ("model.layers.0.self_attn.", "q_norm"),
      "cohere": ("model.layers.0.self_attn.", "rotary")}


@pytest.mark.parametrize("name", sorted(QK))
def test_query_key_is_refused_per_layer_and_the_rest_is_kept(name):
    """GPT-J, Qwen3, Cohere: the census goes on with the query/key symmetry refused per layer (with
    its reason), the residual stream, FFN units, value/output and heads verified; GL on one key
    head's queries and keys, applied by hand, really changes the output (the refusal is right)."""
    from output_change import relative_output_change

    model = tiny_model(name, seed=0, causal_lm=True).double()
    cfg = model.config
    L = cfg.num_hidden_layers if hasattr(cfg, "num_hidden_layers") else cfg.n_layer
    r = census(model, layout="derived")
    assert r.all_verified
    assert [x["kind"] for x in r.refused] == ["attention.query_key"] * L
    pre, cause = QK[name]
    assert pre.rstrip(".") == r.refused[0]["module"] and cause in r.refused[0]["reason"]
    kinds = [e.kind for e in r.entries]
    assert not any(k.startswith("attention.query_key") for k in kinds)
    assert kinds.count("attention.value_output.gl") == L and kinds.count("hidden_permutation") == L
    assert kinds.count("residual_permutation") == 1 and kinds.count("head_permutation") == L
    H = cfg.num_attention_heads if hasattr(cfg, "num_attention_heads") else cfg.n_head
    Hkv = getattr(cfg, "num_key_value_heads", None) or H
    d = model.get_input_embeddings().embedding_dim // H if name == "gptj" else cfg.head_dim if name == "qwen3" else (
        cfg.hidden_size // H)
    params = {k: v.detach() for k, v in model.named_parameters()}
    A = torch.eye(d, dtype=torch.float64) + 0.3 * torch.randn(d, d, generator=torch.Generator().manual_seed(2),
                                                             dtype=torch.float64)
    q, k = params[pre + "q_proj.weight"].clone(), params[pre + "k_proj.weight"].clone()
    for h in range(H // Hkv):  # the query heads of key/value head 0
        q[h * d:(h + 1) * d] = A @ q[h * d:(h + 1) * d]
    k[:d] = torch.linalg.inv(A).T @ k[:d]
    assert relative_output_change(model, {**params, pre + "q_proj.weight": q, pre + "k_proj.weight": k}) > 1e-3


# -- one rule (issue 34 item 3): the dtype's rounding through the model plus the measured islands ------------


def _rule(model, dtype):
    """The rule's dtype term written out here: ``10·(L+1)·√n·ε`` with ``L`` from the config and ``n``
    the longest last axis of any matrix (the widest fan-in bound), ``ε`` the dtype's unit roundoff."""
    cfg = model.config
    L = next(getattr(cfg, k) for k in ("num_hidden_layers", "n_layer", "n_layers") if hasattr(cfg, k))
    n = max(p.shape[-1] for p in model.parameters() if p.dim() >= 2)
    return 10 * (L + 1) * n**0.5 * torch.finfo(dtype).eps


@pytest.mark.parametrize("name", ["gpt2", "llama", "starcoder2"])
def test_entries_and_residual_rotation_share_one_rule(name):
    """Entries and the residual rotation: the dtype term (the same number, computed here from the
    formula) plus a measured island floor ≥ 0 — 0 exactly where the model has no float32 islands."""
    model = tiny_model(name, seed=0, causal_lm=True)
    r = census(model, layout="derived")
    assert r.tolerance == pytest.approx(_rule(model, torch.float64), rel=1e-12)
    rot = r.residual_rotation
    assert rot["verified"] and rot["tolerance"] >= r.tolerance and all(e.tolerance >= r.tolerance for e in r.entries)
    if name == "gpt2":  # no islands: float64 is float64 throughout, the floor is 0
        assert rot["tolerance"] == r.tolerance and all(e.tolerance == r.tolerance for e in r.entries)
    else:  # RMSNorm / softmax in float32: the floor is measured, far below float32 resolution of a broken claim
        assert r.tolerance < rot["tolerance"] < 1e-5


def test_a_broken_residual_rotation_fails_the_rule():
    """The rotation of the canonical form with the LM head left unrotated changes the logits by far
    more than the rule's tolerance (measured islands included); the true rotation stays within it."""
    from paramsym.census.canonical import canonical_form
    from paramsym.census.precision import float64_throughout, island_floor, rounding_tolerance
    from paramsym.census.rotation import random_orthogonal, rotate_canonical
    from paramsym.census.spaces import derive_spaces
    from paramsym.census.walk import _output, default_inputs

    model = tiny_model("llama", seed=1, causal_lm=True).double()
    inputs = default_inputs(model, torch.Generator().manual_seed(0))
    sp = derive_spaces(model, inputs, _output)
    M = random_orthogonal(sp.hidden_size, torch.Generator().manual_seed(4))
    with torch.no_grad():
        ref = _output(model(**inputs))
        ref_exact = float64_throughout(lambda: _output(model(**inputs)))
        errs = {}
        for broken in (False, True):
            canon = canonical_form(model, inputs, _output, untie=True, spaces=sp)
            head = canon.lm_head.weight.detach().clone()
            rot = rotate_canonical(canon, sp, M)
            if broken:
                rot.lm_head.weight.copy_(head)
            got = _output(rot(**inputs))
            tol = rounding_tolerance(torch.float64, 2, 96) + island_floor(
                ref, ref_exact, got, float64_throughout(lambda r=rot: _output(r(**inputs))))
            errs[broken] = (float((got - ref).norm() / ref.norm()), tol)
    assert errs[False][0] <= errs[False][1] < 1e-5
    assert errs[True][0] > 1e-2 > errs[True][1]


@pytest.mark.parametrize("name", ["llama", "gpt2", "starcoder2"])
def test_float32_runs_verify_on_every_seed_under_the_rule(name):
    """In float32 the dtype term is ``10·(L+1)·√n·ε₃₂`` (no islands measured: the whole run is float32);
    seeds 0–2 verify every entry with the same total dimension."""
    totals = set()
    for seed in range(3):
        model = tiny_model(name, seed=seed, causal_lm=True)
        r = census(model, layout="derived", seed=seed, dtype=torch.float32)
        assert r.tolerance == pytest.approx(_rule(model, torch.float32), rel=1e-6)
        assert r.all_verified, (seed, [(e.module, e.kind, e.verified_error) for e in r.entries if not e.verified])
        totals.add(r.total_dimension)
    assert len(totals) == 1


def test_a_wrong_claim_fails_in_float32_too():
    model = tiny_model("llama", seed=0, causal_lm=True)
    w = "model.layers.0.mlp.gate_proj.weight"

    class Broken:  # rescaling the *gate* rows (down columns ÷) is no symmetry of a SwiGLU FFN
        name = "broken"

        def find(self, ctx):
            def t(p, gen):
                c = 1.5 + torch.rand(p[w].shape[0], generator=gen, dtype=p[w].dtype)
                d = "model.layers.0.mlp.down_proj.weight"
                return {**p, w: p[w] * c[:, None], d: p[d] / c[None, :]}
            return [Candidate("model.layers.0.mlp", "rescaling", 96, {w: 96}, t)]

    (e,) = census(model, layout="derived", finders=[Broken()], dtype=torch.float32).entries
    assert not e.verified and e.verified_error > 1e-3
