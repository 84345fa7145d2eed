"""Parameter-space flows along the lifted directions, and their function-space predictions.

Two flows ([Attribution] §3 and App. C), forward Euler with step ``dt``:

* **resolved** — recompute ``J``, the target and the direction at every step:
  ``θ_{k+1} = θ_k + s·dt·z(θ_k)``;
* **fixed** — compute ``z_0`` once: ``θ_t = θ_0 + s·t·z_0``;

with ``z = c*`` (direction ``"+c"``, target ``η_ξ``) or ``z = b* = J⁺(−δ)`` (direction ``"-b"``,
the paper's label for the descent on the defect), sign ``s = ±1``, and optionally the unit
direction ``z/‖z‖`` (the Hamiltonian walk).

If the lift were exact (``J z = η`` or ``J z = −δ`` for all ``θ``), the function would follow,
with function-space time ``τ = Σ_k s·dt/‖z_k‖`` for unit steps and ``τ = s·t`` otherwise,

    along +c:  f_τ = Π(exp τξ) f_0          (a rigid rotation for SO(2): f_τ = f_0 ∘ R_τ),
    along −b:  f_τ = P_E f_0 + e^{−τ} δ_0.

A :class:`FlowTrace` records ``‖δ‖`` against its prediction, the lifting residual of every
solve, and parameter snapshots for deviation profiles and pictures. Angular deviation profiles
``d_t(φ) = f_t(r cos φ, r sin φ) − mean_φ f_t`` and their predictions come from
:func:`angular_profile` and :func:`predicted_function`; :func:`predicted_profile` predicts a
sampled profile exactly (``d_0(φ + τ)`` along +c, ``e^{−τ} d_0`` along −b) and
:func:`phase_shift` fits ``s`` in ``d_t(φ) ≈ d_0(φ + s)`` (the +c prediction is ``s = τ``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..errors import ShapeError
from .problem import SymmetryProblem
from .symmetry import InputFunction, equivariance_error_x, reynolds_x, transform_x

#: flow modes: recompute the direction at every step, or keep the first one
FLOW_MODES = ("resolved", "fixed")
#: lifted directions: ``+c`` (along ``c* = J⁺η``) and ``-b`` (along ``b* = J⁺(−δ)``)
DIRECTIONS = ("+c", "-b")


@dataclass
class LiftRecord:
    """One lift at the start of an experiment, as a summary row.

    Attributes:
        name: ``"c*"`` or ``"b*"`` (possibly with the truncation, e.g. ``"c* (τ=1e-08)"``).
        target: ``"eta"`` or ``"-delta"``.
        residual: relative lifting residual ``‖J z − target‖ / ‖target‖``.
        rank: resolved rank of ``J`` at the truncation used (``None`` when not computed).
        target_norm, direction_norm: ``‖target‖`` and ``‖z‖``.
        liftable: the residual is below the lifting tolerance.
        verdict: one line in words.
    """

    name: str
    target: str
    residual: float
    rank: int | None
    target_norm: float
    direction_norm: float
    liftable: bool
    verdict: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FlowRecord:
    """Start, end and predicted ‖δ‖ of one flow, and its first and last lifting residuals."""

    flow: str
    direction: str
    delta_start: float
    delta_end: float
    delta_predicted: float | None
    residual_start: float | None
    residual_end: float | None
    t_end: float | None = None
    steps: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Flat dict: the fields with ``extra`` merged in."""
        d = asdict(self)
        extra = d.pop("extra")
        d.update(extra)
        return d



@dataclass
class FlowTrace:
    """Everything measured along one flow (lists indexed by step ``k = 0..steps``)."""

    mode: str
    direction: str
    dt: float
    sign: int
    normalize: bool
    ts: list[float] = field(default_factory=list)
    taus: list[float] = field(default_factory=list)
    delta_norms: list[float] = field(default_factory=list)
    delta_predicted: list[float] = field(default_factory=list)
    deviation: list[float] = field(default_factory=list)
    residuals: list[float] = field(default_factory=list)
    ranks: list[int | None] = field(default_factory=list)
    direction_norms: list[float] = field(default_factory=list)
    snapshots: dict[float, Tensor] = field(default_factory=dict)
    snapshot_taus: dict[float, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def steps(self) -> int:
        return len(self.ts) - 1

    def record(self) -> FlowRecord:
        """Summary row for ``--json`` (start, end, predicted ‖δ‖; first and last residual)."""
        res = [r for r in self.residuals if r is not None and not math.isnan(r)]
        extra = {
            "tau_end": self.taus[-1],
            "deviation_end": self.deviation[-1],
            "deviation_end_relative": self.deviation[-1] / max(self.extra.get("f0_norm", 1.0), 1e-300),
            "delta_error_end_relative": abs(self.delta_norms[-1] - self.delta_predicted[-1])
            / max(abs(self.delta_predicted[-1]), 1e-300),
            "rank_start": self.ranks[0],
            "direction_norm_start": self.direction_norms[0],
            "residual_max": max(res) if res else None,
            **{k: v for k, v in self.extra.items() if isinstance(v, (int, float, str, bool)) or v is None},
        }
        return FlowRecord(
            flow=self.mode,
            direction=self.direction,
            delta_start=self.delta_norms[0],
            delta_end=self.delta_norms[-1],
            delta_predicted=self.delta_predicted[-1],
            residual_start=res[0] if res else None,
            residual_end=res[-1] if res else None,
            t_end=self.ts[-1],
            steps=self.steps,
            extra=extra,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode, "direction": self.direction, "dt": self.dt, "sign": self.sign,
            "normalize": self.normalize, "t": self.ts, "tau": self.taus,
            "delta_norm": self.delta_norms, "delta_predicted": self.delta_predicted,
            "deviation": self.deviation, "residual": self.residuals, "rank": self.ranks,
            "direction_norm": self.direction_norms,
        }


def predicted_function(problem: SymmetryProblem, theta0: Tensor, direction: str, tau: float) -> InputFunction:
    """Exact function-space prediction at function-space time ``tau`` (module docstring)."""
    f0 = problem.function_of_x(theta0)
    if direction == "+c":
        return transform_x(f0, problem.group, tau, problem.xi)
    if direction == "-b":
        decay = math.exp(-tau)

        def h(x: Tensor) -> Tensor:
            with torch.no_grad():
                pe = reynolds_x(f0, x, problem.group, warn=False)
                return pe + decay * (f0(x) - pe)

        return h
    raise ValueError(f"direction must be one of {DIRECTIONS}, received {direction!r}.")


def run_flow(
    problem: SymmetryProblem,
    direction: str = "+c",
    mode: str = "resolved",
    *,
    t_end: float = 1.0,
    dt: float = 0.005,
    steps: int | None = None,
    sign: int = 1,
    normalize: bool = False,
    theta0: Tensor | None = None,
    snapshot_at: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
    progress: bool = True,
    callback: Callable[[int, Tensor, FlowTrace], None] | None = None,
    predict_every: int = 1,
) -> FlowTrace:
    """Integrate one flow and measure it (see the module docstring).

    Args:
        problem: the symmetry problem (function, probes, group, solver settings).
        direction: ``"+c"`` or ``"-b"``.
        mode: ``"resolved"`` or ``"fixed"``.
        t_end, dt: integrate ``steps = round(t_end/dt)`` Euler steps (or pass ``steps``).
        sign: ``+1`` forward, ``−1`` backward.
        normalize: use unit directions ``z/‖z‖`` (step length ``dt`` in parameter space).
        theta0: starting flat parameters (default: the problem's).
        snapshot_at: times ``t`` at which to keep ``θ_t`` (the last step is always kept).
        progress: show a tqdm bar.
        callback: ``callback(k, θ_k, trace)`` after each measurement (e.g. checkpointing).
        predict_every: evaluate the +c prediction (one Reynolds average of the rotated
            function) every this many steps and at the last step; NaN in between.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, received {direction!r}.")
    if mode not in FLOW_MODES:
        raise ValueError(f"mode must be one of {FLOW_MODES}, received {mode!r}.")
    if sign not in (1, -1):
        raise ValueError(f"sign must be +1 or -1, received {sign!r}.")
    n_steps = int(round(t_end / dt)) if steps is None else int(steps)
    if predict_every < 1:
        raise ValueError(f"predict_every must be ≥ 1, received {predict_every}.")
    key = "c" if direction == "+c" else "b"
    theta = (problem.theta0 if theta0 is None else theta0).detach().clone().to(torch.float64)
    th0 = theta.clone()
    trace = FlowTrace(mode=mode, direction=direction, dt=dt, sign=sign, normalize=normalize)
    f0_vals = problem.values(th0)
    trace.extra["f0_norm"] = float(f0_vals.norm())
    if direction == "-b":
        f0x = problem.function_of_x(th0)
        with torch.no_grad():
            P0 = reynolds_x(f0x, problem.probes, problem.group, warn=False)
            PP0 = reynolds_x(lambda z: reynolds_x(f0x, z, problem.group, warn=False), problem.probes,
                             problem.group, warn=False, chunk=4)
    delta0 = None
    z_fixed = None
    tau = 0.0
    want = {round(float(s) / dt) for s in snapshot_at}

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_steps, desc=f"{mode} {direction}", leave=False)
    for k in range(n_steps + 1):
        solve = k < n_steps and (mode == "resolved" or k == 0)
        if solve:
            att = problem.lifts(theta, which=(key,), warn=(k == 0))
            lr = att.c if key == "c" else att.b
            z = lr.direction
            delta = att.delta
            trace.residuals.append(lr.residual)
            trace.ranks.append(lr.rank)
            trace.direction_norms.append(float(z.norm()))
            if mode == "fixed":
                z_fixed = z
        else:
            delta = problem.delta(theta, warn=False)
            z = z_fixed
            if k < n_steps:
                trace.residuals.append(float("nan"))
                trace.ranks.append(None)
                trace.direction_norms.append(float(z.norm()))
        if delta0 is None:
            delta0 = delta
        # measurements at time t_k (the +c prediction costs a Reynolds average: every
        # `predict_every` steps and at the end)
        with torch.no_grad():
            cur_vals = problem.values(theta)
            if direction == "+c" and k % predict_every and k != n_steps:
                pred_vals = pred_delta = None
            elif direction == "+c":
                pred = predicted_function(problem, th0, direction, tau)
                pred_vals = pred(problem.probes)
                pred_delta = pred_vals - reynolds_x(pred, problem.probes, problem.group, warn=False)
            else:  # affine in e^{−τ}: combine the precomputed P_E f_0 and P_E P_E f_0
                decay = math.exp(-tau)
                pred_vals = P0 + decay * (f0_vals - P0)
                pred_delta = pred_vals - (PP0 + decay * (P0 - PP0))
        trace.ts.append(k * dt)
        trace.taus.append(tau)
        trace.delta_norms.append(float(delta.norm()))
        if pred_vals is None:
            trace.delta_predicted.append(float("nan"))
            trace.deviation.append(float("nan"))
        else:
            trace.delta_predicted.append(float(pred_delta.norm()))
            trace.deviation.append(float((cur_vals - pred_vals).norm()))
        if k in want or k == n_steps:
            trace.snapshots[k * dt] = theta.clone()
            trace.snapshot_taus[k * dt] = tau
        if callback is not None:
            callback(k, theta, trace)
        if k == n_steps:
            break
        zn = float(z.norm())
        scale = (1.0 / zn if zn > 0 else 0.0) if normalize else 1.0
        theta = theta + sign * dt * scale * z
        tau += sign * dt * scale
        if bar is not None:
            bar.update(1)
            bar.set_postfix(delta=f"{trace.delta_norms[-1]:.4g}")
    if bar is not None:
        bar.close()
    fx0 = problem.function_of_x(th0)
    fx1 = problem.function_of_x(theta)
    with torch.no_grad():
        trace.extra["equivariance_error_start"] = equivariance_error_x(fx0, problem.probes, problem.group)
        trace.extra["equivariance_error_end"] = equivariance_error_x(fx1, problem.probes, problem.group)
    return trace


def angular_profile(
    g: InputFunction,
    radius: float,
    *,
    n_angles: int = 360,
    input_dim: int = 2,
    plane: Sequence[int] = (0, 1),
    fill: Sequence[float] | Tensor | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Angular deviation profile ``d(φ) = g(r cos φ, r sin φ) − mean_φ g`` on one orbit.

    Args:
        g: function of the inputs ``[N, dimX] -> [N, dimY]``.
        radius: orbit radius ``r``.
        n_angles: equispaced angles ``φ_j = 2πj/n`` (360 in the seed).
        input_dim, plane: the input dimension and the rotated coordinates.
        fill: values of the other input coordinates (e.g. α), default 0.

    Returns:
        ``(φ [n], d [n, dimY])``.
    """
    phi = 2 * math.pi * torch.arange(n_angles, dtype=torch.float64) / n_angles
    x = torch.zeros(n_angles, input_dim, dtype=torch.float64)
    if fill is not None:
        x[:] = torch.as_tensor(fill, dtype=torch.float64)
    x[:, plane[0]] = radius * torch.cos(phi)
    x[:, plane[1]] = radius * torch.sin(phi)
    with torch.no_grad():
        y = g(x)
    d = y - y.mean(0, keepdim=True)
    return phi.numpy(), d.numpy()


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


def rms(d: np.ndarray) -> float:
    """Root mean square of a profile."""
    return float(np.sqrt(np.mean(np.asarray(d) ** 2)))


def flow_record(trace: FlowTrace, **extra: Any) -> FlowRecord:
    """:meth:`FlowTrace.record` with extra fields merged into the record."""
    rec = trace.record()
    rec.extra.update(extra)
    return rec
