"""The exact catalogue's verdicts (docs/actions.md): every action passes at float64 rounding and moves
the parameters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...claims import Claim, Measured
from ..runs import RunSpec, kept

__all__ = ["CLAIMS", "RUNS", "render_actions"]

M = "[Measurement]"


@kept
def _actions(quick: bool, out: Path) -> dict[str, Any]:
    from ..action_checks import action_checks

    return action_checks()


def _actions_claim(r):
    worst = max(max(v["output"], v["output2"], v["composition"], v["inverse"]) for v in r.values())
    still = min(v["motion"] for v in r.values())
    ok = all(v["passed"] for v in r.values()) and worst <= 1e-12 and still > 0.05
    return Measured(f"{len(r)} actions: worst error {worst:.2g}, smallest median motion {still:.2g} s_θ", ok,
                    {"cases": r})


def render_actions(rows: dict[str, dict[str, Any]]) -> str:
    """The verdict table of docs/actions.md (block ``action-checks``)."""
    r = rows["actions-verdict"]["values"]["cases"]
    out = ["| action, module | output (1 / 2 factors) | composition | inverse | motion (s_θ) |", "|---|---|---|---|---|"]
    for label, v in r.items():
        out.append(f"| {label} | {v['output']:.2g} / {v['output2']:.2g} | {v['composition']:.2g} | {v['inverse']:.2g} | "
                   f"{v['motion']:.3g} |")
    return "\n".join(out)


RUNS: tuple[RunSpec, ...] = (
    RunSpec("action-checks", "python -m paramsym.reproduce.action_checks", _actions(False), _actions(True),
            "≈ 5 s (7 small float64 modules, 64 samples per cell)", exact=True),
)
CLAIMS: tuple[Claim, ...] = (
    Claim("actions-verdict", f"{M} docs/actions.md", "every exact catalogue action passes the verdict",
          "aim: float64 rounding on every error, parameters move", "check_action passes; output, composition and inverse "
          "errors ≤ 1e-12; median motion > 0.05 s_θ in every case", "action-checks", _actions_claim),
)
