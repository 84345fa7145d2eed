"""RMHSA / MHSA against explicit loops and against torch.nn.MultiheadAttention."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from paramsym.attention.rmhsa import (
    from_multihead_attention,
    head_slices,
    mhsa,
    reduce_mhsa,
    rmhsa,
)
from paramsym.errors import NonFiniteError, ShapeError, UnsupportedLayerError


def _loop_rmhsa(x: np.ndarray, M: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Definition, one token and one head at a time (independent reference)."""
    L, d = x.shape
    out = np.zeros((L, d))
    for i in range(L):
        for h in range(M.shape[0]):
            s = np.array([x[i] @ M[h] @ x[j] for j in range(L)])
            w = np.exp(s - s.max())
            w /= w.sum()
            for j in range(L):
                out[i] += w[j] * (R[h] @ x[j])
    return out


def test_rmhsa_matches_explicit_loops():
    rng = np.random.default_rng(0)
    H, d, L = 3, 5, 4
    M = rng.normal(size=(H, d, d)) / d
    R = rng.normal(size=(H, d, d))
    x = rng.normal(size=(L, d))
    got = rmhsa(torch.tensor(x), torch.tensor(M), torch.tensor(R)).numpy()
    np.testing.assert_allclose(got, _loop_rmhsa(x, M, R), rtol=1e-12, atol=1e-12)
    # batch dimensions broadcast
    xb = rng.normal(size=(2, 3, L, d))
    got_b = rmhsa(torch.tensor(xb), torch.tensor(M), torch.tensor(R)).numpy()
    np.testing.assert_allclose(got_b[1, 2], _loop_rmhsa(xb[1, 2], M, R), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("head_dims", [2, [1, 3, 2]])
def test_mhsa_equals_rmhsa_of_reduction(head_dims):
    g = torch.Generator().manual_seed(1)
    d = 6
    params = {k: torch.randn(d, d, generator=g, dtype=torch.float64) / 2 for k in ("phi_q", "phi_k", "phi_v", "phi_o")}
    x = torch.randn(3, 5, d, generator=g, dtype=torch.float64)
    for scale in (1.0, 0.3):
        M, R = reduce_mhsa(params, head_dims, scale=scale)
        torch.testing.assert_close(mhsa(x, params, head_dims, scale=scale), rmhsa(x, M, R), rtol=1e-12, atol=1e-12)
        # rank bound rank M_h, R_h <= dim V_h
        for h, sl in enumerate(head_slices(d, head_dims)):
            dh = sl.stop - sl.start
            assert torch.linalg.matrix_rank(M[h]) <= dh
            assert torch.linalg.matrix_rank(R[h]) <= dh


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_conversion_reproduces_torch_multihead_attention(batch_first, bias):
    torch.manual_seed(2)
    E, H, L = 8, 4, 5
    mha = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=batch_first).double().eval()
    with torch.no_grad():
        if bias:
            mha.in_proj_bias.normal_()
            mha.in_proj_bias[:E] = 0.0  # query bias must vanish
            mha.out_proj.bias.normal_()
    conv = from_multihead_attention(mha)
    assert conv.num_heads == H and math.isclose(conv.scale, 1 / math.sqrt(E // H))
    x = torch.randn(3, L, E, dtype=torch.float64)
    xin = x if batch_first else x.transpose(0, 1)
    with torch.no_grad():
        ref = mha(xin, xin, xin, need_weights=False)[0]
    ref = ref if batch_first else ref.transpose(0, 1)
    torch.testing.assert_close(rmhsa(x, conv.M, conv.R) + conv.offset, ref, rtol=1e-10, atol=1e-10)
    if bias:
        assert conv.offset.abs().max() > 0 and any("key bias" in n for n in conv.notes)
    else:
        assert conv.offset.abs().max() == 0


def test_conversion_from_state_dict_and_separate_projections():
    torch.manual_seed(3)
    E, H = 6, 3
    mha = torch.nn.MultiheadAttention(E, H, bias=False).double().eval()
    state = mha.state_dict()
    with pytest.raises(ShapeError, match="num_heads"):
        from_multihead_attention(state)
    a = from_multihead_attention(state, num_heads=H)
    W = state["in_proj_weight"]
    split = {
        "q_proj_weight": W[:E],
        "k_proj_weight": W[E : 2 * E],
        "v_proj_weight": W[2 * E :],
        "out_proj.weight": state["out_proj.weight"],
    }
    b = from_multihead_attention(split, num_heads=H)
    torch.testing.assert_close(a.M, b.M)
    torch.testing.assert_close(a.R, b.R)


def test_conversion_bad_input():
    torch.manual_seed(4)
    E = 4
    mha = torch.nn.MultiheadAttention(E, 2).double()
    with torch.no_grad():
        mha.in_proj_bias.normal_()
    with pytest.raises(UnsupportedLayerError, match="query bias"):
        from_multihead_attention(mha)
    # tolerance lets tiny noise through
    with torch.no_grad():
        mha.in_proj_bias[:E] = 1e-14
    from_multihead_attention(mha, bias_tol=1e-12)
    with pytest.raises(UnsupportedLayerError, match="add_bias_kv"):
        from_multihead_attention(torch.nn.MultiheadAttention(E, 2, add_bias_kv=True))
    with pytest.raises(ShapeError, match="does not divide"):
        from_multihead_attention(mha.state_dict(), num_heads=3)
    bad = dict(mha.state_dict())
    bad["out_proj.weight"] = torch.full((E, E), float("nan"))
    with pytest.raises(NonFiniteError):
        from_multihead_attention(bad, num_heads=2, bias_tol=1.0)


def test_head_slices_errors():
    assert [s.stop - s.start for s in head_slices(12, 4)] == [3, 3, 3, 3]
    with pytest.raises(ShapeError, match="does not divide"):
        head_slices(10, 4)
    with pytest.raises(ShapeError, match="add up"):
        head_slices(10, [3, 3])


def test_package_exports_resolve():
    import paramsym.attention as A

    for name in A.__all__:
        assert getattr(A, name) is not None
    with pytest.raises(AttributeError):
        A.no_such_name  # noqa: B018
