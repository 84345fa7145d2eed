"""The composition error of a group action and its summaries — the one definition ([Discovery] §6.2, §6.3).

For group elements ``g1, g2`` and a point θ, with ``s`` the storage map applied after every
action (the identity for an action evaluated in float64; float32 rounding for weights
installed in a checkpoint, [Discovery] §6.3: "Each update is rounded to float32 before the next
action"):

    θ1 = s(a(g1, θ)),   θ21 = s(a(g2, θ1)),   θd = s(a(g2 g1, θ))
    e = ‖θd − θ21‖ / (‖θ1 − θ‖ + ‖θ21 − θ1‖)

— "the discrepancy between successive transformations and their group product divided by the
summed displacements of the two steps" (§6.2). A zero denominator gives 0 when the numerator is 0
too and ``inf`` otherwise. Per seed the errors are summarised by :func:`p95` (the papers'
within-seed statistic) or :func:`median`; across seeds by the median (:mod:`paramsym.paper_stats`).

:func:`composition_errors` is used by the verdict (:mod:`paramsym.verdict`, Table 1) and by the
whole-model protocol of a transformer FFN unit (:func:`paramsym.actions.ffn_unit.evaluate_action`,
Fig. 3(b), ``paramsym compensate --learned``) alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

__all__ = ["composition_errors", "median", "p95", "safe_ratio"]


def safe_ratio(num: Tensor, den: Tensor) -> Tensor:
    """``num / den`` elementwise; 0 where both are 0, ``inf`` where only ``den`` is."""
    out = num / den
    out = torch.where((num == 0) & (den == 0), torch.zeros_like(out), out)
    return torch.where((num != 0) & (den == 0), torch.full_like(out, float("inf")), out)


def p95(x: Tensor) -> float:
    """The 95th percentile of ``x`` (linear interpolation between order statistics, float64)."""
    return float(torch.quantile(torch.as_tensor(x).double().reshape(-1), 0.95))


def median(x: Tensor) -> float:
    """The median of ``x`` (linear interpolation: the mean of the two middle values for even length)."""
    return float(torch.quantile(torch.as_tensor(x).double().reshape(-1), 0.5))


def composition_errors(action: Any, theta: Tensor, g1: Tensor, g2: Tensor,
                       store: Callable[[Tensor], Tensor] | None = None) -> Tensor:
    """Relative two-step composition error per sample (module docstring).

    Args:
        action: a group action with ``act_many(g, theta)`` (batched over the leading dimension).
        theta: ``(n, p)`` points (one per sample).
        g1, g2: ``(n, s, s)`` group elements.
        store: the storage map applied after every action (default: none).

    Returns:
        ``(n,)`` errors ``e``.
    """
    s = store if store is not None else (lambda x: x)
    a1 = s(action.act_many(g1, theta))
    a21 = s(action.act_many(g2, a1))
    direct = s(action.act_many(g2 @ g1, theta))
    return safe_ratio((direct - a21).norm(dim=-1), (a1 - theta).norm(dim=-1) + (a21 - a1).norm(dim=-1))
