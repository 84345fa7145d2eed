"""The canonical form and residual rotation of a Vision Transformer (issue 35): HF ``ViTForImageClassification``.

The stream's input writers are the patch convolution (output channels), the CLS token and the
position embeddings; the classifier reads the final norm at the CLS position. References are
independent of the code under test: the original HF model's own forward pass, and a rotation
applied by hand through ViT's parameter names.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from paramsym.census.canonical import canonical_form
from paramsym.census.rotation import random_orthogonal, rotate_residual
from paramsym.census.spaces import derive_spaces
from paramsym.census.walk import _output
from paramsym.census.zoo import tiny_vit
from paramsym.errors import SymmetryNotApplicableError, TraceError

transformers = pytest.importorskip("transformers")

EPS32, EPS64 = torch.finfo(torch.float32).eps, torch.finfo(torch.float64).eps
D, L = 16, 2


def vit(seed: int = 0, patch: int = 2, dtype=torch.float64, pooler: bool = False):
    """The zoo's tiny ViT (8×8 one-channel images, D = 16, 2 layers; norm gains 1 + N(0, 0.2²), biases nonzero)."""
    return tiny_vit(seed, patch=patch, hidden=D, layers=L, pooler=pooler).to(dtype)


def images(dtype=torch.float64, n: int = 6):
    return {"pixel_values": torch.randn(n, 1, 8, 8, generator=torch.Generator().manual_seed(1), dtype=dtype)}


def _rel(a, b):
    return float((a - b).detach().norm() / b.detach().norm())


def _tol(eps):
    """Rounding of the logits: each of the L + 1 norm–read–write blocks is a D-long inner product
    (error ~ √D·eps relative), with a margin of 10 (the rule of census/precision.py)."""
    return 10 * (L + 1) * D**0.5 * eps


INPUT_WRITERS = {"vit.embeddings.patch_embeddings.projection.weight": 0, "vit.embeddings.patch_embeddings.projection.bias": 0,
                 "vit.embeddings.cls_token": 2, "vit.embeddings.position_embeddings": 2}


def test_tracer_finds_the_patch_convolution_cls_and_position_embeddings_as_stream_writers():
    model = vit()
    sp = derive_spaces(model, images(), _output)
    assert sp.input_writers == INPUT_WRITERS and sp.hidden_size == D and not sp.unfollowed
    assert set(sp.readers) >= {"classifier", "vit.layers.1.mlp.fc1"} and len(sp.writers) == 2 * L
    assert [la.attention.num_heads for la in sp.layout.layers] == [2, 2]
    stream = dict(sp.stream)
    assert all(stream[n] == ax for n, ax in INPUT_WRITERS.items())


@pytest.mark.parametrize("patch", [2, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_vit_canonical_form_keeps_the_logits_and_centres_every_input_writer(patch, dtype):
    model = vit(patch=patch, dtype=dtype)
    x = images(dtype)
    canon = canonical_form(model, x, _output)
    with torch.no_grad():
        ref, got = model(**x).logits, canon(**x).logits
    assert _rel(got, ref) <= _tol(EPS32 if dtype == torch.float32 else EPS64)
    norms = [m for m in canon.modules() if isinstance(m, (nn.LayerNorm, nn.RMSNorm))]
    assert len(norms) == 2 * L + 1 and all(isinstance(m, nn.RMSNorm) and torch.all(m.weight == 1) for m in norms)
    p, p0 = dict(canon.named_parameters()), dict(model.named_parameters())
    tol = 50 * (EPS32 if dtype == torch.float32 else EPS64)
    for n, ax in INPUT_WRITERS.items():  # the stream lies in 𝟙⊥: every writer sums to 0 along the stream axis
        assert float(p[n].detach().sum(ax).abs().max()) <= tol * float(p0[n].detach().abs().sum(ax).max()), n
        assert _rel(p[n], p0[n]) > 1e-3, n  # and was moved to get there
    assert _rel(p["classifier.weight"], p0["classifier.weight"]) > 1e-2  # the final norm's gain went into it


def _rotate_by_hand(model, Q):
    """Q applied through ViT's parameter names: input writers and writers' outputs by Q, readers by Qᵀ."""
    m = copy.deepcopy(model)
    p = dict(m.named_parameters())
    with torch.no_grad():
        w = "vit.embeddings.patch_embeddings.projection.weight"
        p[w].copy_(torch.einsum("ij,jchw->ichw", Q, p[w]))
        for n in ("vit.embeddings.patch_embeddings.projection.bias",):
            p[n].copy_(Q @ p[n])
        for n in ("vit.embeddings.cls_token", "vit.embeddings.position_embeddings"):
            p[n].copy_(p[n] @ Q.T)
        p["classifier.weight"].copy_(p["classifier.weight"] @ Q.T)
        for i in range(L):
            h = f"vit.layers.{i}."
            for r in ("attention.q_proj", "attention.k_proj", "attention.v_proj", "mlp.fc1"):
                p[h + r + ".weight"].copy_(p[h + r + ".weight"] @ Q.T)
            for w in ("attention.o_proj", "mlp.fc2"):
                p[h + w + ".weight"].copy_(Q @ p[h + w + ".weight"])
                p[h + w + ".bias"].copy_(Q @ p[h + w + ".bias"])
    return m


def test_vit_residual_rotation_is_exact_on_the_canonical_form_only():
    """A Haar Q applied by hand to the canonical ViT keeps the logits to rounding and moves the
    weights by O(1); the census's rotate_residual gives the same weights; Q on the original does not."""
    model = vit()
    x = images()
    canon = canonical_form(model, x, _output)
    Q = random_orthogonal(D, torch.Generator().manual_seed(3))
    by_hand = _rotate_by_hand(canon, Q)
    with torch.no_grad():
        ref = model(**x).logits
        assert _rel(by_hand(**x).logits, ref) <= _tol(EPS64)
        assert _rel(_rotate_by_hand(model, Q)(**x).logits, ref) > 1e-2  # LayerNorm's gains and centring: no symmetry
    p, pc = dict(by_hand.named_parameters()), dict(canon.named_parameters())
    assert min(_rel(p[n], pc[n]) for n in INPUT_WRITERS) > 0.3
    census, M = rotate_residual(model, x, _output, torch.Generator(), M=Q)
    for n, t in census.named_parameters():
        assert float((t - p[n]).detach().abs().max()) <= 1e-12, n


def test_vit_base_model_with_pooler_handled_through_its_pooler_or_refused_by_name():
    """ViTModel with its pooler: the pooler's dense layer reads the final norm at the CLS position,
    so with the pooled output compared the final norm folds into it; compared on last_hidden_state
    (the default output) the final norm feeds nothing and the canonical form refuses, naming why."""
    model = vit(pooler=True)
    x = images()

    def pooled(out):
        return out.pooler_output

    canon = canonical_form(model, x, pooled)
    with torch.no_grad():
        assert _rel(canon(**x).pooler_output, model(**x).pooler_output) <= _tol(EPS64)
    assert _rel(canon.pooler.dense.weight, model.pooler.dense.weight) > 1e-2
    with pytest.raises(SymmetryNotApplicableError, match="base model"):
        canonical_form(model, x, _output)


def test_an_input_embedding_without_embedding_or_convolution_is_refused_by_name():
    model = vit()
    """Two convolutions in the input embedding (a patch convolution followed by a 1×1 one): which
    one's output channels are the stream is not decided; the tracer says so."""
    pe = model.vit.embeddings.patch_embeddings
    pe.projection = nn.Sequential(pe.projection, nn.Conv2d(D, D, 1, dtype=torch.float64))
    with pytest.raises(TraceError, match="neither an nn.Embedding nor holds exactly one convolution"):
        derive_spaces(model, images(), _output)


def test_census_of_a_vit_verifies_every_entry_and_the_residual_rotation():
    """The whole census on a ViT: every entry verified on the actual weights — the residual
    permutation permutes the patch convolution's output channels, CLS and position embeddings with
    the rest (without them it would move the logits) — and O(D) verified on the canonical form."""
    from paramsym.census import census

    res = census(vit(), inputs=images())
    kinds = [e.kind for e in res.entries]
    assert "residual_permutation" in kinds and kinds.count("head_permutation") == L and kinds.count("norm_scale") == 2 * L
    assert all(e.verified for e in res.entries), [(e.kind, e.verified) for e in res.entries if not e.verified]
    rot = res.residual_rotation
    assert rot["group"] == f"O({D})" and rot["verified"] and rot["motion"] > 0.3


def test_tiny_vit_refuses_a_patch_that_does_not_divide_the_image():
    from paramsym.errors import ConfigError

    with pytest.raises(ConfigError, match="patch must divide the image side 8"):
        tiny_vit(patch=3)
