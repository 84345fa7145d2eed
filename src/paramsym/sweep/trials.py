"""One sweep trial: a discovery run defined by (preset, variant, overrides, seed, steps, parent).

A trial is a plain JSON-able mapping (it crosses process and machine boundaries unchanged: the
local process pool and Ray Tune pass the same dict to the same :func:`run_trial`). Its id is the
first 16 hex digits of the SHA-256 of its canonical JSON (sorted keys, no spaces), so the same
trial always lands in the same directory ``OUT/trials/<id>/`` and a resumed sweep finds it.

Results do not depend on the backend: each trial runs in a worker process with one torch thread,
all randomness comes from the seeded generators of the discovery run, and ``metrics.json``
depends only on the configuration (see :mod:`paramsym.discovery.run`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .spec import METRICS

__all__ = ["SUMMARY_FILE", "make_trial", "run_trial", "summarize", "trial_config", "trial_id"]

#: written by the driver (and the worker) next to metrics.json: the trial's summary row
SUMMARY_FILE = "summary.json"


def trial_id(trial: Mapping[str, Any]) -> str:
    """``sha256(canonical JSON of the trial without its id and stage)[:16]``."""
    body = {k: v for k, v in trial.items() if k not in ("id", "stage")}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def make_trial(*, preset: str, variant: str, base: Mapping[str, Any], point: Mapping[str, Any], seed: int,
               steps: int, quick: bool, device: str, figures: bool, stage: str, parent: str | None = None) -> dict[str, Any]:
    """A trial mapping with its id. ``parent``: the id of the trial whose final checkpoint this
    one continues from (its budget is then ``steps`` in total, not on top)."""
    trial = {"preset": preset, "variant": variant, "base": dict(base), "point": dict(point), "seed": int(seed),
             "steps": int(steps), "quick": bool(quick), "device": device, "figures": bool(figures), "parent": parent,
             "stage": stage}
    trial["id"] = trial_id(trial)
    return trial


def trial_config(trial: Mapping[str, Any]):
    """The trial's :class:`~paramsym.discovery.config.DiscoverConfig`: the preset's recipe for the
    variant ← (quick) ← ``base`` ← ``point`` ← seed, steps, device.

    Raises:
        ConfigError: an override key or value the configuration rejects.
    """
    from ..discovery.config import DiscoverConfig, DiscoverOverrides

    start = DiscoverConfig.quick if trial["quick"] else DiscoverConfig.for_preset
    cfg = DiscoverOverrides({**trial["base"], **trial["point"]}).apply(start(trial["preset"], trial["variant"]))
    return DiscoverOverrides({"seed": trial["seed"], "train.steps": trial["steps"], "device": trial["device"]}).apply(cfg)


def summarize(trial: Mapping[str, Any], metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The trial's row: identity, ``fits`` and the declared cell's metrics (ρ, factors, p95s, motion)."""
    declared = metrics["verdict"]["declared"]
    return {"id": trial["id"], "stage": trial["stage"], "variant": trial["variant"], "point": trial["point"],
            "seed": trial["seed"], "steps": trial["steps"], "parent": trial["parent"],
            "fits": bool(metrics["verdict"]["fits"]), "rho": declared.get("rho"), "factors": declared.get("factors"),
            **{k: declared[k] for k in METRICS if k in declared}}


_NO_MATPLOTLIB = "(Figures skipped: matplotlib is not installed; `pip install paramsym[viz]`.)"
_NO_FIGURES = "(Figures skipped: the sweep spec sets `figures: false`; `paramsym report DIR` draws them.)"


@contextmanager
def _no_figures(enabled: bool):
    """Skip the discovery report's figures while the block runs (``figures: false`` in a spec)."""
    if enabled:
        yield
        return
    from ..discovery import report

    saved = report.make_figures
    report.make_figures = lambda run: []
    try:
        yield
    finally:
        report.make_figures = saved


def _copy_checkpoint(parent_dir: Path, run_dir: Path, steps: int) -> None:
    """Seed ``run_dir`` with the parent's final checkpoint and block (config.json is written after)."""
    from ..errors import RunDirError
    from ..runs.rundir import RunDir

    parent = RunDir(parent_dir)
    ck = parent.load_checkpoint() if parent.has("metrics.json") else None
    if ck is None:
        raise RunDirError(f"{str(parent_dir)!r} has no finished run with a checkpoint to continue from; "
                          "run the sweep's candidate stage first (rerun with --resume).")
    state = ck[1]
    if state["step"] > steps:
        raise RunDirError(f"{str(parent_dir)!r} trained {state['step']} steps, more than the {steps} to continue to.")
    (run_dir / "checkpoint").mkdir(parents=True, exist_ok=True)
    shutil.copy2(parent_dir / "checkpoint" / state["tensor_file"], run_dir / "checkpoint" / state["tensor_file"])
    shutil.copy2(parent_dir / "checkpoint" / "state.json", run_dir / "checkpoint" / "state.json")
    shutil.copy2(parent_dir / "block.json", run_dir / "block.json")


def run_trial(trial: Mapping[str, Any], trials_root: str | os.PathLike) -> dict[str, Any]:
    """Run (or finish, or just read) one trial in ``trials_root/<id>/``; return its summary.

    * ``metrics.json`` present: nothing is trained, the summary is read from it;
    * ``config.json`` present (an interrupted trial): the run resumes from its last checkpoint;
    * otherwise a new run; with a ``parent``, it starts from the parent's final checkpoint and
      trains on to ``steps`` (the learning-rate schedule and curriculum are those of a
      ``steps``-step run from that step on).

    The thread count is the caller's (the backends' worker processes set one torch thread:
    a worker runs one trial at a time). A failure of
    the run itself (e.g. divergence) is returned as ``{"id", "error"}`` and written to
    ``error.json``; nothing in the directory is deleted.
    """
    from ..discovery.run import run_discovery
    from ..errors import ParamsymError
    from ..runs.rundir import RunDir

    root = Path(trials_root)
    run = RunDir(root / trial["id"])
    if run.has("metrics.json"):
        out = summarize(trial, run.read_json("metrics.json"))
        run.write_json(SUMMARY_FILE, out)
        return out
    cfg = trial_config(trial)
    run.write_json("trial.json", dict(trial))
    try:
        resume, continued = run.has("config.json"), False
        if not resume and trial.get("parent"):
            _copy_checkpoint(root / trial["parent"], run.path, int(trial["steps"]))
            continued = True
        with _no_figures(bool(trial.get("figures", True))):
            metrics = run_discovery(cfg, run, resume=resume, from_checkpoint=continued, progress=False)
        if not trial.get("figures", True):
            text = run.file("report.md").read_text(encoding="utf-8")
            run.write_text("report.md", text.replace(_NO_MATPLOTLIB, _NO_FIGURES))
    except ParamsymError as exc:
        err = {"id": trial["id"], "error": f"{type(exc).__name__}: {exc}"}
        run.write_json("error.json", err)
        return err
    out = summarize(trial, metrics)
    run.write_json(SUMMARY_FILE, out)
    return out
