"""Ansätze for affine vector fields ``v(θ) = Aθ + b`` on a parameter block θ ∈ R^p.

An ansatz is a linear parametrisation ``c ∈ R^L ↦ (A(c), b(c))``; the solver looks for the
``c`` whose field is tangent to the level sets of the target. It is a sum of *terms*, each
owning a consecutive range of ``c`` and contributing ``v_term(θ)``:

* :class:`FullAffine` — every ``(A, b)``: ``L = p(p+1)``, coefficients laid out as the row-major
  ``p × (p+1)`` matrix ``M = [A | b]``, ``v(θ) = M θ̃`` with ``θ̃ = [θ; 1]``. Its Gram matrix has
  the Kronecker form ``Σ_j (J_jᵀ J_j) ⊗ (θ̃_j θ̃_jᵀ)`` (built without forming the rows).
* :class:`RowMaps` — per-tensor (block-diagonal) linear maps: for each *group* ``I`` of indices
  of one axis shared by several tensors (e.g. the rows of a weight and its bias, or the query
  rows of an attention projection), one matrix ``a ∈ R^{|I|×|I|}`` acts on that axis of every
  listed tensor at once: ``δT[…, i, …] = Σ_{i'∈I} a[i, i'] T[…, i', …]``. ``L = Σ |I|²``.
* :class:`Translations` — constant fields on the entries of named tensors (``b``).
* :class:`CrossMap` — a dense linear map from the entries of source tensors to the entries of
  destination tensors (e.g. the output projection into the output bias).

Every term is exact: for any coefficients the assembled ``(A, b)`` reproduces ``v`` (tested:
``A = v(e_i) − v(0)``, ``b = v(0)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ..errors import ConfigError, MaskError
from ..params import ParameterBlock

__all__ = ["Ansatz", "FullAffine", "RowMaps", "Translations", "CrossMap", "Term"]


class Term:
    """One part of an ansatz: ``n_unknowns`` coefficients and their fields."""

    n_unknowns: int = 0
    label: str = ""

    def fields(self, coeffs: Tensor, theta: Tensor, out: Tensor) -> None:
        """Add the fields of ``coeffs`` (k, L_term) at ``theta`` (m, p) into ``out`` (m, k, p)."""
        raise NotImplementedError


class FullAffine(Term):
    """All affine fields on R^p: ``M = [A | b]`` row-major, ``L = p(p+1)``."""

    def __init__(self, p: int):
        self.p = int(p)
        self.n_unknowns = self.p * (self.p + 1)
        self.label = f"full affine gl({self.p}) ⋉ R^{self.p}"

    def fields(self, coeffs, theta, out):
        m = coeffs.reshape(coeffs.shape[0], self.p, self.p + 1)
        out += torch.einsum("kab,mb->mka", m[:, :, :-1], theta) + m[:, :, -1].unsqueeze(0)


def _whole_slice(block: ParameterBlock, name: str) -> tuple[slice, tuple[int, ...]]:
    for e in block.entries:
        if e.name == name:
            if not e.whole:
                raise MaskError(f"RowMaps needs whole tensors, but the block selects part of {name!r}.")
            return slice(e.offset, e.offset + e.size), e.shape
    raise MaskError(f"the block has no parameter named {name!r}; block parameters: {block.names}.")


class RowMaps(Term):
    """Block-diagonal linear maps on one axis shared by several tensors (module docstring).

    Args:
        block: the parameter block (whole tensors for the listed names).
        axes: ``{tensor name: axis}``; every listed axis must have the same length ``n``.
        groups: index groups of that axis (default one group, the whole axis); each group gets
            its own ``|I| × |I|`` matrix. Groups must be disjoint.
    """

    def __init__(self, block: ParameterBlock, axes: Mapping[str, int],
                 groups: Sequence[Sequence[int]] | None = None, *, label: str = ""):
        if not axes:
            raise ConfigError("RowMaps needs at least one {tensor name: axis}.")
        self.parts = []
        n = None
        for name, axis in axes.items():
            sl, shape = _whole_slice(block, name)
            ax = int(axis) % len(shape)
            if n is not None and shape[ax] != n:
                raise ConfigError(f"RowMaps axes must have equal length; {name!r} axis {axis} has "
                                  f"{shape[ax]}, expected {n}.")
            n = shape[ax]
            self.parts.append((name, sl, shape, ax))
        groups = [list(range(n))] if groups is None else [list(map(int, g)) for g in groups]
        flat = [i for g in groups for i in g]
        if len(set(flat)) != len(flat) or any(not 0 <= i < n for i in flat) or any(not g for g in groups):
            raise ConfigError(f"RowMaps groups must be disjoint, non-empty indices in [0, {n}); received {groups}.")
        self.groups = [torch.tensor(g) for g in groups]
        self.n_unknowns = sum(len(g) ** 2 for g in groups)
        self.label = label or f"row maps on {list(axes)} ({len(groups)} groups)"

    def fields(self, coeffs, theta, out):
        m, k = theta.shape[0], coeffs.shape[0]
        for _name, sl, shape, ax in self.parts:
            x = theta[:, sl].reshape(m, *shape).movedim(ax + 1, 1).reshape(m, shape[ax], -1)
            acc = torch.zeros(m, k, *x.shape[1:], dtype=theta.dtype, device=theta.device)
            start = 0
            for g in self.groups:
                s = len(g)
                a = coeffs[:, start : start + s * s].reshape(k, s, s)
                start += s * s
                acc[:, :, g, :] += torch.einsum("kij,mjr->mkir", a, x[:, g, :])
            moved = [shape[ax]] + [d for i, d in enumerate(shape) if i != ax]
            acc = acc.reshape(m, k, *moved).movedim(2, ax + 2).reshape(m, k, -1)
            out[:, :, sl] += acc


def _slices(block: ParameterBlock, names: Sequence[str]) -> list[slice]:
    sl = block.entry_slices()
    missing = [n for n in names if n not in sl]
    if missing or not names:
        raise MaskError(f"tensors {missing or names} are not in the block; block parameters: {block.names}.")
    return [sl[n] for n in names]


class Translations(Term):
    """Constant fields (the ``b`` part) on every selected entry of ``names``."""

    def __init__(self, block: ParameterBlock, names: Sequence[str], *, label: str = ""):
        self.slices = _slices(block, list(names))
        self.idx = torch.cat([torch.arange(s.start, s.stop) for s in self.slices])
        self.n_unknowns = int(self.idx.numel())
        self.label = label or f"translations of {list(names)}"

    def fields(self, coeffs, theta, out):
        out[:, :, self.idx] += coeffs.unsqueeze(0)


class CrossMap(Term):
    """A dense linear map ``δθ[dst] = B θ[src]`` (``L = |dst| · |src|``, ``B`` row-major)."""

    def __init__(self, block: ParameterBlock, src: Sequence[str], dst: Sequence[str], *, label: str = ""):
        self.src = torch.cat([torch.arange(s.start, s.stop) for s in _slices(block, list(src))])
        self.dst = torch.cat([torch.arange(s.start, s.stop) for s in _slices(block, list(dst))])
        self.n_unknowns = int(self.src.numel() * self.dst.numel())
        self.label = label or f"linear map {list(src)} → {list(dst)}"

    def fields(self, coeffs, theta, out):
        b = coeffs.reshape(coeffs.shape[0], self.dst.numel(), self.src.numel())
        out[:, :, self.dst] += torch.einsum("kds,ms->mkd", b, theta[:, self.src])


class Ansatz:
    """A sum of terms on R^p (module docstring); ``L = Σ`` term unknowns.

    Args:
        p: dimension of the parameter block.
        terms: the terms (default: ``[FullAffine(p)]``).
    """

    def __init__(self, p: int, terms: Sequence[Term] | None = None):
        self.p = int(p)
        self.terms = list(terms) if terms else [FullAffine(self.p)]
        self.n_unknowns = sum(t.n_unknowns for t in self.terms)

    @classmethod
    def full(cls, p: int) -> Ansatz:
        return cls(p, [FullAffine(p)])

    @property
    def is_full(self) -> bool:
        return len(self.terms) == 1 and isinstance(self.terms[0], FullAffine)

    def describe(self) -> list[dict[str, object]]:
        return [{"term": t.label, "unknowns": t.n_unknowns} for t in self.terms]

    def fields(self, coeffs: Tensor, theta: Tensor) -> Tensor:
        """``v_c(θ)`` for coefficient rows ``coeffs`` (k, L) at points ``theta`` (m, p): (m, k, p)."""
        out = torch.zeros(theta.shape[0], coeffs.shape[0], self.p, dtype=theta.dtype, device=theta.device)
        start = 0
        for t in self.terms:
            t.fields(coeffs[:, start : start + t.n_unknowns], theta, out)
            start += t.n_unknowns
        return out

    def rows(self, jac: Tensor, theta: Tensor) -> Tensor:
        """The stacked system's rows ``J_j Φ(θ_j)`` for Jacobians ``jac`` (m, q, p): (m·q, L)."""
        eye = torch.eye(self.n_unknowns, dtype=theta.dtype, device=theta.device)
        phi = self.fields(eye, theta)  # (m, L, p)
        return torch.einsum("mqp,mlp->mql", jac, phi).reshape(-1, self.n_unknowns)

    def gram_bytes(self, m: int, q: int) -> int:
        """Temporaries of :meth:`gram` for ``m`` points and ``q`` outputs (bytes, float64): the
        Kronecker blocks of the full ansatz, else the fields ``Φ`` and the field image inside
        the terms (``2 m L p``) and the rows (``m q L``)."""
        p, n = self.p, self.n_unknowns
        if self.is_full:
            step = max(1, 2**22 // max(1, p * (p + 1) ** 2))
            return 8 * (m * p * p + m * (p + 1) ** 2 + 2 * min(step, p) * p * (p + 1) ** 2)
        return 8 * (m * n * (2 * p + q) + n * n)

    def gram(self, jac: Tensor, theta: Tensor, out: Tensor | None = None, max_bytes: int | None = None) -> Tensor:
        """``Σ_j (J_j Φ_j)ᵀ (J_j Φ_j)`` (L × L) for a chunk of points, added into ``out`` if given.

        For :class:`FullAffine` this is ``Σ_j (J_jᵀJ_j) ⊗ (θ̃_j θ̃_jᵀ)``, assembled one block
        rows at a time as one GEMM ``vec(G_j)[a-rows]ᵀ · vec(θ̃_j θ̃_jᵀ)`` (``G_j = J_jᵀJ_j``) and
        a permutation of axes: ``O(m p⁴)`` flops instead of ``O(m q p⁴)`` for the explicit rows.
        Otherwise the rows are formed for as many points at a time as keep the temporaries
        (:meth:`gram_bytes`) within ``max_bytes`` (at least one point).
        """
        n = self.n_unknowns
        if out is None:
            out = torch.zeros(n, n, dtype=theta.dtype, device=theta.device)
        if not self.is_full:
            m = theta.shape[0]
            per = self.gram_bytes(1, jac.shape[1])
            step = m if max_bytes is None else max(1, min(m, int(max_bytes) // per))
            for i in range(0, m, step):
                r = self.rows(jac[i : i + step], theta[i : i + step])
                out.addmm_(r.T, r)
            return out
        p, m = self.p, theta.shape[0]
        t = torch.cat([theta, torch.ones(m, 1, dtype=theta.dtype, device=theta.device)], 1)  # (m, p+1)
        g = jac.transpose(1, 2) @ jac  # (m, p, p)
        tt = (t[:, :, None] * t[:, None, :]).reshape(m, -1)  # (m, (p+1)²)
        step = max(1, 2**22 // max(1, p * (p + 1) ** 2))  # rows a per GEMM (≈ 32 MiB temporaries)
        for a0 in range(0, p, step):
            a1 = min(p, a0 + step)
            # Σ_j G_j[a, b] θ̃_j[i] θ̃_j[k] for a in [a0, a1): one GEMM, then (a, b, i, k) → (a, i, b, k)
            blk = (g[:, a0:a1, :].reshape(m, -1).T @ tt).reshape(a1 - a0, p, p + 1, p + 1)
            out[a0 * (p + 1) : a1 * (p + 1)] += blk.permute(0, 2, 1, 3).reshape((a1 - a0) * (p + 1), n)
        return out

    def apply(self, jac: Tensor, theta: Tensor, basis: Tensor) -> Tensor:
        """``K V``: the rows applied to coefficient columns ``basis`` (L, k), as (m·q, k)."""
        v = self.fields(basis.T, theta)  # (m, k, p)
        return torch.einsum("mqp,mkp->mqk", jac, v).reshape(-1, basis.shape[1])

    def assemble(self, coeffs: Tensor) -> tuple[Tensor, Tensor]:
        """Dense ``(A, b)`` of each coefficient row: ``A`` (k, p, p), ``b`` (k, p).

        Exact for every term (fields are affine): ``b = v(0)``, ``A[:, i] = v(e_i) − v(0)``.
        """
        pts = torch.cat([torch.zeros(1, self.p, dtype=coeffs.dtype, device=coeffs.device),
                         torch.eye(self.p, dtype=coeffs.dtype, device=coeffs.device)])
        v = self.fields(coeffs, pts)  # (p+1, k, p)
        b = v[0]
        a = (v[1:] - b).permute(1, 2, 0)  # (k, p_out, p_in)
        return a, b
