"""Compensation measurements (docs/compensation.md): the closed form on six models against both controls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...claims import Claim, Measured, missing_note
from ..runs import RunSpec, budgeted, run_cli

__all__ = ["CLAIMS", "RUNS", "render_compensation"]

M = "[Measurement]"
#: (label, model, layer, unit); tiny models: the first layer's unit 7
COMP_FULL = (("all-MiniLM-L6-v2, layer 3 unit 7", "minilm", 3, 7), ("all-MiniLM-L6-v2, layer 3 unit 100", "minilm", 3, 100),
             ("all-MiniLM-L6-v2, layer 2 unit 42", "minilm", 2, 42), ("gpt2-tiny (Conv1D), layer 0 unit 7", "gpt2-tiny", 0, 7),
             ("pythia-tiny (GPT-NeoX), layer 0 unit 7", "pythia-tiny", 0, 7),
             ("llama-tiny (gated), layer 0 unit 7", "llama-tiny", 0, 7))
COMP_QUICK = COMP_FULL[:1] + COMP_FULL[3:4]


@budgeted
def _comp(quick: bool, out: Path) -> dict[str, Any]:
    res = {}
    for label, model, layer, unit in (COMP_QUICK if quick else COMP_FULL):
        r = run_cli(["compensate", "--model", model, "--layer", str(layer), "--unit", str(unit), "--tokens", "16",
                     "--seed", "0", "--json"], out, f"{model}-{layer}-{unit}.json")
        r.pop("sweep", None)
        res[label] = r
    return res


def _comp_claim(r):
    lo = min(min(v["ratio_random"], v["ratio_uncompensated"]) for v in r.values())
    return Measured(f"smallest control ratio {lo:,.0f} over {len(r)} cases", lo >= 10,
                    {"min_ratio": lo, "cases": {k: {f: v[f] for f in ("drift_relative", "ratio_random",
                                                                       "ratio_uncompensated", "condition_number",
                                                                       "units_changed")} for k, v in r.items()}})


def render_compensation(rows: dict[str, dict[str, Any]]) -> str:
    r = rows["compensation-models"]["values"]["cases"]
    out = ["| model | drift (float32) | ratio random | ratio uncompensated | cond | units changed |",
           "|---|---|---|---|---|---|"]
    for label, v in r.items():
        out.append(f"| {label} | {v['drift_relative']:.3g} | {v['ratio_random']:,.0f} | {v['ratio_uncompensated']:,.0f} | "
                   f"{v['condition_number']:.3g} | {v['units_changed']} |")
    return "\n".join(out) + missing_note(r, [c[0] for c in COMP_FULL])


RUNS: tuple[RunSpec, ...] = (
    RunSpec("compensation-models", "paramsym compensate --model M --layer L --unit U --tokens 16 --json (6 cases)",
            _comp(False), _comp(True), "≈ 1–2 min (≈ 10 s per case); --quick runs 2 of the 6 cases", exact=True),
)
CLAIMS: tuple[Claim, ...] = (
    Claim("compensation-models", f"{M} docs/compensation.md", "closed-form compensation beats both controls",
          "aim: compensated drift far below the controls", "ratio to the random and to the uncompensated control ≥ 10 "
          "in every case", "compensation-models", _comp_claim),
)
