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

import pytest
import torch

from paramsym.alignment.align import align
from paramsym.alignment.arch import hf_architecture
from paramsym.alignment.matching import rotate_axes
from paramsym.alignment.refine import RefineConfig, refine, transform
from paramsym.census.canonical import canonical_form
from paramsym.census.permspec import apply_spec, random_perms, spec_from_spaces
from paramsym.census.rotation import random_orthogonal, rotate_canonical, rotate_residual
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
