"""The learned transformer discovery (docs/discovery.md): every objective and seed of the run behind
the [Discovery] §6.3 claims, and the page's summary of those claims' rows.
"""

from __future__ import annotations

from typing import Any

from ..claims.base import Claim, Measured

__all__ = ["CLAIMS", "render_transformer_learned", "render_transformer_objectives"]

M = "[Measurement]"


def _td_comp(row: dict[str, Any], p95: bool = False) -> float | None:
    """The stored-weight composition error of a run's row (``composition_stored_*``: runs before issue 17)."""
    new, old = ("composition_error_p95", "composition_stored_p95") if p95 else ("composition_error",
                                                                              "composition_stored_median")
    return row.get(new, row.get(old))


def _td_objectives(r):
    """Every (objective, seed) of the learned-transformer run, against the issue's joint target.

    Training CPU seconds come from the run's timing (``r["timing"]``, the sub-run's
    ``train_cpu_seconds``; older runs kept ``run_cpu_seconds`` in the rows).
    """
    timing = r.get("timing") or {}

    def key(v: str, row: dict[str, Any]) -> str:  # sub-run name (runs before the multi-unit protocol: no unit)
        return f"{row['unit']}-{v}-seed{row.get('seed')}" if row.get("unit") else f"{v}-seed{row.get('seed')}"

    per = {v: [{"unit": row.get("unit"), "seed": row.get("seed"), "steps": row.get("steps"), "rho": row.get("rho", r.get("rho")),
                "beta": row.get("beta"), "ratio_random": row.get("ratio_random"),
                "ratio_uncompensated": row.get("ratio_uncompensated"), "motion_median": row.get("motion_median"),
                "composition_error": _td_comp(row), "composition_error_p95": _td_comp(row, p95=True),
                "run_cpu_seconds": row.get("run_cpu_seconds",
                                           (timing.get(key(v, row)) or {}).get("train_cpu_seconds"))}
               for row in rows] for v, rows in r["per_seed"].items()}
    h = r["median"]["hybrid"]
    f = r["median"].get("finite")
    ok = (h["ratio_random"] >= 100 and h["ratio_uncompensated"] >= 10 and h["motion_median"] >= 5e-4
          and f is not None and _td_comp(h) < _td_comp(f)
          and all((row["run_cpu_seconds"] or 0) <= 900 for rows in per.values() for row in rows))
    return Measured(f"hybrid: {h['ratio_random']:.1f}× / {h['ratio_uncompensated']:.1f}× at motion "
                    f"{100 * h['motion_median']:.3f}%", ok, {"objectives": per})


def render_transformer_learned(rows: dict[str, dict[str, Any]]) -> str:
    """The learned-transformer result of docs/discovery.md (block ``transformer-learned``) from the four paper-claim
    rows of run ``transformer``: per unit, the hybrid medians over seeds (composition: finite → hybrid), and
    whether each claim holds on every unit."""
    g = {c: rows[c] for c in ("transformer-drift-random-learned", "transformer-drift-uncompensated-learned",
                             "transformer-motion", "transformer-composition")}
    vals = {c: r["values"] for c, r in g.items()}
    comp = vals["transformer-composition"]
    r0 = g["transformer-drift-random-learned"]
    made = ", ".join(x for x in (r0.get("budget") and f"budget {r0['budget']}",
                                 r0.get("date_utc") and str(r0["date_utc"])[:10],
                                 f"code `{str(r0['code_version'])[:12]}`" if r0.get("code_version") else
                                 "no code version recorded: made before rows recorded their provenance; the command "
                                 "above reruns it") if x)
    head = ["| unit | ratio random | ratio uncompensated | motion (median entry) | stored composition finite → hybrid |",
            "|---|---|---|---|---|"]
    per = {c: v.get("per_unit") for c, v in vals.items()}
    if all(per.values()):
        units = list(per["transformer-drift-random-learned"])
        body = [f"| {u} | {per['transformer-drift-random-learned'][u]:.1f} | "
                f"{per['transformer-drift-uncompensated-learned'][u]:.1f} | {100 * per['transformer-motion'][u]:.4f} % | "
                f"{100 * per['transformer-composition'][u]['finite']:.3f} % → "
                f"{100 * per['transformer-composition'][u]['hybrid']:.3f} % |" for u in units]
    else:  # a run of the one-unit protocol
        body = [f"| — | {vals['transformer-drift-random-learned']['ratio_random']:.1f} | "
                f"{vals['transformer-drift-uncompensated-learned']['ratio_uncompensated']:.1f} | "
                f"{100 * vals['transformer-motion']['motion_median']:.4f} % | {100 * comp['finite']:.3f} % → "
                f"{100 * comp['hybrid']:.3f} % |"]
    verdict = ", ".join(f"{c.removeprefix('transformer-')} {'holds' if r.get('holds') else 'fails'}" for c, r in g.items())
    return "\n".join([*head, *body, "", f"Hybrid medians over seeds per unit (composition: finite → hybrid). On every "
                      f"unit: {verdict}. From the rows of docs/reproductions.md ({made})."])


def render_transformer_objectives(rows: dict[str, dict[str, Any]]) -> str:
    """Every objective and seed of the learned-transformer run (block ``transformer-objectives``)."""
    per = rows["transformer-learned-objectives"]["values"]["objectives"]
    out = ["| unit | variant | seed | steps | eval ρ | β | train CPU s | ratio random | ratio uncompensated | "
           "motion (median entry) | stored composition median (p95) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for v, rs in per.items():
        for x in rs:
            cs = "—" if x.get("run_cpu_seconds") is None else f"{x['run_cpu_seconds']:.0f}"
            rho = "—" if x.get("rho") is None else f"{x['rho']:g}"
            beta = "—" if x.get("beta") is None else f"{x['beta']:.3g}"
            p95 = "—" if _td_comp(x, p95=True) is None else f"{100 * _td_comp(x, p95=True):.2f} %"
            out.append(f"| {x.get('unit') or '—'} | {v} | {x['seed']} | {x['steps']} | {rho} | {beta} | {cs} | {x['ratio_random']:.1f} | "
                       f"{x['ratio_uncompensated']:.1f} | {100 * x['motion_median']:.4f} % | "
                       f"{100 * _td_comp(x):.3f} % ({p95}) |")
    return "\n".join(out)


CLAIMS: tuple[Claim, ...] = (
    Claim("transformer-learned-objectives", f"{M} docs/discovery.md", "learned transformer discovery, every "
          "objective: ratios, motion, composition, training time", "aim: the issue's joint target",
          "hybrid: ratio random ≥ 100 and uncompensated ≥ 10 at median entry motion ≥ 0.05 %, stored composition "
          "below finite's; each training ≤ 15 CPU minutes", "transformer", _td_objectives),
)
