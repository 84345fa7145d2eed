"""The canonical form on every architecture of the census zoo (issue 35, must-show item 1).

Each pre-norm architecture of :func:`paramsym.census.zoo.tiny_names` (loaded with its LM head,
random norm scales ``1 + N(0, 0.2²)``): the canonical form keeps the logits to rounding, leaves no
LayerNorm and no norm scale behind, and a Haar-random rotation ``Q`` of its residual stream is an
exact symmetry (logits unchanged, weights moved by O(1)) while the same ``Q`` on the original
(untied) weights is not. Each post-norm one is refused by name. The list is the zoo's own, so
a new architecture is tested (as pre-norm) the day it is added, and the classification below
must name it.

References are independent of the code under test: the original HF model's own forward pass,
as computed and in float64 throughout (:class:`~paramsym.census.precision.Float64Throughout`:
the float32 islands of HF's norms and softmax made float64, so the canonical model must match to
float64 rounding even where the as-computed forward is exact only to float32's). Tolerances are
the census's one rule, ``rounding_tolerance(dtype, L, n) = 10·(L + 1)·√n·ε`` with ``n`` the widest
fan-in and ``ε`` the unit roundoff of what the forward computes in (float32 where the as-computed
float64 forward differs from the float64-throughout one: measured here).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from paramsym.census import census
from paramsym.census.canonical import canonical_form
from paramsym.census.precision import float64_throughout, model_extent, rounding_tolerance
from paramsym.census.rotation import random_orthogonal, rotate_canonical
from paramsym.census.spaces import derive_spaces
from paramsym.census.walk import default_inputs
from paramsym.census.zoo import tiny_model, tiny_names
from paramsym.errors import SymmetryNotApplicableError

pytest.importorskip("transformers")

#: every zoo architecture the canonical form refuses, and how it is loaded (BERT-family encoders
#: with their masked-LM head; the post-norm decoders with their causal LM head)
REFUSED = {"bert": "BertForMaskedLM", "roberta": "RobertaForMaskedLM", "distilbert": "DistilBertForMaskedLM",
           "gemma2": None, "olmo2": None}
#: the pre-norm ones, each named (so a new zoo architecture must be classified here too)
PRE_NORM_NAMED = {"llama", "mistral", "qwen2", "gemma", "phi3", "gpt2", "gpt_neox", "opt", "falcon", "stablelm",
                  "starcoder2", "falcon_old", "gpt_bigcode", "gptj", "qwen3", "cohere", "mixtral", "olmo"}
#: the test list: the zoo itself, less the refused ones (a new architecture lands here)
PRE_NORM = [n for n in tiny_names() if n not in REFUSED]
GEMMA_OFFSET = {"gemma"}  # γ = 1 + w: the identity scale is w = 0


def test_every_zoo_architecture_is_classified():
    assert set(PRE_NORM_NAMED) | set(REFUSED) == set(tiny_names()), "classify the new zoo architecture here"
    assert not PRE_NORM_NAMED & set(REFUSED) and set(PRE_NORM) == PRE_NORM_NAMED


def _model(name, dtype=torch.float64):
    m = tiny_model(name, cls=REFUSED[name]) if REFUSED.get(name) else tiny_model(name, causal_lm=True)
    return m.to(dtype)


def _inputs(model):
    return default_inputs(model, torch.Generator().manual_seed(0))


def _rel(a, b):
    return float((a - b).detach().norm() / b.detach().norm())


def _logits(model, inputs, exact=False):
    with torch.no_grad():
        return float64_throughout(lambda: model(**inputs).logits) if exact else model(**inputs).logits


def _tols(model, inputs):
    """(as computed, float64 throughout) tolerances of the one rule; the first in float32's ε where the
    model's float64 forward holds float32 islands (measured: it differs from float64 throughout)."""
    L = model.config.num_hidden_layers
    depth, width = model_extent(dict(model.named_parameters()), L)
    dtype = next(model.parameters()).dtype
    islands = dtype == torch.float64 and not torch.equal(_logits(model, inputs), _logits(model, inputs, exact=True))
    as_computed = rounding_tolerance(torch.float32 if islands else dtype, depth, width)
    return as_computed, rounding_tolerance(dtype, depth, width)


def _untied(model):
    m = copy.deepcopy(model)
    head = m.get_output_embeddings()
    if head.weight is m.get_input_embeddings().weight:
        head.weight = nn.Parameter(head.weight.detach().clone())
    return m


@pytest.mark.parametrize("name", PRE_NORM)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_canonical_form_keeps_the_logits_and_its_norms_are_unit_rms(name, dtype):
    model = _model(name, dtype)
    inputs = _inputs(model)
    canon = canonical_form(model, inputs, untie=True)
    tol, tol_exact = _tols(model, inputs)
    assert _rel(_logits(canon, inputs), _logits(model, inputs)) <= tol
    if dtype == torch.float64:  # float64 throughout: the fold is exact to float64 rounding, islands or not
        assert _rel(_logits(canon, inputs, True), _logits(model, inputs, True)) <= tol_exact
    # no LayerNorm left; every D-wide norm scale at the identity, without bias
    D = model.get_input_embeddings().embedding_dim
    assert not any("LayerNorm" in type(m).__name__ for m in canon.modules())
    norms = [m for m in canon.modules() if "norm" in type(m).__name__.lower()]
    assert norms
    for m in norms:
        w = getattr(m, "weight", None)
        if w is not None and w.shape == (D,):
            assert getattr(m, "bias", None) is None and torch.all(w + (1.0 if name in GEMMA_OFFSET else 0.0) == 1)
    # the fold really moved weights (readers absorbed the scales; LayerNorm writers were centred)
    p0, p1 = dict(model.named_parameters()), dict(canon.named_parameters())
    moved = [k for k in p0 if k in p1 and not torch.equal(p0[k], p1[k])]
    assert len(moved) >= 2 * model.config.num_hidden_layers


@pytest.mark.parametrize("name", PRE_NORM)
def test_residual_rotation_is_an_exact_symmetry_of_the_canonical_form(name):
    model = _model(name)
    inputs = _inputs(model)
    sp = derive_spaces(model, inputs, lambda o: o.logits)
    canon = canonical_form(model, inputs, untie=True, spaces=sp)
    Q = random_orthogonal(sp.hidden_size, torch.Generator().manual_seed(3))
    rot = rotate_canonical(copy.deepcopy(canon), sp, Q)
    tol, tol_exact = _tols(model, inputs)
    assert _rel(_logits(rot, inputs), _logits(model, inputs)) <= tol
    assert _rel(_logits(rot, inputs, True), _logits(model, inputs, True)) <= tol_exact
    # Q moved the weights by O(1): both embeddings (HF's own accessors) and at least four tensors per layer
    for get in ("get_input_embeddings", "get_output_embeddings"):
        assert _rel(getattr(rot, get)().weight.detach(), getattr(canon, get)().weight.detach()) > 0.5
    p0, p1 = dict(canon.named_parameters()), dict(rot.named_parameters())
    moved = [k for k in p0 if _rel(p1[k].detach(), p0[k].detach()) > 0.5]
    assert len(moved) >= 4 * model.config.num_hidden_layers + 2
    # the same Q on the original weights (untied) is no symmetry: the fold is what makes it one
    assert _rel(_logits(rotate_canonical(_untied(model), sp, Q), inputs, True), _logits(model, inputs, True)) > 1e-3


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_post_norm_architectures_are_refused_by_name(name):
    model = _model(name)
    inputs = _inputs(model)
    with pytest.raises(SymmetryNotApplicableError, match="post-norm") as e:
        canonical_form(model, inputs, untie=True)
    assert "norm" in str(e.value).split("post-norm")[0] and len(str(e.value).splitlines()) == 1
    rot = census(model).to_json()["group"]["residual_rotation"]
    assert rot["verified"] is False and "post-norm" in rot["note"]


def test_parameter_free_layernorm_becomes_a_parameter_free_rms_norm_with_its_eps():
    """OLMo: nothing to fold; every norm becomes ``nn.RMSNorm`` without parameters and with OLMo's
    ε = 1e-5 (stated in its code only: measured), the writers are centred (the stream lies in 𝟙⊥),
    and no parameter is added; a tied head (its final norm has no scale) needs no untying."""
    model = _model("olmo")
    canon = canonical_form(model, _inputs(model), untie=True)
    rms = [m for m in canon.modules() if isinstance(m, nn.RMSNorm)]
    assert len(rms) == 2 * model.config.num_hidden_layers + 1
    assert all(m.weight is None and abs(m.eps - 1e-5) <= 1e-5 * 1e-6 for m in rms)
    assert {k for k, _ in canon.named_parameters()} == {k for k, _ in model.named_parameters()}
    p = {k: v.detach() for k, v in canon.named_parameters()}
    assert float(p["model.embed_tokens.weight"].sum(1).abs().max()) < 1e-12
    for i in range(model.config.num_hidden_layers):
        for w in ("self_attn.o_proj", "mlp.down_proj"):
            assert float(p[f"model.layers.{i}.{w}.weight"].sum(0).abs().max()) < 1e-12
    # tied to its embedding, the head reads a final norm without scale: it stays tied without untie=True
    model.lm_head.weight = model.model.embed_tokens.weight
    inputs = _inputs(model)
    tied = canonical_form(model, inputs)
    assert tied.lm_head.weight is tied.model.embed_tokens.weight
    assert _rel(_logits(tied, inputs, True), _logits(model, inputs, True)) <= _tols(model, inputs)[1]


def test_mixtral_norm_scale_goes_into_the_router_and_every_expert():
    """The post-attention norm's scale γ is folded into the router's columns and into every
    expert's gate and up rows' columns (the (E, 2h, D) bank), by hand: W ↦ W diag γ."""
    model = _model("mixtral")
    canon = canonical_form(model, _inputs(model), untie=True)
    p0, p1 = dict(model.named_parameters()), dict(canon.named_parameters())
    for i in range(model.config.num_hidden_layers):
        pre = f"model.layers.{i}."
        g = p0[pre + "post_attention_layernorm.weight"].detach()
        assert torch.all(p1[pre + "post_attention_layernorm.weight"] == 1)
        assert torch.allclose(p1[pre + "mlp.gate.weight"], p0[pre + "mlp.gate.weight"] * g, rtol=0, atol=1e-15)
        bank0, bank1 = p0[pre + "mlp.experts.gate_up_proj"], p1[pre + "mlp.experts.gate_up_proj"]
        assert torch.allclose(bank1, bank0 * g[None, None, :], rtol=0, atol=1e-15)
        assert torch.equal(p1[pre + "mlp.experts.down_proj"], p0[pre + "mlp.experts.down_proj"])  # RMS: nothing centred
