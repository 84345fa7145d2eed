"""Hybrid vs finite-constraint objectives at the same step budget (Section 6.2, Table 1).

For a preset (default ``sigmoid-scalar``) and each seed, trains the ``hybrid`` and the
``finite`` baseline objectives (optionally ``infinitesimal``) with the same architecture,
regularisers, recipe and final step budget, runs the verdict on each, and compares the
composition error at ρ = 0.5 with one factor beside the motion it was measured at. Source
numbers (scalar sigmoid): composition error 0.306% (finite) → 0.037% (hybrid), at similar
motion; the block moves a median 12%.

Writes ``<out>/<variant>-seed<k>/`` discovery runs and a comparison ``metrics.json`` /
``report.md`` in ``<out>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ....discovery.config import DiscoverOverrides
from ....discovery.resolve import (
    QUICK_DISCOVER_STEPS,
    quick_discover_overrides,
    resolve_discover_config,
)
from ....errors import ConfigError
from ....runs.rundir import RunDir, default_run_dir

KIND = "discovery-objectives"
PAPER = {"sigmoid-scalar": {"finite": 0.306e-2, "hybrid": 0.037e-2, "motion": 0.12}}
KEYS = ("composition_err_p95", "inverse_err_p95", "output_err_p95", "transport_err_p95", "motion_median", "motion_rel_median")


@dataclass
class ObjectivesConfig:
    """Configuration of the objectives comparison (kind ``discovery-objectives``)."""

    preset: str = "sigmoid-scalar"
    variants: list[str] = field(default_factory=lambda: ["hybrid", "finite"])
    seeds: list[int] = field(default_factory=lambda: [0])
    steps: int | None = None
    #: typed overrides of every sub-run's DiscoverConfig (after its recipe, seed and steps)
    overrides: DiscoverOverrides = field(default_factory=DiscoverOverrides)

    @classmethod
    def quick(cls) -> ObjectivesConfig:
        """A small, fast version (tests, smoke runs): 20 steps, a narrow network, a tiny verdict."""
        return cls(steps=QUICK_DISCOVER_STEPS, overrides=quick_discover_overrides())

    @classmethod
    def paper(cls) -> ObjectivesConfig:
        """The paper's run of Table 1 (``paramsym reproduce objectives``; ``paramsym experiment objectives
        --paper``): five seeds per objective, 1–5 (Table 1 reports 5/5 fits), at the recipes' step budgets."""
        return cls(seeds=[1, 2, 3, 4, 5])

    def validate(self) -> None:
        DiscoverOverrides.require(self.overrides, "overrides")
        bad = [v for v in self.variants if v not in ("hybrid", "infinitesimal", "finite")]
        if bad or not self.variants:
            raise ConfigError(f"variants must be among hybrid, infinitesimal, finite; received {self.variants}.")
        if not self.seeds:
            raise ConfigError("seeds must be a nonempty list.")


def subrun_configs(cfg: ObjectivesConfig) -> dict[str, object]:
    """The resolved discovery configuration of every sub-run ``<variant>-seed<k>`` (recipe included)."""
    return {f"{variant}-seed{seed}": resolve_discover_config(cfg.preset, variant, seed, cfg.steps, overrides=cfg.overrides)
            for variant in cfg.variants for seed in cfg.seeds}


def run(cfg: ObjectivesConfig, out: RunDir, progress: bool = True, reuse: str = "refuse", *, resume: bool = False,
        command: str | None = None) -> dict:
    """:func:`compute` through the run verb (:func:`paramsym.experiments.discovery.run_experiment`)."""
    from .. import run_experiment

    return run_experiment(KIND, cfg, out, progress=progress, resume=resume, command=command, reuse=reuse)


def compute(cfg: ObjectivesConfig, out: RunDir, progress: bool = True, reuse: str = "refuse") -> dict:
    """Train every (variant, seed), reusing finished sub-runs whose provenance matches; write the comparison.

    ``reuse``: what to do with a stale sub-run (:mod:`paramsym.runs.reuse`): ``"refuse"``
    (StaleRunError before anything is written), ``"rerun"`` or ``"stale"``.
    """
    from ....discovery.run import run_discovery
    from ....runs.reuse import plan_subrun, run_subrun, write_subruns

    cfg.validate()
    configs = subrun_configs(cfg)
    plans = {name: plan_subrun(out.path / name, dcfg, reuse) for name, dcfg in configs.items()}
    per: dict[str, list[dict]] = {v: [] for v in cfg.variants}
    infos: dict[str, dict] = {}
    for variant in cfg.variants:
        for seed in cfg.seeds:
            name = f"{variant}-seed{seed}"
            rd, dcfg = RunDir(out.path / name), configs[name]
            m, infos[name] = run_subrun(rd.path, dcfg, lambda resume, rd=rd, dcfg=dcfg: run_discovery(
                dcfg, rd, resume=resume, progress=progress), reuse, plans[name])
            per[variant].append({"seed": seed, "fits": m["verdict"]["fits"], **{k: m["verdict"]["declared"][k] for k in KEYS}})
    write_subruns(out.path, infos)
    summary = {v: {k: float(np.median([r[k] for r in rows])) for k in KEYS} | {"fits": int(sum(r["fits"] for r in rows))}
               for v, rows in per.items()}
    metrics = {"kind": KIND, "preset": cfg.preset, "per_seed": per, "median": summary, "paper": PAPER.get(cfg.preset, {})}
    if "hybrid" in summary and "finite" in summary:
        metrics["composition_ratio_finite_over_hybrid"] = summary["finite"]["composition_err_p95"] / max(summary["hybrid"]["composition_err_p95"], 1e-300)
        metrics["motion_ratio_finite_over_hybrid"] = summary["finite"]["motion_median"] / max(summary["hybrid"]["motion_median"], 1e-300)
    return metrics


def render(run: RunDir) -> str:
    m = run.read_json("metrics.json")
    lines = [f"# Objectives compared on `{m['preset']}` (ρ = 0.5, one factor; medians over seeds)", "",
             "| objective | composition error p95 | inverse error p95 | output error p95 | transport error p95 | "
             "motion (s_θ) | ‖Δθ‖/‖θ‖ | fits |", "|---|---|---|---|---|---|---|---|"]
    for v, s in m["median"].items():
        lines.append(f"| {v} | {s['composition_err_p95']:.3%} | {s['inverse_err_p95']:.3%} | {s['output_err_p95']:.2e} | "
                     f"{s['transport_err_p95']:.2e} | {s['motion_median']:.3f} | {s['motion_rel_median']:.1%} | "
                     f"{s['fits']}/{len(m['per_seed'][v])} |")
    if "composition_ratio_finite_over_hybrid" in m:
        lines += ["", f"Composition error, finite / hybrid: **{m['composition_ratio_finite_over_hybrid']:.2f}×** "
                      f"(motion ratio finite / hybrid {m['motion_ratio_finite_over_hybrid']:.2f})."]
    if m.get("paper"):
        p = m["paper"]
        lines += ["", f"Paper (scalar sigmoid): composition error {p['finite']:.3%} (finite) → {p['hybrid']:.3%} (hybrid), "
                      f"ratio {p['finite'] / p['hybrid']:.1f}×; median block change {p['motion']:.0%}."]
    lines += ["", "Per-seed runs: " + ", ".join(f"[`{v}-seed{r['seed']}`]({v}-seed{r['seed']}/report.md)"
                                                for v, rows in m["per_seed"].items() for r in rows), ""]
    return "\n".join(lines)


def default_out(cfg: ObjectivesConfig) -> Path:
    return default_run_dir("objectives", cfg.preset)
