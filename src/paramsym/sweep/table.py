"""Ranking and the paper's table form.

Per variant, over the replication seeds ``S`` of the selected recipe: for each metric ``m`` of
the verdict's declared cell (ρ = 0.5, one factor), ``median_{s ∈ S} p95_s(m)`` — the median over
seeds of the within-seed 95th percentile (errors) or median (motion) — and ``fits`` = the number
of seeds whose verdict fits (``k/|S|``), as in ``docs/results.md``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from .spec import METRICS, SelectSpec

__all__ = ["aggregate", "rank", "render_table", "score"]


def score(rows: Sequence[Mapping[str, Any]], select: SelectSpec) -> dict[str, Any]:
    """Medians over a point's seeds of the selection metrics, and whether every seed fits.

    A failed trial (``error``) makes the point unfit and its metrics infinite.
    """
    ok = [r for r in rows if "error" not in r]
    keys = [select.metric, *select.tiebreak]
    med = {k: (statistics.median(r[k] for r in ok) if ok and len(ok) == len(rows) else float("inf")) for k in keys}
    fits = bool(rows) and len(ok) == len(rows) and all(r["fits"] for r in ok)
    return {"fits_all": fits, **med}


def rank(points: Sequence[tuple[dict[str, Any], dict[str, Any]]], select: SelectSpec) -> list[int]:
    """Indices of ``points`` (``(point, score)`` pairs) best first (see :class:`SelectSpec`)."""
    sign = -1.0 if select.mode == "max" else 1.0

    def key(i: int) -> tuple:
        sc = points[i][1]
        primary = sc[select.metric]
        primary = sign * primary if primary != float("inf") else float("inf")
        return ((not sc["fits_all"]) if select.require_fits else False, primary,
                *(sc[k] for k in select.tiebreak), i)

    return sorted(range(len(points)), key=key)


def aggregate(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Medians over seeds of each metric, ``fits`` count, the seeds and per-seed values."""
    ok = [r for r in rows if "error" not in r]
    out: dict[str, Any] = {"seeds": [r["seed"] for r in rows], "fits": sum(bool(r.get("fits")) for r in rows),
                           "n": len(rows), "failed": [r["id"] for r in rows if "error" in r]}
    out["median"] = {k: statistics.median(r[k] for r in ok) for k in METRICS if ok and all(k in r for r in ok)}
    out["per_seed"] = {k: [r.get(k) for r in rows] for k in METRICS}
    if ok:
        out["rho"], out["factors"] = ok[0].get("rho"), ok[0].get("factors")
    return out


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.3g}" if x != float("inf") else "inf"
    return str(x)


def _point(p: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in p.items()) or "(recipe)"


def render_table(table: Mapping[str, Any]) -> str:
    """``table.md``: the replication table, then each stage's selection table."""
    lines = [f"# Sweep `{table['name']}` on `{table['preset']}`", "",
             f"Replication: the selected recipe of each variant trained for {table['replicate_steps']} steps on seeds "
             f"{table['replication_seeds']}; medians over seeds of within-seed 95th percentiles (motion: medians) at "
             f"the declared cell (ρ = {_fmt(table.get('rho'))}, {_fmt(table.get('factors'))} factor); "
             "fits = seeds whose verdict fits.", "",
             "| variant | recipe | output err p95 | composition err p95 | inverse err p95 | transport err p95 | "
             "motion (s_θ) | ‖Δθ‖/‖θ‖ | fits |", "|---|---|---|---|---|---|---|---|---|"]
    for v, r in table["variants"].items():
        m = r["median"]
        comp = m.get("composition_err_p95")
        per = ", ".join(_fmt(x) for x in r["per_seed"]["composition_err_p95"])
        lines.append(f"| {v} | {_point(r['point'])} | {_fmt(m.get('output_err_p95'))} | "
                     f"{_fmt(comp)} ({per}) | {_fmt(m.get('inverse_err_p95'))} | {_fmt(m.get('transport_err_p95'))} | "
                     f"{_fmt(m.get('motion_median'))} | {_fmt(m.get('motion_rel_median'))} | {r['fits']}/{r['n']} |")
    sel = table["select"]
    for stage in ("candidates", "continue"):
        rows = table["stages"].get(stage)
        if not rows:
            continue
        lines += ["", f"## Selection: {stage} ({rows[0]['steps']} steps, seeds {table['validation_seeds']}; "
                      f"{sel['metric']} ({sel['mode']}), median over seeds)", "",
                  f"| variant | point | {sel['metric']} | fits on every seed | rank |", "|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['variant']} | {_point(r['point'])} | {_fmt(r['score'][sel['metric']])} | "
                         f"{'yes' if r['score']['fits_all'] else 'no'} | {r['rank']} |")
    lines += ["", "Trial directories: `trials/<id>/` (metrics.json, report.md); ids in table.json.", ""]
    return "\n".join(lines)
