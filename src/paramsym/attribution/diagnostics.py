"""Diagnostics of lifts and flows: along-flow monitors, the cutoff sweep, quadrature and orbit checks.

* :class:`FlowMonitor` — a :func:`~paramsym.attribution.flows.run_flow` callback recording, at
  every step ``k``: the task loss and accuracy (any ``task(f) -> (loss, accuracy)``), the
  parameter path length ``Σ_j ‖θ_{j+1} − θ_j‖`` and distance ``‖θ_k − θ_0‖``, the function-space
  distance to the flow's endpoint ``‖f_k − f_end‖/‖f_0‖`` on the probes (``f_end = f_0 ∘ R_T``
  along +c, ``P_E f_0`` along −b), and every ``every`` steps the *staleness* of the frozen first
  direction ``z_0``: ``‖J_k z_0 − t_k‖/‖t_k‖`` with ``t_k = η(θ_k)`` or ``−δ(θ_k)`` (one JVP).
* :func:`cutoff_sweep` — for each truncation ``τ``: resolved rank, captured energy
  ``‖P_k t‖²/‖t‖²`` (``P_k`` the projector on the ``k`` leading left singular vectors), projection
  residual ``‖(I − P_k) t‖/‖t‖`` (summed over the complement, not ``sqrt(1 − captured)``), residual
  ``‖J c_τ − t‖/‖t‖``, ``‖c_τ‖`` and ``cos(c_τ, c_ref)``.
* :func:`quadrature_check` — ``‖P_n f − P_{2n} f‖ / ‖f‖`` for the equally spaced SO(2) rule
  (``C_n`` against ``C_{2n}``): how much the Reynolds average still moves when the rule is
  refined.
* :func:`sparse_attribution` — an L1 / elastic-net direction: FISTA on
  ``min_c ½‖J D⁻¹ c̃ − t‖² + λ(α‖c̃‖₁ + ½(1 − α)‖c̃‖²)``, ``c = D⁻¹c̃`` (``D`` the column norms,
  or 1 without normalisation), ``λ = λ_rel·‖(J D⁻¹)ᵀ t‖_∞`` (``λ_rel = 1`` gives ``c = 0``);
  reports the residual, the support and the participation ratio ``(Σc²)²/Σc⁴``.
* :func:`orbit_closure` — ``max_n |ρ(g(2π))⁻¹ f(τ_{g(2π)} x_n) − f(x_n)|`` through the
  exponential map: the one-parameter group closes after one turn.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from .flows import FlowTrace, angular_profile, predicted_function
from .gauges import tail_norms
from .lift import DenseLift
from .problem import SymmetryProblem
from .symmetry import reynolds_x, so2, transform_x

__all__ = ["FlowMonitor", "cutoff_sweep", "orbit_closure", "quadrature_check", "sparse_attribution"]


class FlowMonitor:
    """Callback for :func:`run_flow` (module docstring); results in :attr:`series` (lists per step).

    Args:
        problem: the flow's problem.
        direction: ``"+c"`` or ``"-b"`` (chooses the endpoint and the staleness target).
        t_end: the flow's end time (the +c endpoint is ``f_0 ∘ R_{t_end}``).
        task: optional ``task(f_of_x) -> (loss, accuracy)``.
        every: measure the staleness every this many steps (and at the end).
        steps: the flow's number of steps (to measure at the end).
        profile_radius: if given, keep the angular deviation profile ``d_t(φ)`` (360 angles, first
            output) at every step in :attr:`profiles` (the profile heatmap).
    """

    def __init__(self, problem: SymmetryProblem, direction: str, t_end: float, *,
                 task: Callable[[Callable[[Tensor], Tensor]], tuple[float, float]] | None = None,
                 every: int = 5, steps: int | None = None, profile_radius: float | None = None):
        self.problem, self.direction, self.task, self.every, self.steps = problem, direction, task, every, steps
        th0 = problem.theta0
        f0 = problem.function_of_x(th0)
        with torch.no_grad():
            if direction == "+c":
                self.endpoint = predicted_function(problem, th0, "+c", t_end)(problem.probes)
            else:
                self.endpoint = reynolds_x(f0, problem.probes, problem.group, warn=False)
            self.f0_norm = float(problem.values(th0).norm())
        self.series: dict[str, list[Any]] = {k: [] for k in (
            "t", "task_loss", "accuracy", "path_length", "distance", "endpoint_distance", "staleness")}
        self.profile_radius = profile_radius
        self.profiles: list[Tensor] = []
        self._prev: Tensor | None = None
        self._theta0: Tensor | None = None
        self._z0: Tensor | None = None

    def __call__(self, k: int, theta: Tensor, trace: FlowTrace) -> None:
        s = self.series
        if self._theta0 is None:
            self._theta0 = theta.clone()
        step = 0.0 if self._prev is None else float((theta - self._prev).norm())
        s["path_length"].append((s["path_length"][-1] if s["path_length"] else 0.0) + step)
        s["distance"].append(float((theta - self._theta0).norm()))
        self._prev = theta.clone()
        s["t"].append(k * trace.dt)
        if self.task is not None:
            loss, acc = self.task(self.problem.function_of_x(theta))
        else:
            loss = acc = None
        s["task_loss"].append(loss)
        s["accuracy"].append(acc)
        with torch.no_grad():
            vals = self.problem.values(theta)
        s["endpoint_distance"].append(float((vals - self.endpoint).norm()) / max(self.f0_norm, 1e-300))
        s["staleness"].append(self._staleness(k, theta))
        if self.profile_radius is not None:
            _, d = angular_profile(self.problem.function_of_x(theta), self.profile_radius)
            self.profiles.append(torch.from_numpy(d[:, 0].copy()))

    def _staleness(self, k: int, theta: Tensor) -> float | None:
        if k == 0 or (k % self.every and k != self.steps):
            return None
        if self._z0 is None:
            return None
        t = self.problem.eta(theta) if self.direction == "+c" else -self.problem.delta(theta, warn=False)
        t = t.reshape(-1)
        Jz = self.problem.operator(theta).matvec(self._z0)
        tn = float(t.norm())
        return float((Jz - t).norm()) / tn if tn > 0 else 0.0

    def set_first_direction(self, z0: Tensor) -> None:
        """The frozen ``z_0`` whose staleness is measured (the flow's first solve)."""
        self._z0 = z0.detach().clone()

    def end(self) -> dict[str, Any]:
        """The last values (and the staleness at the end), for a flow record."""
        s = self.series
        stale = [v for v in s["staleness"] if v is not None]
        return {"task_loss_end": s["task_loss"][-1], "accuracy_end": s["accuracy"][-1],
                "task_loss_start": s["task_loss"][0], "accuracy_start": s["accuracy"][0],
                "path_length": s["path_length"][-1], "distance_end": s["distance"][-1],
                "endpoint_distance_end": s["endpoint_distance"][-1],
                "staleness_end": stale[-1] if stale else None}


def cutoff_sweep(J: Tensor, target: Tensor, rtols: Sequence[float] = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 1e-5, 1e-6),
                 *, gauge: str = "column", reference_rtol: float = 1e-3) -> list[dict[str, float]]:
    """How the lift moves with the truncation (module docstring); one row per ``τ``."""
    t = target.reshape(-1).to(J.dtype)
    tn2 = float(t.square().sum())
    ref = DenseLift(J, rtol=reference_rtol, gauge=gauge, solver="gram").solve(t).direction
    U, _, _ = torch.linalg.svd(J, full_matrices=False)
    coords = U.T @ t
    energy = torch.cumsum(coords.square(), 0)
    tail = tail_norms(coords, float((t - U @ coords).norm()))  # ‖(I − P_k) t‖ from the complement
    rows = []
    for tau in rtols:
        r = DenseLift(J, rtol=tau, gauge=gauge, solver="gram" if tau >= 1e-6 else "svd").solve(t)
        cap = float(energy[r.rank - 1]) / tn2 if r.rank and tn2 > 0 else 0.0
        proj_res = float(tail[r.rank]) / tn2**0.5 if tn2 > 0 else 0.0
        c = r.direction
        cos = float(c @ ref) / max(float(c.norm() * ref.norm()), 1e-300)
        rows.append({"rtol": tau, "rank": r.rank, "captured_energy": cap, "residual": r.residual,
                     "projection_residual": proj_res, "direction_norm": float(c.norm()), "cos_to_reference": cos})
    return rows


def quadrature_check(f: Callable[[Tensor], Tensor], probes: Tensor, n: int = 64) -> dict[str, float]:
    """``‖P_n f − P_{2n} f‖/‖f‖`` and ``‖P_n f − P_{n/2} f‖/‖f‖`` for SO(2) on the input plane."""
    with torch.no_grad():
        fx = f(probes)
        pn = reynolds_x(f, probes, so2(n_quadrature=n), warn=False)
        p2 = reynolds_x(f, probes, so2(n_quadrature=2 * n), warn=False)
        ph = reynolds_x(f, probes, so2(n_quadrature=max(n // 2, 1)), warn=False)
    fn = max(float(fx.norm()), 1e-300)
    return {"n": n, "refined_change": float((pn - p2).norm()) / fn, "coarsened_change": float((pn - ph).norm()) / fn}


def orbit_closure(f: Callable[[Tensor], Tensor], probes: Tensor, group=None) -> float:
    """``max |Π(exp 2πξ) f − f|`` on the probes (0 up to rounding for SO(2))."""
    group = group if group is not None else so2()
    g = transform_x(f, group, 2 * math.pi)
    with torch.no_grad():
        return float((g(probes) - f(probes)).abs().max())


def sparse_attribution(J: Tensor, target: Tensor, *, lam_rel: float = 1e-2, alpha: float = 1.0,
                       normalize_columns: bool = True, iters: int = 500) -> dict[str, Any]:
    """Elastic-net direction by FISTA (module docstring); ``alpha = 1`` is the lasso.

    Returns:
        ``{"direction", "residual", "support", "participation_ratio", "lam", "objective_change"}`` —
        ``objective_change`` is the relative change of the objective over the last 10 % of the
        iterations (a convergence measure; FISTA converges as O(1/k²)).
    """
    t = target.reshape(-1).to(J.dtype)
    col = J.norm(dim=0)
    D = torch.where(col > 0, col, torch.ones_like(col)) if normalize_columns else torch.ones_like(col)
    A = J / D
    lam = lam_rel * float((A.T @ t).abs().max())
    l1, l2 = lam * alpha, lam * (1.0 - alpha)
    L = float(torch.linalg.matrix_norm(A, 2)) ** 2 + l2

    def objective(x: Tensor) -> float:
        return 0.5 * float((A @ x - t).square().sum()) + l1 * float(x.abs().sum()) + 0.5 * l2 * float(x.square().sum())

    x = torch.zeros(A.shape[1], dtype=J.dtype)
    y, tk = x.clone(), 1.0
    history = []
    for _ in range(iters):
        g = A.T @ (A @ y - t) + l2 * y
        z = y - g / L
        x_new = torch.sign(z) * (z.abs() - l1 / L).clamp_min(0)
        t_new = (1 + math.sqrt(1 + 4 * tk * tk)) / 2
        y = x_new + ((tk - 1) / t_new) * (x_new - x)
        x, tk = x_new, t_new
        history.append(objective(x))
    c = x / D
    tn = float(t.norm())
    sq = c.square()
    tail = history[-max(iters // 10, 1)]
    return {"direction": c, "lam": lam, "alpha": alpha,
            "residual": float((J @ c - t).norm()) / tn if tn > 0 else 0.0,
            "support": int((x.abs() > 0).sum()),
            "participation_ratio": float(sq.sum() ** 2 / sq.square().sum()) if float(sq.sum()) > 0 else 0.0,
            "objective_change": abs(tail - history[-1]) / max(abs(history[-1]), 1e-300)}
