"""The base of the catalogue's exact actions: dimension, order, lazily built groups, elements.

Every catalogue action is a :class:`~paramsym.actions.base.GroupAction` (``act(g, θ)`` on one
``s × s`` matrix and one point) with, in addition,

* ``kind``: a short name (``"hidden_basis"``, ``"head_permutation"``, ...; see
  :func:`paramsym.actions.catalogue.catalogue`);
* ``dimension``: the continuous dimension of the group acting (0 for a discrete group);
* ``order``: the number of elements of a finite group (``None`` for a continuous one), and
  ``log10_order`` (``order`` can be astronomically large, e.g. ``3072!``);
* :meth:`ExactAction.random_elements`: ``n`` random group elements as ``(n, s, s)`` matrices,
  cheap even when the Lie algebra's basis would be too large to store (a census verifies an
  action by applying one such element and measuring the output change);
* :meth:`ExactAction.random_compact` / :meth:`ExactAction.act_compact`: one random element in the
  group's **compact form** and its action — a permutation ``perm`` (long, ``(s,)``) for the
  permutation groups, a diagonal ``d`` (``(s,)``) for the diagonal groups (rescalings, norm
  scales, sign flips), the dense matrix otherwise. The compact element is drawn from the same
  random numbers as ``random_elements(1, ·)[0]`` and ``act_compact(c, θ) == act(dense(c), θ)``
  entry for entry, but no ``s × s`` matrix is built and the action is indexing or an entrywise
  product, O(p) — what lets a census of a 7B-wide layer verify its FFN's ``S_F`` and ``{±1}^F``
  (``F = 11008``) without ``F × F`` matrices (issue 34).

The group (:class:`~paramsym.groups.lie.MatrixLieGroup`, needed by the verdict) is built on first
use from :meth:`ExactAction._basis`, in the dtype of the action (``action.double()`` before or
after first use gives a float64 group): storing ``r`` generators of size ``s × s`` costs
``r s²`` numbers, which only the verdict on small blocks needs.

Standard algebras (Frobenius-orthonormal bases, as ``(r, s, s)`` tensors):
:func:`gl_basis` (block-diagonal ``gl(h_1) ⊕ … ⊕ gl(h_k)``), :func:`diagonal_basis`
(``E_jj``: the positive diagonal group ``{exp(diag t)}``) and :func:`translation_basis`
(``E_{i,k}``, ``i < k``, in ``(k+1) × (k+1)``: the unipotent matrices ``[[I, c], [0, 1]]``,
a faithful copy of the translation group ``(R^k, +)``; ``c = g[:k, k]`` and
``[[I, c₂], [0, 1]] [[I, c₁], [0, 1]] = [[I, c₁ + c₂], [0, 1]]``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from ..errors import ActionError, GroupError
from ..groups.lie import MatrixLieGroup
from .base import GroupAction


def gl_basis(sizes: Sequence[int], dtype: torch.dtype = torch.float64) -> Tensor:
    """``E_ij`` basis of block-diagonal ``gl(h_1) ⊕ … ⊕ gl(h_k)``, shape ``(Σ h², Σ h, Σ h)``."""
    s = sum(sizes)
    out = torch.zeros(sum(h * h for h in sizes), s, s, dtype=dtype)
    k, start = 0, 0
    for h in sizes:
        for i in range(h):
            for j in range(h):
                out[k, start + i, start + j] = 1.0
                k += 1
        start += h
    return out


def diagonal_basis(h: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """``E_jj``, shape ``(h, h, h)``: the algebra of the positive diagonal group."""
    out = torch.zeros(h, h, h, dtype=dtype)
    idx = torch.arange(h)
    out[idx, idx, idx] = 1.0
    return out


def translation_basis(k: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """``E_{i,k}`` (``i < k``) in ``(k+1) × (k+1)``: the translation group ``R^k`` as unipotent matrices."""
    out = torch.zeros(k, k + 1, k + 1, dtype=dtype)
    idx = torch.arange(k)
    out[idx, idx, k] = 1.0
    return out


def translation_of(g: Tensor) -> Tensor:
    """``c = g[:k, k]`` of a unipotent ``(k+1) × (k+1)`` matrix ``[[I, c], [0, 1]]``."""
    return g[:-1, -1]


class ExactAction(GroupAction):
    """A catalogue action: a :class:`GroupAction` with ``kind``, ``dimension``, ``order`` and
    cheap random elements; its group is built lazily from :meth:`_basis` (see module docstring).

    Subclasses set ``self.dimension``, ``self.p``, ``self.size`` (the matrix size ``s``) and
    implement :meth:`act` and :meth:`_basis` (continuous) or :meth:`random_elements` (discrete).
    """

    kind: str = "exact"
    dimension: int
    order: int | None = None
    size: int

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("_probe", torch.zeros((), dtype=torch.float32), persistent=False)

    @property
    def group(self) -> MatrixLieGroup:  # type: ignore[override]
        """The (supplied) matrix Lie group acting; built on first use in the action's dtype."""
        g = self._modules.get("group")
        if g is None:
            if self.order is not None:
                raise ActionError(
                    f"{type(self).__name__} is a discrete action (order {self.order_text}) with no Lie group to "
                    "sample from; apply its elements with act(g, θ) for g in random_elements(n, generator) "
                    "(permutation matrices), e.g. with paramsym.verdict's per-sample metrics.")
            g = MatrixLieGroup.supplied(self._basis(self._probe.dtype))
            self._modules["group"] = g
        return g

    @group.setter
    def group(self, value: MatrixLieGroup) -> None:
        self._modules["group"] = value

    def _basis(self, dtype: torch.dtype) -> Tensor:
        raise NotImplementedError

    @property
    def log10_order(self) -> float | None:
        """``log10(order)`` (``None`` for a continuous group)."""
        if self.order is None:
            return None
        return math.log10(self.order) if self.order < 10**300 else _log10_big(self.order)

    @property
    def order_text(self) -> str:
        if self.order is None:
            return "∞"
        return str(self.order) if self.order < 10**12 else f"10^{self.log10_order:.1f}"

    def random_elements(self, n: int, generator: torch.Generator | None = None, rho: float = 0.5) -> Tensor:
        """``n`` random group elements ``(n, s, s)``: single exponentials ``exp(t h)`` with a random
        unit direction ``h`` of the algebra and ``|t| ≤ rho`` (subclasses build them without the
        algebra's basis when it would be large)."""
        grp = self.group
        return grp.matrices(grp.sample(n, rho, exact_factors=1, generator=generator)).to(self._probe.dtype)

    #: the compact form of the elements: ``"dense"`` (an ``s × s`` matrix), ``"permutation"`` or ``"diagonal"``
    compact: str = "dense"

    def random_compact(self, generator: torch.Generator | None = None) -> Tensor:
        """One random element in the compact form (module docstring): the same draws as
        ``random_elements(1, generator)[0]``, which is :meth:`dense` of the result."""
        return self.random_elements(1, generator)[0]

    def act_compact(self, c: Tensor, theta: Tensor) -> Tensor:
        """``act(dense(c), θ)`` for a compact element ``c`` (subclasses: by indexing or entrywise)."""
        return self.act(c, theta)

    def dense(self, c: Tensor) -> Tensor:
        """The ``s × s`` matrix of a compact element: ``permutation_matrix(c)``, ``diag(c)`` or ``c``."""
        if self.compact == "permutation":
            return permutation_matrix(c.tolist(), self._probe.dtype)
        return torch.diag(c) if self.compact == "diagonal" else c

    def is_identity(self, c: Tensor) -> bool:
        """Whether the compact element ``c`` is the identity (O(s), no ``s × s`` matrix for the compact forms)."""
        if self.compact == "permutation":
            return bool(torch.equal(c, torch.arange(c.numel(), device=c.device)))
        if self.compact == "diagonal":
            return bool((c == 1).all())
        return bool(torch.equal(c, torch.eye(c.shape[0], dtype=c.dtype, device=c.device)))

    def extra_repr(self) -> str:
        return f"kind={self.kind}, p={self.p}, dimension={self.dimension}, order={self.order_text}"


class DiagonalScalingAction(ExactAction):
    """Base of actions whose group is the positive diagonal matrices ``exp(diag t)`` of size
    ``self.size`` (per-unit rescalings): the algebra basis is :func:`diagonal_basis` and random
    elements are :func:`random_exp` of a Gaussian diagonal direction. Subclasses set ``size``
    and implement ``act``."""

    size: int
    compact = "diagonal"

    def _basis(self, dtype: torch.dtype) -> Tensor:
        return diagonal_basis(self.size, dtype)

    def random_diagonals(self, n: int, generator: torch.Generator | None = None, rho: float = 0.5) -> Tensor:
        """The diagonals ``(n, size)`` of :meth:`random_elements`: ``exp(t a)`` entrywise, ``a`` a
        Gaussian unit direction, ``|t|`` uniform in ``[0.2ρ, ρ]`` with a random sign."""
        t = torch.randn(n, self.size, generator=generator, dtype=self._probe.dtype)
        a = t / t.norm(dim=-1).clamp_min(1e-300)[:, None]
        return torch.exp(_radius(n, rho, generator, t.dtype)[:, None] * a)

    def random_elements(self, n: int, generator: torch.Generator | None = None, rho: float = 0.5) -> Tensor:
        """``random_exp(diag t)`` with the exponential of the diagonal taken entrywise (the same
        draws; no ``size × size`` matrix exponential)."""
        return torch.diag_embed(self.random_diagonals(n, generator, rho))

    def random_compact(self, generator: torch.Generator | None = None) -> Tensor:
        return self.random_diagonals(1, generator)[0]

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        """``act_diagonal(diag(g), θ)``: only the diagonal of ``g`` is read."""
        return self.act_diagonal(torch.diagonal(g), theta)

    def act_compact(self, c: Tensor, theta: Tensor) -> Tensor:
        return self.act_diagonal(c, theta)

    def act_diagonal(self, d: Tensor, theta: Tensor) -> Tensor:
        """The action of ``diag(d)`` (subclasses: entrywise products)."""
        raise NotImplementedError


def _radius(n: int, rho: float, generator: torch.Generator | None, dtype: torch.dtype) -> Tensor:
    """``n`` signed radii: ``|t|`` uniform in ``[0.2ρ, ρ]``, random sign."""
    t = rho * (0.2 + 0.8 * torch.rand(n, generator=generator, dtype=dtype))
    return t * (torch.randint(0, 2, (n,), generator=generator) * 2 - 1).to(dtype)


def random_exp(direction: Tensor, rho: float, generator: torch.Generator | None = None) -> Tensor:
    """``exp(t A / ‖A‖_F)`` for directions ``A`` ``(n, s, s)``: ``|t|`` uniform in ``[0.2ρ, ρ]``, random sign
    (the radius convention of :meth:`~paramsym.groups.lie.MatrixLieGroup.sample`)."""
    n = direction.shape[0]
    a = direction / direction.flatten(1).norm(dim=-1).clamp_min(1e-300)[:, None, None]
    return torch.linalg.matrix_exp(_radius(n, rho, generator, direction.dtype)[:, None, None] * a)


def _log10_big(n: int) -> float:
    """``log10(n)`` of a huge int (no decimal string: Python limits those to 4300 digits, e.g. 3072!)."""
    shift = max(n.bit_length() - 1000, 0)
    return math.log10(n >> shift) + shift * math.log10(2)


def factorial(n: int) -> int:
    """``n!`` as an exact integer."""
    return math.factorial(int(n))


def random_permutations(n: int, h: int, generator: torch.Generator | None = None,
                        dtype: torch.dtype = torch.float64) -> Tensor:
    """``n`` uniformly random ``h × h`` permutation matrices ``P`` (``P[i, π(i)] = 1``)."""
    out = torch.zeros(n, h, h, dtype=dtype)
    for k in range(n):
        perm = torch.randperm(h, generator=generator)
        out[k, torch.arange(h), perm] = 1.0
    return out


def permutation_matrix(perm: Sequence[int], dtype: torch.dtype = torch.float64) -> Tensor:
    """``P`` with ``P[i, perm[i]] = 1``: ``(P x)_i = x_{perm[i]}`` (unit ``i`` of the result is old unit ``perm[i]``).

    Raises:
        GroupError: ``perm`` is not a permutation of ``0..h-1``.
    """
    p = [int(i) for i in perm]
    if sorted(p) != list(range(len(p))):
        raise GroupError(f"expected a permutation of 0..{len(p) - 1}; received {p}.")
    h = len(p)
    out = torch.zeros(h, h, dtype=dtype)
    out[torch.arange(h), torch.tensor(p, dtype=torch.long)] = 1.0
    return out
