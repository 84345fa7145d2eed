"""[Discovery]'s claims: Table 1 (§6.2), subnetwork lifting and the pretrained transformer (§6.3),
the affine solver's dimensions (§6.1, App. F).
"""

from __future__ import annotations

import math
from typing import Any

from .base import MINILM, REL, Claim, D, Measured, Printed, pct

__all__ = ["CLAIMS"]


def _obj(r: dict[str, Any], variant: str, key: str) -> float:
    return float(r["median"][variant][key])


P_T1_HYBRID, P_T1_FINITE, P_T1_RATIO, P_T1_MOTION = Printed("0.037%"), Printed("0.306%"), Printed("8.3×"), Printed("12%")
#: Table 1's runs: the paper reports 5/5 fits, i.e. five seeds per objective
T1_SEEDS = 5
#: "at similar motion" (§6.2), made quantitative: finite / hybrid median motion within 25 %
T1_MOTION_BAND = (0.8, 1.25)


def _t1_hybrid(r):
    h = _obj(r, "hybrid", "composition_err_p95")
    return Measured(pct(h), P_T1_HYBRID.at_most(h), {"hybrid": h})


def _t1_finite(r):
    f = _obj(r, "finite", "composition_err_p95")
    return Measured(pct(f), P_T1_FINITE.at_most(f), {"finite": f})


def _t1_ratio(r):
    ratio, motion = r["composition_ratio_finite_over_hybrid"], r["motion_ratio_finite_over_hybrid"]
    lo, hi = T1_MOTION_BAND
    return Measured(f"{ratio:.1f}× (motion ratio {motion:.2f})", P_T1_RATIO.at_least(ratio) and lo <= motion <= hi,
                    {"ratio": ratio, "motion_ratio": motion})


def _t1_motion(r):
    m = _obj(r, "hybrid", "motion_rel_median")
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


P_LIFTING = Printed("5.8×")


def _lifting_ratio(r):
    mt = r["matched"]
    if not mt.get("overlap"):
        return Measured("no overlapping displacement range", False, {})
    ratio = float(mt["ratio_median"])
    return Measured(f"{ratio:.1f}× (geometric mean {mt['ratio_geometric_mean']:.1f}×)", P_LIFTING.at_least(ratio),
                    {"ratio": ratio, "geometric_mean": mt["ratio_geometric_mean"], "ratios": mt["ratios"],
                     "range": [mt["displacements"][0], mt["displacements"][-1]], "rhos": r["rhos"],
                     "median": r["median"], "seeds": [row["seed"] for row in r["per_seed"]["relu2881-unit"]],
                     "same_rho_ratio": r.get("same_rho_ratio"), "unit_rescaling": r.get("unit_rescaling"),
                     "unit_beta": r.get("unit_beta"), "all_beta": r.get("all_beta")})


P_TD_RANDOM, P_TD_UNC, P_TD_MOTION = Printed("129×"), Printed("49×"), Printed("0.069%")
P_TD_COMP_HYBRID = Printed("0.058%")


def _comp_random(r):
    x = float(r["ratio_random"])
    return Measured(f"{x:,.0f}× (closed form, MiniLM L3 unit 7)", P_TD_RANDOM.at_least(x), {"ratio_random": x})


def _comp_unc(r):
    x = float(r["ratio_uncompensated"])
    return Measured(f"{x:,.0f}× (closed form, MiniLM L3 unit 7)", P_TD_UNC.at_least(x), {"ratio_uncompensated": x})


def _td_units(r, variant: str = "hybrid") -> dict[str, dict[str, float]]:
    """Each unit's medians over seeds for ``variant`` (runs before the multi-unit protocol: one unit, ``""``)."""
    per = r.get("per_unit")
    if per:
        return {label: u["median"][variant] for label, u in per.items() if variant in u["median"]}
    return {"": r["median"][variant]} if variant in r.get("median", {}) else {}


def _td_rho(r) -> str:
    rho = r.get("rho", (r.get("per_seed", {}).get("hybrid") or [{}])[0].get("rho"))
    return "" if rho is None else f", ρ = {rho:g}"


def _td_each(r, key: str, fmt, ok) -> Measured:
    """A learned-transformer claim on every unit (hybrid medians over seeds): holds iff it holds on each."""
    units = _td_units(r)
    vals = {label: float(m[key]) for label, m in units.items()}
    each = ", ".join(f"{label} {fmt(x)}" if label else fmt(x) for label, x in vals.items())
    worst = min(vals.values()) if vals else math.nan  # every such claim is a lower bound
    n = len(vals)
    return Measured(f"{each} (learned, hybrid, MiniLM{_td_rho(r)}{f'; {n} units' if n > 1 else ''})",
                    bool(vals) and all(ok(x) for x in vals.values()), {key: worst, "per_unit": vals})


def _td_random(r):
    return _td_each(r, "ratio_random", lambda x: f"{x:.1f}×", P_TD_RANDOM.at_least)


def _td_unc(r):
    return _td_each(r, "ratio_uncompensated", lambda x: f"{x:.1f}×", P_TD_UNC.at_least)


def _td_motion(r):
    return _td_each(r, "motion_median", lambda x: pct(x, 4), P_TD_MOTION.at_least)


#: the issue's reading of "0.321 % → 0.058 %": hybrid at most the paper's and finite at least twice hybrid
TD_COMP_FACTOR = 2.0


def _td_comp(r):
    def comp(row: dict[str, Any]) -> float:  # "composition_stored_median": runs before issue 17
        return float(row["composition_error"] if "composition_error" in row else row["composition_stored_median"])

    hyb, fin = _td_units(r, "hybrid"), _td_units(r, "finite")
    rows = {label: (comp(fin[label]) if label in fin else math.nan, comp(h)) for label, h in hyb.items()}
    text = ", ".join(f"{label + ' ' if label else ''}{pct(f)} → {pct(h)}" for label, (f, h) in rows.items())
    ok = bool(rows) and all(P_TD_COMP_HYBRID.at_most(h) and f >= TD_COMP_FACTOR * h for f, h in rows.values())
    worst = max(rows, key=lambda k: rows[k][1])
    return Measured(f"{text} (finite → hybrid, MiniLM{_td_rho(r)})", ok,
                    {"finite": rows[worst][0], "hybrid": rows[worst][1],
                     "per_unit": {k: {"finite": f, "hybrid": h} for k, (f, h) in rows.items()}})


def _affine_dims(r):
    rows = {p: (int(v["dimension"]), int(v["expected"])) for p, v in r.items()}
    text = ", ".join(f"{p} {d}" for p, (d, _) in rows.items())
    detail = {p: {"dimension": v["dimension"], "expected": v["expected"], "gap": v.get("gap"),
                  "unknowns": v.get("unknowns"),
                  "residual_max": v.get("max_residual"), "status": v.get("status"), "seconds": v.get("seconds")} for p, v in r.items()}
    return Measured(text, all(d == e for d, e in rows.values()) and max(d for d, _ in rows.values()) >= 8,
                    {"dimensions": {p: d for p, (d, _) in rows.items()}, "detail": detail})


def _affine_commuting(r):
    lin, relu = float(r["linear2x2"]["commutativity"]), float(r["relu242"]["commutativity"])
    return Measured(f"‖[A_i, A_j]‖: linear2x2 {lin:.2g}, relu242 {relu:.1e}", lin > 1e-3 and relu < 1e-10,
                    {"linear2x2": lin, "relu242": relu})


CLAIMS: list[Claim] = [
    # [Discovery] Table 1, §6.2 (scalar sigmoid, ρ = 0.5, one factor; medians over the 5 seeds)
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
    Claim("lifting-subnetwork-ratio", f"{D} §6.3, Fig. 2(c)",
          "one-unit (10 weights) discovery vs all 88 weights: full-network error at similar displacement", "5.8×",
          f"all/unit error ratio {P_LIFTING.ge()} (median over the matched range; at least the paper's); protocol v2: "
          "the unit's β by the equal-field-norm rule, seeds 5–9", "lifting",
          _lifting_ratio),
    Claim("transformer-drift-random-closed-form", f"{D} §6.3, Fig. 3(a), Cor. 4.6",
          "compensated drift vs random translation at similar motion", "129× (Pythia-1B, learned)",
          f"{P_TD_RANDOM.ge()}; related: closed form (Cor. 4.6) on all-MiniLM-L6-v2, the paper learned it on Pythia-1B",
          "compensation", _comp_random, REL),
    Claim("transformer-drift-uncompensated-closed-form", f"{D} §6.3, Fig. 3(a), Cor. 4.6",
          "removing compensation raises drift", "49× (Pythia-1B, learned)",
          f"{P_TD_UNC.ge()}; related: closed form on all-MiniLM-L6-v2, the paper learned it on Pythia-1B",
          "compensation", _comp_unc, REL),
    Claim("transformer-drift-random-learned", f"{D} §6.3, Fig. 3(a)",
          "learned compensated drift vs random translation", "129× (Pythia-1B)",
          f"learned (hybrid, median over seeds) {P_TD_RANDOM.ge()} on every unit; {MINILM}, ρ = 0.5", "transformer",
          _td_random, REL),
    Claim("transformer-drift-uncompensated-learned", f"{D} §6.3, Fig. 3(a)",
          "learned: removing compensation raises drift", "49× (Pythia-1B)",
          f"learned (hybrid, median over seeds) {P_TD_UNC.ge()} on every unit; {MINILM}, ρ = 0.5", "transformer",
          _td_unc, REL),
    Claim("transformer-motion", f"{D} §6.3", "selected weights change by a median of 0.069% at ρ = 0.5",
          "0.069% (Pythia-1B)", f"median entry motion (hybrid, median over seeds) {P_TD_MOTION.ge()} on every unit; "
          f"{MINILM}, ρ = 0.5", "transformer", _td_motion, REL),
    Claim("transformer-composition", f"{D} §6.3, Fig. 3(b)", "stored-weight composition error, finite → hybrid",
          "0.321% → 0.058% (Pythia-1B)", f"hybrid {P_TD_COMP_HYBRID.le()} and finite ≥ {TD_COMP_FACTOR:g}× hybrid "
          f"(medians over seeds) on every unit; {MINILM}, ρ = 0.5", "transformer", _td_comp, REL),
    Claim("affine-dimensions", f"{D} §6.1, App. F",
          "affine solver recovers algebras of up to 8 dimensions without being told the dimension",
          "up to 8", "every preset's dimension equals theory's (exact), and one is ≥ 8", "affine", _affine_dims),
    Claim("affine-commutation", f"{D} §6.1, App. F", "linear-network symmetries do not commute; ReLU rescalings do",
          "non-commuting / commuting", "linear2x2 commutator norm > 1e-3, relu242 < 1e-10", "affine", _affine_commuting),
]
