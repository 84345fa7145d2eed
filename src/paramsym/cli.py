"""The ``paramsym`` command line.

Sub-commands live next to the concept they expose; each module in ``COMMAND_MODULES`` provides
``register(subparsers)`` which adds its parsers and sets ``func`` (a callable taking the parsed
arguments and returning an exit code). Library errors (:class:`ParamsymError`) are printed as
one clear line and exit with status 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import ParamsymError

#: Modules that contribute sub-commands (each has ``register(subparsers)``).
COMMAND_MODULES = [
    "paramsym.discovery.cli",
    "paramsym.attention.cli",
    "paramsym.attribution.cli",
    "paramsym.groups.cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="paramsym",
        description="Symmetry in neural-network parameter spaces.",
    )
    parser.add_argument("--version", action="version", version=f"paramsym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):  # module not written yet in this checkout
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        return int(args.func(args) or 0)
    except ParamsymError as exc:
        print(f"paramsym {args.command}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and closed early
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
