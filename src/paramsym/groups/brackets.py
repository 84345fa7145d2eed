"""Commutativity of a family of generators in bounded memory (sparsity-aware).

``c = max_{a<b} ‖[X_a, X_b]‖_F / (‖X_a‖_F ‖X_b‖_F)`` for ``d`` matrices ``s × s`` (the one
implementation; :func:`paramsym.groups.algebra.commutativity` is this function). Broadcasting
every pair at once would need about ``4 · 8 d² s²`` bytes (16 GiB for the 80 affine generators of
the attention-with-biases preset, ``s = 289``); here one ``X_a`` at a time meets a block of
``n_b`` of the ``X_b`` with ``b > a`` (``[X_b, X_a] = −[X_a, X_b]``), ``n_b`` chosen from
``max_memory``.

Two products, both exact:

* *pattern* (structured ansätze, whose generators share a sparse support ``P``: row maps touch
  ``|I|`` entries per row): ``(X_a X_b)[i, j] = Σ_t X_a[e1_t] X_b[e2_t]`` over the ``T`` triples
  ``e1_t = (i, k) ∈ P``, ``e2_t = (k, j) ∈ P``; so ``[X_a, X_b]`` is a scatter-add of
  ``X_a[e1] X_b[e2] − X_b[e1] X_a[e2]``: ``O(d² T)`` work, ``T ≪ s³``;
* *dense*: two GEMMs ``X_a [X_b …]`` and ``X_aᵀ [X_bᵀ …]`` per block: ``O(d² s³)`` work.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import ShapeError
from .memory import budget_bytes, check_memory, dense_bytes

__all__ = ["commutativity", "commutativity_bytes"]


def commutativity_bytes(d: int, s: int) -> int:
    """Least memory the dense product needs: the stack in two layouts and one commutator block
    of width one (``(2d + 3) s²`` float64 numbers). The pattern product is used only when it
    needs less."""
    return dense_bytes(2 * d + 3, s, s)


def _triples(x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The union support ``P`` (flat indices ``i s + k``), the triples as positions ``e1 = (i, k)``,
    ``e2 = (k, j)`` in ``P``, the index of each triple's ``(i, j)`` among the distinct products,
    and those products' flat indices ``i s + j``."""
    s = x.shape[1]
    rows, cols = (x != 0).any(0).nonzero(as_tuple=True)  # row-major: sorted by row
    counts = torch.bincount(rows, minlength=s)
    rowptr = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    n2 = counts[cols]  # e2 candidates per e1: the entries of row k = cols[e1]
    e1 = torch.repeat_interleave(torch.arange(rows.numel()), n2)
    first = torch.repeat_interleave(rowptr[cols], n2)
    within = torch.arange(e1.numel()) - torch.repeat_interleave(n2.cumsum(0) - n2, n2)
    e2 = first + within
    out, inverse = torch.unique(rows[e1] * s + cols[e2], return_inverse=True)
    return rows * s + cols, e1, e2, inverse, out


def commutativity(mats: Tensor, *, max_memory: int | None = None) -> float:
    """``max_{a,b} ‖[X_a, X_b]‖_F / (‖X_a‖_F ‖X_b‖_F)`` (0 for a commuting family or ``d ≤ 1``).

    Args:
        mats: (d, s, s) matrices (converted to float64).
        max_memory: budget in bytes (``None``: :data:`paramsym.groups.memory.DEFAULT_MAX_MEMORY`).

    Raises:
        ShapeError: not a stack of square matrices. TooLargeError: the budget is below
            :func:`commutativity_bytes`.
    """
    x = torch.as_tensor(mats).to(torch.float64)
    if x.dim() == 2:
        x = x.unsqueeze(0)
    if x.dim() != 3 or x.shape[1] != x.shape[2]:
        raise ShapeError(f"expected square matrices (d, s, s); received shape {tuple(x.shape)}.")
    d, s, _ = x.shape
    if d < 2:
        return 0.0
    budget = budget_bytes(max_memory)
    check_memory(commutativity_bytes(d, s), f"the commutativity of {d} matrices {s}×{s}", budget,
                 "Check fewer generators at a time.")
    norms = x.flatten(1).norm(dim=1).clamp_min(1e-300)
    nnz = int((x != 0).any(0).sum())
    # expected triples T ≈ nnz²/s; the pattern path needs about (2d + 3 n_b) T numbers
    if nnz * nnz <= s**4 // 8 and dense_bytes(2 * d + 3, nnz * nnz // s + nnz) <= budget // 2:
        flat_idx, e1, e2, inverse, out = _triples(x)
        n_out = out.numel()
        t = e1.numel()
        if dense_bytes(2 * d + 3, t) + dense_bytes(d, n_out) <= budget:
            v = x.reshape(d, -1)[:, flat_idx]
            v1, v2 = v[:, e1], v[:, e2]  # (d, T)
            nb = max(1, (budget - dense_bytes(2 * d, t)) // dense_bytes(3, t + n_out))
            worst = 0.0
            for a in range(d - 1):
                for b0 in range(a + 1, d, nb):
                    b1 = min(d, b0 + nb)
                    terms = v1[a] * v2[b0:b1] - v1[b0:b1] * v2[a]  # (n_b, T)
                    comm = terms.new_zeros(b1 - b0, n_out).index_add_(1, inverse, terms)
                    worst = max(worst, float((comm.norm(dim=1) / (norms[a] * norms[b0:b1])).max()))
            return worst
    wide = x.permute(1, 0, 2).reshape(s, d * s)  # [X_1 | … | X_d]
    wide_t = x.transpose(1, 2).permute(1, 0, 2).reshape(s, d * s)  # [X_1ᵀ | … | X_dᵀ]
    nb = max(1, (budget - dense_bytes(2 * d, s, s)) // dense_bytes(3, s, s))
    worst = 0.0
    for a in range(d - 1):
        for b0 in range(a + 1, d, nb):
            b1 = min(d, b0 + nb)
            cols = slice(b0 * s, b1 * s)
            left = (x[a] @ wide[:, cols]).reshape(s, b1 - b0, s).permute(1, 0, 2)  # X_a X_b
            right = (x[a].T @ wide_t[:, cols]).reshape(s, b1 - b0, s).permute(1, 2, 0)  # X_b X_a
            c = (left - right).flatten(1).norm(dim=1) / (norms[a] * norms[b0:b1])
            worst = max(worst, float(c.max()))
    return worst
