"""Run kind ``"attention"``: component tables over a range of copies, and their reports.

A run is configured by :class:`AttentionTableConfig` (group, representation, copies, heads,
memory budget; :meth:`~AttentionTableConfig.quick` for smoke runs); :func:`table` computes its
summary. ``paramsym attention table --out DIR`` runs it as a managed run kind
(:func:`paramsym.runs.execute.execute`, :mod:`paramsym.kinds.math`): the
directory holds ``config.json`` (the fields, ``"kind": "attention"``, provenance),
``metrics.json`` (the summary: group, rep, heads and one row per ``C`` with ``c``, the closed form
where it applies and the exact Theorem 9 bound ``c^(2|H|)/|H|!``), ``env.json``, ``output.txt``,
``figures/components.png`` and ``report.md``. :func:`render` regenerates the report (and the
figure) from the directory alone (also of directories written before, ``"run":
"component-table"``); ``paramsym report DIR`` dispatches to it through the registry.

Pure math: nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..errors import ConfigError
from ..groups.memory import MemoryBudget
from ..runs.rundir import RunDir

__all__ = ["AttentionTableConfig", "KIND", "RUN", "render", "rows_markdown", "table"]

KIND = "attention"
RUN = "component-table"


@dataclass
class AttentionTableConfig:
    """A table of ``c_(G,d)(R^C ⊗ ρ)`` and the Theorem 9 bound over a list of copies ``C``.

    Attributes:
        group: group spec as ``--group`` takes it (a name such as ``D4``, ``perm:[...]``, a file).
        rep: representation spec ``ρ`` as ``--rep`` takes it (``regular``, ``copies:C``, ...).
        copies: the numbers of copies ``C >= 1`` (one row each).
        heads: number of heads ``|H| >= 1``; the head dimension is ``d = dim V / |H|``.
        max_memory: budget in bytes for dense representation matrices (``None``: the default
            of :mod:`paramsym.groups.memory`).
    """

    group: str = "D4"
    rep: str = "regular"
    copies: list[int] = field(default_factory=lambda: list(range(1, 13)))
    heads: int = 8
    max_memory: MemoryBudget | None = None

    #: keys of a table run's config.json written before the kind was managed (they configure nothing)
    DROPPED: ClassVar[dict[str, str]] = {"run": "the former run name, 'component-table'",
                                         "group_name": "the former copy of the group's name"}

    @classmethod
    def quick(cls) -> AttentionTableConfig:
        """A small, fast table (C4, copies 1..3, 2 heads): milliseconds, for tests and examples."""
        return cls(group="C4", copies=[1, 2, 3], heads=2)

    def validate(self) -> None:
        """Raises :class:`ConfigError` naming the field for a value of the wrong kind."""
        for name in ("group", "rep"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ConfigError(f"{name} must be a nonempty spec string; received {getattr(self, name)!r}.")
        if isinstance(self.heads, bool) or not isinstance(self.heads, int) or self.heads < 1:
            raise ConfigError(f"heads must be an integer >= 1; received {self.heads!r}.")
        bad = [c for c in self.copies if isinstance(c, bool) or not isinstance(c, int) or c < 1]
        if not self.copies or bad:
            raise ConfigError(f"copies must be a nonempty list of integers >= 1; received {self.copies!r}.")
        if self.max_memory is not None:
            MemoryBudget(self.max_memory, "max_memory")  # MemoryBudgetError (a ConfigError) names the field


def table(cfg: AttentionTableConfig, *, progress: bool = False) -> dict[str, Any]:
    """The component table of ``cfg``: ``{"group", "rep", "heads", "rows"}`` (rows as dicts).

    Raises:
        ConfigError: an invalid field; GroupError, TooLargeError, ShapeError: from the group and
            representation specs (e.g. a representation over the memory budget).
    """
    from ..groups.finite import FiniteGroup
    from ..groups.reps import Representation
    from .components import component_table

    cfg.validate()
    G = FiniteGroup.parse(cfg.group, argument="group")
    rep = Representation.parse(G, cfg.rep, max_memory=cfg.max_memory, progress=progress, argument="rep")
    rows = component_table(rep, cfg.copies, cfg.heads, rep_name=cfg.rep, progress=progress, max_memory=cfg.max_memory)
    return {"group": G.name, "rep": cfg.rep, "heads": cfg.heads, "rows": [r.to_dict() for r in rows]}


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

    rows = _rows(run)
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


_ROW_KEYS = {"copies": int, "dim_V": int, "d": int, "c": int, "bound_exact": str}


def _rows(run: RunDir) -> list[dict[str, Any]]:
    """The rows of ``metrics.json``, checked to be of the form :func:`table` writes.

    Raises:
        RunFileError: ``metrics.json`` is corrupt or of another form.
    """
    from fractions import Fraction

    from ..errors import RunFileError

    metrics = run.read_json("metrics.json")
    rows = metrics.get("rows") if isinstance(metrics, dict) else None
    ok = isinstance(rows, list) and all(
        isinstance(r, dict) and all(isinstance(r.get(k), t) and not isinstance(r.get(k), bool)
                                    for k, t in _ROW_KEYS.items())
        and r["copies"] >= 1 and (r.get("log10_bound") is None or isinstance(r["log10_bound"], (int, float)))
        for r in rows)
    if ok:
        try:
            for r in rows:
                Fraction(r["bound_exact"])
        except (ValueError, ZeroDivisionError):
            ok = False
    if not ok:
        raise RunFileError(f"{str(run.file('metrics.json'))!r} is not an attention component table (expected "
                           "{\"rows\": [{\"copies\", \"dim_V\", \"d\", \"c\", \"bound_exact\", ...}]}); "
                           "rerun `paramsym attention table --out DIR`.")
    return rows


def rows_markdown(rows: list[dict[str, Any]]) -> str:
    """Markdown table of the rows of :func:`table` (C, dim V, d, c, closed form, bound, log10 bound)."""
    from fractions import Fraction

    from .components import format_scientific

    lines = ["| C | dim V | d | c | closed form | bound c^(2H)/H! | log10 bound |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cf = "" if r.get("closed_form") is None else str(r["closed_form"])
        lb = r.get("log10_bound")
        lines.append(f"| {r['copies']} | {r['dim_V']} | {r['d']} | {r['c']} | {cf} | "
                     f"{format_scientific(Fraction(r['bound_exact']))} | {'' if lb is None else f'{lb:.3f}'} |")
    return "\n".join(lines)


def render(run: RunDir) -> str:
    """Markdown report of an attention run directory, from its files only (redraws the figure)."""
    from ..errors import RunDirError, RunFileError

    cfg = run.read_json("config.json")
    if not isinstance(cfg, dict) or cfg.get("kind") != KIND or cfg.get("run", RUN) != RUN:
        got = (cfg.get("kind"), cfg.get("run")) if isinstance(cfg, dict) else (None, None)
        raise RunDirError(
            f"{run.path}: not an attention component-table run (config kind={got[0]!r}, "
            f"run={got[1]!r}); expected kind={KIND!r}, run={RUN!r}."
        )
    if not all(isinstance(cfg.get(k), t) for k, t in (("group", str), ("rep", str), ("heads", int))):
        raise RunFileError(f"{str(run.file('config.json'))!r} lacks the attention table's 'group', 'rep' and "
                           "'heads'; restore it, or rerun `paramsym attention table --out DIR`.")
    rows = _rows(run)
    _figure(run)
    lines = [
        f"# Components of the equivariance locus: {cfg['group']}, rep {cfg['rep']}, {cfg['heads']} heads",
        "",
        "c = c_(G,d)(V) counts maximal subrepresentations of dimension ≤ d = dim V / |H| up to "
        "isomorphism (Definition 8); the Theorem 9 bound is c^(2|H|) / |H|!.",
        "",
        rows_markdown(rows),
    ]
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
