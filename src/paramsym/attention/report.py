"""Run directories of ``paramsym attention table --out DIR`` and their reports.

Run kind ``"attention"`` with ``"run": "component-table"``: ``config.json`` (group,
representation, heads, copies),
``metrics.json`` (one row per ``C`` with ``c``, the closed form where it applies and the exact
Theorem 9 bound), ``env.json``, ``figures/components.png`` and ``report.md``.
:func:`render` regenerates the report (and the figure) from the directory alone; ``paramsym
report DIR`` dispatches to it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..runs import RunDir

__all__ = ["write_table_run", "render", "KIND", "RUN"]

KIND = "attention"
RUN = "component-table"


def write_table_run(out: str | os.PathLike, args: argparse.Namespace, rows) -> Path:
    """Write the run directory for a component table (see module docstring)."""
    run = RunDir(out)
    run.write_json(
        "config.json",
        {
            "kind": KIND,
            "run": RUN,
            "group": args.group,
            "rep": args.rep,
            "heads": args.heads,
            "copies": [r.copies for r in rows],
        },
    )
    run.write_env(seed=None)
    run.write_json("metrics.json", {"rows": [r.to_dict() for r in rows]})
    run.write_text("report.md", render(run))
    return run.path


def _slopes(rows) -> tuple[float, float] | None:
    """Log-log slopes of c and of the bound between the two largest distinct C (growth exponents)."""
    import math

    pts = sorted({r["copies"]: r for r in rows}.items())
    if len(pts) < 2 or pts[-2][0] < 1:
        return None
    (c0, r0), (c1, r1) = pts[-2], pts[-1]
    if not (r0["c"] > 0 and r1["c"] > 0 and r0["log10_bound"] is not None and r1["log10_bound"] is not None):
        return None
    dx = math.log10(c1) - math.log10(c0)
    return (
        (math.log10(r1["c"]) - math.log10(r0["c"])) / dx,
        (r1["log10_bound"] - r0["log10_bound"]) / dx,
    )


def _figure(run: RunDir) -> Path | None:
    """Log-log plot of c and of the Theorem 9 bound against C (slopes = growth exponents)."""
    import math

    from ..plots import pyplot, save

    rows = run.read_json("metrics.json")["rows"]
    pts = [r for r in rows if r["c"] > 0 and r["log10_bound"] is not None]
    plt = pyplot()
    if plt is None or len(pts) < 2:
        return None
    x = [math.log10(r["copies"]) for r in pts]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    axes[0].plot(x, [math.log10(r["c"]) for r in pts], "o-", ms=3)
    axes[0].set_ylabel("log10 c")
    axes[1].plot(x, [r["log10_bound"] for r in pts], "o-", ms=3, color="C1")
    axes[1].set_ylabel("log10 bound c^(2H)/H!")
    for ax in axes:
        ax.set_xlabel("log10 C (copies)")
        ax.grid(alpha=0.3)
    fig.suptitle("components of the equivariance locus (slope = growth exponent)")
    return save(fig, run.figures / "components.png")


def render(run: RunDir) -> str:
    """Markdown report of an attention run directory, from its files only (redraws the figure)."""
    from ..errors import RunDirError
    from .components import format_scientific

    cfg = run.read_json("config.json")
    if cfg.get("kind") != KIND or cfg.get("run") != RUN:
        raise RunDirError(
            f"{run.path}: not an attention component-table run (config kind={cfg.get('kind')!r}, "
            f"run={cfg.get('run')!r}); expected kind={KIND!r}, run={RUN!r}."
        )
    _figure(run)
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
    slopes = _slopes(rows)
    if slopes is not None:
        lines += [
            "",
            f"Log-log slope between the two largest C: c grows like C^{slopes[0]:.2f} and the bound "
            f"like C^{slopes[1]:.2f} (for D4 with 8 heads the paper's exponents are 4 and 64).",
        ]
    if (run.figures / "components.png").exists():
        lines += ["", "![components](figures/components.png)"]
    return "\n".join(lines) + "\n"
