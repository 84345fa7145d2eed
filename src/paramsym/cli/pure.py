"""``paramsym group`` and ``paramsym attention ...``: the pure-math commands, as run kinds.

Their parsers and computations live beside their concepts (:mod:`paramsym.groups.cli`,
:mod:`paramsym.attention.cli`, :mod:`paramsym.attention.commands`: no torch, no run
directories). This module registers them and adds the shared ``--out DIR`` / ``--resume DIR``
(:func:`paramsym.cli.options.add_run_options`) to those that compute a result — ``group``,
``attention count``, ``attention table``, ``attention clusterings``, ``attention classify`` and
``attention build`` (which needs ``--out DIR``: its layer is the run directory's
``layer.safetensors``). With neither flag a command runs as before and
prints the same; with one, it runs by the one sequence of every run kind
(:func:`paramsym.cli.options.run_kind`: the ``--out``/``--resume`` rule, ``config.json`` with
provenance, ``metrics.json`` = the ``--json`` result, ``env.json``, ``report.md``) and then prints
exactly what it prints without ``--out``. Torch is never imported for them (no ``--threads``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["register"]

_OUT = "also keep a run directory here (new or empty): config.json, metrics.json (the --json result), env.json, " \
       "output.txt, report.md"


def register(subparsers) -> None:
    """Register ``attention`` and ``group`` (in that order) with ``--out``/``--resume`` where they are run kinds."""
    from ..attention import build, commands
    from ..attention import cli as attention_cli
    from ..groups import cli as group_cli

    parsers = attention_cli.register(subparsers)
    _kind(parsers["count"], "attention-count", commands.count_config, commands.COUNT_FLAGS, _print_json)
    _kind(parsers["table"], "attention", commands.table_config, commands.TABLE_FLAGS, _print_json,
          json_flag=lambda args: args.json or args.format == "json", note=True)
    _kind(parsers["clusterings"], "attention-clusterings", commands.clusterings_config, commands.CLUSTERINGS_FLAGS,
          _print_json)
    _kind(parsers["classify"], "attention-classify", commands.classify_config, commands.CLASSIFY_FLAGS, _print_json)
    _kind(parsers["build"], "attention-build", build.build_config, build.BUILD_FLAGS, _print_json, note=True,
          artifact="layer.safetensors")
    p = group_cli.register(subparsers)
    _kind(p, "group", group_cli.describe_config, group_cli.DESCRIBE_FLAGS, _dump_group)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2))


def _dump_group(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=1)
    print()


def _kind(parser: argparse.ArgumentParser, kind: str, build: Callable[[argparse.Namespace], Any],
          flags: dict[str, Any], show_json: Callable[[Any], None], *,
          json_flag: Callable[[argparse.Namespace], bool] = lambda args: args.json, note: bool = False,
          artifact: str | None = None) -> None:
    """Give ``parser`` the run-directory flags and route ``--out``/``--resume`` through :func:`run_kind`
    (``artifact``: the file the kind writes into its run directory; an ``--out`` naming a file is refused,
    :func:`paramsym.cli.options.run_dir_option`)."""
    from .options import add_run_options

    add_run_options(parser, seed=False, threads=False, out=_OUT, json="", quiet=False)
    plain = parser.get_default("func")

    def func(args: argparse.Namespace) -> int:
        if args.out is None and args.resume is None:
            return plain(args)
        from ..kinds.math import OUTPUT
        from .options import run_kind

        cfg = None  # read back from the run directory when resuming
        if args.resume is None:
            from ..attention.cli import require

            require(args)  # argparse's message for a missing GROUP, --group, --heads, WEIGHTS
            if artifact is not None:
                from ..runs.kinds import KINDS
                from .options import run_dir_option

                run_dir_option(args.out, KINDS[kind].command, artifact)
            cfg = build(args)
        run, cfg, outcome = run_kind(args, kind=kind, cfg=cfg, config_flags=flags, threads=None)
        if note:
            print(f"wrote run directory {run.path}", file=sys.stderr)
        if json_flag(args):
            show_json(outcome.metrics)
        elif run.has(OUTPUT):
            print(run.file(OUTPUT).read_text(encoding="utf-8"), end="")
        else:  # a table run written before output.txt existed
            from ..attention.commands import table_text

            print(table_text({"group": cfg.group, "rep": cfg.rep, "heads": cfg.heads, **outcome.metrics}), end="")
        return 0

    parser.set_defaults(func=func, config=build)
