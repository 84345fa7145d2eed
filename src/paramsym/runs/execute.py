"""The run verb: :func:`execute` (the one place a run directory's common files are written, fresh
or resumed) and :func:`load_run_config` (the typed configuration of a run, back from its
``config.json``). ``config.json`` is written and read by the one serializer
(:func:`paramsym.config.to_document` / :func:`paramsym.config.from_document`).

It imports :mod:`.kinds` and :mod:`.reports`, neither of which imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ParamsymError, RunDirError, RunFileError
from .kinds import checked_config, get_kind
from .reports import render

__all__ = ["Outcome", "execute", "load_run_config"]


# ------------------------------------------------------------------------------- the runner


@dataclass(frozen=True)
class Outcome:
    """What :func:`execute` returns: the metrics, the run directory, and whether the run had
    already finished before this call (``--resume`` of a finished run)."""

    metrics: dict[str, Any]
    run: Any
    already_finished: bool = False


def load_run_config(run) -> Any:
    """The typed configuration of run directory ``run`` (by the kind in its ``config.json``): the one
    reader of every kind's ``config.json``, ``discovery`` included (:func:`paramsym.discovery.files.load_config`
    is this with the kind checked).

    The stored ``config_hash`` must be the hash of the fields as written or of the configuration they
    read back as (:func:`~paramsym.config.from_document`: renames applied, types coerced), so that a run
    written before a field was renamed (``train.memory_gb``) still loads and resumes.

    Raises:
        RunDirError: unknown kind, or a kind without a configuration class.
        RunFileError: ``config.json`` corrupt, or edited since the run started (its ``config_hash``
            no longer matches the configuration).
        ConfigFileError: a field of ``config.json`` unknown or of the wrong type (named).
    """
    from ..config import DOCUMENT_KEYS, from_document
    from .provenance import config_hash

    data = checked_config(run)
    kind = get_kind(data.get("kind"))
    spec = kind.load()
    if spec.config is None:
        raise RunDirError(f"{str(run.path)!r} is a {kind.name} run, whose configuration is its preset's; rerun it "
                          f"with `{kind.command}`.")
    cfg = from_document(spec.config, data, str(run.file("config.json")))
    stored = (data.get("provenance") or {}).get("config_hash") if isinstance(data.get("provenance"), dict) else None
    # the hash is of the fields as written (an old run's, before the reader's renames and type coercions) or of
    # the configuration they read back as (a run whose former keys were rewritten: the same configuration)
    if stored is not None and stored not in (config_hash({k: v for k, v in data.items() if k not in DOCUMENT_KEYS}),
                                             config_hash(cfg)):
        raise RunFileError(f"{str(run.file('config.json'))!r} was edited after the run started (its config_hash "
                           f"{stored!r} no longer matches the configuration); restore it, or start a fresh run with "
                           "--out NEWDIR.")
    return cfg


_COMMON = ("config.json", "env.json", "timing.json")


def _discard(out) -> None:
    """Remove the files :func:`execute` wrote into a fresh run directory (and it, when left empty)
    — only while the run made nothing else: a run that had begun its own files (a checkpoint, a
    sub-run) keeps its ``config.json``, so it can be resumed or inspected."""
    import os

    try:
        if any(entry.name not in _COMMON for entry in os.scandir(out.path)):
            return
    except OSError:
        return
    for name in _COMMON:
        try:
            os.unlink(out.file(name))
        except OSError:
            pass
    try:
        os.rmdir(out.path)
    except OSError:  # not empty or already gone
        pass


def execute(kind: str, cfg: Any, out, *, resume: bool = False, command: str | None = None, progress: bool = True,
            seed: int | None = None, options: dict[str, Any] | None = None, env: dict[str, Any] | None = None
            ) -> Outcome:
    """Run a managed kind: the one place its run directory's common files are written.

    A fresh run writes ``config.json`` = ``{"kind": kind, <fields of cfg>, "provenance": {...}}``
    (:func:`paramsym.config.to_document`; :func:`paramsym.runs.provenance.provenance` of ``cfg`` and ``command``), appends a start to
    ``env.json``, calls the kind's ``run(cfg, out, progress=...)`` and writes its metrics to
    ``metrics.json`` and the rendered ``report.md``. With ``resume=True`` the run in ``out``
    continues: a finished run (``metrics.json`` present) is returned unchanged; otherwise the
    start is recorded (``resumed: true``) and ``run`` runs again with ``cfg`` (which must be the
    run's saved configuration, :func:`load_run_config`), continuing from its checkpoint if it
    keeps one.

    Args:
        kind: a key of :data:`KINDS` registered with ``managed=True``.
        cfg: its configuration (an instance of the kind's config class).
        out: the :class:`~paramsym.runs.rundir.RunDir` (empty for a fresh run).
        resume: continue the run in ``out``.
        command: the command line, recorded in the provenance.
        progress: show progress bars.
        seed: the seed recorded in ``env.json``.
        options: run-time options passed on to ``run`` that are not configuration (they do not
            change the metrics: e.g. the sweep's backend and worker count).
        env: extra entries of this start in ``env.json`` (e.g. those options).

    Raises:
        RunDirError: ``kind`` is not a managed kind, or ``out`` holds another kind's run.
    """
    from ..config import to_document
    from .provenance import provenance

    spec = get_kind(kind).load()
    if not spec.managed or spec.config is None or not isinstance(cfg, spec.config):
        raise RunDirError(f"run kind {kind!r} is not run through execute() with a {type(cfg).__name__}.")
    if resume:
        have = out.kind()
        if have != kind:
            raise RunDirError(f"{str(out.path)!r} holds a {have} run, not a {kind} run; resume it with "
                              f"`{get_kind(have).command} --resume {out.path}`.")
        if out.has("metrics.json"):
            return Outcome(out.read_json("metrics.json"), out, already_finished=True)
    else:
        out.write_json("config.json", to_document(kind, cfg, provenance(cfg, command=command)))
    out.write_env(seed, **{"resumed": resume, **(env or {})})
    try:
        metrics = spec.run(cfg, out, progress=progress, **(options or {}))
    except ParamsymError:
        if not resume:  # bad input found late (e.g. a layer the model lacks): leave no half-made run behind
            _discard(out)
        raise
    out.write_json("metrics.json", metrics)
    out.write_text("report.md", render(out))
    return Outcome(out.read_json("metrics.json"), out)

