"""Multi-head self-attention (MHSA) and its reduced form (RMHSA).

Conventions ([Attention] §1). Tokens ``x = (x_1, .., x_L)`` with ``x_i ∈ V = R^d`` are stored
as a tensor of shape ``(..., L, d)``; linear maps act on column vectors, ``(A x_i)`` is
``x @ A.T`` in row form.

- **MHSA** with an orthogonal head decomposition ``V = ⊕_h V_h`` (projections ``π_h``) and maps
  ``φ_q, φ_k, φ_v, φ_o ∈ End(V)``::

      MHSA(x)_i = φ_o Σ_h Σ_j softmax_j(s ⟨φ_q x_i, π_h φ_k x_j⟩) π_h φ_v x_j

  The paper has ``s = 1``; ``torch.nn.MultiheadAttention`` uses ``s = 1/√(d/H)``.
- **RMHSA** with free QK matrices ``M_h`` and OV matrices ``R_h``::

      RMHSA(x; M, R)_i = Σ_h Σ_j softmax_j(⟨x_i, M_h x_j⟩) R_h x_j

  MHSA is RMHSA with ``M_h = s φ_q^T π_h φ_k`` and ``R_h = φ_o π_h φ_v`` (:func:`reduce_mhsa`).

Heads are contiguous coordinate blocks of ``V`` (``head_dims``); any other orthogonal head
decomposition ``V_h = Q_h R^{d_h}`` is the coordinate one after replacing ``φ_q, φ_k, φ_v`` by
``Q^T φ`` and ``φ_o`` by ``φ_o Q``, which leaves ``M_h`` and ``R_h`` unchanged.

Parameters are plain tensors (``M``, ``R`` of shape ``(H, d, d)``) or a ``dict[str, Tensor]``
with keys ``phi_q, phi_k, phi_v, phi_o`` — pure functions in the ``torch.func`` style.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import ShapeError, UnsupportedLayerError, check_finite

__all__ = [
    "rmhsa",
    "mhsa",
    "reduce_mhsa",
    "head_slices",
    "MHAConversion",
    "from_multihead_attention",
    "check_qk_ov",
]


def _as_tensor(name: str, value, dtype=None) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        t = value
    elif isinstance(value, np.ndarray) or isinstance(value, (list, tuple)):
        t = torch.as_tensor(np.asarray(value, dtype=np.float64))
    else:
        raise ShapeError(f"{name}: expected a tensor or array, received {type(value).__name__}.")
    if dtype is not None:
        t = t.to(dtype)
    return t


def check_qk_ov(M, R, d: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate RMHSA parameters and return them as tensors of a common floating dtype.

    Args:
        M: QK matrices, shape ``(H, d, d)``.
        R: OV matrices, shape ``(H, d, d)``.
        d: expected token dimension (checked if given).

    Raises:
        ShapeError: wrong number of dimensions, non-square matrices, ``M`` and ``R`` disagreeing,
            or a token dimension different from ``d``.
        NonFiniteError: NaN or inf entries.
    """
    M = _as_tensor("QK matrices M", M)
    R = _as_tensor("OV matrices R", R)
    for name, t in (("QK matrices M", M), ("OV matrices R", R)):
        if t.ndim != 3 or t.shape[1] != t.shape[2]:
            raise ShapeError(
                f"{name}: expected shape (heads, d, d), received {tuple(t.shape)}; stack one square "
                "matrix per head."
            )
    if M.shape != R.shape:
        raise ShapeError(
            f"QK matrices M have shape {tuple(M.shape)} but OV matrices R have {tuple(R.shape)}; "
            "both must be (heads, d, d)."
        )
    if d is not None and M.shape[-1] != d:
        raise ShapeError(f"RMHSA parameters act on R^{M.shape[-1]} but the tokens live in R^{d}.")
    check_finite("QK matrices M", M)
    check_finite("OV matrices R", R)
    dtype = torch.promote_types(M.dtype, R.dtype)
    if not dtype.is_floating_point:
        dtype = torch.float64
    return M.to(dtype), R.to(dtype)


def rmhsa(x: torch.Tensor, M: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """Reduced multi-head self-attention ``Σ_h Σ_j softmax_j(⟨x_i, M_h x_j⟩) R_h x_j``.

    Args:
        x: tokens, shape ``(..., L, d)``.
        M: QK matrices ``(H, d, d)``.
        R: OV matrices ``(H, d, d)``.

    Returns:
        Output tokens, shape ``(..., L, d)``.

    Invariants: equals :func:`mhsa` on ``reduce_mhsa(params)``; adding a matrix ``N`` with
    ``x_i^T N (x_j - x_k) = 0`` to ``M_h`` changes nothing (softmax shift invariance).
    """
    if x.ndim < 2:
        raise ShapeError(f"tokens x: expected shape (..., L, d), received {tuple(x.shape)}.")
    if M.ndim != 3 or R.ndim != 3 or M.shape[-1] != x.shape[-1] or R.shape[-1] != x.shape[-1]:
        raise ShapeError(
            f"tokens of dimension {x.shape[-1]} need M and R of shape (H, {x.shape[-1]}, "
            f"{x.shape[-1]}); received M {tuple(M.shape)}, R {tuple(R.shape)}."
        )
    xh = x.unsqueeze(-3)  # (..., 1, L, d), broadcast over heads
    scores = (xh @ M) @ xh.transpose(-1, -2)  # (..., H, L, L): x_i^T M_h x_j
    attn = torch.softmax(scores, dim=-1)
    values = xh @ R.transpose(-1, -2)  # (..., H, L, d): R_h x_j
    return (attn @ values).sum(dim=-3)


def head_slices(d: int, head_dims: int | Sequence[int]) -> list[slice]:
    """Coordinate blocks of the heads: ``H`` equal blocks (an ``int``) or the given sizes.

    Raises:
        ShapeError: if ``H`` does not divide ``d`` or the sizes do not add up to ``d``.
    """
    if isinstance(head_dims, int):
        H = head_dims
        if H <= 0 or d % H:
            raise ShapeError(
                f"number of heads {H} does not divide the token dimension {d}; choose a divisor of "
                f"{d} or pass explicit head sizes that add up to {d}."
            )
        sizes = [d // H] * H
    else:
        sizes = [int(s) for s in head_dims]
        if any(s <= 0 for s in sizes) or sum(sizes) != d:
            raise ShapeError(
                f"head sizes {sizes} must be positive and add up to the token dimension {d}."
            )
    out, start = [], 0
    for s in sizes:
        out.append(slice(start, start + s))
        start += s
    return out


_PHI_KEYS = ("phi_q", "phi_k", "phi_v", "phi_o")


def _check_phis(params: Mapping[str, torch.Tensor]) -> int:
    missing = [k for k in _PHI_KEYS if k not in params]
    if missing:
        raise ShapeError(
            f"MHSA parameters: missing keys {missing}; expected a dict with keys {list(_PHI_KEYS)}."
        )
    d = params["phi_q"].shape[-1]
    for k in _PHI_KEYS:
        if tuple(params[k].shape) != (d, d):
            raise ShapeError(
                f"MHSA parameter {k}: expected shape ({d}, {d}) (an endomorphism of V), received "
                f"{tuple(params[k].shape)}."
            )
    return d


def mhsa(
    x: torch.Tensor,
    params: Mapping[str, torch.Tensor],
    head_dims: int | Sequence[int],
    *,
    scale: float = 1.0,
) -> torch.Tensor:
    """Multi-head self-attention of the paper (no mask, no residual, no normalisation).

    ``MHSA(x)_i = φ_o Σ_h Σ_j softmax_j(scale · ⟨φ_q x_i, π_h φ_k x_j⟩) π_h φ_v x_j``.

    Args:
        x: tokens ``(..., L, d)``.
        params: ``{"phi_q", "phi_k", "phi_v", "phi_o"}``, each ``(d, d)``.
        head_dims: number of equal heads, or the sizes of the coordinate blocks ``V_h``.
        scale: factor on the scores (1 in the paper, ``1/√d_h`` in PyTorch).
    """
    d = _check_phis(params)
    if x.shape[-1] != d:
        raise ShapeError(f"tokens of dimension {x.shape[-1]} do not match MHSA parameters on R^{d}.")
    q = x @ params["phi_q"].T
    k = x @ params["phi_k"].T
    v = x @ params["phi_v"].T
    out = torch.zeros_like(v)
    for sl in head_slices(d, head_dims):
        scores = scale * (q[..., sl] @ k[..., sl].transpose(-1, -2))
        attn = torch.softmax(scores, dim=-1)
        out[..., sl] = attn @ v[..., sl]
    return out @ params["phi_o"].T


def reduce_mhsa(
    params: Mapping[str, torch.Tensor], head_dims: int | Sequence[int], *, scale: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """QK and OV matrices of an MHSA layer: ``M_h = scale · φ_q^T π_h φ_k``, ``R_h = φ_o π_h φ_v``.

    Invariants: ``mhsa(x, params, head_dims, scale=s) == rmhsa(x, *reduce_mhsa(params, head_dims,
    scale=s))`` and ``rank M_h, rank R_h ≤ dim V_h``.
    """
    d = _check_phis(params)
    Ms, Rs = [], []
    for sl in head_slices(d, head_dims):
        Ms.append(scale * params["phi_q"][sl].T @ params["phi_k"][sl])
        Rs.append(params["phi_o"][:, sl] @ params["phi_v"][sl])
    return torch.stack(Ms), torch.stack(Rs)


@dataclass
class MHAConversion:
    """RMHSA form of a ``torch.nn.MultiheadAttention`` self-attention layer.

    ``mha(x, x, x)[0] == rmhsa(x, M, R) + offset`` for every token sequence ``x`` (eval mode).

    Attributes:
        M: QK matrices ``(H, d, d)``, the ``1/√d_h`` scaling folded in.
        R: OV matrices ``(H, d, d)``.
        offset: constant output ``W_o b_v + b_o`` (``(d,)``) from the value and output biases;
            zero when the layer has no biases.
        num_heads: number of heads ``H``.
        scale: the score scaling ``1/√d_h`` that was folded into ``M``.
        notes: how each bias was handled.
    """

    M: torch.Tensor
    R: torch.Tensor
    offset: torch.Tensor
    num_heads: int
    scale: float
    notes: list[str] = field(default_factory=list)


def _mha_state(module_or_state) -> tuple[dict[str, torch.Tensor], int | None]:
    if isinstance(module_or_state, torch.nn.MultiheadAttention):
        mod = module_or_state
        if mod.bias_k is not None or mod.bias_v is not None:
            raise UnsupportedLayerError(
                "nn.MultiheadAttention with add_bias_kv=True appends a learned key/value token; "
                "that is not a self-attention layer of RMHSA form. Use add_bias_kv=False."
            )
        if mod.add_zero_attn:
            raise UnsupportedLayerError(
                "nn.MultiheadAttention with add_zero_attn=True attends to an extra zero token; "
                "that is not of RMHSA form. Use add_zero_attn=False."
            )
        state = {k: v.detach() for k, v in mod.state_dict().items()}
        return state, mod.num_heads
    if isinstance(module_or_state, Mapping):
        return {str(k): v for k, v in module_or_state.items()}, None
    raise ShapeError(
        "expected a torch.nn.MultiheadAttention or its state dict, received "
        f"{type(module_or_state).__name__}."
    )


def from_multihead_attention(
    module_or_state,
    num_heads: int | None = None,
    *,
    bias_tol: float = 0.0,
    dtype: torch.dtype = torch.float64,
) -> MHAConversion:
    """Convert ``torch.nn.MultiheadAttention`` self-attention weights to RMHSA form.

    PyTorch computes, per head ``h`` (rows ``h d_h .. (h+1) d_h`` of each projection),
    ``softmax_j((W_q x_i + b_q)_h · (W_k x_j + b_k)_h / √d_h)`` and ``W_o concat_h(...) + b_o``.
    Hence ``M_h = W_{q,h}^T W_{k,h} / √d_h`` and ``R_h = W_{o,:,h} W_{v,h}``.

    Biases: the key bias adds a term independent of ``j`` to every score, which softmax ignores,
    so it is dropped exactly. Value and output biases add the constant ``W_o b_v + b_o`` to every
    output token (attention weights sum to one); it is returned as ``offset`` (a G-equivariant layer
    needs a G-fixed offset). A query bias adds ``b_{q,h}·W_{k,h} x_j`` to the scores, which RMHSA
    cannot express: a query bias with an entry above ``bias_tol`` raises
    :class:`~paramsym.errors.UnsupportedLayerError`.

    Args:
        module_or_state: the module, or its ``state_dict`` (keys ``in_proj_weight`` or
            ``q_proj_weight``/``k_proj_weight``/``v_proj_weight``, ``out_proj.weight``, optional
            ``in_proj_bias``, ``out_proj.bias``).
        num_heads: required for a state dict (it is not stored in the weights).
        bias_tol: largest query-bias entry treated as zero.
        dtype: dtype of the returned matrices (float64 by default).
    """
    state, mod_heads = _mha_state(module_or_state)
    H = num_heads if num_heads is not None else mod_heads
    if H is None:
        raise ShapeError(
            "num_heads is required to convert MultiheadAttention weights (it is not stored in the "
            "state dict); pass num_heads=... (the CLI reads it from the safetensors metadata)."
        )
    H = int(H)
    for bad in ("bias_k", "bias_v"):
        if bad in state:
            raise UnsupportedLayerError(
                f"MultiheadAttention weights contain {bad!r} (add_bias_kv=True): an extra learned "
                "token is not of RMHSA form."
            )
    if "in_proj_weight" in state:
        W = state["in_proj_weight"].to(dtype)
        if W.ndim != 2 or W.shape[0] != 3 * W.shape[1]:
            raise ShapeError(
                f"in_proj_weight: expected shape (3E, E), received {tuple(W.shape)}."
            )
        E = W.shape[1]
        Wq, Wk, Wv = W[:E], W[E : 2 * E], W[2 * E :]
    elif all(k in state for k in ("q_proj_weight", "k_proj_weight", "v_proj_weight")):
        Wq, Wk, Wv = (state[k].to(dtype) for k in ("q_proj_weight", "k_proj_weight", "v_proj_weight"))
        E = Wq.shape[0]
        for name, w in (("q_proj_weight", Wq), ("k_proj_weight", Wk), ("v_proj_weight", Wv)):
            if tuple(w.shape) != (E, E):
                raise ShapeError(
                    f"{name}: expected shape ({E}, {E}) for self-attention on one token space, "
                    f"received {tuple(w.shape)} (kdim/vdim different from embed_dim is not "
                    "self-attention)."
                )
    else:
        raise ShapeError(
            "MultiheadAttention weights: expected 'in_proj_weight' (or 'q_proj_weight', "
            f"'k_proj_weight', 'v_proj_weight'); received keys {sorted(state)}."
        )
    if "out_proj.weight" not in state:
        raise ShapeError(
            f"MultiheadAttention weights: missing 'out_proj.weight'; received keys {sorted(state)}."
        )
    Wo = state["out_proj.weight"].to(dtype)
    if tuple(Wo.shape) != (E, E):
        raise ShapeError(f"out_proj.weight: expected shape ({E}, {E}), received {tuple(Wo.shape)}.")
    if H <= 0 or E % H:
        raise ShapeError(
            f"num_heads {H} does not divide embed_dim {E}; nn.MultiheadAttention needs a divisor."
        )
    for name, t in (("W_q", Wq), ("W_k", Wk), ("W_v", Wv), ("W_o", Wo)):
        check_finite(f"MultiheadAttention {name}", t)
    dh = E // H
    scale = 1.0 / math.sqrt(dh)
    notes = [f"folded the score scaling 1/sqrt({dh}) = {scale:.6g} into M_h"]
    zero = torch.zeros(E, dtype=dtype)
    b_in = state.get("in_proj_bias")
    if b_in is not None:
        b_in = b_in.to(dtype)
        bq, bk, bv = b_in[:E], b_in[E : 2 * E], b_in[2 * E :]
    else:
        bq, bk, bv = zero, zero, zero
    bo = state.get("out_proj.bias")
    bo = bo.to(dtype) if bo is not None else zero
    qmax = float(bq.abs().max()) if bq.numel() else 0.0
    if qmax > bias_tol:
        raise UnsupportedLayerError(
            f"query bias has entries up to {qmax:.3g} (> bias_tol={bias_tol:g}): it adds "
            "b_q·W_k x_j to the scores, which reduced MHSA cannot express. Retrain or export the "
            "layer with a zero query bias (or raise bias_tol if it is numerical noise)."
        )
    if float(bk.abs().max()) > 0:
        notes.append("dropped the key bias: it shifts every score of a query equally (softmax-invariant)")
    offset = Wo @ bv + bo
    if float(offset.abs().max()) > 0:
        notes.append(
            "value/output biases give the constant output offset W_o b_v + b_o "
            f"(norm {float(offset.norm()):.3g}); it must be G-fixed for equivariance"
        )
    Ms, Rs = [], []
    for h in range(H):
        sl = slice(h * dh, (h + 1) * dh)
        Ms.append(scale * Wq[sl].T @ Wk[sl])
        Rs.append(Wo[:, sl] @ Wv[sl])
    return MHAConversion(torch.stack(Ms), torch.stack(Rs), offset, H, scale, notes)
