"""Table 1's claims ([Discovery] §6.2, scalar sigmoid, ρ = 0.5, one factor; medians over the 5 seeds)
and its generated docs block (``objectives``): read from the result of the run ``objectives``
(:func:`.run.run`).
"""

from __future__ import annotations

from typing import Any

from ....claims import Block, Claim, D, Measured, Printed, Rows, pct
from ....paper_stats import across_seeds, statistic_of

__all__ = ["BLOCKS", "CLAIMS"]


def _stat(r: dict[str, Any], claim: str, variant: str) -> float:
    """The registry's statistic of ``claim`` (:mod:`paramsym.paper_stats`) over ``variant``'s per-seed rows."""
    return statistic_of(claim, r["per_seed"][variant])


P_T1_HYBRID, P_T1_FINITE, P_T1_RATIO, P_T1_MOTION = Printed("0.037%"), Printed("0.306%"), Printed("8.3×"), Printed("12%")
#: Table 1's runs: the paper reports 5/5 fits, i.e. five seeds per objective
T1_SEEDS = 5
#: "at similar motion" (§6.2), made quantitative: finite / hybrid median motion within 25 %
T1_MOTION_BAND = (0.8, 1.25)


def _t1_hybrid(r):
    h = _stat(r, "table1-composition-hybrid", "hybrid")
    return Measured(pct(h), P_T1_HYBRID.at_most(h), {"hybrid": h})


def _t1_finite(r):
    f = _stat(r, "table1-composition-finite", "finite")
    return Measured(pct(f), P_T1_FINITE.at_most(f), {"finite": f})


def _t1_ratio(r):
    ratio = (_stat(r, "table1-composition-ratio", "finite")
             / max(_stat(r, "table1-composition-ratio", "hybrid"), 1e-300))
    mot = {v: across_seeds(row["motion_median"] for row in r["per_seed"][v]) for v in ("finite", "hybrid")}
    motion = mot["finite"] / max(mot["hybrid"], 1e-300)
    lo, hi = T1_MOTION_BAND
    return Measured(f"{ratio:.1f}× (motion ratio {motion:.2f})", P_T1_RATIO.at_least(ratio) and lo <= motion <= hi,
                    {"ratio": ratio, "motion_ratio": motion})


def _t1_motion(r):
    m = _stat(r, "table1-motion", "hybrid")
    return Measured(pct(m, 1), P_T1_MOTION.near(m), {"motion_rel_median": m})


def _t1_fits(r):
    n = {v: len(rows) for v, rows in r["per_seed"].items()}
    fits = {v: int(s["fits"]) for v, s in r["median"].items()}
    text = ", ".join(f"{v} {fits[v]}/{n[v]}" for v in fits)
    table = {v: {**r["median"][v], "n": n[v], "seeds": [row["seed"] for row in r["per_seed"][v]],
                 "composition_per_seed": [row["composition_err_p95"] for row in r["per_seed"][v]]} for v in fits}
    ok = set(fits) >= {"hybrid", "finite"} and all(fits[v] == n[v] >= T1_SEEDS for v in fits)
    return Measured(text, ok, {"fits": fits, "runs": n, "table": table,
                               "ratio": r.get("composition_ratio_finite_over_hybrid"),
                               "motion_ratio": r.get("motion_ratio_finite_over_hybrid")})


CLAIMS: list[Claim] = [
    Claim("table1-composition-hybrid", f"{D} §6.2, Table 1", "hybrid objective: composition error p95 (scalar sigmoid)",
          "0.037%", f"median over 5 seeds (ρ = 0.5, one factor) {P_T1_HYBRID.le()} (at most the paper's, printed "
          "precision)", "objectives", _t1_hybrid),
    Claim("table1-composition-finite", f"{D} §6.2, Table 1", "finite objective: composition error p95 (scalar sigmoid)",
          "0.306%", f"median over 5 seeds {P_T1_FINITE.le()} (at most the paper's + 2 %)", "objectives", _t1_finite),
    Claim("table1-composition-ratio", f"{D} §6.2", "hybrid reduces composition error at similar motion",
          "8.3× (0.306/0.037)", f"finite/hybrid {P_T1_RATIO.ge()} at motion ratio within 0.8–1.25 (\"similar motion\")",
          "objectives", _t1_ratio),
    Claim("table1-motion", f"{D} §6.2", "transformed block changes by a median of 12%", "12%",
          f"hybrid median ‖Δθ‖/‖θ‖ within {P_T1_MOTION.range_text()} (printed precision)", "objectives", _t1_motion),
    Claim("table1-fits", f"{D} Table 1, App. D", "fits satisfying every tolerance", "5/5",
          "every one of ≥ 5 seeds of both objectives fits", "objectives", _t1_fits),
]


def _paper(cid: str) -> str:
    return next(c.paper for c in CLAIMS if c.id == cid)


def render_objectives(rows: Rows) -> str:
    v = rows["table1-fits"]["values"]
    t = v["table"]
    out = ["| objective | composition error p95 (per seed) | inverse error p95 | output error p95 | transport error p95 "
           "| ‖Δθ‖/‖θ‖ | fits |", "|---|---|---|---|---|---|---|"]
    for name, s in t.items():
        per = ", ".join(f"{100 * c:.3f}" for c in s["composition_per_seed"])
        out.append(f"| {name} | **{100 * s['composition_err_p95']:.3f}%** ({per}) | {100 * s['inverse_err_p95']:.3f}% | "
                   f"{s['output_err_p95']:.2e} | {s['transport_err_p95']:.2e} | {100 * s['motion_rel_median']:.1f}% | "
                   f"{s['fits']}/{s['n']} |")
    seeds = ", ".join(str(x) for x in next(iter(t.values()))["seeds"])
    out += ["", f"Seeds {seeds}; medians over seeds. Finite / hybrid composition error: **{v['ratio']:.1f}×** at motion "
                f"ratio {v['motion_ratio']:.2f}. Paper: {_paper('table1-composition-hybrid')} (hybrid), "
                f"{_paper('table1-composition-finite')} (finite), {_paper('table1-composition-ratio')}; median block "
                f"change {_paper('table1-motion')}."]
    return "\n".join(out)


BLOCKS: tuple[Block, ...] = (
    Block("objectives", ("table1-composition-hybrid", "table1-composition-finite", "table1-composition-ratio",
                         "table1-motion", "table1-fits"), render_objectives),
)
