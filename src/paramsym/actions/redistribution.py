"""Redistribution of OV maps within a QK cluster of an RMHSA layer ([Attention] Theorem 7).

``RMHSA(x; M, R)_i = Σ_h Σ_j softmax_j(⟨x_i, M_h x_j⟩) R_h x_j``. Heads with equal QK matrices
``M_h = M_C`` (a *cluster* C) have equal attention weights ``A_C``, so they contribute
``Σ_j A_C,ij (Σ_{h∈C} R_h) x_j``: the output depends on the cluster's OV maps only through their
sum ``R_C = Σ_{h∈C} R_h``. Hence

    R_h ↦ R_h + Δ_h  (h ∈ C),   Σ_{h∈C} Δ_h = 0

keeps the function exactly; conversely (the identifiability theorem, L ≥ 3 tokens) equal
functions have equal summed OV maps per QK matrix, so these are *all* the OV changes that keep
the function at fixed M. Group: translations of ``{Δ : Σ_{h∈C} Δ_h = 0}``, dimension
``(|C| − 1) d²`` per cluster, abelian; coordinates ``c``: ``Δ_{C[k]} = c_k`` for ``k ≥ 1`` and
``Δ_{C[0]} = −Σ_k c_k`` (a linear isomorphism onto the constraint space), represented as
unipotent matrices ``[[I, c], [0, 1]]`` (:func:`~paramsym.actions.exact.translation_basis`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..errors import ShapeError
from ..params import ParameterBlock
from .exact import ExactAction, translation_basis, translation_of
from .layout import entry, locate, refuse_untouched, replace


def qk_clusters(M: Tensor, tol: float = 0.0) -> list[list[int]]:
    """Clusters of heads with equal QK matrices: ``h ~ h'`` when ``max|M_h − M_h'| ≤ tol · max(1, max|M|)``.

    Returns the clusters of two or more heads (the applicability predicate of
    :class:`OVRedistributionAction`: an empty list means no redistribution symmetry).
    """
    if M.ndim != 3:
        raise ShapeError(f"qk_clusters: M must have shape (H, d, d); received {tuple(M.shape)}.")
    scale = tol * max(1.0, float(M.abs().max()))
    left = list(range(M.shape[0]))
    out = []
    while left:
        h = left.pop(0)
        same = [k for k in left if float((M[k] - M[h]).abs().max()) <= scale]
        left = [k for k in left if k not in same]
        if same:
            out.append([h] + same)
    return out


class OVRedistributionAction(ExactAction):
    """``R_h ↦ R_h + Δ_h`` with ``Σ_{h∈C} Δ_h = 0`` within each given QK cluster C (module docstring).

    Valid where the clusters' heads have equal ``M_h`` (use :func:`qk_clusters` on the weights;
    the action does not see ``M``).

    Args:
        block: exactly the OV entries of the clusters' heads, e.g. ``"R"`` when the clusters
            cover every head, ``"R[0:2]"`` for the cluster ``[0, 1]`` of three heads.
        R: name of the OV tensor ``(H, d, d)``.
        clusters: disjoint lists of ≥ 2 head indices.

    Raises:
        ShapeError: ``R`` not ``(H, d, d)``, clusters that are not disjoint, too small or out of
            range, or a block that selects only part of a cluster's OV maps.
        ActionError: the block holds entries the action would leave untouched (other heads).
    """

    kind = "ov_redistribution"

    def __init__(self, block: ParameterBlock, R: str, clusters: Sequence[Sequence[int]]):
        super().__init__()
        cls = "OVRedistributionAction"
        shp = tuple(entry(block, R, cls).shape)
        if len(shp) != 3 or shp[1] != shp[2]:
            raise ShapeError(f"{cls}: {R!r} has shape {shp}; expected OV matrices (H, d, d).")
        H, d = shp[0], shp[1]
        clusters = [[int(h) for h in c] for c in clusters]
        flat = [h for c in clusters for h in c]
        if not clusters or any(len(c) < 2 for c in clusters) or len(set(flat)) != len(flat) or \
                any(not 0 <= h < H for h in flat):
            raise ShapeError(f"{cls}: clusters must be disjoint lists of at least two head indices in 0..{H - 1}; "
                             f"received {clusters}. Find them with qk_clusters(M).")
        dd = d * d
        self.clusters, self.dd = clusters, dd
        self.locs = [[locate(block, R, torch.arange(h * dd, (h + 1) * dd), cls) for h in c] for c in clusters]
        refuse_untouched(cls, block, [loc for c in self.locs for loc in c],
                         f"It moves the OV maps of heads {flat} only; select e.g. {R}[{flat[0]}] ... for those heads.")
        self.dimension = sum(len(c) - 1 for c in clusters) * dd
        self.size, self.p = self.dimension + 1, block.size

    def _basis(self, dtype: torch.dtype) -> Tensor:
        return translation_basis(self.dimension, dtype)

    def random_elements(self, n: int, generator: torch.Generator | None = None, rho: float = 0.5) -> Tensor:
        k = self.dimension
        c = torch.randn(n, k, generator=generator, dtype=self._probe.dtype)
        c = c / c.norm(dim=-1, keepdim=True) * rho * (0.2 + 0.8 * torch.rand(n, 1, generator=generator, dtype=c.dtype))
        g = torch.eye(k + 1, dtype=c.dtype).repeat(n, 1, 1)
        g[:, :k, k] = c
        return g

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        c = translation_of(g).to(theta.dtype)
        parts, pos = [], 0
        for locs in self.locs:
            m = len(locs) - 1
            delta = c[pos : pos + m * self.dd].reshape(m, self.dd)
            pos += m * self.dd
            parts.append((locs[0], theta[locs[0]] - delta.sum(0)))
            for k, loc in enumerate(locs[1:]):
                parts.append((loc, theta[loc] + delta[k]))
        return replace(theta, parts)
