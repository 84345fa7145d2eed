"""The ``paramsym`` command line.

Sub-commands live in modules with ``register(subparsers)``, which adds their parsers and sets
``func`` (a callable taking the parsed arguments and returning an exit code): the training and
reproduction commands here (:mod:`paramsym.cli.discover`, :mod:`paramsym.cli.attribute`), the
pure-math ones beside their concepts (:mod:`paramsym.attention.cli`, :mod:`paramsym.groups.cli`),
registered with their run-directory flags by :mod:`paramsym.cli.pure`.

Fast start: this module and every sub-command module import only the standard library at their
top level (heavy imports sit inside the command functions), so ``paramsym --version``,
``paramsym group ...`` and ``paramsym attention count|table|clusterings`` never import torch.

Usage errors (a missing or unknown argument, a bad choice) are one line too: the parsers are
:class:`ArgumentParser`, whose ``error`` prints ``paramsym CMD: error: <message>; see paramsym CMD
--help`` (no usage block) and exits with status 2; every sub-command level requires its
sub-command.

Errors: library errors (:class:`~paramsym.errors.ParamsymError`) are printed as one clear line
``paramsym CMD: error: <Name>: <message>`` and exit with status 2, never as a traceback; as a
safety net, so are file-system errors (``OSError``), corrupt JSON and corrupt safetensors files,
and ``MemoryError`` (an input far beyond what fits).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from .. import __version__
from ..errors import ParamsymError

__all__ = ["COMMAND_MODULES", "ArgumentParser", "build_parser", "main"]

#: Modules that contribute sub-commands (each has ``register(subparsers)``).
COMMAND_MODULES = [
    "paramsym.cli.discover",
    "paramsym.cli.attribute",
    "paramsym.cli.affine",
    "paramsym.cli.census",
    "paramsym.cli.compensate",
    "paramsym.cli.sweep",
    "paramsym.cli.align",
    "paramsym.cli.teleport",
    "paramsym.cli.reproduce",
    "paramsym.cli.pure",  # `attention` and `group` (parsers beside their concepts) with --out/--resume
]


def one_line(text: str) -> str:
    """``text`` as one printable line: whitespace runs collapsed, control characters escaped."""
    text = " ".join(str(text).split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors are one line on stderr (exit status 2).

    Sub-parsers inherit the class (``add_subparsers`` passes ``parser_class=type(self)``), and
    their sub-commands are required, so ``paramsym attention`` without a sub-command is a usage
    error rather than a help page with another exit status.
    """

    def error(self, message: str):  # noqa: D102 (argparse API)
        self.exit(2, f"{self.prog}: error: {one_line(message)}; see {self.prog} --help\n")

    def add_subparsers(self, **kwargs):  # noqa: D102 (argparse API)
        kwargs.setdefault("required", True)
        return super().add_subparsers(**kwargs)


def build_parser() -> ArgumentParser:
    """The argument parser with every sub-command registered."""
    parser = ArgumentParser(
        prog="paramsym",
        description="Symmetry in neural-network parameter spaces.",
    )
    parser.add_argument("--version", action="version", version=f"paramsym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _error(command: str, name: str, message: str) -> int:
    print(f"paramsym {one_line(command)}: error: {name}: {one_line(message)}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, return its exit status."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(argv)
    args.argv = argv  # the command line as given, for the run's provenance (cli.options.command_line)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    sub = getattr(args, "attention_command", None) or getattr(args, "experiment", None)
    command = f"{args.command} {sub}" if sub else args.command
    if extra:  # named by the sub-command they were given to, not by the top-level parser
        parser.exit(2, f"paramsym {command}: error: unrecognized arguments: {one_line(' '.join(extra))}; "
                       f"see paramsym {command} --help\n")
    try:
        import os

        from ..options import check_shared_options  # standard library only at import
        from ..quiet import quiet_loading

        check_shared_options(args)  # --seed, --seeds, --threads, --out, --resume, --preset: once, for every command

        with quiet_loading(bool(getattr(args, "json", False) or getattr(args, "quiet", False)), env=os.environ):
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
    except MemoryError as exc:  # numpy's _ArrayMemoryError too: an input far beyond what fits
        detail = " ".join(str(exc).split()) or "out of memory"
        return _error(command, "MemoryError",
                      f"the computation needs more memory than this machine has ({detail[:200]}); use smaller "
                      "inputs (fewer copies, heads, steps or a smaller group).")
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
