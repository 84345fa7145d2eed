"""The structure theorem ([Attention] Theorem 2) in both directions.

For an orthogonal G-representation ``ρ`` on ``V`` and ``L ≥ 3`` tokens, ``RMHSA(·; M, R)`` is
G-equivariant iff there is a partial G-clustering ``χ : H → X_0 ⊔ X`` with

1. ``M_h`` constant on the clusters (write ``M_p``);
2. ``M_{g·p} = ρ(g) M_p ρ(g)^{-1}`` for ``p ∈ X``;
3. ``R_p := Σ_{h ∈ χ^{-1}(p)} R_h`` satisfies ``R_{g·p} = ρ(g) R_p ρ(g)^{-1}`` on ``X`` and
   ``R_p = 0`` on ``X_0``.

:func:`build_equivariant_rmhsa` draws random parameters satisfying 1–3 for a given clustering: on
each orbit of ``X`` with representative ``p`` and stabiliser ``K``, ``M_p`` and ``R_p`` are random
elements of the commutant of ``ρ(K)`` (the Reynolds average ``|K|^{-1} Σ_k ρ(k) A ρ(k)^T`` of a
Gaussian ``A``, which is the orthogonal projection onto the commutant), transported along the orbit
by ``M_{g·p} = ρ(g) M_p ρ(g)^T`` (well defined because ``M_p`` commutes with ``ρ(K)``); the summed
OV map of a cluster is split into random summands. ``X_0`` clusters get a free ``M`` and OV maps
summing to zero.

:func:`recover_clustering` goes the other way: it groups heads by equal QK matrix (within a
relative tolerance), puts the clusters with vanishing summed OV map in ``X_0`` (the canonical
choice: a cluster with ``R_p = 0`` is never forced into ``X``), finds how each ``ρ(g)`` permutes
the remaining clusters by conjugation, and checks the summed OV maps; otherwise it reports the
first failing condition precisely.

The theorem needs ``L ≥ 3``: :func:`two_token_exception` builds a layer that is equivariant on
two tokens but violates condition 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..errors import GroupError, RepresentationError, ShapeError
from ..groups.reynolds import reynolds_matrices
from .clusterings import PartialClustering
from .equivariance import token_matrices
from .rmhsa import check_qk_ov

__all__ = [
    "commutant_average",
    "build_equivariant_rmhsa",
    "Recovery",
    "recover_clustering",
    "default_rtol",
    "two_token_exception",
]


def commutant_average(A: torch.Tensor, mats: torch.Tensor) -> torch.Tensor:
    """Reynolds average ``|K|^{-1} Σ_k ρ(k) A ρ(k)^T`` over the matrices ``mats = ρ(K)``.

    For an orthogonal representation of a subgroup ``K`` this is the orthogonal (Frobenius)
    projection of ``A`` onto the commutant ``{B : ρ(k) B = B ρ(k)}``. This is
    :func:`paramsym.groups.reynolds.reynolds_matrices` with ``ρ_in = ρ_out = ρ|_K``.
    """
    return reynolds_matrices(A, mats)


def _rep_parts(rep, d: int | None = None) -> tuple[Any, np.ndarray]:
    """``(group, matrices of all elements)`` of a Representation; validated."""
    if not (hasattr(rep, "group") and hasattr(rep, "matrices")):
        raise RepresentationError(
            "expected a paramsym.groups.reps.Representation (a group with one matrix per element); "
            f"received {type(rep).__name__}. Build one with paramsym.groups.reps (e.g. regular(G))."
        )
    mats = token_matrices(rep, d)
    if mats.shape[0] != rep.group.order:
        raise ShapeError(
            f"representation has {mats.shape[0]} matrices but the group {rep.group.name} has "
            f"{rep.group.order} elements."
        )
    return rep.group, mats


def build_equivariant_rmhsa(
    clustering: PartialClustering,
    rep,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random RMHSA parameters that satisfy Theorem 2 for ``clustering`` (see module docstring).

    Args:
        clustering: the partial G-clustering of the heads.
        rep: orthogonal representation of the same group on ``V`` (all elements' matrices).
        generator: randomness (default seed 0).
        dtype: dtype of the result (computed in float64).

    Returns:
        ``(M, R)``, each ``(H, d, d)``. Invariants: conditions 1–3 hold exactly up to rounding;
        for a generic draw, distinct clusters have distinct ``M`` whenever ``ρ(g) ∉ span ρ(K)``
        (e.g. for faithful regular representations), so :func:`recover_clustering` returns a
        clustering isomorphic to ``clustering``.
    """
    group, mats_np = _rep_parts(rep)
    if not group.same_as(clustering.group):
        raise GroupError(
            f"clustering is over {clustering.group.name} (order {clustering.group.order}) but the "
            f"representation is of {group.name} (order {group.order}); use the same group."
        )
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    mats = torch.as_tensor(mats_np)
    d = mats.shape[-1]
    k = clustering.n_clusters

    def gauss() -> torch.Tensor:
        return torch.randn(d, d, generator=gen, dtype=torch.float64) / np.sqrt(d)

    Mp = [None] * k
    Rp = [None] * k
    for orbit in clustering.orbits():
        p = orbit[0]
        K = sorted(clustering.stabilizer(p))
        mK = mats[K]
        Mp[p] = commutant_average(gauss(), mK)
        Rp[p] = commutant_average(gauss(), mK)
        for q in orbit[1:]:
            g = int(np.flatnonzero(clustering.action[:, p] == q)[0])
            Mp[q] = mats[g] @ Mp[p] @ mats[g].T
            Rp[q] = mats[g] @ Rp[p] @ mats[g].T
    for p in clustering.x0:
        Mp[p] = gauss()
        Rp[p] = torch.zeros(d, d, dtype=torch.float64)
    H = clustering.n_heads
    M = torch.empty(H, d, d, dtype=torch.float64)
    R = torch.empty(H, d, d, dtype=torch.float64)
    for p, heads in enumerate(clustering.clusters):
        s = len(heads)
        noise = torch.stack([gauss() for _ in heads]) if s > 1 else torch.zeros(1, d, d, dtype=torch.float64)
        noise = noise - noise.mean(0, keepdim=True)  # summands of zero sum
        for i, h in enumerate(heads):
            M[h] = Mp[p]
            R[h] = Rp[p] / s + noise[i]
    return M.to(dtype), R.to(dtype)


@dataclass
class Recovery:
    """Result of :func:`recover_clustering`.

    Attributes:
        equivariant: whether conditions 1–3 of Theorem 2 hold (within tolerance); for ``L ≥ 3``
            tokens this is equivalent to the layer being G-equivariant.
        clustering: the recovered partial G-clustering (``None`` when a condition fails).
        clusters: heads grouped by equal QK matrix.
        x0: indices (into ``clusters``) of the clusters with vanishing summed OV map.
        condition: ``None``, or the failing condition: ``"qk_clusters_ambiguous"`` (tolerance
            chains heads whose QK matrices differ), ``"qk_orbit"`` (condition 2: a conjugated QK
            matrix matches no cluster) or ``"ov_equivariance"`` (condition 3: summed OV maps not
            conjugate).
        message: a precise one-paragraph explanation.
        details: relative residuals and the failing element/cluster (JSON-able).
    """

    equivariant: bool
    clustering: PartialClustering | None
    clusters: list[list[int]]
    x0: list[int]
    condition: str | None = None
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "equivariant": self.equivariant,
            "condition": self.condition,
            "message": self.message,
            "clusters": self.clusters,
            "x0": self.x0,
            "clustering": self.clustering.to_dict() if self.clustering is not None else None,
            "details": self.details,
        }

    def summary(self) -> str:
        if self.equivariant and self.clustering is not None:
            return "equivariant (Theorem 2 conditions hold)\n" + self.clustering.describe()
        return f"NOT equivariant: {self.condition}\n{self.message}"


def _heads(c: list[int]) -> str:
    return "{" + ", ".join(f"h{h}" for h in c) + "}"


def default_rtol(dtype: torch.dtype) -> float:
    """Default relative tolerance of :func:`recover_clustering` for parameters stored in ``dtype``:
    ``1e-9`` (float64), ``1e-5`` (float32), ``1e-2`` (16-bit floats)."""
    if dtype == torch.float64:
        return 1e-9
    if dtype == torch.float32:
        return 1e-5
    return 1e-2


def recover_clustering(M, R, rep, *, rtol: float | None = None) -> Recovery:
    """Recover the partial G-clustering of an RMHSA layer, or report which condition fails.

    Args:
        M, R: RMHSA parameters ``(H, d, d)``.
        rep: orthogonal representation of G on ``V`` (a ``Representation``).
        rtol: relative tolerance; distances between QK matrices are compared with
            ``rtol · max_h ‖M_h‖_F`` and OV sums with ``rtol · max_h ‖R_h‖_F``. Default
            :func:`default_rtol` of the parameters' dtype. Pass it explicitly when the parameters
            were converted from a lower precision (e.g. float32 weights cast to float64).

    Returns:
        A :class:`Recovery`; ``details`` always holds ``qk_spread`` (largest distance inside a
        cluster) and ``qk_gap`` (smallest distance between clusters), relative to the QK scale,
        which show how clear-cut the tolerance decision was.
    """
    M_t, R_t = check_qk_ov(M, R)
    if rtol is None:
        rtol = default_rtol(M_t.dtype)
    Mn = M_t.double().numpy()
    Rn = R_t.double().numpy()
    H, d = Mn.shape[0], Mn.shape[-1]
    group, mats = _rep_parts(rep, d)
    scale_M = float(np.linalg.norm(Mn, axis=(1, 2)).max())
    scale_R = float(np.linalg.norm(Rn, axis=(1, 2)).max())
    tol_M = rtol * scale_M
    tol_R = rtol * scale_R
    relM = 1.0 / scale_M if scale_M > 0 else 1.0
    relR = 1.0 / scale_R if scale_R > 0 else 1.0

    # 1. clusters of (numerically) equal QK matrices: connected components of the tolerance graph
    D = np.linalg.norm(Mn[:, None] - Mn[None, :], axis=(2, 3))
    parent = list(range(H))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for i in range(H):
        for j in range(i + 1, H):
            if D[i, j] <= tol_M:
                parent[find(j)] = find(i)
    roots: dict[int, int] = {}
    chi = []
    for h in range(H):
        chi.append(roots.setdefault(find(h), len(roots)))
    k = len(roots)
    clusters = [[h for h in range(H) if chi[h] == c] for c in range(k)]
    same = np.equal.outer(chi, chi)
    spread = float(D[same].max()) if H else 0.0
    gap = float(D[~same].min()) if (~same).any() else float("inf")
    details: dict[str, Any] = {
        "rtol": rtol,
        "qk_spread": spread * relM,
        "qk_gap": gap * relM if np.isfinite(gap) else None,
    }
    if spread > tol_M:
        i, j = np.unravel_index(np.argmax(np.where(same, D, -1.0)), D.shape)
        msg = (
            f"heads h{i} and h{j} are linked through a chain of QK matrices within rtol={rtol:g} but "
            f"differ by {D[i, j] * relM:.3g} (relative); the clustering by equal QK matrix is not "
            "well defined at this tolerance. Choose rtol below the spread or above it."
        )
        details.update({"heads": [int(i), int(j)]})
        return Recovery(False, None, clusters, [], "qk_clusters_ambiguous", msg, details)

    Mc = np.stack([Mn[c].mean(0) for c in clusters])
    Rc = np.stack([Rn[c].sum(0) for c in clusters])
    rnorm = np.linalg.norm(Rc, axis=(1, 2))
    x0 = [c for c in range(k) if rnorm[c] <= tol_R]
    xs = [c for c in range(k) if rnorm[c] > tol_R]
    details["ov_sum_norms"] = (rnorm * relR).tolist()

    # 2./3. the action of G on X by conjugation, generators first
    action = np.tile(np.arange(k), (group.order, 1))
    order = list(group.generators) + [g for g in range(group.order) if g not in set(group.generators)]
    max_qk = max_ov = 0.0
    for g in order:
        rho = mats[g]
        for c in xs:
            target = rho @ Mc[c] @ rho.T
            dist = np.linalg.norm(Mc - target, axis=(1, 2))
            c2 = int(dist.argmin())
            glabel = group.label(g)
            if dist[c2] > tol_M:
                msg = (
                    f"condition 2 fails: ρ({glabel}) M ρ({glabel})^-1 for cluster {c} = "
                    f"{_heads(clusters[c])} (summed OV map nonzero, so it must lie in X) matches no "
                    f"cluster's QK matrix; nearest is cluster {c2} = {_heads(clusters[c2])} at "
                    f"relative distance {dist[c2] * relM:.3g} > rtol={rtol:g}."
                )
                details.update({"element": glabel, "cluster": c, "nearest": c2, "residual": dist[c2] * relM})
                return Recovery(False, None, clusters, x0, "qk_orbit", msg, details)
            res = float(np.linalg.norm(rho @ Rc[c] @ rho.T - Rc[c2]))
            if res > tol_R:
                msg = (
                    f"condition 3 fails: {glabel} sends cluster {c} = {_heads(clusters[c])} to "
                    f"cluster {c2} = {_heads(clusters[c2])} (by conjugating QK matrices) but "
                    f"ρ({glabel}) R_{c} ρ({glabel})^-1 differs from the summed OV map R_{c2} by "
                    f"{res * relR:.3g} (relative) > rtol={rtol:g}."
                )
                details.update({"element": glabel, "cluster": c, "image": c2, "residual": res * relR})
                return Recovery(False, None, clusters, x0, "ov_equivariance", msg, details)
            max_qk = max(max_qk, float(dist[c2]) * relM)
            max_ov = max(max_ov, res * relR)
            action[g, c] = c2
    details.update({"max_qk_residual": max_qk, "max_ov_residual": max_ov})
    try:
        clustering = PartialClustering(group, chi, x0, action, validate=True)
    except GroupError as exc:  # only with clusters closer than the tolerance can resolve
        msg = f"the permutation of clusters by conjugation is not a group action ({exc})."
        return Recovery(False, None, clusters, x0, "qk_orbit", msg, details)
    return Recovery(True, clustering, clusters, x0, None, "", details)


def two_token_exception(
    T, *, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """A two-head RMHSA that is ``{1, T}``-equivariant on ``L = 2`` tokens but not on ``L ≥ 3``.

    With two tokens, ``RMHSA(x)_1 = Σ_h [½ R_h (x_1 + x_2) + τ(⟨x_1, M_h u⟩) R_h u]`` where
    ``u = x_1 − x_2`` and ``τ = σ − ½`` is odd. Heads ``(M, R)`` and ``(0, −R)`` with
    ``T M T = −M`` and ``T R T = −R`` give ``x ↦ τ(⟨x_1, M u⟩) R u``, which commutes with ``T``
    because ``τ`` is odd. Condition 2 fails: ``T M T^{-1} = −M`` is the QK matrix of no head.

    Args:
        T: an orthogonal involution ``(d, d)`` with both eigenvalues ``±1``.
        generator: randomness for ``M`` and ``R`` (projections of Gaussians onto the matrices
            anticommuting with ``T``).
    """
    T = torch.as_tensor(np.asarray(T, dtype=np.float64)) if not isinstance(T, torch.Tensor) else T.double()
    if T.ndim != 2 or T.shape[0] != T.shape[1]:
        raise ShapeError(f"T must be a square matrix, received shape {tuple(T.shape)}.")
    d = T.shape[0]
    eye = torch.eye(d, dtype=torch.float64)
    if (T @ T - eye).abs().max() > 1e-10 or (T.T @ T - eye).abs().max() > 1e-10:
        raise RepresentationError("T must be an orthogonal involution (T^T T = T^2 = I).")
    if (T - eye).abs().max() < 1e-10 or (T + eye).abs().max() < 1e-10:
        raise RepresentationError(
            "T = ±I: no matrix anticommutes with it, so there is no two-token exception; use an "
            "involution with both eigenvalues +1 and -1 (e.g. a reflection)."
        )
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    A, B = torch.randn(2, d, d, generator=gen, dtype=torch.float64)
    Mh = (A - T @ A @ T) / 2
    Rh = (B - T @ B @ T) / 2
    M = torch.stack([Mh, torch.zeros_like(Mh)])
    R = torch.stack([Rh, -Rh])
    return M, R
