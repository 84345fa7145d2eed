"""Pieces the Hamiltonian experiment needs on top of :mod:`paramsym.attribution`.

1. :class:`TallLift` — the *same* truncated, gauged lift as
   :class:`paramsym.attribution.lift.DenseLift`, computed through the ``p × p`` Gram matrix
   ``J_Lᵀ J_L`` instead of the ``M × M`` one ``J_L J_Lᵀ``. The Hamiltonian system stacks
   ``M = 2·480·n_α`` rows (10 560 for 11 values of α) over ``p = 2 273`` parameters, where an
   ``M × M`` eigenproblem per walk step is far too slow on a CPU; ``p × p`` is cheap.

   Definition (identical to ``DenseLift``; ``J_L`` = live columns, ``D`` = their norms):
   ``σ`` are the singular values of ``J_L``, the resolved rank is
   ``k = #{σ_i ≥ max(τ, floor)·σ_1}`` with the Gram noise floor ``floor = sqrt(max(M, p)·ε)``,
   and with ``J_D = J_L D⁻¹ = U_D Σ_D V_Dᵀ``

       c_L = D⁻¹ (J_D)⁺_k t = D⁻¹ V_{D,k} Σ_{D,k}⁻² V_{D,k}ᵀ J_Dᵀ t          (gauge "column")
       c_L = V_k Σ_k⁻² V_kᵀ J_Lᵀ t                                          (gauge "none")

   using ``J_Dᵀ U_{D,k} Σ_{D,k}⁻¹ = V_{D,k}``: the right singular vectors come from the
   eigen-decomposition of ``J_Dᵀ J_D``. Dead columns get ``c_i = 0``. Agreement with
   ``DenseLift`` is tested (``tests/attribution/test_hamiltonian_experiment.py``).

2. :class:`TallSymmetryProblem` — a :class:`~paramsym.attribution.problem.SymmetryProblem` whose
   :meth:`lifts` uses :class:`TallLift`, so that the core's flows (:func:`run_flow`) and tables
   work unchanged on the stacked-α system.

3. Phase shift of angular deviation profiles: :func:`phase_shift` fits ``s`` in
   ``d_t(φ) ≈ d_0(φ + s)`` (the +c prediction is ``s = τ``, the function-space time).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import torch
from torch import Tensor

from ..attribution.jacobian import check_outputs
from ..attribution.lift import DEAD_TOL, GAUGES, RTOL, DenseLift, LiftResult
from ..attribution.problem import Attribution, SymmetryProblem
from ..attribution.symmetry import reynolds_x
from ..errors import ShapeError


def _gram_floor(shape: tuple[int, int]) -> float:
    """Relative σ floor of the Gram route: ``sqrt(max(M, p)·ε)`` (as in ``DenseLift``)."""
    return math.sqrt(max(shape) * float(np.finfo(np.float64).eps))


def _top_eigh(A: np.ndarray, k: int, vectors: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """The ``k`` largest eigenpairs of symmetric ``A`` (descending).

    Lanczos (ARPACK ``eigsh``, tolerance 0 = machine precision, fixed start vector so runs are
    reproducible) when ``k`` is small against ``n``, else LAPACK ``syevr`` on the subset.
    """
    n = A.shape[0]
    k = max(1, min(k, n))
    if 3 * k < n:
        from scipy.sparse.linalg import eigsh

        out = eigsh(A, k=k, which="LA", v0=np.ones(n), tol=0, return_eigenvectors=vectors)
        w, V = (out, None) if not vectors else out
        order = np.argsort(w)[::-1]
        return w[order].copy(), (None if V is None else V[:, order].copy())
    out = scipy.linalg.eigh(A, subset_by_index=(n - k, n - 1), driver="evr", check_finite=False,
                            eigvals_only=not vectors)
    if not vectors:
        return out[::-1].copy(), None
    w, V = out
    return w[::-1].copy(), V[:, ::-1].copy()


def _gram(JL: Tensor) -> np.ndarray:
    """``J_Lᵀ J_L`` by the symmetric rank-k update ``dsyrk`` (half the flops of a matmul, and no
    copy: the transpose of a C-ordered ``J_L`` is Fortran-ordered)."""
    from scipy.linalg.blas import dsyrk

    X = np.ascontiguousarray(JL.numpy())
    upper = dsyrk(1.0, X.T, trans=0, lower=0)
    return np.triu(upper) + np.triu(upper, 1).T


class TallLift:
    """Truncated, gauged pseudo-inverse of a tall ``J`` (``M ≥ p``) via ``J_Lᵀ J_L``.

    Same definition and :class:`LiftResult` as :class:`~paramsym.attribution.lift.DenseLift`
    (module docstring); cost ``O(M p²)`` for ``J_Lᵀ J_L``, ``O(p³)`` for its eigenvalues (the
    resolved rank) and Lanczos for the ``k ≪ p`` leading eigenvectors of ``J_Dᵀ J_D`` (LAPACK
    when ``k`` is not small), instead of ``O(M² p + M³)``.

    Args:
        J: ``[M, p]`` float64.
        rtol: truncation ``τ`` (keep ``σ_k ≥ τ σ_1``), 1e-3 by default.
        gauge: ``"column"`` or ``"none"``.
        dead_tol: dead-column threshold relative to the largest column norm.
    """

    def __init__(self, J: Tensor, *, rtol: float = RTOL, gauge: str = "column", dead_tol: float = DEAD_TOL):
        if gauge not in GAUGES:
            raise ShapeError(f"gauge must be one of {GAUGES}, received {gauge!r}.")
        if J.dim() != 2 or J.shape[0] == 0 or J.shape[1] == 0:
            raise ShapeError(f"J must be a non-empty matrix [M, p], received shape {tuple(J.shape)}.")
        check_outputs(J, "J")
        self.J, self.rtol, self.gauge = J.to(torch.float64), float(rtol), gauge
        self.col = self.J.norm(dim=0)
        cmax = float(self.col.max())
        self.dead = self.col <= dead_tol * cmax if cmax > 0 else torch.ones_like(self.col, dtype=torch.bool)
        self.live = ~self.dead
        JL = self.J[:, self.live]
        self.JL = JL
        self.gauge_rank = 0
        if JL.shape[1] == 0:
            self.sigma = torch.zeros(0, dtype=torch.float64)
            self.rank = 0
            return
        A = _gram(JL)
        floor = _gram_floor(tuple(JL.shape))
        lam = scipy.linalg.eigh(A, eigvals_only=True, check_finite=False)[::-1]
        self.sigma = torch.from_numpy(np.sqrt(np.clip(lam, 0.0, None)).copy())
        s1 = float(self.sigma[0])
        self.rank = int((self.sigma >= max(self.rtol, floor) * s1).sum()) if s1 > 0 else 0
        if self.rank == 0:
            return
        if gauge == "column":
            self.D = self.col[self.live]
            Dn = self.D.numpy()
            B = A / Dn[:, None] / Dn[None, :]
            w, V = _top_eigh(B, self.rank)
            sD = np.sqrt(np.clip(w, 0.0, None))
            self.gauge_rank = int((sD >= floor * sD[0]).sum())
        else:
            w, V = _top_eigh(A, self.rank)
            self.gauge_rank = self.rank
        self.V = torch.from_numpy(V[:, : self.gauge_rank])
        self.lam = torch.from_numpy(w[: self.gauge_rank].copy())

    def solve(self, target: Tensor) -> LiftResult:
        """Lift ``target`` (length ``M``); see the module docstring."""
        t = target.reshape(-1).to(torch.float64)
        if t.numel() != self.J.shape[0]:
            raise ShapeError(f"the target has {t.numel()} entries but J has {self.J.shape[0]} rows.")
        check_outputs(t, "the lifting target")
        c = torch.zeros(self.J.shape[1], dtype=torch.float64)
        info = {"solver": "tall-gram", "gauge_rank": self.gauge_rank}
        if self.rank > 0 and self.gauge_rank > 0:
            if self.gauge == "column":
                g = (self.JL.T @ t) / self.D  # J_Dᵀ t
                c[self.live] = (self.V @ ((self.V.T @ g) / self.lam)) / self.D
            else:
                g = self.JL.T @ t
                c[self.live] = self.V @ ((self.V.T @ g) / self.lam)
        reached = self.J @ c
        tn = float(t.norm())
        res = float((reached - t).norm()) / tn if tn > 0 else 0.0
        return LiftResult(
            direction=c, residual=res, rank=self.rank, sigma=self.sigma, dead=self.dead,
            column_norms=self.col, target_norm=tn, reached=reached, gauge=self.gauge,
            method="dense", rtol=self.rtol, info=info,
        )


@dataclass(frozen=True)
class PolarGrid:
    """Nodes ``(r cos 2πi/L, r sin 2πi/L, α)`` for ``r`` in ``radii``, ``i < n_angles = L``, α in
    ``alphas``: the orbit of a polar probe grid under a cyclic quadrature (``L`` = lcm of the
    grid's and the quadrature's angle counts), possibly rotated as a whole by a common angle."""

    radii: tuple[float, ...]
    n_angles: int
    alphas: tuple[float, ...]

    @property
    def size(self) -> int:
        return len(self.radii) * self.n_angles * len(self.alphas)


class PolarGridFunction:
    """``x ↦ g(x)`` that evaluates ``g`` once on a rotated copy of a :class:`PolarGrid` and gathers.

    Reynolds averages of a function on a polar probe grid evaluate it at ``M`` rotated copies of
    the grid — points that all lie on the ``L``-angle node set (and, for a prediction rotated by
    ``τ``, on the node set rotated by ``τ``). For a batch ``x`` whose points all sit within
    ``tol`` of such nodes (common angular offset, radius and α on the grid) this returns the
    cached node values (computed by one call of ``g`` per offset), otherwise ``g(x)`` itself. The
    result equals ``g(x)`` up to the rounding of the node coordinates (~1e-16 relative), which
    the tests check against the direct evaluation.
    """

    def __init__(self, g: Callable[[Tensor], Tensor], grid: PolarGrid, *, tol: float = 1e-11, max_offsets: int = 8):
        self.g, self.grid, self.tol, self.max_offsets = g, grid, tol, max_offsets
        self.radii = torch.tensor(sorted(grid.radii), dtype=torch.float64)
        self.alphas = torch.tensor(sorted(grid.alphas), dtype=torch.float64)
        self.cache: dict[float, Tensor] = {}
        self.hits = 0

    def _nodes(self, offset: float) -> Tensor:
        L = self.grid.n_angles
        ang = 2 * math.pi * (torch.arange(L, dtype=torch.float64) + offset) / L
        r, a, al = torch.meshgrid(self.radii, ang, self.alphas, indexing="ij")
        x = torch.stack([r * torch.cos(a), r * torch.sin(a), al], -1).reshape(-1, 3)
        y = self.g(x)
        return y.reshape(len(self.radii), L, len(self.alphas), -1)

    def _index(self, x: Tensor) -> tuple[float, Tensor, Tensor, Tensor] | None:
        if x.dim() != 2 or x.shape[1] != 3 or x.shape[0] < self.grid.size:
            return None
        r = x[:, :2].norm(dim=1)
        ir = torch.bucketize(r, (self.radii[1:] + self.radii[:-1]) / 2)
        a = x[:, 2].contiguous()
        ia = torch.bucketize(a, (self.alphas[1:] + self.alphas[:-1]) / 2) if len(self.alphas) > 1 \
            else torch.zeros(x.shape[0], dtype=torch.long)
        if float((r - self.radii[ir]).abs().max()) > self.tol or float((a - self.alphas[ia]).abs().max()) > self.tol:
            return None
        L = self.grid.n_angles
        u = torch.atan2(x[:, 1], x[:, 0]) * (L / (2 * math.pi))
        offset = float(u[0] - torch.round(u[0]))
        w = u - offset
        i = torch.round(w)
        if float(((w - i) * r).abs().max()) * (2 * math.pi / L) > self.tol:
            return None
        return round(offset, 12), ir, torch.remainder(i.long(), L), ia

    def __call__(self, x: Tensor) -> Tensor:
        found = self._index(x)
        if found is None:
            return self.g(x)
        offset, ir, ii, ia = found
        if offset not in self.cache:
            if len(self.cache) >= self.max_offsets:
                self.cache.pop(next(iter(self.cache)))
            self.cache[offset] = self._nodes(offset)
        self.hits += 1
        return self.cache[offset][ir, ii, ia]


@dataclass
class TallSymmetryProblem(SymmetryProblem):
    """:class:`SymmetryProblem` whose dense lifts use :class:`TallLift` (``J_Lᵀ J_L`` route)
    when ``J`` has at least as many rows as columns, and the core's :class:`DenseLift` otherwise.

    Everything else (``η``, ``δ``, Jacobian, flows, tables) is the core's. The lifts at the
    last few parameter vectors are cached (both directions are always solved), so flows that
    start from the same ``θ₀`` share one Jacobian and factorisation. With ``grid`` (the orbit
    node set of a polar probe grid), :meth:`function_of_x` returns a
    :class:`PolarGridFunction`, so that the core's Reynolds averages (``δ``, the flows'
    predictions) cost one evaluation per rotation offset instead of one per quadrature point.
    """

    grid: PolarGrid | None = None

    def function_of_x(self, theta: Tensor | None = None) -> Callable[[Tensor], Tensor]:
        base = super().function_of_x(theta)
        return base if self.grid is None else PolarGridFunction(base, self.grid)

    def delta(self, theta: Tensor | None = None, warn: bool = True) -> Tensor:
        """``δ = f − P_E f`` by the core's :func:`reynolds_x` on :meth:`function_of_x`."""
        if self.grid is None:
            return super().delta(theta, warn=warn)
        g = self.function_of_x(theta)
        with torch.no_grad():
            return check_outputs(self.values(theta)) - reynolds_x(g, self.probes, self.group, warn=warn)

    cache_size = 4

    def lifts(self, theta: Tensor | None = None, which: Sequence[str] = ("c", "b"),
              warn: bool = True) -> Attribution:
        """Both lifts at ``θ`` (``which`` is accepted for the core's signature; both are always
        solved — the second costs one product once ``J`` is factorised — and cached)."""
        th = self.theta0 if theta is None else theta.detach().to(torch.float64)
        key = th.numpy().tobytes()
        cache = self.__dict__.setdefault("_lift_cache", {})
        if key in cache:
            return cache[key]
        att = self._solve(th, warn)
        cache[key] = att
        while len(cache) > self.cache_size:
            cache.pop(next(iter(cache)))
        return att

    def _solve(self, theta: Tensor, warn: bool) -> Attribution:
        eta = self.eta(theta)
        delta = self.delta(theta, warn=warn)
        values = self.values(theta)
        m = eta.numel()
        J = self.jacobian(theta)
        if J.shape[0] >= J.shape[1]:
            solver = TallLift(J, rtol=self.rtol, gauge=self.gauge)
        else:  # wide J: the core's M × M route is the cheap one
            solver = DenseLift(J, rtol=self.rtol, gauge=self.gauge)
        c, b = solver.solve(eta.reshape(-1)), solver.solve(-delta.reshape(-1))
        return Attribution(c, b, eta, delta, values, self.layout, solver.col / m**0.5)


# --------------------------------------------------------------------------------------------
# Angular deviation profiles
# --------------------------------------------------------------------------------------------


def predicted_profile(d0: np.ndarray, direction: str, tau: float) -> np.ndarray:
    """Exact prediction of a deviation profile at function-space time ``tau``.

    ``d_0(φ + τ)`` along ``"+c"`` (trigonometric interpolation of the equispaced samples; the
    seed's ``d_t(φ) = d_0(φ + t)``), ``e^{−τ} d_0`` along ``"-b"``. ``d0``: ``[n]`` or ``[n, K]``.
    """
    a = np.asarray(d0, dtype=np.float64)
    if direction == "-b":
        return math.exp(-tau) * a
    if direction != "+c":
        raise ShapeError(f"direction must be '+c' or '-b', received {direction!r}.")
    m = np.arange(a.shape[0] // 2 + 1).reshape((-1,) + (1,) * (a.ndim - 1))
    return np.fft.irfft(np.fft.rfft(a, axis=0) * np.exp(1j * m * tau), n=a.shape[0], axis=0)


def phase_shift(d0: np.ndarray, d1: np.ndarray, *, grid: int = 7200) -> tuple[float, float]:
    """Best ``s`` with ``d1(φ) ≈ d0(φ + s)`` for profiles on equispaced angles ``φ_j = 2πj/n``.

    Both arrays have shape ``[n]`` or ``[n, K]`` (K profiles fitted with one common shift, e.g.
    several α). ``d0(φ + s)`` is the trigonometric interpolant of the samples, so the fit is
    exact for band-limited profiles. Minimises ``Σ_m |D1_m − D0_m e^{ims}|²`` over the Fourier
    coefficients: a grid search on ``(−π, π]`` refined by a bounded scalar minimisation.

    Returns:
        ``(s, misfit)`` with ``misfit = ‖d1 − d0(· + s)‖ / ‖d1‖`` (0 for an exact shift).
    """
    from scipy.optimize import minimize_scalar

    a0 = np.asarray(d0, dtype=np.float64)
    a1 = np.asarray(d1, dtype=np.float64)
    if a0.shape != a1.shape or a0.ndim not in (1, 2) or a0.shape[0] < 3:
        raise ShapeError(f"profiles must have equal shapes [n] or [n, K] with n ≥ 3, received {a0.shape}, {a1.shape}.")
    if a0.ndim == 1:
        a0, a1 = a0[:, None], a1[:, None]
    n = a0.shape[0]
    F0, F1 = np.fft.rfft(a0, axis=0), np.fft.rfft(a1, axis=0)
    m = np.arange(F0.shape[0])[:, None]
    # weight the real-FFT bins so that Σ_m w_m |·|² is Parseval's Σ_φ |·|² · n
    w = np.full((F0.shape[0], 1), 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    cross = (w * np.conj(F0) * F1).sum(1)  # Σ_K w conj(F0) F1, per m

    def objective(s: float) -> float:
        return -float(np.real((cross * np.exp(-1j * m[:, 0] * s)).sum()))

    ss = np.linspace(-math.pi, math.pi, grid, endpoint=False)
    vals = -np.real(np.exp(-1j * np.outer(ss, m[:, 0])) @ cross)
    s0 = float(ss[int(np.argmin(vals))])
    h = 2 * math.pi / grid
    s = float(minimize_scalar(objective, bounds=(s0 - h, s0 + h), method="bounded",
                              options={"xatol": 1e-12}).x)
    shifted = np.fft.irfft(F0 * np.exp(1j * m * s), n=n, axis=0)
    nrm = float(np.linalg.norm(a1))
    misfit = float(np.linalg.norm(a1 - shifted)) / nrm if nrm > 0 else 0.0
    return s, misfit
