"""The report of a compensation run: ``report.md`` and two plots, from the result's numbers.

Both functions read the JSON form of the result (:meth:`CompensationResult.as_dict`, the
``metrics.json`` of a ``compensate`` run), so a report is re-rendered from the run directory
alone (``paramsym report DIR``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..plots import pyplot, save
from ..runs.rundir import RunDir

__all__ = ["report_markdown", "write_figures"]

FIGURES = ("drift_vs_motion.png", "per_unit_change.png")


def write_figures(res: Mapping[str, Any], run: RunDir) -> list[str]:
    """Write ``figures/drift_vs_motion.png`` and ``figures/per_unit_change.png`` of closed-form result
    ``res`` (its dict form) into ``run``; return the file names (none without matplotlib)."""
    plt = pyplot()
    if plt is None:
        return []
    rows = sorted(res["sweep"], key=lambda r: r["motion_median"])
    x = [100 * r["motion_median"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label in (("drift_relative", "compensated (closed form)"), ("drift_random", "random, matched motion"),
                       ("drift_uncompensated", "same update, no compensation")):
        ax.loglog(x, [max(r[key], 1e-12) for r in rows], "o-", label=label)
    ax.set_xlabel("median relative motion of the moved weights (%)")
    ax.set_ylabel("relative drift of the last hidden state on the prefix")
    ax.set_title(f"{res['model_type']} layer {res['layer']} unit {res['unit']}, {res['tokens']}-token prefix")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    save(fig, run.figures / FIGURES[0])
    fig, ax = plt.subplots(figsize=(6, 3))
    pu = np.asarray(res["per_unit"])
    ax.semilogy(np.arange(pu.size), np.maximum(pu, 1e-12), ".", ms=3)
    ax.set_xlabel(f"unit of layer {res['layer']}'s FFN")
    ax.set_ylabel("relative change of the unit's weights")
    ax.set_title(f"{res['units_changed']} of {pu.size} units changed (moving unit + {len(res['compensators'])} "
                 "compensators)")
    save(fig, run.figures / FIGURES[1])
    return list(FIGURES)


def report_markdown(res: Mapping[str, Any], *, model_name: str = "", figures: list[str] | None = None) -> str:
    """``report.md`` of closed-form result ``res`` (its dict form)."""
    n_comp = len(res["compensators"])
    sweep = "\n".join(f"| {100 * r['motion_median']:.4f} | {r['drift_relative']:.3e} | {r['drift_random']:.3e} | "
                      f"{r['drift_uncompensated']:.3e} |" for r in sorted(res["sweep"], key=lambda r: r["motion_median"]))
    figs = ", ".join(f"`figures/{name}`" for name in figures) if figures else "(matplotlib unavailable)"
    return f"""# Closed-form compensation: {model_name or res['model_type']}, layer {res['layer']}, unit {res['unit']}

One FFN unit's incoming weights and bias are translated at random; {n_comp} compensators
(chosen by pivoted QR on their features on the {res['tokens']}-token prefix) absorb the change in closed form
(Corollary 4.6). The edit is installed into the full model in {res['dtype']}.

| quantity | value |
|---|---|
| median motion of the moved weights | {100 * res['motion_median']:.4f} % |
| relative drift of the last hidden state on the prefix | {res['drift_relative']:.3e} |
| drift, random translation of the same weights (matched ‖Δθ‖) | {res['drift_random']:.3e} |
| drift, the same update without compensation | {res['drift_uncompensated']:.3e} |
| ratio random / compensated | {res['ratio_random']:.1f} |
| ratio uncompensated / compensated | {res['ratio_uncompensated']:.1f} |
| drift on other inputs (fresh prefix), compensated | {res['drift_other_inputs']:.3e} |
| boundary output preserved (float64, relative) | {res['boundary_preservation']:.2e} |
| condition number of the compensators' features | {res['condition_number']:.1f} |
| units changed | {res['units_changed']} |

The symmetry is data-dependent: on other inputs the same edit changes the output
({res['drift_other_inputs']:.2e}, against {res['drift_relative']:.2e} on the prefix).

## Drift against motion

| motion (%) | compensated | random | uncompensated |
|---|---|---|---|
{sweep}

Figures: {figs}.
"""
