"""A small linear-operator base: products define the operator, everything else is derived once.

A :class:`LinearOperator` ``A ∈ R^{M×p}`` supplies only

    matvec(v) = A v   (v ∈ R^p),        rmatvec(u) = Aᵀ u   (u ∈ R^M),        shape, dtype.

The base derives, in one place, for every operator (dense, matrix-free Jacobian, stack):

* :meth:`~LinearOperator.rows` — ``A[idx, :] = (Aᵀ e_idx)ᵀ`` by batched ``rmatvec``;
* :meth:`~LinearOperator.column_norms` — ``‖A_{:,i}‖₂ = sqrt(Σ_m A_{m,i}²)`` from the rows;
* :meth:`~LinearOperator.dense` — ``A`` materialised from the rows;
* :meth:`~LinearOperator.gram` — ``A W Aᵀ`` (``W = diag(w)``) column block by column block,
  ``(A W Aᵀ)[:, S] = A (W A[S, :]ᵀ)``, symmetrised ``½(K + Kᵀ)``;
* :meth:`~LinearOperator.to_scipy` — a ``scipy.sparse.linalg.LinearOperator`` on float64 numpy
  vectors.

Subclasses may override a derived method only for speed (:class:`DenseOperator` indexes its
matrix), never to change its definition; the tests compare every derived quantity with the
dense float64 reference.

Concrete operators here: :class:`DenseOperator` (a matrix) and :class:`StackedOperator`
(``[A_1; A_2; …]`` over the same columns). The matrix-free Jacobian is
:class:`paramsym.attribution.jacobian.JacobianOperator`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import Tensor
from torch.func import vmap

from .errors import ShapeError


class LinearOperator:
    """``A ∈ R^{M×p}`` given by its products (see module docstring).

    Subclasses set ``shape = (M, p)`` and ``dtype`` and implement :meth:`matvec` and
    :meth:`rmatvec` on flat torch vectors. Batched products default to ``torch.func.vmap``.
    """

    shape: tuple[int, int]
    dtype: torch.dtype

    # ---- the operator --------------------------------------------------------------------
    def matvec(self, v: Tensor) -> Tensor:
        """``A v`` for ``v`` of length ``p``; returns length ``M``."""
        raise NotImplementedError

    def rmatvec(self, u: Tensor) -> Tensor:
        """``Aᵀ u`` for ``u`` of length ``M``; returns length ``p``."""
        raise NotImplementedError

    def matmat(self, V: Tensor) -> Tensor:
        """``A Vᵀ`` row by row: ``V`` is ``[k, p]``, the result ``[k, M]`` (``vmap`` of matvec)."""
        return vmap(self.matvec)(V)

    def rmatmat(self, U: Tensor) -> Tensor:
        """``Aᵀ Uᵀ`` row by row: ``U`` is ``[k, M]``, the result ``[k, p]`` (``vmap`` of rmatvec)."""
        return vmap(self.rmatvec)(U)

    # ---- derived once --------------------------------------------------------------------
    def rows(self, index: Tensor | Iterable[int]) -> Tensor:
        """Rows ``A[index, :]`` as ``Aᵀ e_index`` (batched rmatvec on unit vectors)."""
        idx = torch.as_tensor(list(index) if not isinstance(index, Tensor) else index, dtype=torch.long)
        eye = torch.zeros(len(idx), self.shape[0], dtype=self.dtype)
        eye[torch.arange(len(idx)), idx] = 1.0
        return self.rmatmat(eye)

    def _row_blocks(self, chunk_size: int):
        m = self.shape[0]
        for s in range(0, m, chunk_size):
            yield s, self.rows(range(s, min(s + chunk_size, m)))

    def column_norms(self, chunk_size: int = 64) -> Tensor:
        """``‖A_{:,i}‖₂`` for all ``i``, accumulated over row chunks (``M`` rmatvecs)."""
        acc = torch.zeros(self.shape[1], dtype=self.dtype)
        for _, r in self._row_blocks(chunk_size):
            acc += (r * r).sum(0)
        return acc.sqrt()

    def dense(self, chunk_size: int = 64) -> Tensor:
        """Materialise ``A`` (``[M, p]``) from its rows (for checks on small problems)."""
        return torch.cat([r for _, r in self._row_blocks(chunk_size)])

    def gram(self, chunk_size: int = 32, weights: Tensor | None = None) -> Tensor:
        """``A W Aᵀ`` with ``W = diag(weights)`` (identity by default), ``[M, M]``, symmetrised.

        Cost ``M`` rmatvecs and ``M`` matvecs; memory ``O(M² + chunk·p)``.
        """
        m = self.shape[0]
        K = torch.empty(m, m, dtype=self.dtype)
        for s, r in self._row_blocks(chunk_size):
            if weights is not None:
                r = r * weights
            K[:, s : s + r.shape[0]] = self.matmat(r).T
        return 0.5 * (K + K.T)

    def to_scipy(self):
        """A ``scipy.sparse.linalg.LinearOperator`` (float64 numpy vectors) wrapping ``A``."""
        from scipy.sparse.linalg import LinearOperator as ScipyOperator

        def mv(v):
            return self.matvec(torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)).reshape(-1)).numpy()

        def rmv(u):
            return self.rmatvec(torch.from_numpy(np.ascontiguousarray(u, dtype=np.float64)).reshape(-1)).numpy()

        return ScipyOperator(self.shape, matvec=mv, rmatvec=rmv, dtype=np.float64)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype})"


class DenseOperator(LinearOperator):
    """A dense matrix ``J`` (e.g. :func:`~paramsym.attribution.jacobian.dense_jacobian`) as an operator.

    The derived quantities keep the base definitions; rows, dense and column norms read the
    matrix directly instead of multiplying unit vectors.
    """

    def __init__(self, matrix: Tensor, layout=None):
        if not isinstance(matrix, Tensor) or matrix.dim() != 2:
            shape = tuple(matrix.shape) if isinstance(matrix, Tensor) else type(matrix).__name__
            raise ShapeError(f"DenseOperator needs a matrix [M, p], received {shape}.")
        self.matrix = matrix
        self.shape = (int(matrix.shape[0]), int(matrix.shape[1]))
        self.dtype = matrix.dtype
        self.layout = layout

    def matvec(self, v: Tensor) -> Tensor:
        return self.matrix @ torch.as_tensor(v, dtype=self.dtype).reshape(-1)

    def rmatvec(self, u: Tensor) -> Tensor:
        return self.matrix.T @ torch.as_tensor(u, dtype=self.dtype).reshape(-1)

    def matmat(self, V: Tensor) -> Tensor:
        return V @ self.matrix.T

    def rmatmat(self, U: Tensor) -> Tensor:
        return U @ self.matrix

    def rows(self, index: Tensor | Iterable[int]) -> Tensor:
        idx = torch.as_tensor(list(index) if not isinstance(index, Tensor) else index, dtype=torch.long)
        return self.matrix[idx]

    def dense(self, chunk_size: int = 64) -> Tensor:
        return self.matrix

    def column_norms(self, chunk_size: int = 64) -> Tensor:
        return self.matrix.norm(dim=0)


class StackedOperator(LinearOperator):
    """Row-stack ``[A_1; A_2; …]`` of operators over the same columns (e.g. several conditions).

    ``matvec`` concatenates, ``rmatvec`` sums ``A_iᵀ u_i`` over the row blocks ``u_i``; a row of
    the stack is read from the operator that owns it (so the derived Gram matrix and column
    norms cost one rmatvec per row, as for a single operator).
    """

    def __init__(self, ops: Sequence[LinearOperator]):
        if not ops:
            raise ShapeError("StackedOperator needs at least one operator.")
        p = ops[0].shape[1]
        bad = [i for i, op in enumerate(ops) if op.shape[1] != p]
        if bad:
            raise ShapeError(
                f"all stacked operators must have the same number of columns (parameters); "
                f"operator 0 has {p}, operators {bad} have {[ops[i].shape[1] for i in bad]}."
            )
        self.ops = list(ops)
        self.layout = getattr(ops[0], "layout", None)
        self.dtype = ops[0].dtype
        self.splits = [op.shape[0] for op in ops]
        self.offsets = [int(o) for o in np.cumsum([0] + self.splits)]
        self.shape = (sum(self.splits), p)

    def matvec(self, v: Tensor) -> Tensor:
        return torch.cat([op.matvec(v) for op in self.ops])

    def rmatvec(self, u: Tensor) -> Tensor:
        parts = torch.as_tensor(u, dtype=self.dtype).reshape(-1).split(self.splits)
        return sum(op.rmatvec(pu) for op, pu in zip(self.ops, parts))

    def matmat(self, V: Tensor) -> Tensor:
        return torch.cat([op.matmat(V) for op in self.ops], dim=1)

    def rows(self, index: Tensor | Iterable[int]) -> Tensor:
        idx = torch.as_tensor(list(index) if not isinstance(index, Tensor) else index, dtype=torch.long)
        out = torch.empty(len(idx), self.shape[1], dtype=self.dtype)
        owner = torch.as_tensor(np.searchsorted(self.offsets, idx.numpy(), side="right") - 1)
        for k, op in enumerate(self.ops):
            sel = (owner == k).nonzero().reshape(-1)
            if sel.numel():
                out[sel] = op.rows(idx[sel] - self.offsets[k])
        return out
