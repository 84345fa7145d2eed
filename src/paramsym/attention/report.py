"""Run directories of ``paramsym attention table --out DIR`` and their reports.

Run kind ``"attention-table"``: ``config.json`` (group, representation, heads, copies),
``metrics.json`` (one row per ``C`` with ``c``, the closed form where it applies and the exact
Theorem 9 bound), ``env.json``, ``figures/components.png`` and ``report.md``.
:func:`render` regenerates the report from the directory alone.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..runs import RunDir

__all__ = ["write_table_run", "render", "KIND"]

KIND = "attention-table"


def write_table_run(out: str | os.PathLike, args: argparse.Namespace, rows) -> Path:
    """Write the run directory for a component table (see module docstring)."""
    run = RunDir(out)
    run.write_json(
        "config.json",
        {
            "kind": KIND,
            "group": args.group,
            "rep": args.rep,
            "heads": args.heads,
            "copies": [r.copies for r in rows],
        },
    )
    run.write_env(seed=None)
    run.write_json("metrics.json", {"rows": [r.to_dict() for r in rows]})
    _figure(run)
    run.write_text("report.md", render(run))
    return run.path


def _figure(run: RunDir) -> Path | None:
    from ..plots import lines

    rows = run.read_json("metrics.json")["rows"]
    if len(rows) < 2:
        return None
    C = [r["copies"] for r in rows]
    series = {"log10 c": [_safe_log10(r["c"]) for r in rows], "log10 bound": [r["log10_bound"] for r in rows]}
    return lines(
        run.figures / "components.png",
        C,
        series,
        title="components c and the Theorem 9 bound",
        xlabel="copies C",
        ylabel="log10",
    )


def _safe_log10(x: int) -> float | None:
    import math

    return math.log10(x) if x and x > 0 else None


def render(run: RunDir) -> str:
    """Markdown report of an ``attention-table`` run, from its files only."""
    from .components import format_scientific

    cfg = run.read_json("config.json")
    rows = run.read_json("metrics.json")["rows"]
    lines = [
        f"# Components of the equivariance locus: {cfg['group']}, rep {cfg['rep']}, {cfg['heads']} heads",
        "",
        "c = c_(G,d)(V) counts maximal subrepresentations of dimension ≤ d = dim V / |H| up to "
        "isomorphism (Definition 8); the Theorem 9 bound is c^(2|H|) / |H|!.",
        "",
        "| C | dim V | d | c | closed form | bound | log10 bound |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    from fractions import Fraction

    for r in rows:
        cf = "" if r.get("closed_form") is None else str(r["closed_form"])
        bound = Fraction(r["bound_exact"])
        lb = r.get("log10_bound")
        lines.append(
            f"| {r['copies']} | {r['dim_V']} | {r['d']} | {r['c']} | {cf} | {format_scientific(bound)} | "
            f"{'' if lb is None else f'{lb:.3f}'} |"
        )
    if (run.figures / "components.png").exists():
        lines += ["", "![components](figures/components.png)"]
    return "\n".join(lines) + "\n"
