"""Command lines quoted in docs and registries checked against the real thing (imported by test
modules; not collected): :func:`check_command` parses ``paramsym ...`` with the real parser
(``paramsym.cli.build_parser()``; argparse only, nothing runs); :func:`check_documented_command`
checks a documented run command — ``paramsym`` lines (placeholders such as ``NAME`` and
alternatives ``a|b`` allowed), ``python -m MODULE`` (importable), ``python -c 'from M import X; ...'``
(``M.X`` exists) and ``python benchmarks/SCRIPT.py --flag`` (the script exists and defines the flag).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import itertools
import re
import shlex
from pathlib import Path

from paramsym.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
#: a placeholder in a documented command (``NAME``, ``RUN``, ``P``): upper-case letters only (``D4`` is a value)
PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*")


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The sub-command parsers of ``parser`` by name (empty: none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_path(parser: argparse.ArgumentParser, words: list[str]) -> str | None:
    """``None`` when ``words`` name a chain of registered (sub-)commands, else why not."""
    p = parser
    for word in words:
        subs = subcommands(p)
        if word not in subs:
            return f"no sub-command {word!r} (have {sorted(subs)})"
        p = subs[word]
    return None


def check_command(parser: argparse.ArgumentParser, command: str) -> str | None:
    """``None`` when ``command`` (``paramsym ARGS``) parses, else the reason (argparse's message)."""
    argv = shlex.split(command, comments=True)[1:]
    if {"-h", "--help"} & set(argv):  # `paramsym CMD [SUB] --help`: the sub-command path must exist
        return command_path(parser, argv[: min(argv.index(h) for h in ("-h", "--help") if h in argv)])
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = parser.parse_args(argv)
            if getattr(args, "resume", None) is None and hasattr(args, "required"):
                # arguments the pure-math commands check themselves (so that --resume DIR stands alone)
                from paramsym.attention.cli import require

                require(args)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return err.getvalue().strip() or f"exit status {exc.code}"
    return None


def _strip_note(text: str) -> str:
    """``text`` without a trailing parenthetical note (``... --json (each preset)``)."""
    text = text.strip()
    if not text.endswith(")"):
        return text
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return text[:i].strip() if i > 0 and text[i - 1] == " " else text
    return text


def split_commands(text: str) -> list[str]:
    """The commands of ``text`` (``;``-separated outside quotes, a trailing ``(note)`` dropped)."""
    text = _strip_note(text)
    parts, current, quote = [], "", None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == ";":
            parts.append(current.strip())
            current = ""
            continue
        current += ch
    parts.append(current.strip())
    return [p for p in parts if p]


def _value_for(parser: argparse.ArgumentParser, option: str | None) -> str:
    """A real value standing for a placeholder: the option's first choice, a number for a typed option."""
    for action in parser._actions:
        if option is None and not action.option_strings and action.dest != "help":
            if action.choices:
                return str(next(iter(action.choices)))
        elif option in action.option_strings:
            if action.choices:
                return str(next(iter(action.choices)))
            if action.type in (int, float):
                return "1"
    return "x"


def _paramsym_problem(parser: argparse.ArgumentParser, command: str) -> str | None:
    words = shlex.split(command)[1:]
    elided = "..." in words
    words = [w for w in words if w != "..."]
    # the sub-command path, then each placeholder replaced by a real value of its option
    p, i = parser, 0
    while i < len(words) and "|" not in words[i] and words[i] in subcommands(p):
        p = subcommands(p)[words[i]]
        i += 1
    options: list[list[str]] = [[shlex.join(words[:i])]]
    for k in range(i, len(words)):
        w = words[k]
        prev = words[k - 1] if k > i and words[k - 1].startswith("--") else None
        if PLACEHOLDER.fullmatch(w):
            options.append([_value_for(p, prev)])
        elif "|" in w and not w.startswith("-"):
            options.append(w.split("|"))
        else:
            options.append([w])
    for combo in itertools.product(*options):
        argv = shlex.split(combo[0]) + list(combo[1:])
        reason = check_command(parser, "paramsym " + shlex.join(argv))
        if reason and not (elided and "required" in reason):
            return f"`paramsym {shlex.join(argv)}`: {reason}"
    return None


def check_documented_command(text: str) -> list[str]:
    """The problems of a documented run command (module docstring); empty when every part is real."""
    parser = build_parser()
    problems = []
    for command in split_commands(text):
        words = shlex.split(command)
        if words[0] == "paramsym":
            reason = _paramsym_problem(parser, command)
            if reason:
                problems.append(reason)
        elif words[0] == "python" and words[1:2] == ["-m"]:
            if importlib.util.find_spec(words[2]) is None:
                problems.append(f"`{command}`: no module {words[2]!r}")
        elif words[0] == "python" and words[1:2] == ["-c"]:
            for module, names in re.findall(r"from\s+([\w.]+)\s+import\s+([\w, ]+)", words[2]):
                mod = importlib.import_module(module) if importlib.util.find_spec(module) else None
                missing = [n.strip() for n in names.split(",") if mod is None or not hasattr(mod, n.strip())]
                if missing:
                    problems.append(f"`{command}`: {module} has no {missing}")
        elif words[0] == "python" and len(words) > 1 and words[1].endswith(".py"):
            script = ROOT / words[1]
            if not script.is_file():
                problems.append(f"`{command}`: no script {words[1]}")
                continue
            source = script.read_text()
            for flag in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
                if f'"{flag}"' not in source and f"'{flag}'" not in source:
                    problems.append(f"`{command}`: {words[1]} defines no option {flag}")
        else:
            problems.append(f"`{command}`: not a paramsym, python -m, python -c or python SCRIPT.py command")
    return problems
