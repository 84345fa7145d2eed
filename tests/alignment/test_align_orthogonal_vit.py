"""The ``orthogonal`` stage of ``align`` on a tiny Vision Transformer (issue 35), on the pattern of
test_align_orthogonal.py's GPT-2 scramble test.

B is a scrambled copy of A: a Haar rotation of the residual stream applied by the census's model
transformation (:func:`paramsym.census.rotation.rotate_residual`: patch convolution, CLS token and
position embeddings included), random FFN-unit and head permutations (the census's spec) and
random per-head GL(d_k) and GL(d_v) (the catalogue actions). Images: scikit-learn's digits as
8×8 one-channel images. References: the real HF forward pass, the planted rotation, A's
canonical weights.
"""

from __future__ import annotations

import pytest
import torch

from paramsym.alignment.align import align
from paramsym.census.canonical import canonical_form
from paramsym.census.permspec import apply_spec, random_perms, spec_from_spaces
from paramsym.census.rotation import rotate_residual
from paramsym.census.spaces import derive_spaces
from paramsym.census.walk import _output
from paramsym.kinds.canonical_pair import canonical_pair
from paramsym.models.datasets import Split, digits

transformers = pytest.importorskip("transformers")
pytest.importorskip("sklearn")


def _vit(seed: int):
    conf = transformers.ViTConfig(image_size=8, patch_size=2, num_channels=1, hidden_size=16, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=24, num_labels=10, attn_implementation="eager")
    model = transformers.ViTForImageClassification(conf).eval().double()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # non-trivial norm gains and biases: the canonical form has something to fold
        for n, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * (0.3 if p.ndim > 1 else 0.1)
                    + (1.0 if "layernorm" in n and n.endswith("weight") else 0.0))
    return model


def _images() -> Split:
    d = digits(0, 0.8, torch.float64)
    img = lambda x: x.reshape(-1, 1, 8, 8)  # noqa: E731
    return Split(img(d.x_train[:96]), d.y_train[:96], img(d.x_test[:64]), d.y_test[:64])


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


@pytest.fixture(scope="module")
def scrambled():
    from paramsym.actions.attention import QueryKeyAction, ValueOutputAction

    model, data = _vit(0), _images()
    gen = torch.Generator().manual_seed(3)
    inputs = {"pixel_values": data.x_train[:32]}
    a_can = canonical_form(model, inputs, _output)
    b_model, M = rotate_residual(model, inputs, _output, gen)
    sp = derive_spaces(b_model, inputs, _output)
    spec = spec_from_spaces(sp, _params(b_model), sub_blocks=True)
    perms = {k: v for k, v in random_perms(spec, gen).items() if k != "P_res"}
    theta = apply_spec(_params(b_model), spec, perms)
    for layer in sp.layout.layers:
        layout = layer.attention
        for cls in (QueryKeyAction, ValueOutputAction):
            block = cls.block_for(theta, layout)
            theta = block.scatter(cls(block, layout).act(_gl(layout.head_dim, layout.num_kv_heads, gen),
                                                         block.gather(theta)), theta)
    return a_can, _load(b_model, theta), M, data


def _rel(x, y):
    return float((x - y).norm() / y.norm())


def test_vit_scramble_is_a_symmetry_and_moves_the_weights(scrambled):
    a_can, b_model, _, data = scrambled
    a, b = _params(a_can), _params(b_model)
    moved = [k for k in a if k.endswith(("projection.weight", "cls_token", "position_embeddings", "q_proj.weight",
                                         "fc1.weight", "classifier.weight"))]
    assert len(moved) == 8 and min(_rel(b[k], a[k]) for k in moved) > 0.3
    with torch.no_grad():
        assert _rel(b_model(data.x_test).logits, a_can(data.x_test).logits) <= 1e-12


def test_canonical_pair_of_two_vits_and_the_orthogonal_stage_recovers_the_planted_rotation(scrambled):
    """canonical_pair traces both ViTs (the patch convolution, CLS token and position embeddings among
    the stream tensors); aligned back: Q = Mᵀ, A's canonical weights recovered, barrier ≈ 0, B's
    function unchanged."""
    a_can, b_model, M, data = scrambled
    pair = canonical_pair(a_can, b_model, data.x_train[:32])
    assert {pair.axes[k] for k in ("vit.embeddings.patch_embeddings.projection.weight", "vit.embeddings.cls_token",
                                   "vit.embeddings.position_embeddings", "classifier.weight")} == {0, 2, 1}
    res = align(pair.arch, _params(a_can), _params(b_model), data, points=5,
                stages=("before", "canonical", "orthogonal"), canonical=pair)
    assert float((res.elements["Q"] - M.T).abs().max()) <= 1e-9
    got = res.stages["orthogonal"]
    for k, v in pair.a.items():
        assert float((got[k] - v).norm()) <= 1e-9 * max(float(v.norm()), 1.0), k
    assert res.function_error["orthogonal"] <= 1e-12 and res.function_error["canonical"] <= 1e-12
    assert abs(res.summary()["barrier_orthogonal"]) <= 1e-9

    def gap(c):  # the largest |loss − the line through the end losses| on the path
        return max(abs(v - ((1 - al) * c.test_loss[0] + al * c.test_loss[-1])) for al, v in zip(c.alphas, c.test_loss))

    assert gap(res.curves["orthogonal"]) <= 1e-9 and gap(res.curves["canonical"]) > 1e-2  # the scramble mattered
