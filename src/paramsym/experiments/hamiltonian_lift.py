"""Pieces the Hamiltonian experiment adds on top of :mod:`paramsym.attribution`.

The solver code lives in the library: the tall ``J_Lᵀ J_L`` lift is
:class:`paramsym.attribution.lift.DenseLift` with ``solver="tall"`` (chosen automatically when
``J`` has at least as many rows as columns), and the polar-grid evaluator is
:mod:`paramsym.attribution.polar`. What stays here is experiment-specific:

1. :class:`TallSymmetryProblem` — a :class:`~paramsym.attribution.problem.SymmetryProblem`
   that caches both lifts at the last few parameter vectors (the walks start every flow from
   the same ``θ₀``), so flows share one Jacobian and factorisation.
2. Phase shift of angular deviation profiles: :func:`phase_shift` fits ``s`` in
   ``d_t(φ) ≈ d_0(φ + s)`` (the +c prediction is ``s = τ``, the function-space time), and
   :func:`predicted_profile`.

:func:`TallLift` is an alias kept for callers of the former class.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..attribution.lift import DEAD_TOL, RTOL, DenseLift
from ..attribution.polar import PolarGrid, PolarGridFunction  # noqa: F401 (re-exported for callers)
from ..attribution.problem import Attribution, SymmetryProblem
from ..errors import ShapeError


def TallLift(J: Tensor, *, rtol: float = RTOL, gauge: str = "column", dead_tol: float = DEAD_TOL) -> DenseLift:  # noqa: N802
    """Alias: ``DenseLift(J, solver="tall", ...)`` — the library's tall-Jacobian lift."""
    return DenseLift(J.to(torch.float64), rtol=rtol, gauge=gauge, dead_tol=dead_tol, solver="tall")


@dataclass
class TallSymmetryProblem(SymmetryProblem):
    """:class:`SymmetryProblem` with a small cache of both lifts per parameter vector.

    Dense lifts use the core's :class:`DenseLift` (its ``"auto"`` solver takes the tall
    ``J_Lᵀ J_L`` route when ``J`` has at least as many rows as columns). The lifts at the last
    few parameter vectors are cached (both directions are always solved), so flows that start
    from the same ``θ₀`` share one Jacobian and factorisation. ``grid`` (a core field) makes
    the Reynolds averages use the polar-grid evaluator.
    """

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
        solver = DenseLift(self.jacobian(theta), rtol=self.rtol, gauge=self.gauge)
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
