"""The Reynolds (group) average — one definition for matrices and for functions.

For a finite group, or a quadrature ``{(g_k, w_k)}`` of a compact group's normalised Haar
measure (``Σ_k w_k = 1``), and representations ``ρ_out``, ``ρ_in``:

* on matrices (intertwiner / commutant projection)::

      R(A) = Σ_k w_k ρ_out(g_k) A ρ_in(g_k)⁻¹

  With orthogonal ``ρ_in`` (``ρ_in⁻¹ = ρ_inᵀ``) and uniform weights over a finite group this is
  the Frobenius-orthogonal projection onto ``Hom_G(ρ_in, ρ_out)``; with ``ρ_in = ρ_out`` onto
  the commutant ``{B : ρ(g) B = B ρ(g)}``. Invariants: ``R(R(A)) = R(A)`` and
  ``ρ_out(g) R(A) = R(A) ρ_in(g)`` for every ``g`` of a finite group.

* on functions (projection onto equivariant functions, probe points ``x_n``)::

      [P f](x_n) = Σ_k w_k ρ_out(g_k)⁻¹ f(τ(g_k) x_n)

  where ``τ`` acts on inputs. ``P f = f`` exactly when ``f`` is equivariant on the orbit of the
  probe set, and ``δ = f − P f`` is the equivariance defect.

Both work with numpy arrays and torch tensors (the array type of the inputs is kept); this
module does not import torch, so pure-math commands stay torch-free.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Array = Any  # numpy.ndarray or torch.Tensor


def _is_torch(a: Array) -> bool:
    return type(a).__module__.startswith("torch")


def _permute(a: Array, axes: tuple[int, ...]) -> Array:
    return a.permute(*axes) if _is_torch(a) else a.transpose(axes)


def _swap_last(a: Array) -> Array:
    return a.transpose(-1, -2) if _is_torch(a) else np.swapaxes(a, -1, -2)


def reynolds_matrices(
    A: Array,
    out_mats: Array,
    in_mats: Array | None = None,
    weights: Array | None = None,
    *,
    in_orthogonal: bool = True,
) -> Array:
    """``R(A) = Σ_k w_k ρ_out(g_k) A ρ_in(g_k)⁻¹`` for one matrix or a batch of matrices.

    Args:
        A: ``(d_out, d_in)`` or a batch ``(B, d_out, d_in)``.
        out_mats: ``ρ_out(g_k)``, shape ``(K, d_out, d_out)``.
        in_mats: ``ρ_in(g_k)``, shape ``(K, d_in, d_in)``; default ``out_mats`` (commutant).
        weights: ``(K,)`` quadrature weights summing to one; default uniform ``1/K``.
        in_orthogonal: ``ρ_in⁻¹ = ρ_inᵀ`` (true for the orthogonal representations used here);
            otherwise the inverses are computed.

    Returns:
        ``R(A)`` with the shape and array type of ``A``. Cost: two matrix products of sizes
        ``(K d_out, d_out) × (d_out, B d_in)`` and ``(B d_out, K d_in) × (K d_in, d_in)``.
    """
    in_mats = out_mats if in_mats is None else in_mats
    single = A.ndim == 2
    X = A[None] if single else A
    K, do = out_mats.shape[0], out_mats.shape[1]
    B, di = X.shape[0], X.shape[2]
    if in_orthogonal:
        inv_t = in_mats  # (ρ_in⁻¹)ᵀ = ρ_in
    else:
        inv = (np.linalg.inv(in_mats) if not _is_torch(in_mats) else _torch_inv(in_mats))
        inv_t = _swap_last(inv)
    if weights is not None:
        out_mats = out_mats * weights.reshape(K, 1, 1)
    # Y[k, a, b, c] = (ρ_out(g_k) X_b)[a, c]
    Y = (out_mats.reshape(K * do, do) @ _permute(X, (1, 0, 2)).reshape(do, B * di)).reshape(K, do, B, di)
    # Z[b, a, e] = Σ_{k, c} Y[k, a, b, c] (ρ_in(g_k)⁻¹)[c, e]  with (ρ_in⁻¹)[c, e] = inv_t[k, e, c]
    Z = _permute(Y, (2, 1, 0, 3)).reshape(B * do, K * di) @ _permute(inv_t, (0, 2, 1)).reshape(K * di, di)
    Z = Z.reshape(B, do, di)
    if weights is None:
        Z = Z / K
    return Z[0] if single else Z


def _torch_inv(m: Array) -> Array:
    import torch

    return torch.linalg.inv(m)


def reynolds_function(
    f: Callable[[Array], Array],
    x: Array,
    in_mats: Array,
    out_inv_mats: Array,
    weights: Array,
    *,
    chunk: int = 16,
    check: Callable[[Array], None] | None = None,
) -> Array:
    """``[P f](x_n) = Σ_k w_k ρ_out(g_k)⁻¹ f(τ(g_k) x_n)`` on the probe points ``x``.

    Args:
        f: maps a batch of inputs ``(M, d_x)`` to outputs ``(M, d_y)`` (or ``(M,)``).
        x: probe points ``(N, d_x)``.
        in_mats: ``τ(g_k)``, ``(K, d_x, d_x)``.
        out_inv_mats: ``ρ_out(g_k)⁻¹``, ``(K, d_y, d_y)``.
        weights: ``(K,)`` quadrature weights (summing to one for a projection).
        chunk: group elements evaluated per call of ``f`` (memory ``chunk · N`` points).
        check: optional callback given each raw output chunk ``(c·N, d_y)`` (e.g. named
            errors for non-finite or wrongly shaped outputs).

    Returns:
        ``(N, d_y)``, the array type of ``f``'s outputs.
    """
    n, dx = x.shape
    K = in_mats.shape[0]
    total = None
    for s in range(0, K, chunk):
        t = in_mats[s : s + chunk]
        c = t.shape[0]
        # xs[k, n, :] = τ(g_k) x_n
        xs = (x @ _swap_last(t)).reshape(c * n, dx)
        y = f(xs)
        if check is not None:
            check(y)
        y = y.reshape(c, n, -1)
        # part[n, a] = Σ_k w_k Σ_b ρ_inv[k, a, b] y[k, n, b]
        wr = out_inv_mats[s : s + chunk] * weights[s : s + chunk].reshape(c, 1, 1)
        part = (y @ _swap_last(wr)).sum(0)
        total = part if total is None else total + part
    return total
