"""The shared options of every command: one meaning for ``--seed``, ``--seeds``, ``--threads``,
``--out``, ``--resume``, ``--json`` and ``--quiet`` (standard library only at import).

The value checks are :mod:`paramsym.options` (re-exported here); this module adds the argparse
side:

* :func:`add_run_options` adds the shared flags with the same help text in every command;
  numeric ones are read as text and validated by :func:`seed_option` / :func:`threads_option`.
* :func:`config_from_flags` (from :mod:`paramsym.options`, so that the pure-math commands beside
  their concepts use it too) maps a command's flags onto its config's keys by one rule: flag
  ``--some-field`` writes key ``some_field`` (or the key of its :class:`~paramsym.options.Flag`,
  e.g. ``--steps`` → ``train.steps``) when given (argparse default ``None``), parsed by the
  key's validator; then ``--set KEY=VALUE`` writes its key (a flag is sugar for ``--set`` of its
  key: the same configuration, the same ``config_hash``); keys not given keep the config's value.
  Every run command registers its builder as the parser default ``config`` (``args.config(args)``
  → the configuration of a fresh run), so the configuration is resolvable without running.
* :func:`open_run` applies the one rule for the run directory:

  - ``--out DIR`` must be missing or empty; a non-empty ``DIR`` is refused (``RunDirError``)
    with the remedy: continue it with ``--resume DIR`` or pass a fresh directory. Nothing is
    replaced, so old files can never sit beside new ones.
  - ``--resume DIR`` continues the run in ``DIR`` with its saved configuration: ``DIR`` must
    exist and hold a run of this command (else a named ``RunDirError``: never a silent fresh
    start), and flags that would change the configuration are refused.
  - neither: the command's default (a new ``runs/...`` directory, or none: a temporary one).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from ..options import (
    MAX_SEED,
    MAX_THREADS,
    Flag,
    check_shared_options,
    config_from_flags,
    device_option,
    float_option,
    given_flags,
    int_option,
    path_option,
    seed_option,
    seeds_option,
    threads_option,
)

__all__ = ["CACHE_VARIABLE", "FILE_SUFFIXES", "MAX_SEED", "MAX_THREADS", "Flag", "add_run_options", "cache_dir_option",
           "check_shared_options", "command_line", "config_from_flags", "device_option", "float_option", "given_flags",
           "int_option", "open_run", "path_option", "resumes_kind", "run_dir_option", "seed_option", "seeds_option",
           "threads_option"]


#: the one environment variable paramsym reads (here, by :func:`cache_dir_option`, nowhere else): where
#: ``paramsym align --preset`` caches its trained models when ``--cache-dir`` is not given
CACHE_VARIABLE = "PARAMSYM_CACHE"


def cache_dir_option(given: str | None) -> str | None:
    """``given`` (``--cache-dir``), else ``$PARAMSYM_CACHE``, else ``None`` (``~/.cache/paramsym``): the one
    read of the environment by the library or the command line (the model loader is offline by
    ``local_files_only``, not by an environment variable)."""
    return given or os.environ.get(CACHE_VARIABLE) or None


#: the help of ``--set`` (every run command has it: :func:`add_run_options`)
SET_HELP = "set any config key, e.g. --set seed=3 (repeatable; each flag is sugar for --set of its key)"


def add_run_options(p: argparse.ArgumentParser, *, seed: bool = True, seeds: bool = False, threads: bool = True,
                    out: str = "the run directory (new or empty)", resume: bool = True, json: str = "print the "
                    "metrics as JSON", quiet: bool = True, set_help: str = SET_HELP) -> None:
    """Add the shared flags to command parser ``p`` (each the same in every command).

    ``--seed`` and ``--threads`` default to ``None`` (the config's value is used); their values
    are validated by :func:`config_from_flags` / :func:`threads_option`. ``--set KEY=VALUE``
    (``args.overrides``, repeatable; ``set_help=""``: none) sets any key of the command's
    configuration, applied by :func:`config_from_flags` after the flags.
    """
    if set_help:
        p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=set_help)
    if seed:
        p.add_argument("--seed", default=None, help="seed, an integer 0 <= N < 2**63 (default: the config's, 0)")
    if seeds:
        p.add_argument("--seeds", default=None, help="comma-separated distinct seeds, each 0 <= N < 2**63")
    if threads:
        p.add_argument("--threads", default=None, help="torch CPU threads, 1..4096 (default 1: on a shared machine "
                       "more threads spin-wait and run slower)")
    if out:
        p.add_argument("--out", default=None, metavar="DIR", help=out)
    if resume:
        p.add_argument("--resume", default=None, metavar="DIR", help="continue the run in DIR with its saved "
                       "configuration (a finished run is reported, not rerun)")
    if json:
        p.add_argument("--json", action="store_true", help=json)
    if quiet:
        p.add_argument("--quiet", action="store_true", help="no progress bars")


#: the suffixes of an ``--out`` naming a file (the form ``census --export`` and ``attention build`` had)
FILE_SUFFIXES = (".json", ".yaml", ".yml", ".safetensors")


def run_dir_option(out: str | None, command: str, artifact: str) -> None:
    """Refuse an ``--out`` ending in a file suffix (:data:`FILE_SUFFIXES`) for a command whose output is a
    run directory holding ``artifact`` (the old ``--out FILE`` form), naming where the file goes now.

    Raises:
        ConfigError: ``out`` ends in ``.json``, ``.yaml``, ``.yml`` or ``.safetensors``.
    """
    from ..errors import ConfigError

    if out is not None and out.lower().endswith(FILE_SUFFIXES):
        stem = os.path.splitext(out)[0]
        raise ConfigError(f"--out {out!r} names a file, but `{command}` now writes a run directory: pass --out DIR "
                          f"(e.g. --out {stem!r}); the file is written to DIR/{artifact}.")


def resumes_kind(args: argparse.Namespace, kind: str) -> bool:
    """``--resume DIR`` of a run of ``kind`` (a command making two kinds continues either: ``paramsym align
    --resume DIR``, ``paramsym census --resume DIR``)."""
    if getattr(args, "resume", None) is None or not os.path.isfile(os.path.join(args.resume, "config.json")):
        return False
    from ..runs.rundir import RunDir

    return RunDir(args.resume).kind() == kind


def command_line(args: argparse.Namespace | None = None) -> str:
    """The command line as given to :func:`paramsym.cli.main` (``paramsym ...``; ``sys.argv`` without
    ``args``), recorded in a run's provenance."""
    import shlex

    argv = getattr(args, "argv", None)
    return shlex.join(["paramsym", *(sys.argv[1:] if argv is None else argv)])


def open_run(args: argparse.Namespace, *, kind: str, config_flags: Mapping[str, Any] = (), default: str | None = None):
    """The run directory of a command, by the one rule (module docstring); ``(run, resuming)``.

    Args:
        args: parsed arguments with ``out`` and ``resume``.
        kind: the run kind of the command (a key of :data:`paramsym.runs.kinds.KINDS`).
        config_flags: the command's configuration flags (refused with ``--resume``).
        default: the directory when neither ``--out`` nor ``--resume`` is given (``None``: a new
            temporary directory, removed at exit: the command prints its result and keeps no files).

    Raises:
        ConfigError: ``--resume`` with configuration flags, or with a different ``--out``.
        RunDirError: ``--resume`` of a missing directory or of another command's run; ``--out``
            (or the default) not empty.
    """
    from ..errors import ConfigError, RunDirError
    from ..runs.kinds import KINDS
    from ..runs.rundir import RunDir

    command = KINDS[kind].command
    resume, out = getattr(args, "resume", None), getattr(args, "out", None)
    if resume is not None:
        if out is not None and os.path.abspath(out) != os.path.abspath(resume):
            raise ConfigError(f"--resume {resume!r} continues the run in that directory; drop --out {out!r} (or pass "
                              "the same directory).")
        bad = given_flags(args, config_flags)
        if bad:
            raise ConfigError(f"--resume continues a run with its saved configuration; do not pass {', '.join(bad)} "
                              f"with it (or start a fresh run with --out NEWDIR).")
        if not os.path.isdir(resume):
            raise RunDirError(f"--resume {resume!r}: no such directory; expected the directory of an earlier "
                              f"`{command} --out DIR` run. Check the path, or drop --resume to start a fresh run.")
        if not os.path.isfile(os.path.join(resume, "config.json")):
            raise RunDirError(f"--resume {resume!r} holds no config.json, so it is not a paramsym run; pass the "
                              f"directory of an earlier `{command} --out DIR` run, or drop --resume.")
        run = RunDir(resume)
        have = run.kind()
        if have != kind:
            other = f"`{KINDS[have].command} --resume {resume}`" if have in KINDS else "the program that made it"
            raise RunDirError(f"--resume {resume!r} holds a run of kind {have!r}, not {kind!r}; resume it with {other}, "
                              f"or pass a `{command}` run directory.")
        return run, True
    if out is not None or default is not None:
        return RunDir.fresh(out if out is not None else default, command=command), False
    import atexit
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix=f"paramsym-{kind}-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    return RunDir(tmp), False


def run_kind(args: argparse.Namespace, *, kind: str, cfg: Any, config_flags: Mapping[str, Any], threads: int | None,
             **execute_options: Any):
    """Run a managed kind from the command line: the one sequence every run-kind command follows.

    Opens the run directory by :func:`open_run` (the ``--out``/``--resume`` rule), reloads the
    stored configuration when resuming (``cfg`` is then ignored), sets the torch threads and calls
    :func:`paramsym.runs.execute.execute` with the command line, ``--json``/``--quiet``
    (no progress bars) and the config's ``seed`` where it has one. Returns ``(run, cfg, outcome)``
    (``cfg``: the configuration that ran, the stored one when resuming). ``threads=None``: a kind
    that never uses torch (``group``, ``attention ...``), which is then not imported.
    """
    from ..runs.execute import execute, load_run_config

    run, resuming = open_run(args, kind=kind, config_flags=config_flags)
    if resuming:
        cfg = load_run_config(run)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    if "seed" not in execute_options and isinstance(getattr(cfg, "seed", None), int):
        execute_options["seed"] = cfg.seed
    outcome = execute(kind, cfg, run, resume=resuming, command=command_line(args),
                      progress=not getattr(args, "json", False) and not getattr(args, "quiet", False),
                      **execute_options)
    return run, cfg, outcome
