"""The reports of run directories: :func:`render` (the ``report.md`` markdown of any run, by the
kind in its ``config.json``), :func:`render_generic` (configuration and scalar metrics as
tables) and :func:`regenerate` (re-render ``report.md`` of a finished run).

Below :mod:`.runner` (which renders each run it finishes) and above :mod:`.run_kinds` (the kinds
whose renderers it dispatches to); it never imports ``registry``, which re-exports every name here.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import RunDirError
from .kinds import checked_config, get_kind

__all__ = ["regenerate", "render", "render_generic"]


def render(run) -> str:
    """The markdown report of run directory ``run``, by the kind in its ``config.json``.

    Raises:
        RunFileError: a file of the run holds valid JSON of another form than its renderer reads
            (e.g. ``curves.json`` = ``null``): the renderers read the run's own files, so a
            ``KeyError``/``TypeError``/... while rendering means a damaged run, named here in one line.
    """
    from ..errors import RunFileError

    renderer = get_kind(checked_config(run).get("kind")).load().render
    try:
        return renderer(run)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        raise RunFileError(
            f"{str(run.path)!r}: a file of the run is not of the form its report reads ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}); restore the run's files, or rerun the command that made it."
        ) from exc


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (dict, list)):
        text = json.dumps(v, sort_keys=True)
        return text if len(text) <= 80 else text[:77] + "..."
    return str(v)


def render_generic(run, title: str | None = None) -> str:
    """A plain report of any run: its configuration and its scalar metrics as tables
    (what a kind without its own renderer shows, and the appendix of those with one)."""
    cfg = checked_config(run)
    metrics = run.read_json("metrics.json") if run.has("metrics.json") else {}
    lines = [f"# {title or cfg['kind'] + ' run'}", "", "## Configuration", "", "| key | value |", "|---|---|"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in cfg.items() if k not in ("kind", "provenance")]
    prov = cfg.get("provenance")
    if isinstance(prov, dict):
        lines += ["", f"Code `{prov.get('code_version')}`, config hash `{prov.get('config_hash')}`, "
                  f"command `{prov.get('command')}`, {prov.get('date_utc')}."]
    lines += ["", "## Metrics", "", "| key | value |", "|---|---|"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in metrics.items()]
    return "\n".join(lines) + "\n"


def regenerate(run):
    """Re-render ``report.md`` (and its figures) from the files in ``run``; return its path.

    Raises:
        RunDirError: unknown kind, or the run has no ``metrics.json`` (it did not finish).
    """
    if not run.has("metrics.json"):
        kind = get_kind(checked_config(run).get("kind"))
        how = f"Continue it with `{kind.command} --resume {run.path}`, or rerun it" if kind.resumable else (
            f"Rerun it with `{kind.command}`")
        raise RunDirError(f"{run.path} has no metrics.json: the run did not finish. {how}.")
    return run.write_text("report.md", render(run))
