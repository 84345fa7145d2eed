"""Starting and resuming a sweep: :func:`run_sweep` and :func:`stored_spec`.

They go through :func:`paramsym.runs.execute.execute` (the run directory, provenance,
the ``sweep`` kind of :mod:`.kind`), so they sit above the protocol (:mod:`.driver`), which the
registry reaches through :mod:`.kind`: the imports go launch -> registry -> kind -> driver only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..errors import RunFileError, SweepSpecError
from ..runs.execute import execute, load_run_config
from .driver import KIND, _open_out, plan_candidates
from .kind import SweepConfig
from .spec import SweepSpec

__all__ = ["run_sweep", "stored_spec"]


def stored_spec(out: str | os.PathLike) -> SweepSpec:
    """The spec a sweep directory was started with (from its ``config.json``).

    Raises:
        RunDirError: not a sweep directory; RunFileError: an unreadable or edited config.json.
    """
    return load_run_config(_open_out(None, out, resume=True)).spec


def run_sweep(spec: SweepSpec | None, out: str | os.PathLike | None = None, *, backend: Any = "local",
              workers: int = 1, address: str | None = None, resume: bool = False, progress: bool = True,
              on_trial: Callable[[dict[str, Any]], None] | None = None,
              command: str | None = None) -> dict[str, Any]:
    """Run the sweep protocol of ``spec``; return the table (also ``OUT/metrics.json`` and ``OUT/table.json``).

    Args:
        spec: a validated spec (:func:`~.spec.load_spec`); ``None`` with ``resume``: the spec the
            sweep in ``out`` was started with.
        out: output directory; new sweeps need it missing or empty (default
            ``runs/sweep-<name>-<time>``).
        backend: ``local`` (process pool) or ``ray`` (Ray Tune), or a backend object from
            :func:`~.backends.make_backend` to share between sweeps (its workers stay started;
            the caller closes it).
        workers: trials at once (local processes; Ray CPUs of a local instance).
        address: Ray cluster to connect to (``HOST:PORT``, ``ray://HOST:PORT``, ``auto``).
        resume: continue the sweep in ``out``: finished trials are read, interrupted ones resume
            from their checkpoints; a finished sweep is returned as it is.
        progress: a progress bar over each stage's trials and a one-line summary per stage (stderr).
        on_trial: called in the driver with each finished trial's summary (e.g. for logging).
        command: the command line, recorded in the provenance.

    Raises:
        SweepSpecError: a grid value the configuration rejects (before anything is written), or
            ``resume`` with a spec other than the one the sweep was started with;
        RunDirError: ``out`` is not empty without ``resume``, or (with ``resume``) missing or not
            a sweep directory;
        BackendUnavailableError: Ray missing or its cluster unreachable (nothing is deleted).
    """
    from .backends import make_backend

    if spec is None:
        if not resume:
            raise SweepSpecError("a new sweep needs its spec (SPEC.yaml); only --resume reads it from the sweep.")
        spec = stored_spec(out)
    plan_candidates(spec)  # every configuration checked before anything starts
    run = _open_out(spec, out, resume)
    owned = isinstance(backend, str)
    engine = make_backend(backend, workers, address) if owned else backend  # an unusable backend fails here
    try:
        if resume and run.has("metrics.json"):  # finished: reported, nothing rerun or rewritten
            table = run.read_json("metrics.json")
            if not run.has("table.json") or run.read_json("table.json") != table:  # a corrupt copy is named
                raise RunFileError(f"{str(run.file('table.json'))!r} is missing or differs from metrics.json (the sweep's "
                                   "table is written to both); restore it, or rerun the sweep into a new --out.")
            return table
        outcome = execute(KIND, SweepConfig(spec), run, resume=resume, command=command, progress=progress,
                          seed=spec.validation_seeds[0],
                          options={"engine": engine, "on_trial": on_trial},
                          env={"device": spec.device, "backend": engine.name, "workers": engine.workers,
                               "address": address})
        return outcome.metrics
    finally:
        if owned:
            engine.close()
