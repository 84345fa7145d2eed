"""Learned discovery on a pretrained transformer's FFN subnetwork ([Discovery] §6.3; kind ``transformer-discovery``).

Protocol (the paper's, on all-MiniLM-L6-v2 instead of Pythia-1B): the preset ``minilm-ffn-unit``
(:mod:`paramsym.discovery.transformer`: one moving FFN unit j of a middle layer, k = N
compensators by pivoted QR, block = unit j's incoming weights and bias + the compensators'
outgoing weights, target = the boundary output on an N = 16-token prefix from cached FFN inputs)
is trained with the existing trainer for each objective (hybrid, finite) and judged by the
verdict. Then the learned edit is installed into the **full model in float32** and, for
``samples`` group elements ``g`` (ρ = ``rho``, one factor) at the real weights θ0:

* ``drift``: ``‖H(θ') − H(θ0)‖ / ‖H(θ0)‖``, H the last hidden state on the prefix, θ' = a(g, θ0)
  rounded to float32;
* (a) ``random``: θ0 + z with z Gaussian on the same block, ``‖z‖ = ‖θ' − θ0‖`` (matched motion);
* (b) ``uncompensated``: θ' on unit j's incoming weights and bias, the compensators left at θ0;
* ``motion``: the median over the block's entries of ``|θ'_i − θ0_i| / |θ0_i|``;
* ratios: median drift of (a) resp. (b) over the median drift of the learned edit;
* stored-weight composition error ``‖s(a(g2g1,θ0)) − s(a(g2, s(a(g1,θ0))))‖ / (‖θ1 − θ0‖ + ‖θ2 − θ1‖)``
  with ``s`` = float32 rounding (the weights as a checkpoint stores them), median and p95.

Source (Pythia-1B, ρ = 0.5): drift 129× below random, 49× below uncompensated, median change
0.069 %; composition error 0.321 % (finite) → 0.058 % (hybrid).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..config import to_dict
from ..discovery.config import DiscoverOverrides
from ..discovery.transformer import incoming_size
from ..errors import ConfigError
from ..runs import RunDir
from .configs import resolve_discover_config

KIND = "transformer-discovery"
PRESET = "minilm-ffn-unit"
PAPER = {"ratio_random": 129.0, "ratio_uncompensated": 49.0, "motion_median": 0.00069,
         "composition_finite": 0.00321, "composition_hybrid": 0.00058}


@dataclass
class TransformerDiscoveryConfig:
    """Configuration of the transformer-subnetwork protocol (kind ``transformer-discovery``)."""

    variants: list[str] = field(default_factory=lambda: ["hybrid", "finite"])
    seeds: list[int] = field(default_factory=lambda: [0])
    steps: int | None = None
    samples: int = 32  #: group elements for the whole-model drift and stored-weight composition
    #: group-element radius of the evaluation: chosen for the issue's motion target (median entry
    #: motion ≥ 0.05 % at β = 0.01); the recipe trains at 3.5, ratios fall slowly beyond it
    #: (measured 624 / 19.6 at 3.5, 480 / 14.9 at 7; docs/discovery.md)
    rho: float = 7.0
    eval_seed: int = 2024
    #: typed overrides of every sub-run's DiscoverConfig (after the recipe, seed and steps)
    overrides: DiscoverOverrides = field(default_factory=DiscoverOverrides)

    def __post_init__(self) -> None:  # "k=v" strings or a mapping (Python, an older config.json): typed once
        self.overrides = DiscoverOverrides.of(self.overrides)

    @classmethod
    def quick(cls) -> TransformerDiscoveryConfig:
        """A tiny budget (tests): 3 steps of a narrow network, 4 samples, a one-cell verdict."""
        return cls(steps=3, samples=4, overrides=DiscoverOverrides({
            "action": {"width": 16}, "train": {"batch": 4, "log_every": 1},
            "verdict": {"samples": 20, "rhos": [0.5], "factors": [1], "curve_points": 2, "curve_times": 3}}))

    def validate(self) -> None:
        bad = [v for v in self.variants if v not in ("hybrid", "infinitesimal", "finite")]
        if bad or not self.variants:
            raise ConfigError(f"variants must be among hybrid, infinitesimal, finite; received {self.variants}.")
        if not self.seeds or self.samples < 1 or not self.rho > 0:
            raise ConfigError("seeds must be nonempty, samples ≥ 1 and rho > 0.")


class _Installer:
    """Writes block values into one float32 copy of the host model in place (and back).

    ``target`` is an :class:`~paramsym.targets.FFNBoundaryTarget` (:meth:`write` / :meth:`restore`).
    """

    def __init__(self, target):
        self.target = target
        self.model = copy.deepcopy(target.model).float().eval()
        self.batch = target.batch
        self.theta0 = target.theta0.float().clone()
        self.h0 = self.hidden(self.theta0)

    @torch.no_grad()
    def hidden(self, theta: torch.Tensor) -> torch.Tensor:
        old = self.target.write(self.model, theta.float())
        try:
            out = self.model(**self.batch)
            return out.last_hidden_state.double() if hasattr(out, "last_hidden_state") else out[0].double()
        finally:
            self.target.restore(self.model, old)

    def drift(self, theta: torch.Tensor) -> float:
        return float((self.hidden(theta) - self.h0).norm() / self.h0.norm())


def whole_model_evaluation(problem, action, *, samples: int = 32, rho: float = 0.5, seed: int = 2024,
                           installer: _Installer | None = None) -> dict[str, Any]:
    """Whole-model drift vs (a) random and (b) uncompensated edits, motion, stored-weight composition.

    See the module docstring for every definition. ``action`` is evaluated in float64; the
    edited weights are rounded to float32 before they are installed or composed.
    """
    inst = installer or _Installer(problem.target)
    act = copy.deepcopy(action).double().eval()
    grp = act.group
    gen = torch.Generator().manual_seed(seed)
    n_in = incoming_size(problem.target)
    th0 = inst.theta0.double()
    with torch.no_grad():
        g = grp.matrices(grp.sample(samples, rho, exact_factors=1, generator=gen)).double()
        moved = act.act_many(g, th0.expand(samples, -1)).float().double()
        g2 = grp.matrices(grp.sample(samples, rho, exact_factors=1, generator=gen)).double()
        t1 = moved
        t2 = act.act_many(g2, t1).float().double()
        t12 = act.act_many(g2 @ g, th0.expand(samples, -1)).float().double()
    comp = ((t12 - t2).norm(dim=-1) / ((t1 - th0).norm(dim=-1) + (t2 - t1).norm(dim=-1)).clamp_min(1e-300)).numpy()
    rows = []
    for i in range(samples):
        d = moved[i] - th0
        z = torch.randn(th0.numel(), generator=gen, dtype=torch.float64)
        z = z * d.norm() / z.norm()
        unc = th0.clone()
        unc[:n_in] = moved[i, :n_in]
        rel = (d.abs() / th0.abs().clamp_min(1e-30))
        rows.append({"learned": inst.drift(moved[i]), "random": inst.drift(th0 + z), "uncompensated": inst.drift(unc),
                     "motion": float(rel.median()), "motion_norm": float(d.norm() / th0.norm()),
                     "motion_incoming": float(d[:n_in].norm() / th0[:n_in].norm())})
    med = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
    return {
        "samples": samples, "rho": rho,
        "drift_relative": med["learned"], "drift_random": med["random"], "drift_uncompensated": med["uncompensated"],
        "ratio_random": med["random"] / max(med["learned"], 1e-300),
        "ratio_uncompensated": med["uncompensated"] / max(med["learned"], 1e-300),
        "motion_median": med["motion"], "motion_norm_median": med["motion_norm"],
        "motion_incoming_median": med["motion_incoming"],
        "composition_stored_median": float(np.median(comp)), "composition_stored_p95": float(np.percentile(comp, 95)),
    }


def train_learned(problem, objective: str = "hybrid", *, out: RunDir, seed: int = 0, steps: int | None = None,
                  overrides: DiscoverOverrides | Sequence[str] = (), progress: bool = True) -> tuple[Any, dict[str, Any]]:
    """Train the learned action on an FFN boundary problem with the ``minilm-ffn-unit`` recipe.

    A finished run in ``out`` is reused; an interrupted one resumes. Returns the trained action
    (:class:`~paramsym.actions.learned.LearnedAction`, eval mode) and ``{"steps", "train_seconds",
    "cpu_seconds", "wall_seconds", "verdict"}`` (``cpu_seconds``: process time of this call).
    """
    from ..discovery.run import load_learned_action, run_discovery

    dcfg = resolve_discover_config(PRESET, objective, seed, steps, device="cpu", overrides=overrides)
    cpu0, wall0 = time.process_time(), time.time()
    m = out.read_json("metrics.json") if out.has("metrics.json") else run_discovery(
        dcfg, out, resume=out.has("config.json"), progress=progress, problem=problem)
    timing = out.read_json("timing.json") if out.has("timing.json") else {}
    declared = m["verdict"]["declared"]
    info = {"objective": objective, "steps": dcfg.train.steps, "train_seconds": timing.get("train_seconds"),
            "cpu_seconds": time.process_time() - cpu0, "wall_seconds": time.time() - wall0,
            "verdict": {k: declared.get(k) for k in ("output_err_p95", "composition_err_p95", "inverse_err_p95",
                                                      "motion_median")}}
    return load_learned_action(out, problem.target), info


def learned_edit(problem, action, *, rho: float = 0.5, generator: torch.Generator | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(θ', θ_unc)``: ``θ' = a(g, θ0)`` for one group element ``g = exp(t h)`` (one factor, ``|t| ≤ rho``)
    in float64, and the same incoming update without compensation (compensators left at θ0)."""
    act = copy.deepcopy(action).double().eval()
    grp = act.group
    th0 = problem.target.theta0.double()
    with torch.no_grad():
        g = grp.matrices(grp.sample(1, rho, exact_factors=1, generator=generator)).double()
        theta = act.act_many(g, th0[None])[0]
    unc = th0.clone()
    n_in = incoming_size(problem.target)
    unc[:n_in] = theta[:n_in]
    return theta, unc


def run(cfg: TransformerDiscoveryConfig, out: RunDir, progress: bool = True, problem=None) -> dict[str, Any]:
    """Train every (objective, seed) on ``minilm-ffn-unit`` (finished sub-runs are reused), evaluate, write the report.

    ``problem``: another FFN-unit problem (:func:`paramsym.discovery.transformer.ffn_unit_problem`,
    e.g. on your own BERT-type model) trained with the ``minilm-ffn-unit`` recipe.
    """
    from ..discovery.run import resolve_problem

    cfg.validate()
    out.write_json("config.json", {"kind": KIND, **to_dict(cfg)})
    out.write_env(cfg.seeds[0])
    installer = None if problem is None else _Installer(problem.target)
    per: dict[str, list[dict[str, Any]]] = {v: [] for v in cfg.variants}
    for variant in cfg.variants:
        for seed in cfg.seeds:
            if problem is None:
                problem = resolve_problem(resolve_discover_config(PRESET, variant, seed, cfg.steps, device="cpu",
                                                                  overrides=cfg.overrides))
                installer = _Installer(problem.target)
            action, info = train_learned(problem, variant, out=RunDir(out.path / f"{variant}-seed{seed}"), seed=seed,
                                         steps=cfg.steps, overrides=cfg.overrides, progress=progress)
            ev = whole_model_evaluation(problem, action, samples=cfg.samples, rho=cfg.rho, seed=cfg.eval_seed,
                                        installer=installer)
            per[variant].append({"seed": seed, "steps": info["steps"], "train_seconds": info["train_seconds"],
                                 "run_cpu_seconds": info["cpu_seconds"], "run_wall_seconds": info["wall_seconds"],
                                 "verdict": info["verdict"], **ev})
    summary = {v: {k: float(np.median([r[k] for r in rows])) for k in
                   ("ratio_random", "ratio_uncompensated", "motion_median", "drift_relative",
                    "composition_stored_median", "composition_stored_p95")} for v, rows in per.items()}
    metrics = {"kind": KIND, "preset": PRESET, "problem": problem.description, "problem_info": problem.info,
               "per_seed": per, "median": summary, "paper": PAPER}
    out.write_json("metrics.json", metrics)
    out.write_text("report.md", render(out))
    return metrics


def render(run: RunDir) -> str:
    """The markdown report of a ``transformer-discovery`` run."""
    m = run.read_json("metrics.json")
    lines = [f"# Learned discovery on a transformer FFN subnetwork (`{m['preset']}`)", "", m["problem"], "",
             "Learned edits installed into the full model in float32; drift = relative change of the last hidden state "
             "on the prefix; ratios against (a) a random translation of the same block with matched motion and (b) the "
             "same incoming update without compensation (medians over samples; ρ one factor).", "",
             "| objective | seed | steps | train s | ratio random | ratio uncompensated | drift | motion (median |Δθ|/|θ|) | "
             "stored composition median | p95 |", "|---|---|---|---|---|---|---|---|---|---|"]
    for v, rows in m["per_seed"].items():
        for r in rows:
            ts = r.get("train_seconds")
            lines.append(f"| {v} | {r['seed']} | {r['steps']} | {ts if ts is None else f'{ts:.0f}'} | {r['ratio_random']:.1f} | "
                         f"{r['ratio_uncompensated']:.1f} | {r['drift_relative']:.2e} | {r['motion_median']:.4%} | "
                         f"{r['composition_stored_median']:.3%} | {r['composition_stored_p95']:.3%} |")
    p = m["paper"]
    lines += ["", f"Paper (Pythia-1B): ratio random {p['ratio_random']:.0f}, uncompensated {p['ratio_uncompensated']:.0f}, "
                  f"motion {p['motion_median']:.3%}; composition {p['composition_finite']:.3%} (finite) → "
                  f"{p['composition_hybrid']:.3%} (hybrid).", ""]
    return "\n".join(lines)
