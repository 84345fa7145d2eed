"""Reuse of finished sub-runs only when their provenance matches (one rule for every experiment).

The experiments that train several discovery runs (``objectives``, ``lifting``,
``transformer_discovery``) keep each in a sub-directory of their run directory and reuse a
finished one instead of training it again. A sub-run is reused **only** when its
``provenance.json`` (written when it finished, :func:`paramsym.runs.provenance.provenance` of its
resolved configuration, with its wall and CPU seconds) has the ``config_hash`` of the
configuration asked for now and the current ``code_version``
(:func:`paramsym.runs.provenance.stale_reason`). Otherwise it is *stale*, and ``reuse`` decides:

* ``"refuse"`` (default): :class:`~paramsym.errors.StaleRunError` before anything is written,
  naming the sub-run and why it is stale;
* ``"rerun"``: the stale directory is moved aside to ``<name>.stale-<UTC time>`` (nothing is
  deleted) and the sub-run is trained again;
* ``"stale"``: the stale sub-run is reused and reported with ``stale: true`` and its reason.

An interrupted sub-run (``config.json`` without ``metrics.json``) resumes when its saved
configuration has the requested hash; otherwise it is stale (an unfinished stale run cannot be
reused: ``"stale"`` refuses it too). A non-empty directory holding neither is not a sub-run:
:class:`~paramsym.errors.RunDirError`, nothing touched.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..config import DOCUMENT_KEYS, to_dict
from ..errors import ConfigError, RunDirError, StaleRunError
from .provenance import config_hash, provenance, stale_reason
from .rundir import read_json, write_json

__all__ = ["PROVENANCE", "RECORD", "REUSE_MODES", "cached_tensors", "check_reuse", "cpu_seconds", "elapsed_seconds",
           "move_aside",
           "plan_subrun", "run_subrun", "write_subruns"]

REUSE_MODES = ("refuse", "rerun", "stale")
#: file of a finished sub-run with its provenance and seconds
PROVENANCE = "provenance.json"
#: file of an experiment run directory listing what each sub-run did (reused, stale, seconds)
SUBRUNS = "subruns.json"
#: file `paramsym reproduce` keeps in a run directory it wraps (its provenance record); the wrapped run
#: treats a directory holding only this file as empty
RECORD = "reproduce.json"

_HINT = ("move it away or use another output directory (`paramsym reproduce`: --rerun recomputes it, keeping the old "
         "one beside it; --reuse-stale reuses it, marked stale)")


def check_reuse(reuse: str) -> str:
    """``reuse`` if it is one of :data:`REUSE_MODES`, else :class:`~paramsym.errors.ConfigError`."""
    if reuse not in REUSE_MODES:
        raise ConfigError(f"reuse must be one of {REUSE_MODES}; received {reuse!r}.")
    return reuse


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (user + system)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def move_aside(path: Path) -> Path:
    """Rename ``path`` to ``<name>.stale-<UTC time>`` beside it (never deletes); return the new path."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    new = path.with_name(f"{path.name}.stale-{stamp}")
    k = 1
    while new.exists():
        new = path.with_name(f"{path.name}.stale-{stamp}-{k}")
        k += 1
    path.rename(new)
    return new


def _data(cfg: Any) -> Any:
    return to_dict(cfg)


def plan_subrun(path: Path, cfg: Any, reuse: str = "refuse") -> dict[str, Any]:
    """What to do with sub-run directory ``path`` for resolved config ``cfg`` (writes nothing).

    Returns ``{"action": "new" | "reuse" | "resume" | "rerun", "stale": bool, "reason": str | None}``.

    Raises:
        StaleRunError: stale and ``reuse == "refuse"`` (or unfinished and stale, ``reuse == "stale"``).
        RunDirError: ``path`` is a file, or a non-empty directory that is not a sub-run.
    """
    check_reuse(reuse)
    if path.exists() and not path.is_dir():
        raise RunDirError(f"{str(path)!r} is a file where a sub-run directory belongs; move it away (nothing was "
                          "written).")
    if not path.exists() or not any(path.iterdir()):
        return {"action": "new", "stale": False, "reason": None}
    data = _data(cfg)
    if (path / "metrics.json").exists():
        rec = read_json(path / PROVENANCE, "a sub-run provenance record") if (path / PROVENANCE).exists() else None
        reason = stale_reason(rec, data)
        if reason is None:
            return {"action": "reuse", "stale": False, "reason": None, "record": rec}
        if reuse == "stale":
            return {"action": "reuse", "stale": True, "reason": reason, "record": rec}
        if reuse == "rerun":
            return {"action": "rerun", "stale": True, "reason": reason}
        raise StaleRunError(f"finished sub-run {str(path)!r} is stale: {reason}; {_HINT}.")
    if (path / "config.json").exists():
        saved = read_json(path / "config.json", "a sub-run configuration")
        saved = {k: v for k, v in saved.items() if k not in DOCUMENT_KEYS} if isinstance(saved, dict) else saved
        if config_hash(saved) == config_hash(data):
            return {"action": "resume", "stale": False, "reason": None}
        reason = f"its saved configuration (hash {config_hash(saved)}) differs from this one ({config_hash(data)})"
        if reuse == "rerun":
            return {"action": "rerun", "stale": True, "reason": reason}
        raise StaleRunError(f"unfinished sub-run {str(path)!r} is stale: {reason}; an unfinished run cannot be reused; "
                            f"{_HINT}.")
    raise RunDirError(f"{str(path)!r} holds files that are not a discovery run (no config.json or metrics.json); "
                      "move them away or use another output directory (nothing was touched).")


def run_subrun(path: Path, cfg: Any, train: Callable[[bool], dict[str, Any]], reuse: str = "refuse",
               plan: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Reuse, resume or train the sub-run in ``path`` (:func:`plan_subrun`); return ``(metrics, info)``.

    ``train(resume)`` trains into ``path`` and returns its metrics. ``info``: ``reused``, ``stale``,
    ``stale_reason``, ``seconds`` and ``cpu_seconds`` (of the run that made the metrics: the
    recorded ones when reused), ``moved_to`` (where a stale directory went under ``"rerun"``) and
    the sub-run's ``code_version`` / ``config_hash``.
    """
    plan = dict(plan or plan_subrun(path, cfg, reuse))
    info: dict[str, Any] = {"reused": False, "stale": bool(plan["stale"]), "stale_reason": plan["reason"]}
    if plan["action"] == "reuse":
        rec = plan.get("record") or {}
        info.update(reused=True, seconds=rec.get("seconds"), cpu_seconds=rec.get("cpu_seconds"),
                    code_version=rec.get("code_version"), config_hash=rec.get("config_hash"),
                    date_utc=rec.get("date_utc"))
        return read_json(path / "metrics.json", "a sub-run's metrics"), info
    if plan["action"] == "rerun":
        info["moved_to"] = str(move_aside(path))
    t0, c0 = time.time(), cpu_seconds()
    metrics = train(plan["action"] == "resume")
    rec = {**provenance(_data(cfg)), "seconds": time.time() - t0, "cpu_seconds": cpu_seconds() - c0,
           "resumed": plan["action"] == "resume"}
    write_json(path / PROVENANCE, rec)
    info.update(seconds=rec["seconds"], cpu_seconds=rec["cpu_seconds"], code_version=rec["code_version"],
                config_hash=rec["config_hash"], date_utc=rec.get("date_utc"))
    return metrics, info


def elapsed_seconds(spans: list[tuple[float, float]]) -> float:
    """The elapsed wall time covered by ``(start, end)`` spans (POSIX seconds): the length of their union.

    Sub-runs trained in parallel processes overlap, so the sum of their seconds is no wall time; the union of
    their spans (a finished sub-run's span ends at its provenance ``date_utc`` and lasts its ``seconds``) is.
    """
    total, cur_start, cur_end = 0.0, None, None
    for a, b in sorted(spans):
        if cur_end is None or a > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = a, b
        else:
            cur_end = max(cur_end, b)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def write_subruns(out: Path, infos: Mapping[str, Mapping[str, Any]]) -> None:
    """Write ``out/subruns.json``: per sub-run what :func:`run_subrun` reported (kept out of ``metrics.json``,
    which holds no wall-clock times)."""
    write_json(out / SUBRUNS, {k: dict(v) for k, v in infos.items()})


def _file_record(path: Path) -> dict[str, Any] | None:
    """The provenance record kept in the metadata of cache file ``path`` (``None``: it has none)."""
    import json

    from safetensors import safe_open

    from ..errors import RunFileError

    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
    except Exception as exc:  # SafetensorError or OSError: a truncated or foreign file
        raise RunFileError(f"cache file {str(path)!r} is truncated or not a safetensors file ({type(exc).__name__}: "
                           f"{exc}); move it away (it is made again).") from None
    try:
        record = json.loads(meta["provenance"]) if "provenance" in meta else None
    except json.JSONDecodeError:
        record = None
    return record if isinstance(record, dict) else None


def cached_tensors(path: Path, cfg: Any, make: Callable[[], Mapping[str, Any]], reuse: str = "rerun") -> dict[str, Any]:
    """The tensors of cache file ``path`` made by ``make()`` from configuration ``cfg``, by the one
    reuse rule: a cached file is reused only when the provenance in its metadata
    (:func:`paramsym.runs.provenance.provenance` of ``cfg``) has this ``config_hash`` and the
    current ``code_version`` (:func:`paramsym.runs.provenance.stale_reason`); otherwise, by
    ``reuse``, it is moved aside (``<name>.stale-<UTC time>``, nothing deleted) and made again
    (``"rerun"``, the default), refused (``"refuse"``: :class:`~paramsym.errors.StaleRunError`
    naming the file and why), or reused marked by a line on stderr (``"stale"``).

    A new file is written atomically and read back (a fresh and a cached run then use the very
    same tensors).
    """
    import sys

    from .rundir import load_tensors, save_tensors

    check_reuse(reuse)
    path = Path(path)
    if path.exists():
        reason = stale_reason(_file_record(path), cfg)
        if reason is None:
            return load_tensors(path)
        if reuse == "refuse":
            raise StaleRunError(f"cache file {str(path)!r} is stale: {reason}; move it away, or let it be made again "
                                "(reuse 'rerun').")
        if reuse == "stale":
            print(f"paramsym: reusing the stale cache file {str(path)!r} ({reason}).", file=sys.stderr)
            return load_tensors(path)
        move_aside(path)
    import json

    data = to_dict(cfg)
    save_tensors(path, make(), {"config": json.dumps(data), "provenance": json.dumps(provenance(data))})
    return load_tensors(path)
