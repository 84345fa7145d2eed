"""The ``paramsym`` command line.

Sub-commands live in modules with ``register(subparsers)``, which adds their parsers and sets
``func`` (a callable taking the parsed arguments and returning an exit code): the training and
reproduction commands here (:mod:`paramsym.cli.discover`, :mod:`paramsym.cli.attribute`), the
pure-math ones beside their concepts (:mod:`paramsym.attention.cli`, :mod:`paramsym.groups.cli`).

Fast start: this module and every sub-command module import only the standard library at their
top level (heavy imports sit inside the command functions), so ``paramsym --version``,
``paramsym group ...`` and ``paramsym attention count|table|clusterings`` never import torch.

Errors: library errors (:class:`~paramsym.errors.ParamsymError`) are printed as one clear line
``paramsym CMD: error: <Name>: <message>`` and exit with status 2, never as a traceback; as a
safety net, so are file-system errors (``OSError``), corrupt JSON and corrupt safetensors files.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from .. import __version__
from ..errors import ParamsymError

__all__ = ["COMMAND_MODULES", "build_parser", "main"]

#: Modules that contribute sub-commands (each has ``register(subparsers)``).
COMMAND_MODULES = [
    "paramsym.cli.discover",
    "paramsym.cli.attribute",
    "paramsym.cli.affine",
    "paramsym.cli.census",
    "paramsym.cli.compensate",
    "paramsym.attention.cli",
    "paramsym.groups.cli",
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="paramsym",
        description="Symmetry in neural-network parameter spaces.",
    )
    parser.add_argument("--version", action="version", version=f"paramsym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _error(command: str, name: str, message: str) -> int:
    print(f"paramsym {command}: error: {name}: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    command = args.command
    try:
        return int(args.func(args) or 0)
    except ParamsymError as exc:
        return _error(command, type(exc).__name__, str(exc))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and closed early
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except json.JSONDecodeError as exc:
        return _error(command, type(exc).__name__,
                      f"a JSON file is not valid JSON ({exc}); it was probably truncated by an interrupted "
                      "write: delete it and rerun the command that makes it.")
    except OSError as exc:
        where = f" (path: {exc.filename!r})" if exc.filename else ""
        return _error(command, type(exc).__name__,
                      f"{exc.strerror or exc}{where}; check that the path exists, is the right kind of file "
                      "and that you may read/write it.")
    except Exception as exc:
        if type(exc).__name__ == "SafetensorError":  # safetensors' own error type (a Rust extension)
            return _error(command, "SafetensorError",
                          f"a .safetensors file could not be read ({exc}); it is corrupt or truncated: delete it "
                          "and rerun the command that makes it.")
        raise
