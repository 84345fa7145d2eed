"""The lifting claim ([Discovery] §6.3, Fig. 2(c)) and its generated docs block (``lifting``): read
from the result of the run ``lifting`` (:func:`.run.run`).
"""

from __future__ import annotations

from ....claims import Block, Claim, D, Measured, Printed, Rows

__all__ = ["BLOCKS", "CLAIMS"]


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


CLAIMS: list[Claim] = [
    Claim("lifting-subnetwork-ratio", f"{D} §6.3, Fig. 2(c)",
          "one-unit (10 weights) discovery vs all 88 weights: full-network error at similar displacement", "5.8×",
          f"all/unit error ratio {P_LIFTING.ge()} (median over the matched range; at least the paper's); protocol v2: "
          "the unit's β by the equal-field-norm rule, seeds 5–9", "lifting",
          _lifting_ratio),
]


def _paper(cid: str) -> str:
    return next(c.paper for c in CLAIMS if c.id == cid)


def render_lifting(rows: Rows) -> str:
    v = rows["lifting-subnetwork-ratio"]["values"]
    u, a = v["median"]["relu2881-unit"], v["median"]["relu2881-all"]
    out = ["| ρ | unit: displacement | unit: full error p95 | all: displacement | all: full error p95 |",
           "|---|---|---|---|---|"]
    for i, rho in enumerate(v["rhos"]):
        out.append(f"| {rho} | {u['displacement_median'][i]:.3g} | {u['full_error_p95'][i]:.3g} | "
                   f"{a['displacement_median'][i]:.3g} | {a['full_error_p95'][i]:.3g} |")
    lo, hi = v["range"]
    betas = ""
    if v.get("unit_beta"):  # rows measured before the β were recorded lack them
        betas = (f" Field magnitude β: unit {', '.join(sorted({f'{b:g}' for b in v['unit_beta']}))}, all weights "
                 f"{', '.join(sorted({f'{b:g}' for b in v['all_beta']}))} (units of each block's s_θ).")
    out += ["", f"Seeds {', '.join(map(str, v['seeds']))}.{betas} At matched displacement (log–log interpolation over the "
                f"overlap {lo:.3g} … {hi:.3g}) the whole-network action's full-network error is **{v['ratio']:.1f}×** "
                f"the subnetwork's (median over the range; geometric mean {v['geometric_mean']:.1f}×; "
                f"{v['ratios'][0]:.1f}× at the small end, {v['ratios'][-1]:.1f}× at the large end). Paper: "
                f"{_paper('lifting-subnetwork-ratio')}."]
    if v.get("same_rho_ratio"):  # rows measured before these diagnostics lack them
        from .run import diagnostics_text

        out += ["", diagnostics_text(v["same_rho_ratio"], v["rhos"], v["unit_rescaling"], v["median"])]
    return "\n".join(out)


BLOCKS: tuple[Block, ...] = (Block("lifting", ("lifting-subnetwork-ratio",), render_lifting),)
