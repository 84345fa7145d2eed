"""``report.md`` of an attribution run, rendered from the run directory's files only.

:func:`render` writes the common part — configuration, lifting verdicts (residual, resolved
rank, liftable or not) and the flow table (start, end and predicted ‖δ‖ with residuals, beside
the source's numbers where the preset provides them) — then the preset's own sections (figures,
experiment-specific tables) through ``Preset.report`` (which may regenerate figures from the
saved arrays). The caller passes those sections as a function (the experiments registry does;
this module knows no preset).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..errors import RunDirError
from ..runs.rundir import RunDir
from .tables import markdown


def render(run: RunDir, sections: Callable[[RunDir], str] | None = None) -> str:
    """Markdown report of an attribution run directory (``kind == "attribution"``).

    Args:
        run: the run directory (``config.json``, ``metrics.json`` with ``"summary"``).
        sections: optional preset-specific sections (markdown from the run directory), placed
            after the flow table.
    """
    cfg = run.read_json("config.json")
    if cfg.get("kind") != "attribution":
        raise RunDirError(f"{run.path} is a {cfg.get('kind')!r} run, not an attribution run.")
    metrics = run.read_json("metrics.json")
    summary = metrics.get("summary")
    if summary is None:
        raise RunDirError(f"{run.path}/metrics.json has no 'summary'; the preset did not finish.")
    preset = cfg.get("preset", "?")
    env = run.read_json("env.json") if run.has("env.json") else {}
    stage = cfg.get("stage") or (cfg.get("config") if isinstance(cfg.get("config"), dict) else {}).get("stage")
    lines = [f"# Attribution run — preset `{preset}`" + (f", stage `{stage}`" if stage else ""), ""]
    lines.append(f"paramsym {env.get('paramsym', '?')}, torch {env.get('torch', '?')}, git {env.get('git_sha', '?')}, "
                 f"seed {env.get('seed')}, {env.get('time_utc', '')}.")
    lines += ["", "## Lifting verdicts", ""]
    lifts = summary.get("lifts", [])
    if lifts:
        lines.append(markdown(lifts, ["name", "target", "residual", "rank", "target_norm", "direction_norm", "liftable"]))
        lines += [f"- {r['verdict']}" for r in lifts]
    if summary.get("verdict") and not lifts:
        lines.append(f"- {summary['verdict']}")
    for key in ("residual_at_paper_rtol", "closed_form_error"):
        if summary.get(key) is not None:
            lines.append(f"- {key.replace('_', ' ')}: {summary[key]:.3g}")
    flows = summary.get("flows", [])
    if flows:
        lines += ["", "## Flows (‖δ‖ on the probe set)", ""]
        lines.append(markdown(flows, ["flow", "direction", "delta_start", "delta_end", "delta_predicted",
                                      "residual_start", "residual_end", "t_end", "steps"], fmt="{:.4g}"))
    if sections is not None:
        lines += ["", sections(run)]
    lines += ["", "## Configuration", "", "```json", json.dumps(cfg.get("config", cfg), indent=2), "```", ""]
    return "\n".join(lines)
