"""Subnetwork vs whole-network discovery on the ReLU (2,8,8,1) host (Section 6.3, Figure 2(c)).

Trains (or reuses) two learned actions: ``relu2881-unit`` (the 10 weights of one hidden unit,
preserving its boundary output) and ``relu2881-all`` (all 88 weights, preserving the full
output). Both are then evaluated on *identical* host parameter points and inputs: for host points
``Θ ~ Θ_base + 0.2 N(0, I)`` (all 88 weights), the action moves its block inside Θ and we record
the raw block displacement ``‖Δθ‖`` and the full-network output error
``‖F_host(Θ') − F_host(Θ)‖ / s_F`` (``s_F`` of the host over the same μ). Sweeping the coefficient
radius over the paper's test grid ρ ∈ {0.1, 0.3, 0.5, 0.8, 1.2} (Appendix D.2) gives
error-vs-displacement curves per seed (median displacement, 95th-percentile error), aggregated by
their medians across seeds (five in the reproduction, as Fig. 2(c)); the ratio of the two curves
at matched displacement is interpolated in log–log coordinates.
Source: 5.8× smaller full-network error for the subnetwork at similar displacement.

Diagnostic: the unit's only exact symmetry of its boundary output ``u ⊗ relu(v X)`` (generic X,
two inputs) is positive rescaling, whose field at ``(v, u)`` is ``(v, −u)``; :func:`rescaling_alignment`
reports how closely the learned field follows it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.func import vmap

from .... import plots
from ....actions.base import float64_copy
from ....discovery.config import DiscoverOverrides
from ....discovery.resolve import (
    QUICK_DISCOVER_STEPS,
    quick_discover_overrides,
    resolve_discover_config,
)
from ....errors import ConfigError
from ....runs.rundir import RunDir
from ....verdict import median, output_scale, p95

KIND = "discovery-lifting"
PAPER_RATIO = 5.8
#: ``LiftingConfig.unit_beta`` value of the equal-field-norm rule (:func:`equal_field_beta`)
EQUAL_FIELD = "equal-field"


@dataclass
class LiftingConfig:
    """Configuration of the subnetwork-lifting comparison (kind ``discovery-lifting``)."""

    seeds: list[int] = field(default_factory=lambda: [0])
    steps: int | None = None
    #: the paper's test grid of coefficient radii (Appendix D.2)
    rhos: list[float] = field(default_factory=lambda: [0.1, 0.3, 0.5, 0.8, 1.2])
    samples: int = 512
    host_std: float = 0.2
    eval_seed: int = 777
    #: typed overrides of both sub-runs' DiscoverConfig (after the recipe, seed and steps)
    overrides: DiscoverOverrides = field(default_factory=DiscoverOverrides)
    #: the unit action's field magnitude β (units of its s_θ). None: the recipe's 0.2, as the all-weights
    #: action's, so the unit moves about √(10/88) as far per ρ. A number: that β. ``"equal-field"``
    #: (:data:`EQUAL_FIELD`, the rule of the reproduction's protocol v2): the same field norm in raw
    #: parameter units, ``β_unit = β_all · s_θ(all) / s_θ(unit)``, from both problems' fixed scales
    #: before any training (:func:`equal_field_beta`), so both actions move alike at each ρ.
    unit_beta: float | str | None = None

    def validate(self) -> None:
        """Raises ConfigError: ``overrides`` not typed, or ``unit_beta`` neither a finite number > 0 nor
        ``"equal-field"`` (checked, not converted: the serializer types the value once)."""
        DiscoverOverrides.require(self.overrides, "overrides")
        b = self.unit_beta
        if b is not None and b != EQUAL_FIELD and (isinstance(b, bool) or not isinstance(b, (int, float))
                                                    or not math.isfinite(b) or b <= 0):
            raise ConfigError(f"unit_beta (--unit-beta) must be a finite number > 0 or {EQUAL_FIELD!r} (the rule); "
                              f"received {b!r}.")

    @classmethod
    def quick(cls) -> LiftingConfig:
        """A small, fast version (tests, smoke runs): 20 steps, three radii, 32 host samples."""
        return cls(steps=QUICK_DISCOVER_STEPS, rhos=[0.1, 0.5, 1.2], samples=32, overrides=quick_discover_overrides())

    @classmethod
    def paper(cls) -> LiftingConfig:
        """The paper's run of Fig. 2(c) (``paramsym reproduce lifting``; ``paramsym experiment lifting --paper``),
        protocol v3 (fixed 2026-12-04 before its run, issue 33): the unit's β by protocol v2's
        equal-field-norm rule (:data:`EQUAL_FIELD`), so both actions move alike at each ρ, judged on the
        geometric mean of the matched ratios (:mod:`paramsym.paper_stats`), on five fresh training seeds
        10–14 (seeds 0–4 served protocol v1, equal β, which failed at 3.6×, and the β development;
        5–9 protocol v2, judged on the median of the matched ratios)."""
        return cls(seeds=[10, 11, 12, 13, 14], unit_beta=EQUAL_FIELD)


def host_curve(action, problem, rhos, samples: int, host_std: float, seed: int, s_F: float) -> dict[str, list[float]]:
    """Displacement medians and full-network error p95 of one action, per ρ (one factor)."""
    act = float64_copy(action)
    host = problem.host.to(torch.float64)
    idx = problem.host_index
    gen = torch.Generator().manual_seed(seed)
    base = host.theta0
    disp, err = [], []
    with torch.no_grad():
        for rho in rhos:
            Theta = base + host_std * torch.randn(samples, base.numel(), generator=gen, dtype=torch.float64)
            g = act.group.matrices(act.group.sample(samples, rho, exact_factors=1, generator=gen)).double()
            block = Theta[:, idx]
            moved = act.act_many(g, block)
            Theta2 = Theta.clone()
            Theta2[:, idx] = moved
            e = (vmap(host)(Theta2) - vmap(host)(Theta)).norm(dim=-1) / s_F
            disp.append(median((moved - block).norm(dim=-1)))
            err.append(p95(e))
    return {"rho": list(map(float, rhos)), "displacement_median": disp, "full_error_p95": err}


def rescaling_alignment(action, problem, host_std: float, seed: int, n: int = 256) -> dict[str, float]:
    """How closely the unit's learned field follows positive rescaling (``relu2881-unit`` only).

    At block points ``θ = (v, u)`` (the unit's incoming row, then its outgoing column; the host's
    values plus ``host_std · N(0, I)``), the rescaling field is ``t(θ) = (v, −u)``; with the learned
    field ``w(θ)`` (one generator), ``cos = |⟨w, t⟩| / (‖w‖ ‖t‖)``.

    Returns:
        ``{"cos_median", "sin_p95"}``: the median cosine and the 95th percentile of
        ``sin = ‖w − (⟨w, t̂⟩) t̂‖ / ‖w‖`` (computed from the projection, not as ``√(1 − cos²)``).
    """
    act = float64_copy(action)
    n_in = problem.target.block.entries[0].size  # the incoming row comes first in the block
    gen = torch.Generator().manual_seed(seed)
    base = problem.host.theta0.to(torch.float64)[problem.host_index]
    theta = base + host_std * torch.randn(n, base.numel(), generator=gen, dtype=torch.float64)
    with torch.no_grad():
        w = act.fields_all(theta)[:, 0, :]
    t = torch.cat([theta[:, :n_in], -theta[:, n_in:]], 1)
    t_hat = t / t.norm(dim=-1, keepdim=True)
    along = (w * t_hat).sum(-1, keepdim=True)
    cos = along.abs().squeeze(-1) / w.norm(dim=-1)
    sin = (w - along * t_hat).norm(dim=-1) / w.norm(dim=-1)
    return {"cos_median": median(cos), "sin_p95": p95(sin)}


def host_scale(problem, host_std: float, seed: int, n: int = 512) -> float:
    """``s_F`` of the host network over ``Θ_0 + host_std · N(0, I)`` (:func:`paramsym.verdict.output_scale`)."""
    host = problem.host.to(torch.float64)
    gen = torch.Generator().manual_seed(seed)
    Theta = host.theta0 + host_std * torch.randn(n, host.p, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        F = vmap(host)(Theta)
    return output_scale(F, what=f"the host network {host.name!r}")


def matched_ratio(unit: dict, full: dict) -> dict[str, float | list[float]]:
    """Error ratio (all / unit) at matched displacement, log–log interpolation on the overlap."""
    xu, yu = np.log(unit["displacement_median"]), np.log(np.maximum(unit["full_error_p95"], 1e-300))
    xa, ya = np.log(full["displacement_median"]), np.log(np.maximum(full["full_error_p95"], 1e-300))
    ou, oa = np.argsort(xu), np.argsort(xa)
    lo, hi = max(xu.min(), xa.min()), min(xu.max(), xa.max())
    if not lo < hi:
        return {"overlap": False}
    grid = np.linspace(lo, hi, 9)
    ratio = np.exp(np.interp(grid, xa[oa], ya[oa]) - np.interp(grid, xu[ou], yu[ou]))
    return {"overlap": True, "displacements": np.exp(grid).tolist(), "ratios": ratio.tolist(),
            "ratio_median": float(np.median(ratio)), "ratio_geometric_mean": float(np.exp(np.mean(np.log(ratio))))}


PRESETS = ("relu2881-unit", "relu2881-all")


def equal_field_beta(unit_cfg, all_cfg) -> float:
    """The unit's β giving its field the all-weights field's norm in raw parameter units.

    A run's field magnitude is ``β s_θ`` (``s_θ = sqrt(E_μ‖θ‖²)``, the problem's fixed scale,
    :func:`paramsym.discovery.problems.problem_scales`), so equal raw field norms need

        β_unit = β_all · s_θ(all) / s_θ(unit),

    computed from both resolved configurations before any training (rounded to 6 significant
    digits, so config.json holds the exact value used).
    """
    from ....discovery.problems import problem_scales, resolve_problem

    s_unit = problem_scales(resolve_problem(unit_cfg), unit_cfg).s_theta
    s_all = problem_scales(resolve_problem(all_cfg), all_cfg).s_theta
    return float(f"{all_cfg.objective.beta * s_all / s_unit:.6g}")


def subrun_configs(cfg: LiftingConfig) -> dict[str, object]:
    """The resolved discovery configuration of every sub-run ``<preset>-seed<k>`` (recipe included)."""
    out = {}
    for seed in cfg.seeds:
        all_cfg = resolve_discover_config("relu2881-all", None, seed, cfg.steps, overrides=cfg.overrides)
        unit_cfg = resolve_discover_config("relu2881-unit", None, seed, cfg.steps, overrides=cfg.overrides)
        if cfg.unit_beta is not None:
            beta = equal_field_beta(unit_cfg, all_cfg) if cfg.unit_beta == EQUAL_FIELD else float(cfg.unit_beta)
            unit_cfg = resolve_discover_config("relu2881-unit", None, seed, cfg.steps,
                                               overrides=cfg.overrides | [f"objective.beta={beta!r}"])
        out[f"relu2881-unit-seed{seed}"], out[f"relu2881-all-seed{seed}"] = unit_cfg, all_cfg
    return {name: out[name] for name in (f"{p}-seed{s}" for p in PRESETS for s in cfg.seeds)}


def run(cfg: LiftingConfig, out: RunDir, progress: bool = True, reuse: str = "refuse", *, resume: bool = False,
        command: str | None = None) -> dict:
    """:func:`compute` through the run verb (:func:`paramsym.experiments.discovery.run_experiment`)."""
    from .. import run_experiment

    return run_experiment(KIND, cfg, out, progress=progress, resume=resume, command=command, reuse=reuse)


def compute(cfg: LiftingConfig, out: RunDir, progress: bool = True, reuse: str = "refuse") -> dict:
    """Train (or reuse, when their provenance matches) both actions per seed; compare them on the host.

    ``reuse``: what to do with a stale sub-run (:mod:`paramsym.runs.reuse`).
    """
    from ....discovery.run import load_trained, run_discovery
    from ....runs.reuse import plan_subrun, run_subrun, write_subruns

    cfg.validate()
    configs = subrun_configs(cfg)
    plans = {name: plan_subrun(out.path / name, dcfg, reuse) for name, dcfg in configs.items()}
    results: dict[str, list] = {p: [] for p in PRESETS}
    infos: dict[str, dict] = {}
    s_F = None
    for preset in results:
        for seed in cfg.seeds:
            name = f"{preset}-seed{seed}"
            rd, dcfg = RunDir(out.path / name), configs[name]
            _, infos[name] = run_subrun(rd.path, dcfg, lambda resume, rd=rd, dcfg=dcfg: run_discovery(
                dcfg, rd, resume=resume, progress=progress), reuse, plans[name])
            action, problem, _, _ = load_trained(rd)
            if s_F is None:
                s_F = host_scale(problem, cfg.host_std, cfg.eval_seed)
            curve = host_curve(action, problem, cfg.rhos, cfg.samples, cfg.host_std, cfg.eval_seed, s_F)
            if preset == "relu2881-unit":
                curve["rescaling"] = rescaling_alignment(action, problem, cfg.host_std, cfg.eval_seed)
            results[preset].append({"seed": seed, **curve})
    write_subruns(out.path, infos)
    agg = {p: {k: np.median([r[k] for r in rows], axis=0).tolist() for k in ("displacement_median", "full_error_p95")}
           for p, rows in results.items()}
    comparison = matched_ratio(agg["relu2881-unit"], agg["relu2881-all"])
    # descriptive: the ratio at the same ρ (the unit then moves ~√(10/88) as far), and the unit's rescaling
    same_rho = [a / u for a, u in zip(agg["relu2881-all"]["full_error_p95"], agg["relu2881-unit"]["full_error_p95"])]
    rescaling = {k: median(torch.tensor([r["rescaling"][k] for r in results["relu2881-unit"]])) for k in ("cos_median", "sin_p95")}
    metrics = {"kind": KIND, "host_s_F": s_F, "rhos": cfg.rhos, "per_seed": results, "median": agg,
               "matched": comparison, "same_rho_ratio": same_rho, "unit_rescaling": rescaling,
               "paper_ratio": PAPER_RATIO,
               "unit_beta": [configs[f"relu2881-unit-seed{seed}"].objective.beta for seed in cfg.seeds],
               "all_beta": [configs[f"relu2881-all-seed{seed}"].objective.beta for seed in cfg.seeds]}
    return metrics


def diagnostics_text(same_rho_ratio: list[float], rhos: list[float], rescaling: dict[str, float],
                     median: dict) -> str:
    """The sentence on the same-ρ ratios and the unit's rescaling alignment (report and docs).

    ``median``: the seed-median curves (``metrics["median"]``); they give how far the unit moves
    against the all-weights action at the same ρ (median over the radii of the displacement ratio).
    """
    moves = float(np.median(np.asarray(median["relu2881-unit"]["displacement_median"])
                            / np.asarray(median["relu2881-all"]["displacement_median"])))
    where = f"where the unit moves {moves:.2f}× as far as the all-weights action (median over the radii)"
    return (f"At the same ρ, {where}, the ratio is "
            + ", ".join(f"{x:.1f}×" for x in same_rho_ratio) + f" (ρ = {', '.join(f'{r:g}' for r in rhos)}). "
            f"The unit's learned field is positive rescaling (v, −u) to a median cosine of {rescaling['cos_median']:.6f} "
            f"(95th-percentile sine {rescaling['sin_p95']:.2g}; medians over seeds).")


def render(run: RunDir) -> str:
    m = run.read_json("metrics.json")
    agg = m["median"]
    fig = None
    plt = plots.pyplot()
    if plt is not None:
        f, ax = plt.subplots(figsize=(6, 4))
        for name, label in (("relu2881-unit", "one unit, boundary output (10 weights)"), ("relu2881-all", "all 88 weights, full output")):
            ax.loglog(agg[name]["displacement_median"], agg[name]["full_error_p95"], "o-", label=label)
        ax.set_xlabel("median raw block displacement ‖Δθ‖")
        ax.set_ylabel("full-network output error p95 (units of s_F)")
        ax.set_title("ReLU (2,8,8,1): subnetwork vs whole-network discovery")
        ax.grid(alpha=0.3)
        ax.legend()
        fig = plots.save(f, run.figures / "lifting.png")
    lines = ["# Subnetwork lifting on ReLU (2,8,8,1)", "",
             "| ρ | unit: displacement | unit: full error p95 | all: displacement | all: full error p95 |", "|---|---|---|---|---|"]
    for i, rho in enumerate(m["rhos"]):
        u, a = agg["relu2881-unit"], agg["relu2881-all"]
        lines.append(f"| {rho} | {u['displacement_median'][i]:.3g} | {u['full_error_p95'][i]:.3g} | "
                     f"{a['displacement_median'][i]:.3g} | {a['full_error_p95'][i]:.3g} |")
    mt = m["matched"]
    lines.append("")
    if mt.get("overlap"):
        lines.append(f"At matched displacement (log–log interpolation over the overlapping range "
                     f"{mt['displacements'][0]:.3g} … {mt['displacements'][-1]:.3g}), the whole-network action's full-network "
                     f"error is **{mt['ratio_median']:.1f}×** the subnetwork's (median over the range; geometric mean "
                     f"{mt['ratio_geometric_mean']:.1f}×). Paper: {m['paper_ratio']}×.")
    else:
        lines.append("The displacement ranges of the two actions do not overlap; widen `rhos`.")
    if "same_rho_ratio" in m:  # runs before these diagnostics lack them
        lines += ["", diagnostics_text(m["same_rho_ratio"], m["rhos"], m["unit_rescaling"], agg)]
    if fig:
        lines += ["", "![error vs displacement](figures/lifting.png)", ""]
    return "\n".join(lines)
