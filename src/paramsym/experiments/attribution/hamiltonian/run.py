"""Preset ``hamiltonian``: symmetry attribution in a learned Hamiltonian ([Attribution] §3.2, App. C.1).

Pipeline (:func:`run`):

1. **Train** a separable Hamiltonian ``K_θ1(p) + V_θ2(q, α)`` (leapfrog, Δt = 0.1) on Mexican-hat
   trajectories at α ∈ {±1.1, ±0.8, ±0.6, ±0.2}, 10 initial conditions each (Adam lr 1e-3,
   L1 1e-5). The trained model is cached in the run directory (``model.safetensors``; resumable
   checkpoints under ``checkpoint/``): a second run into the same directory reuses it.
2. **Analyse** the learned force ``F_θ(q; α) = −∇_q V_θ2(q, α)`` as a function of V's
   parameters on a polar grid (15 radii × 32 angles in ‖q‖ ≤ 1, N = 480) for every training and
   analysis α, rows stacked into one least-squares system; G = SO(2) rotating q (not α) and F;
   Reynolds projection by 64-point quadrature; ``c* = J⁺η``, ``b* = J⁺(−δ)``.
3. **α sweep**: per α the force error against the truth, the relative defect ‖δ_α‖/‖F_α‖, the
   finite-rotation error at 73°, the per-α lifting residuals and a held-out trajectory error.
4. **Walks**: unit-normalised direction, step 0.02 in parameter space, 5 forward and 3 backward
   steps; *resolved* (re-solved every step) and *fixed* (direction of step 0). The predicted
   function-space time is ``τ = Σ ±0.02/‖z_k‖``: along +c the potential's angular deviation
   profile shifts by ``τ`` (``d_τ(φ) = d_0(φ + τ)``), along −b it shrinks by ``e^{−τ}``.
5. **Perturbation sweep** ``θ + ε ĉ`` (and ``θ + ε b̂``), ε ∈ [−0.2, 0.2], 21 values.

The source reports no numbers for this experiment (only Figures 3 and 4 and the qualitative
claims quoted in :data:`PAPER`), so the report shows its claims beside our measurements.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ....attribution.flows import (
    FlowRecord,
    phase_shift,
    predicted_function,
    predicted_profile,
    run_flow,
)
from ....attribution.polar import PolarGrid
from ....attribution.problem import SymmetryProblem
from ....attribution.symmetry import equivariance_error_x, polar_grid, so2
from ....attribution.tables import tensor_table
from ....models.hamiltonian import (
    SeparableHamiltonian,
    force_function,
    generate_trajectories,
    mexican_hat_force,
)
from ....runs.rundir import RunDir, save_tensors
from ..records import lift_records, run_metrics
from .config import HamiltonianConfig
from .report import report_sections
from .train import train_or_load

__all__ = ["HamiltonianConfig", "PAPER", "build_problem", "force_group", "report_sections", "run", "stacked_probes"]

#: preset name (``paramsym attribute --preset hamiltonian``)
PRESET = "hamiltonian"

#: what the source says about this experiment (it gives no numbers)
PAPER: dict[str, Any] = {
    "numbers": None,
    "claims": [
        "resolved walk along c* shifts the angular deviation profile (effectively rotates the "
        "learned potential)",
        "resolved walk along b* reduces the equivariance error (the learned potential becomes "
        "'more' equivariant)",
        "fixed directions behave similarly for the first few steps, then drift accumulates",
    ],
    "source": "[Attribution] §3.2 and App. C.1 (Figures 3 and 4)",
}


# --------------------------------------------------------------------------------------------
# The analysed function, probe set and group
# --------------------------------------------------------------------------------------------


def all_alphas(cfg: HamiltonianConfig) -> list[float]:
    """Training α then analysis α (duplicates removed, order kept)."""
    out: list[float] = []
    for a in (*cfg.system.train_alphas, *cfg.system.analysis_alphas):
        if a not in out:
            out.append(float(a))
    return out


def stacked_probes(cfg: HamiltonianConfig, alphas: list[float]) -> Tensor:
    """Polar grid × α values: ``[n_α · N, 3]`` rows ``(q₁, q₂, α)``, α-major (one block per α)."""
    q = polar_grid(cfg.probe.n_radii, cfg.probe.n_angles, cfg.probe.r_max)
    return torch.cat([torch.cat([q, torch.full((q.shape[0], 1), a, dtype=q.dtype)], 1) for a in alphas])


def force_group(n_quadrature: int = 64):
    """SO(2) rotating ``q`` inside ``x = (q₁, q₂, α)`` and the force ``F`` by the same rotation."""
    return so2(input_dim=3, input_plane=(0, 1), output_dim=2, output_plane=(0, 1), n_quadrature=n_quadrature)


def build_problem(model: SeparableHamiltonian, cfg: HamiltonianConfig, alphas: list[float]) -> SymmetryProblem:
    """The stacked-α attribution problem for the learned force (float64): dense lifts (the tall
    ``J_Lᵀ J_L`` route, since rows ≥ columns), the polar-grid evaluator, and the lifts at the last
    4 parameter vectors cached (the walks start every flow from the same ``θ₀``)."""
    pot = model.potential.double()
    params = {k: v.detach() for k, v in pot.named_parameters()}
    p = cfg.probe
    grid = PolarGrid(tuple(p.r_max * k / p.n_radii for k in range(1, p.n_radii + 1)),
                     math.lcm(p.n_angles, p.n_quadrature), tuple(alphas))
    return SymmetryProblem(
        force_function(pot), params, stacked_probes(cfg, alphas), force_group(p.n_quadrature),
        rtol=p.rtol, gauge=p.gauge, grid=grid, cache_size=4,
    )


def rotation_error(g, x: Tensor, group, degrees: float) -> float:
    """``‖ρ(R)⁻¹ g(τ_R x) − g(x)‖ / ‖g(x)‖`` for the rotation by ``degrees`` (relative, L²)."""
    tau, rho = group.exp(-math.radians(degrees))  # exp(−aΩ) = R_a
    with torch.no_grad():
        y0 = g(x)
        y = g(x @ tau.to(x.dtype).T) @ torch.linalg.inv(rho).to(x.dtype).T
    n0 = float(y0.norm())
    return float((y - y0).norm()) / n0 if n0 > 0 else 0.0


class Observer:
    """Measurements of the learned potential and force at any flat ``θ`` of V."""

    def __init__(self, model: SeparableHamiltonian, problem: SymmetryProblem, cfg: HamiltonianConfig):
        self.pot = model.potential
        self.problem = problem
        self.cfg = cfg
        p = cfg.probe
        phi = 2 * math.pi * torch.arange(p.profile_angles, dtype=torch.float64) / p.profile_angles
        self.phi = phi.numpy()
        ring = torch.stack([p.profile_radius * torch.cos(phi), p.profile_radius * torch.sin(phi)], -1)
        self.ring = torch.cat(
            [torch.cat([ring, torch.full((len(phi), 1), a, dtype=torch.float64)], 1) for a in p.profile_alphas]
        )

    def potential(self, theta: Tensor, x: Tensor) -> Tensor:
        params = self.problem.unflatten(theta)
        with torch.no_grad():
            return torch.func.functional_call(self.pot, params, (x,))

    def profile(self, theta: Tensor) -> np.ndarray:
        """Angular deviation profiles of ``V_θ`` on the ring, ``[n_angles, n_profile_alphas]``."""
        v = self.potential(theta, self.ring).reshape(len(self.cfg.probe.profile_alphas), -1).T
        return (v - v.mean(0, keepdim=True)).numpy()

    def measure(self, theta: Tensor, max_error: bool = False) -> dict[str, Any]:
        """Rotation error at ``probe.rotation_deg``, the potential's profiles and, when
        ``max_error``, the max equivariance error over ``probe.n_error_angles`` angles."""
        g = self.problem.function_of_x(theta)
        x, grp = self.problem.probes, self.problem.group
        out: dict[str, Any] = {
            "rotation_error": rotation_error(g, x, grp, self.cfg.probe.rotation_deg),
            "profile": self.profile(theta),
        }
        if max_error:
            with torch.no_grad():
                out["equivariance_error_40"] = equivariance_error_x(g, x, grp, self.cfg.probe.n_error_angles)
        return out


# --------------------------------------------------------------------------------------------
# α sweep, walks, perturbation sweep
# --------------------------------------------------------------------------------------------


def alpha_sweep(model, problem, att, alphas, cfg) -> list[dict[str, Any]]:
    """Per-α diagnostics at the trained parameters (see module docstring, step 3)."""
    n = cfg.probe.n_radii * cfg.probe.n_angles
    x = problem.probes
    F = att.values
    truth = mexican_hat_force(x[:, :2], x[:, 2])
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    test = generate_trajectories(alphas, cfg.system.n_test_initial, cfg.system.num_steps, cfg.system.dt,
                                 generator=gen, q_radius=cfg.system.q_radius, p_radius=cfg.system.p_radius)
    with torch.no_grad():
        qh, _ = model.rollout(test.q[0], test.p[0], test.alpha, cfg.system.dt, test.num_steps)
    rows = []
    f0 = problem.function_of_x()
    for i, a in enumerate(alphas):
        sl = slice(i * n, (i + 1) * n)
        rs = slice(2 * i * n, 2 * (i + 1) * n)
        tr = slice(i * cfg.system.n_test_initial, (i + 1) * cfg.system.n_test_initial)
        Fa, Ta = F[sl], truth[sl]
        eta_a, d_a = att.eta[sl].reshape(-1), att.delta[sl].reshape(-1)
        rows.append({
            "alpha": a,
            "train": a in cfg.system.train_alphas,
            "force_error": float((Fa - Ta).norm() / Ta.norm()),
            "defect_relative": float(d_a.norm() / Fa.norm()),
            "rotation_error": rotation_error(f0, x[sl], problem.group, cfg.probe.rotation_deg),
            "rotation_error_truth": rotation_error(
                lambda z: mexican_hat_force(z[:, :2], z[:, 2]), x[sl], problem.group, cfg.probe.rotation_deg),
            "c_residual": float((att.c.reached[rs] - eta_a).norm() / eta_a.norm()),
            "b_residual": float((att.b.reached[rs] + d_a).norm() / d_a.norm()),
            "trajectory_error": float((qh[:, tr] - test.q[:, tr]).norm() / test.q[:, tr].norm()),
        })
    return rows


def walk(problem, observer, direction: str, mode: str, cfg, progress: bool) -> dict[str, Any]:
    """Forward and backward unit-step walks of one (direction, mode); see module docstring."""
    w = cfg.walk
    out: dict[str, Any] = {"direction": direction, "mode": mode}
    for label, sign, steps in (("forward", 1, w.forward), ("backward", -1, w.backward)):
        if steps == 0:
            continue
        meas: list[dict[str, Any]] = []
        trace = run_flow(
            problem, direction, mode, dt=w.step, steps=steps, sign=sign, normalize=True,
            snapshot_at=[k * w.step for k in range(steps + 1)], progress=progress,
            callback=lambda k, th, tr, meas=meas: meas.append(observer.measure(th)),
        )
        out[label] = {"trace": trace, "measure": meas}
    return out


def predicted_change(problem, direction: str, tau: float) -> float:
    """``‖F_pred(τ) − F_0‖`` on the probe set: how far the exact prediction has moved the
    function (``‖Π(exp τξ) F_0 − F_0‖`` along +c, ``|1 − e^{−τ}|·‖δ_0‖`` along −b)."""
    th0 = problem.theta0
    if direction == "-b":
        return abs(math.expm1(-tau)) * float(problem.lifts(th0).delta.norm())  # 1 − e^{−τ} without cancellation
    with torch.no_grad():
        pred = predicted_function(problem, th0, "+c", tau)(problem.probes)
        return float((pred - problem.values(th0)).norm())


def summarise_walk(res: dict[str, Any], problem) -> dict[str, Any]:
    """Per step (backward steps first, negative k): τ, ‖δ‖ and prediction, phase shift, errors.

    ``tracking_relative = ‖F_k − F_pred‖ / ‖F_pred − F_0‖`` is the part of the predicted motion
    that was not realised (≈ the lifting residual for a resolved walk; it grows for a fixed one).
    """
    fwd, bwd = res["forward"], res.get("backward")
    p0 = fwd["measure"][0]["profile"]
    steps = []
    parts = [] if bwd is None else [(-k, bwd["trace"], bwd["measure"], k) for k in range(len(bwd["measure"]) - 1, 0, -1)]
    parts += [(k, fwd["trace"], fwd["measure"], k) for k in range(len(fwd["measure"]))]
    for k, tr, meas, i in parts:
        prof = meas[i]["profile"]
        s, misfit = phase_shift(p0, prof)
        r0 = float(np.sqrt(np.mean(p0**2)))
        tau = tr.taus[i]
        pred_profile = predicted_profile(p0, res["direction"], tau)
        change = predicted_change(problem, res["direction"], tau) if k != 0 else 0.0
        steps.append({
            "k": k, "tau": tau, "delta": tr.delta_norms[i], "delta_predicted": tr.delta_predicted[i],
            "deviation": tr.deviation[i], "change_predicted": change,
            "tracking_relative": tr.deviation[i] / change if change > 0 else None,
            "residual": tr.residuals[i] if i < len(tr.residuals) else None,
            "direction_norm": tr.direction_norms[i] if i < len(tr.direction_norms) else None,
            "phase_shift": s, "phase_misfit": misfit,
            "phase_shift_per_alpha": [phase_shift(p0[:, j], prof[:, j])[0] for j in range(p0.shape[1])],
            "profile_rms_ratio": float(np.sqrt(np.mean(prof**2))) / r0 if r0 > 0 else float("nan"),
            "profile_rms_ratio_per_alpha": (np.sqrt(np.mean(prof**2, 0)) / np.sqrt(np.mean(p0**2, 0))).tolist(),
            "profile_error": float(np.linalg.norm(prof - pred_profile) / np.linalg.norm(p0)),
            "rotation_error": meas[i]["rotation_error"],
        })
    return {"direction": res["direction"], "mode": res["mode"], "steps": steps,
            "f0_norm": fwd["trace"].extra["f0_norm"]}


def perturbation_sweep(problem, observer, att, cfg) -> dict[str, Any]:
    """``θ₀ + ε ẑ`` for ẑ = ĉ, b̂ and ε on a uniform grid of ``cfg.sweep.n`` values in ±eps_max."""
    eps = np.linspace(-cfg.sweep.eps_max, cfg.sweep.eps_max, cfg.sweep.n)
    th0 = problem.theta0
    p0 = observer.profile(th0)
    out: dict[str, Any] = {"eps": eps.tolist()}
    for key, lr in (("c", att.c), ("b", att.b)):
        z = lr.direction
        zn = float(z.norm())
        rows = []
        for e in eps:
            th = th0 + float(e) * z / zn
            m = observer.measure(th)
            s, misfit = phase_shift(p0, m["profile"])
            rows.append({
                "eps": float(e), "delta": float(problem.delta(th, warn=False).norm()),
                "phase_shift": s, "phase_misfit": misfit,
                "profile_rms_ratio": float(np.sqrt(np.mean(m["profile"] ** 2)) / np.sqrt(np.mean(p0**2))),
                "rotation_error": m["rotation_error"],
            })
        out[key] = {"direction_norm": zn, "predicted_rate": 1.0 / zn, "rows": rows}
    return out


# --------------------------------------------------------------------------------------------
# The preset
# --------------------------------------------------------------------------------------------


def run(cfg: HamiltonianConfig, out: RunDir, *, progress: bool = True) -> dict[str, Any]:
    """Run the ``hamiltonian`` preset into ``out`` and return its metrics (the ``--json`` summary inside).

    Runs the walks of ``cfg.flows`` (``resolved``/``fixed``); ``progress`` shows tqdm bars.
    Writes ``model.safetensors`` (and ``checkpoint/``), ``walks.safetensors`` (profiles and parameter
    snapshots) and ``timing.json`` (``timing_s``: seconds of train, lift, walks, sweep and total;
    ``train_seconds``: the training loop); the run verb writes ``config.json`` (kind ``attribution``),
    ``env.json``, ``metrics.json`` (the returned metrics: no wall-clock times) and ``report.md``, whose
    rendering draws ``figures/*.png`` (:func:`.report.report_sections`).
    """
    cfg.validate()
    timing: dict[str, float] = {}
    t0 = time.perf_counter()
    model, train_info = train_or_load(cfg, out, progress=progress)
    timing["train"] = time.perf_counter() - t0
    model = model.double()
    alphas = all_alphas(cfg)
    problem = build_problem(model, cfg, alphas)
    observer = Observer(model, problem, cfg)

    t = time.perf_counter()
    att = problem.lifts()
    timing["lift"] = time.perf_counter() - t
    base = observer.measure(problem.theta0, max_error=True)
    sweep_alpha = alpha_sweep(model, problem, att, alphas, cfg)

    t = time.perf_counter()
    walks, profiles = [], {}
    for mode in cfg.flows:
        for direction in ("+c", "-b"):
            res = walk(problem, observer, direction, mode, cfg, progress)
            summ = summarise_walk(res, problem)
            walks.append({"summary": summ, "trace": res["forward"]["trace"]})
            tag = f"{mode}_{'c' if direction == '+c' else 'b'}"
            for k, st in zip([s["k"] for s in summ["steps"]], _profiles_in_order(res)):
                profiles[f"{tag}_{k:+d}"] = torch.from_numpy(np.ascontiguousarray(st))
            snaps = res["forward"]["trace"].snapshots
            profiles[f"theta_{tag}_end"] = snaps[max(snaps)]
    timing["walks"] = time.perf_counter() - t
    t = time.perf_counter()
    sweep = perturbation_sweep(problem, observer, att, cfg)
    timing["sweep"] = time.perf_counter() - t
    profiles["phi"] = torch.from_numpy(observer.phi)
    profiles["theta_0"] = problem.theta0
    save_tensors(out.file("walks.safetensors"), profiles)

    lifts = lift_records(att)
    flows = [_flow_record(w) for w in walks]
    summary = {
        "preset": PRESET, "stage": None,
        "lifts": [r.to_json() for r in lifts],
        "flows": [f.to_json() for f in flows],
        "paper": PAPER,
    }
    timing["total"] = time.perf_counter() - t0
    metrics = {
        "train": train_info,
        "problem": {
            "alphas": alphas, "n_probe_per_alpha": cfg.probe.n_radii * cfg.probe.n_angles,
            "rows": int(att.eta.numel()), "params": problem.layout.numel,
            "delta_norm": att.delta_norm, "eta_norm": float(att.eta.norm()),
            "values_norm": float(att.values.norm()),
            "rotation_error": base["rotation_error"], "equivariance_error_40": base["equivariance_error_40"],
            "sigma": att.c.sigma[: min(400, att.c.sigma.numel())].tolist(),
            "c": att.c.summary(), "b": att.b.summary(),
            "c_b_cosine": float(att.c.direction @ att.b.direction
                                / (att.c.direction.norm() * att.b.direction.norm())),
        },
        "tensor_table": tensor_table(att),
        "alpha_sweep": sweep_alpha,
        "walks": [w["summary"] for w in walks],
        "perturbation_sweep": sweep,
    }
    # wall-clock times are not results: timing.json (a resumed run's metrics.json equals an uninterrupted one's)
    out.write_json("timing.json", {"timing_s": timing, "train_seconds": train_info.pop("seconds")})
    return run_metrics(summary, metrics)


def _profiles_in_order(res: dict[str, Any]) -> list[np.ndarray]:
    bwd = res.get("backward")
    out = [] if bwd is None else [bwd["measure"][i]["profile"] for i in range(len(bwd["measure"]) - 1, 0, -1)]
    return out + [m["profile"] for m in res["forward"]["measure"]]


def _flow_record(w: dict[str, Any]) -> FlowRecord:
    """``--json`` row of one walk: forward end against its prediction, plus walk extras."""
    summ, trace = w["summary"], w["trace"]
    rec = trace.record()
    steps = summ["steps"]
    end = steps[-1]
    first = steps[0]
    rec.extra.update({
        "walk_step": trace.dt,
        "phase_shift_end": end["phase_shift"],
        "phase_shift_predicted_end": end["tau"] if summ["direction"] == "+c" else 0.0,
        "profile_rms_ratio_end": end["profile_rms_ratio"],
        "profile_rms_ratio_predicted_end": 1.0 if summ["direction"] == "+c" else math.exp(-end["tau"]),
        "profile_error_end": end["profile_error"],
        "tracking_relative_end": end["tracking_relative"],
        "rotation_error_start": next(s for s in steps if s["k"] == 0)["rotation_error"],
        "rotation_error_end": end["rotation_error"],
    })
    back = first["k"] < 0
    rec.extra.update({
        "backward_k": first["k"] if back else None,
        "backward_delta": first["delta"] if back else None,
        "backward_delta_predicted": first["delta_predicted"] if back else None,
        "backward_phase_shift": first["phase_shift"] if back else None,
        "backward_tau": first["tau"] if back else None,
    })
    return rec
