"""``paramsym report``: regenerate a run directory's report by dispatching on its kind.

Each run kind has ``paramsym.<area>.report.render(run: RunDir) -> str``; the kind is the
``"kind"`` key of the run's ``config.json``.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from .errors import RunDirError
from .runs import RunDir

#: run kind -> module providing ``render(run) -> str``
RENDERERS = {
    "discovery": "paramsym.discovery.report",
    "discovery-objectives": "paramsym.experiments.objectives",
    "discovery-lifting": "paramsym.experiments.lifting",
    "attribution": "paramsym.attribution.report",
    "attention": "paramsym.attention.report",
}


def regenerate(run: RunDir) -> Path:
    """Re-render ``report.md`` (and its figures) from the files in ``run``; return its path."""
    cfg = run.read_json("config.json")
    kind = cfg.get("kind")
    if kind not in RENDERERS:
        raise RunDirError(f"{run.path}: unknown run kind {kind!r} in config.json; known kinds: {sorted(RENDERERS)}.")
    if not run.has("metrics.json"):
        raise RunDirError(
            f"{run.path} has no metrics.json: the run did not finish. Continue it with "
            f"`paramsym discover --resume {run.path}` (discovery) or rerun it."
        )
    module = importlib.import_module(RENDERERS[kind])
    text = module.render(run)
    return run.write_text("report.md", text)
