"""Lifting a function-space direction through ``J``: ``c* = J⁺η``, ``b* = J⁺(−δ)``.

Given the Jacobian ``J ∈ R^{M×p}`` (dense or matrix-free) and a target ``t ∈ R^M`` (the orbit
tangent ``η_ξ`` or the negative defect ``−δ``), the lift is the minimum-norm least-squares
solution with a truncated pseudo-inverse ([Attribution] App. A.5):

* **Dead columns**: ``‖J_{:,i}‖ ≤ dead_tol · max_j ‖J_{:,j}‖`` (``dead_tol = 1e-8``) get
  ``c_i = 0``; the rest form ``J_L``.
* **Truncation**: ``J_L = U Σ Vᵀ``; keep ``σ_k ≥ τ σ_1`` (``τ = rtol = 1e-3``); the *resolved
  rank* is the number kept. ``P_k = U_k U_kᵀ`` projects onto the resolved part of the image.
* **Gauge** (``gauge="column"``): ``D = diag(‖J_{:,i}‖)`` over the live columns;
  ``c = D⁻¹ (J_L D⁻¹)⁺_k t``, the pseudo-inverse of the column-normalised matrix truncated at
  the *same rank k* as ``J`` itself (k is taken from J's own singular values, so the resolved
  rank does not depend on the gauge). A parameter is then not favoured for having a small raw
  scale. ``J c`` is the projection of ``t`` onto the k leading left singular vectors of
  ``J_L D⁻¹``; it equals the ungauged ``P_k t`` when the two k-dimensional subspaces coincide
  (a spectral gap at k, or equal column norms) and otherwise differs by the angle between them,
  reported as ``info["gauge_image_shift"] = ‖P_k^D t − P_k t‖ / ‖t‖``; the residual is always the
  measured one. (Demanding ``J c = P_k t`` exactly, the minimum-``‖Dc‖`` solution is not
  numerically well posed for network Jacobians: ``J_L D⁻¹`` has a continuum of singular values
  down to rounding level, and that solution moves with the noise floor.) ``gauge="none"`` gives
  ``c = J_L⁺_k t`` (minimum Euclidean norm) and ``J c = P_k t``.
* **Noise floor**: singular values below ``max(M, p)·ε·σ_1`` (SVD) or
  ``sqrt(max(M, p)·ε)·σ_1`` (Gram route) are rounding noise and are never kept, whatever τ.
* **Residual** ``‖J c − t‖ / ‖t‖`` (measured with the full ``J``) — the fraction of the target
  the parametrisation cannot reach at the resolved rank. The lifting criterion
  ``Im η ⊆ Im J`` holds numerically when the residual is ≤ :data:`LIFT_TOL`.

Dense path: the Gram route ``J_L J_Lᵀ = U Σ² Uᵀ`` (one ``M×M`` symmetric eigenproblem, exact to
``σ_k²/σ_1² ≫ ε`` — fine for ``τ = 1e-3``; used when ``τ ≥ 1e-6``, else a thin SVD of ``J_L``)
for the truncation, and the same for ``J_L D⁻¹`` in the gauge. ``c = J_Lᵀ U_k Σ_k⁻² U_kᵀ t``.

Tall route (``solver="tall"``, chosen by ``"auto"`` when ``M ≥ p``, float64, ``τ ≥ 1e-6``): the
same definition through the ``p × p`` Gram matrix ``J_Lᵀ J_L`` (cost ``O(M p² + p³)`` instead of
``O(M² p + M³)``). ``σ`` are the square roots of its eigenvalues (same Gram noise floor), and
with ``J_D = J_L D⁻¹ = U_D Σ_D V_Dᵀ``, using ``J_Dᵀ U_{D,k} Σ_{D,k}⁻¹ = V_{D,k}``,

    c_L = D⁻¹ V_{D,k} Σ_{D,k}⁻² V_{D,k}ᵀ J_Dᵀ t     (gauge "column"),
    c_L = V_k Σ_k⁻² V_kᵀ J_Lᵀ t                      (gauge "none"),

the ``k`` leading eigenvectors of ``J_Dᵀ J_D`` by Lanczos when ``k`` is small against ``p``
(LAPACK otherwise). It does not report ``gauge_image_shift`` (that needs ``U_k``).

Paper gauge (``gauge="paper"``, :mod:`.gauges`): the authors' column-normalised solve — among
all ``c`` with ``V_kᵀ c = Σ_k⁻¹U_kᵀt`` (J's own truncated SVD), the one of least ``‖Dc‖``:
``c = D⁻¹ W(WᵀW)⁻¹Σ_k⁻¹U_kᵀt``, ``W = D⁻¹V_k``. ``V_k = J_Lᵀ U_k Σ_k⁻¹`` on the Gram and SVD
routes, the leading eigenvectors of ``J_LᵀJ_L`` on the tall route. Its residual is the measured
``‖Jc − t‖/‖t‖`` (which includes the leak of ``c`` into the unresolved directions);
``info["projection_residual"] = ‖(I − P_k)t‖/‖t‖`` is the number the authors report.

Residual hint: on the Gram and SVD routes ``info["rtol_hint"]`` holds the largest smaller ``τ'``
whose projection residual ``‖(I − P_{k'})t‖/‖t‖`` passes :data:`LIFT_TOL` (one ``Uᵀt``), and the
verdict suggests it (:func:`.gauges.projection_residual_hint`).

Matrix-free paths: :mod:`.matrix_free` (``lift_matrix_free``, re-exported by the package).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..errors import ShapeError
from ..linop import StackedOperator  # noqa: F401 (re-exported)
from .gauges import paper_dead_mask, paper_direction, projection_residual_hint
from .jacobian import check_outputs

#: truncation τ of the pseudo-inverse: keep σ_k ≥ τ σ_1
RTOL = 1e-3
#: dead-column threshold relative to the largest column norm
DEAD_TOL = 1e-8
#: residual at or below which the symmetry counts as liftable (first order, numerically)
LIFT_TOL = 1e-6
GAUGES = ("column", "none", "paper")
#: smallest τ for which the Gram route (eigenvalues σ² of J Jᵀ) resolves σ_k ≥ τσ_1 accurately
GRAM_MIN_RTOL = 1e-6
#: dense factorisations: "auto" picks "tall" (M ≥ p, float64), else "gram"; "svd" below GRAM_MIN_RTOL
SOLVERS = ("auto", "gram", "svd", "tall")


def _eps_floor(J: Tensor, solver: str) -> float:
    """Relative singular-value floor below which the computed σ are rounding noise."""
    eps = float(torch.finfo(J.dtype).eps)
    if solver == "gram":
        return (max(J.shape) * eps) ** 0.5
    return max(J.shape) * eps


@dataclass
class LiftResult:
    """A lifted direction with its diagnostics.

    Attributes:
        direction: ``c`` of length ``p`` (layout order, float64); dead columns are 0.
        residual: ``‖J c − t‖ / ‖t‖`` (0 when ``t = 0``).
        rank: resolved rank (singular values kept); ``None`` for LSMR.
        sigma: singular values of ``J_L`` (descending), when computed.
        dead: boolean mask of dead columns.
        column_norms: ``‖J_{:,i}‖`` (``None`` when not computed, LSMR without gauge).
        target_norm: ``‖t‖``.
        reached: ``J c`` (length ``M``).
        gauge, method, rtol: how it was computed.
        info: solver details (LSMR iterations, damping, stop reason).
    """

    direction: Tensor
    residual: float
    rank: int | None
    sigma: Tensor | None
    dead: Tensor
    column_norms: Tensor | None
    target_norm: float
    reached: Tensor
    gauge: str
    method: str
    rtol: float
    info: dict[str, Any] = field(default_factory=dict)

    def liftable(self, tol: float = LIFT_TOL) -> bool:
        """``residual ≤ tol``: the target lies in the (resolved) image of ``J``."""
        return self.residual <= tol

    def verdict(self, what: str = "symmetry direction η", tol: float = LIFT_TOL) -> str:
        """One line: liftable or not at this truncation, with the residual and the threshold."""
        at = f"at τ = {self.rtol:g}" if self.rank is not None else f"({self.method})"
        span = (f"the span of the {self.rank} resolved singular directions of J"
                if self.rank is not None else "the image of J reached by the solver")
        if self.liftable(tol):
            return f"{what}: liftable {at} — residual {self.residual:.3g} ≤ {tol:g} (resolved rank {self.rank})."
        return (
            f"{what}: NOT liftable {at} — residual {self.residual:.3g} > {tol:g}: "
            f"{100 * min(self.residual, 1.0):.3g}% of the target lies outside {span}.{self._hint(tol)}"
        )

    def _hint(self, tol: float) -> str:
        """The smaller-τ suggestion (``info["rtol_hint"]``, see :mod:`.gauges`), or ``""``."""
        h = self.info.get("rtol_hint")
        if not h or tol != LIFT_TOL:
            return ""
        if "rtol" in h:
            return (f" It is liftable at rtol={h['rtol']:g} (projection residual {h['residual']:.2g}, "
                    f"rank {h['rank']}): pass --set rtol={h['rtol']:g}.")
        if h["floor"] > 1e-8:
            return (f" No smaller τ down to this factorisation's floor {h['floor']:.1g} passes; "
                    "--set rtol=1e-8 (thin SVD) tests image membership.")
        return f" No smaller τ down to {h['floor']:.1g} passes either."

    def summary(self) -> dict[str, Any]:
        return {
            "residual": self.residual,
            "rank": self.rank,
            "target_norm": self.target_norm,
            "direction_norm": float(self.direction.norm()),
            "dead_columns": int(self.dead.sum()),
            "sigma_max": None if self.sigma is None or self.sigma.numel() == 0 else float(self.sigma[0]),
            "gauge": self.gauge,
            "method": self.method,
            "liftable": self.liftable(),
            **{k: v for k, v in self.info.items() if isinstance(v, (int, float, str, bool))},
            **({"rtol_hint": self.info["rtol_hint"]} if self.info.get("rtol_hint") else {}),
        }


def _check_system(J: Tensor, target: Tensor) -> Tensor:
    if J.dim() != 2:
        raise ShapeError(f"J must be a matrix [M, p], received shape {tuple(J.shape)}.")
    t = target.reshape(-1).to(J.dtype)
    if t.numel() != J.shape[0]:
        raise ShapeError(
            f"the target has {t.numel()} entries but J has {J.shape[0]} rows; both must be "
            "flattened in the same (probe point, output component) order."
        )
    check_outputs(J, "J")
    check_outputs(t, "the lifting target")
    return t


def _relres(reached: Tensor, t: Tensor) -> tuple[float, float]:
    tn = float(t.norm())
    return (float((reached - t).norm()) / tn if tn > 0 else 0.0), tn


def _top_left_singular(A: Tensor, solver: str) -> tuple[Tensor, Tensor]:
    """``(U, σ)`` of ``A`` (descending), by the Gram route or a thin SVD."""
    if solver == "gram":
        lam, U = torch.linalg.eigh(A @ A.T)
        return U.flip(1), lam.flip(0).clamp_min(0).sqrt()
    U, s, _ = torch.linalg.svd(A, full_matrices=False)
    return U, s


def _resolved(sigma: Tensor, rtol: float, floor: float) -> int:
    s1 = float(sigma[0]) if sigma.numel() else 0.0
    return int((sigma >= max(rtol, floor) * s1).sum()) if s1 > 0 else 0


def _top_eigh(A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenpairs of symmetric ``A`` (descending): Lanczos (ARPACK, tol 0, fixed
    start vector: reproducible) when ``k`` is small against ``n``, else LAPACK ``syevr``."""
    import scipy.linalg

    n = A.shape[0]
    k = max(1, min(k, n))
    if 3 * k < n:
        from scipy.sparse.linalg import eigsh

        w, V = eigsh(A, k=k, which="LA", v0=np.ones(n), tol=0)
        order = np.argsort(w)[::-1]
        return w[order].copy(), V[:, order].copy()
    w, V = scipy.linalg.eigh(A, subset_by_index=(n - k, n - 1), driver="evr", check_finite=False)
    return w[::-1].copy(), V[:, ::-1].copy()


def _gram_tall(JL: Tensor) -> np.ndarray:
    """``J_Lᵀ J_L`` by ``dsyrk`` (half a matmul's flops; ``J_Lᵀ`` of a C-ordered ``J_L`` is Fortran-ordered)."""
    from scipy.linalg.blas import dsyrk

    X = np.ascontiguousarray(JL.numpy())
    upper = dsyrk(1.0, X.T, trans=0, lower=0)
    return np.triu(upper) + np.triu(upper, 1).T


class DenseLift:
    """Factorise a dense ``J`` once; :meth:`solve` lifts any number of targets.

    Args:
        J: ``[M, p]`` (float64 recommended).
        rtol: truncation ``τ``.
        gauge: ``"column"``, ``"none"`` or ``"paper"`` (module docstring).
        dead_tol: dead-column threshold (relative; ``"paper"`` also kills ``‖J_{:,i}‖ ≤ 1e-8``).
        solver: ``"auto"`` (``"tall"`` when ``M ≥ p`` and J is float64, ``"gram"`` otherwise,
            ``"svd"`` when ``τ < 1e-6``), ``"gram"`` (``J_L J_Lᵀ``), ``"svd"`` (thin SVD) or
            ``"tall"`` (``J_Lᵀ J_L``); all compute the same lift (module docstring).
    """

    def __init__(self, J: Tensor, *, rtol: float = RTOL, gauge: str = "column", dead_tol: float = DEAD_TOL,
                 solver: str = "auto"):
        if gauge not in GAUGES:
            raise ValueError(f"gauge must be one of {GAUGES}, received {gauge!r}.")
        if J.dim() != 2 or J.shape[0] == 0 or J.shape[1] == 0:
            raise ShapeError(f"J must be a non-empty matrix [M, p], received shape {tuple(J.shape)}.")
        check_outputs(J, "J")
        self.J, self.rtol, self.gauge = J, float(rtol), gauge
        self.col = J.norm(dim=0)
        cmax = float(self.col.max())
        if cmax <= 0:
            self.dead = torch.ones_like(self.col, dtype=torch.bool)
        elif gauge == "paper":
            self.dead = paper_dead_mask(self.col, dead_tol)
        else:
            self.dead = self.col <= dead_tol * cmax
        self.live = ~self.dead
        JL = J if bool(self.live.all()) else J[:, self.live]
        self.JL = JL
        if JL.shape[1] == 0:
            self.sigma = torch.zeros(0, dtype=J.dtype)
            self.rank = 0
            self.Uk = torch.zeros(J.shape[0], 0, dtype=J.dtype)
            self.sk = torch.zeros(0, dtype=J.dtype)
            self.solver = "none"
            return
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, received {solver!r}.")
        if solver == "auto":
            if self.rtol < GRAM_MIN_RTOL:
                solver = "svd"
            elif J.shape[0] >= J.shape[1] and J.dtype == torch.float64:
                solver = "tall"
            else:
                solver = "gram"
        self.solver = solver
        if solver == "tall":
            self._factor_tall(JL)
            return
        U, self.sigma = _top_left_singular(JL, solver)
        self.floor = _eps_floor(JL, solver)
        self.rank = _resolved(self.sigma, self.rtol, self.floor)
        self.U = U
        self.Uk, self.sk = U[:, : self.rank], self.sigma[: self.rank]
        self.gauge_rank = self.rank
        if gauge == "paper":
            self.D = self.col[self.live]
            self.Vk = (JL.T @ self.Uk) / self.sk  # J_Lᵀ U_k Σ_k⁻¹
        if gauge == "column" and self.rank > 0:
            self.D = self.col[self.live]
            JD = JL / self.D
            UD, sD = _top_left_singular(JD, solver)
            # never invert J D⁻¹ below its own noise floor (reported if it cuts the rank)
            self.gauge_rank = min(self.rank, _resolved(sD, 0.0, _eps_floor(JD, solver)))
            self.UDk, self.sDk = UD[:, : self.gauge_rank], sD[: self.gauge_rank]
            self.JD = JD

    def _factor_tall(self, JL: Tensor) -> None:
        """The tall route (module docstring): eigenvalues and leading eigenvectors of ``J_Lᵀ J_L``."""
        if JL.dtype != torch.float64:
            raise ValueError(f"solver='tall' needs a float64 J, received {JL.dtype}.")
        import scipy.linalg

        A = _gram_tall(JL)
        floor = _eps_floor(JL, "gram")
        lam = scipy.linalg.eigh(A, eigvals_only=True, check_finite=False)[::-1]
        self.sigma = torch.from_numpy(np.sqrt(np.clip(lam, 0.0, None)).copy())
        self.rank = _resolved(self.sigma, self.rtol, floor)
        self.gauge_rank = 0
        if self.rank == 0:
            return
        if self.gauge == "paper":
            self.D = self.col[self.live]
            w, V = _top_eigh(A, self.rank)
            self.gauge_rank = self.rank
        elif self.gauge == "column":
            self.D = self.col[self.live]
            Dn = self.D.numpy()
            w, V = _top_eigh(A / Dn[:, None] / Dn[None, :], self.rank)
            sD = np.sqrt(np.clip(w, 0.0, None))
            self.gauge_rank = int((sD >= floor * sD[0]).sum())
        else:
            w, V = _top_eigh(A, self.rank)
            self.gauge_rank = self.rank
        self.V = torch.from_numpy(V[:, : self.gauge_rank])
        self.lam = torch.from_numpy(w[: self.gauge_rank].copy())

    def _solve_tall(self, t: Tensor) -> Tensor:
        if self.gauge_rank == 0:
            return torch.zeros(self.JL.shape[1], dtype=self.J.dtype)
        if self.gauge == "paper":  # U_kᵀt = Σ_k⁻¹ V_kᵀ J_Lᵀ t, so a = Σ_k⁻² V_kᵀ J_Lᵀ t
            return paper_direction(self.V, (self.V.T @ (self.JL.T @ t)) / self.lam, self.D)
        if self.gauge == "column":
            g = (self.JL.T @ t) / self.D  # J_Dᵀ t
            return (self.V @ ((self.V.T @ g) / self.lam)) / self.D
        return self.V @ ((self.V.T @ (self.JL.T @ t)) / self.lam)

    def solve(self, target: Tensor) -> LiftResult:
        """Lift ``target`` (length ``M``); see the module docstring for the definition."""
        t = _check_system(self.J, target)
        p = self.J.shape[1]
        c = torch.zeros(p, dtype=self.J.dtype)
        info: dict[str, Any] = {"solver": self.solver}
        proj = None
        if self.rank > 0 and self.solver == "tall":
            info["gauge_rank"] = self.gauge_rank
            c[self.live] = self._solve_tall(t)
        elif self.rank > 0:
            a = self.Uk.T @ t
            if self.gauge == "column":
                aD = self.UDk.T @ t
                c_live = (self.JD.T @ (self.UDk @ (aD / self.sDk**2))) / self.D
                tn_ = float(t.norm())
                info["gauge_rank"] = self.gauge_rank
                info["gauge_image_shift"] = (
                    float((self.UDk @ aD - self.Uk @ a).norm()) / tn_ if tn_ > 0 else 0.0
                )
            elif self.gauge == "paper":
                c_live = paper_direction(self.Vk, a / self.sk, self.D)
            else:
                c_live = self.JL.T @ (self.Uk @ (a / self.sk**2))  # J_L⁺_k t
            c[self.live] = c_live
            tn_ = float(t.norm())
            coords = self.U.T @ t
            info["rtol_hint"] = projection_residual_hint(self.sigma, coords, tn_, self.rtol, self.floor, LIFT_TOL,
                                                         outside=float((t - self.U @ coords).norm()))
            if self.gauge == "paper":
                proj = self.Uk @ a  # P_k t
        reached = self.J @ c
        res, tn = _relres(reached, t)
        if proj is not None and tn > 0:
            info["projection_residual"] = float((t - proj).norm()) / tn
            info["gauge_leak"] = float((reached - proj).norm()) / tn
        return LiftResult(
            direction=c,
            residual=res,
            rank=self.rank,
            sigma=self.sigma,
            dead=self.dead,
            column_norms=self.col,
            target_norm=tn,
            reached=reached,
            gauge=self.gauge,
            method="dense",
            rtol=self.rtol,
            info=info,
        )


def lift(J: Tensor, target: Tensor, *, rtol: float = RTOL, gauge: str = "column",
         dead_tol: float = DEAD_TOL, solver: str = "auto") -> LiftResult:
    """Lift one target through a dense ``J`` (``c = D⁻¹(J D⁻¹)⁺ P_k t``; see module doc)."""
    return DenseLift(J, rtol=rtol, gauge=gauge, dead_tol=dead_tol, solver=solver).solve(target)


def stack_rows(systems: Sequence[tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
    """Stack several ``(J_i, t_i)`` (conditions, generators' rows) into one system.

    The stacked lift is one direction ``c`` minimising ``Σ_i ‖J_i c − t_i‖²`` — e.g. all values
    of a conditioning input α at once, instead of one uncoordinated direction per α.
    """
    if not systems:
        raise ShapeError("stack_rows needs at least one (J, target) pair.")
    p = systems[0][0].shape[1]
    for i, (J, t) in enumerate(systems):
        if J.shape[1] != p:
            raise ShapeError(f"system {i} has {J.shape[1]} columns; system 0 has {p}; stack systems over the same parameters.")
        if t.numel() != J.shape[0]:
            raise ShapeError(f"system {i}: target has {t.numel()} entries, J has {J.shape[0]} rows.")
    return torch.cat([J for J, _ in systems]), torch.cat([t.reshape(-1).to(systems[0][0].dtype) for _, t in systems])
