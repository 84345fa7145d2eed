"""Evaluation of a trained action: the verdict grid, generated curves and the reference-span alignment."""

from __future__ import annotations

from typing import Any

import torch

from .. import verdict as V
from .analysis import span_alignment
from .config import DiscoverConfig
from .objectives import Scales
from .problem import DiscoveryProblem

__all__ = ["evaluate_action"]


def evaluate_action(problem: DiscoveryProblem, trainer_or_action: Any, cfg: DiscoverConfig, scales: Scales,
                    progress: bool = False) -> dict[str, Any]:
    """Verdict grid, generated curves and (if known) the reference-span alignment."""
    action = getattr(trainer_or_action, "action", trainer_or_action)
    target64 = problem.target.to(torch.float64)

    def points(n: int, gen: torch.Generator) -> torch.Tensor:
        return problem.sample(n, gen, torch.float64)

    vc = cfg.verdict
    verdict = V.evaluate(
        action, target64, points, s_F=scales.s_F, s_theta=scales.s_theta, rhos=vc.rhos, factors=vc.factors,
        samples=vc.samples, seed=vc.eval_seed, unit_outputs=problem.unit_outputs, progress=progress,
    )
    curves = V.generated_curves(
        action, target64, points, s_F=scales.s_F, points=vc.curve_points, times=vc.curve_times,
        tmax=vc.curve_tmax, seed=vc.eval_seed + 1, unit_outputs=problem.unit_outputs,
    )
    out: dict[str, Any] = {"verdict": verdict.to_dict(), "curves": curves}
    if problem.reference_span is not None:
        held_out = points(256, torch.Generator().manual_seed(vc.eval_seed + 2))
        out["reference_span"] = {"name": problem.reference_name, **span_alignment(action, problem.reference_span, held_out)}
    return out
