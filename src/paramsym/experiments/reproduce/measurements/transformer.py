"""The learned transformer discovery (docs/discovery.md): every objective and seed of the run behind
the [Discovery] §6.3 claims, and the page's summary of those claims' rows.
"""

from __future__ import annotations

from typing import Any

from ..claims.base import Claim, Measured

__all__ = ["CLAIMS", "render_transformer_learned", "render_transformer_objectives"]

M = "[Measurement]"


def _td_objectives(r):
    """Every (objective, seed) of the learned-transformer run, against the issue's joint target."""
    per = {v: [{k: row.get(k) for k in ("seed", "steps", "rho", "train_seconds", "run_cpu_seconds", "ratio_random",
                                        "ratio_uncompensated", "motion_median", "composition_stored_median",
                                        "composition_stored_p95")} for row in rows] for v, rows in r["per_seed"].items()}
    h = r["median"]["hybrid"]
    f = r["median"].get("finite")
    ok = (h["ratio_random"] >= 100 and h["ratio_uncompensated"] >= 10 and h["motion_median"] >= 5e-4
          and f is not None and h["composition_stored_median"] < f["composition_stored_median"]
          and all((row["run_cpu_seconds"] or 0) <= 900 for rows in per.values() for row in rows))
    return Measured(f"hybrid: {h['ratio_random']:.1f}× / {h['ratio_uncompensated']:.1f}× at motion "
                    f"{100 * h['motion_median']:.3f}%", ok, {"objectives": per})


def render_transformer_learned(rows: dict[str, dict[str, Any]]) -> str:
    """The learned-transformer result of docs/discovery.md (block ``transformer-learned``) from the four paper-claim
    rows of run ``transformer`` (hybrid objective; the composition row also has finite)."""
    g = {c: rows[c] for c in ("transformer-drift-random-learned", "transformer-drift-uncompensated-learned",
                             "transformer-motion", "transformer-composition")}
    comp = g["transformer-composition"]["values"]
    r0 = g["transformer-drift-random-learned"]
    made = ", ".join(x for x in (r0.get("budget") and f"budget {r0['budget']}",
                                 r0.get("date_utc") and str(r0["date_utc"])[:10],
                                 f"code `{str(r0['code_version'])[:12]}`" if r0.get("code_version") else
                                 "no code version recorded: made before rows recorded their provenance; the command "
                                 "above reruns it") if x)
    return "\n".join([
        "| objective | ratio random | ratio uncompensated | motion (median entry) | stored composition (median) |",
        "|---|---|---|---|---|",
        f"| hybrid | {g['transformer-drift-random-learned']['values']['ratio_random']:.1f} | "
        f"{g['transformer-drift-uncompensated-learned']['values']['ratio_uncompensated']:.1f} | "
        f"{100 * g['transformer-motion']['values']['motion_median']:.4f} % | {100 * comp['hybrid']:.3f} % |",
        f"| finite | — | — | — | {100 * comp['finite']:.3f} % |",
        "", f"From the rows of docs/reproductions.md ({made})."])


def render_transformer_objectives(rows: dict[str, dict[str, Any]]) -> str:
    """Every objective and seed of the learned-transformer run (block ``transformer-objectives``)."""
    per = rows["transformer-learned-objectives"]["values"]["objectives"]
    out = ["| objective | seed | steps | eval ρ | train s | run CPU s | ratio random | ratio uncompensated | "
           "motion (median entry) | stored composition median (p95) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for v, rs in per.items():
        for x in rs:
            ts = "—" if x.get("train_seconds") is None else f"{x['train_seconds']:.0f}"
            cs = "—" if x.get("run_cpu_seconds") is None else f"{x['run_cpu_seconds']:.0f}"
            rho = "—" if x.get("rho") is None else f"{x['rho']:g}"
            out.append(f"| {v} | {x['seed']} | {x['steps']} | {rho} | {ts} | {cs} | {x['ratio_random']:.1f} | "
                       f"{x['ratio_uncompensated']:.1f} | {100 * x['motion_median']:.4f} % | "
                       f"{100 * x['composition_stored_median']:.2f} % ({100 * x['composition_stored_p95']:.0f} %) |")
    return "\n".join(out)


CLAIMS: tuple[Claim, ...] = (
    Claim("transformer-learned-objectives", f"{M} docs/discovery.md", "learned transformer discovery, every "
          "objective: ratios, motion, composition, training time", "aim: the issue's joint target",
          "hybrid: ratio random ≥ 100 and uncompensated ≥ 10 at median entry motion ≥ 0.05 %, stored composition "
          "below finite's; each training ≤ 15 CPU minutes", "transformer", _td_objectives),
)
