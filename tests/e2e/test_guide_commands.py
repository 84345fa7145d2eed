"""The guides cannot rot: every ``paramsym ...`` command in ``docs/guide/*.md`` parses with the real
parser (``paramsym.cli.build_parser()``; argparse only, nothing runs), every ``examples/*.py`` a
guide names exists, and every relative link resolves.

"Every" is checked, not assumed: a command is a line of a shell-like fenced block or an inline code
span; :func:`unread_mentions` lists each code line or span that says ``paramsym WORD`` but that the
extractor did not turn into a command (a form it does not read, e.g. ``sudo paramsym ...``), and the
test fails on it. Nothing is skipped: a command of a sub-command that is not registered fails.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest
from command_checks import check_command, command_path

from paramsym.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
GUIDES = ROOT / "docs" / "guide"

_SHELL_LANGS = {"", "bash", "sh", "shell", "console", "text"}
#: how a command line starts: optional ``$`` prompt, ``VAR=value`` assignments, ``python -m`` or a path
_LEAD = r"(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:python3?\s+-m\s+|\S*/)?"
_COMMAND = re.compile(_LEAD + r"paramsym(?=\s|$)")
#: a mention of the command in code: ``paramsym`` then a space and a word (not ``paramsym.cli``)
_MENTION = re.compile(r"(?<![\w./-])paramsym\s+[\w'\"-]")
#: argparse's own message quoted in prose: ``paramsym discover: error: ...``
_MESSAGE = re.compile(r"(?:\S*/)?paramsym(?:\s+[\w-]+)*:\s")


def _normalized(line: str) -> str | None:
    """``paramsym ARGS`` for a command line (prompt, assignments, ``python -m`` or path dropped), else ``None``."""
    m = _COMMAND.match(line)
    return None if m is None else "paramsym" + line[m.end():]


def fenced_commands(text: str) -> list[tuple[int, str]]:
    """``(line number, command)`` for each ``paramsym ...`` line of a shell-like fenced block.

    A trailing ``\\`` joins the next line; a leading ``$ `` prompt, ``VAR=value`` assignments and
    ``python -m`` are dropped; ``# comments`` are removed by :func:`shlex.split` later. Python blocks
    are not scanned.
    """
    out: list[tuple[int, str]] = []
    in_block, lang, pending, start = False, "", "", 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("```"):
            in_block, lang = (not in_block), line[3:].strip().lower()
            continue
        if not in_block or lang not in _SHELL_LANGS:
            continue
        if pending:
            pending += " " + line.rstrip("\\").strip()
            if not line.endswith("\\"):
                out.append((start, pending))
                pending = ""
            continue
        command = _normalized(line)
        if command is not None:
            if line.endswith("\\"):
                pending, start = command.rstrip("\\").strip(), no
            else:
                out.append((no, command))
    return out


def _prose(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of the lines outside fenced blocks, a line ending inside an inline span
    joined with the next (a span may wrap)."""
    out, in_block, carry, start = [], False, "", 0
    for no, raw in enumerate(text.splitlines(), 1):
        if raw.strip().startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            continue
        line = (carry + " " + raw) if carry else raw
        start = start if carry else no
        if line.count("`") % 2:
            carry = line
            continue
        carry = ""
        out.append((start, line))
    return out


def inline_commands(text: str) -> list[tuple[int, str]]:
    """``(line number, command)`` for each inline code span of the prose that is a command
    (argparse messages quoted in prose, ``paramsym discover: error: ...``, are not)."""
    out = []
    for no, line in _prose(text):
        for span in re.findall(r"`([^`]+)`", line):
            span = " ".join(span.split())
            command = _normalized(span)
            if command is not None and not _MESSAGE.match(span) and command != "paramsym ...":
                out.append((no, command))
    return out


def unread_mentions(text: str) -> list[tuple[int, str]]:
    """Code that mentions ``paramsym WORD`` but that neither extractor reads as a command: lines of
    shell-like fenced blocks (continuations of a command aside) and inline spans of the prose."""
    fenced = fenced_commands(text)
    covered: set[int] = set()
    lines = text.splitlines()
    for start, _ in fenced:  # a command and its continuation lines
        no = start
        while lines[no - 1].rstrip().endswith("\\"):
            no += 1
            covered.add(no)
        covered.add(start)
    out, in_block, lang = [], False, ""
    for no, raw in enumerate(lines, 1):
        line = raw.strip()
        if line.startswith("```"):
            in_block, lang = (not in_block), line[3:].strip().lower()
            continue
        if in_block and lang in _SHELL_LANGS and _MENTION.search(line.split("#", 1)[0]) and no not in covered:
            out.append((no, line))
    inline = {(no, c) for no, c in inline_commands(text)}
    for no, line in _prose(text):
        for span in re.findall(r"`([^`]+)`", line):
            span = " ".join(span.split())
            if not _MENTION.search(span) or _MESSAGE.match(span) or span == "paramsym ...":
                continue
            command = _normalized(span)
            if command is None or (no, command) not in inline:
                out.append((no, span))
    return out


def check_inline(parser: argparse.ArgumentParser, command: str) -> str | None:
    """An inline span: a bare name (``paramsym``, ``paramsym attention``) must name the program or
    registered (sub-)commands; a span with arguments must parse (:func:`check_command`)."""
    argv = shlex.split(command, comments=True)[1:]
    if all(re.fullmatch(r"[a-z][a-z-]*", w) for w in argv) and command_path(parser, argv) is None:
        return None
    return check_command(parser, command)


def _all_commands() -> list[tuple[str, int, str, bool]]:
    """``(page, line, command, inline)`` of every command of every guide page."""
    out = []
    for page in sorted(GUIDES.glob("*.md")):
        text = page.read_text()
        out += [(page.name, no, cmd, False) for no, cmd in fenced_commands(text)]
        out += [(page.name, no, cmd, True) for no, cmd in inline_commands(text)]
    return out


def test_extractor_and_checker_catch_a_bad_command() -> None:
    text = "```\nparamsym discover --preset relu242 \\\n    --steps 10 --bogus 3\n$ paramsym nosuch\n" \
           "OMP_NUM_THREADS=1 python -m paramsym list\nsudo paramsym list\n```\n" \
           "```python\nparamsym = 1\n```\n" \
           "Run `paramsym attention` or `paramsym discover --stepz 3`; it says `paramsym discover: error: x`\n" \
           "and `paramsym nosuch`; also `env X=1 paramsym list`.\n"
    found = fenced_commands(text)
    assert found == [(2, "paramsym discover --preset relu242 --steps 10 --bogus 3"), (4, "paramsym nosuch"),
                     (5, "paramsym list")]
    assert inline_commands(text) == [(11, "paramsym attention"), (11, "paramsym discover --stepz 3"),
                                     (12, "paramsym nosuch")]
    assert unread_mentions(text) == [(6, "sudo paramsym list"), (12, "env X=1 paramsym list")]
    parser = build_parser()
    assert "--bogus" in check_command(parser, found[0][1])
    assert check_command(parser, found[1][1]) is not None
    assert check_command(parser, found[2][1]) is None
    assert check_command(parser, "paramsym discover --preset relu242 --steps 10  # a comment") is None
    assert check_command(parser, "paramsym attention count --help") is None
    assert check_command(parser, "paramsym attention nosuch --help") is not None
    assert "required" in check_command(parser, "paramsym attention count --group D4")  # --heads missing
    assert check_inline(parser, "paramsym attention") is None  # a name: the sub-command exists
    assert check_inline(parser, "paramsym") is None  # the program's name
    assert check_inline(parser, "paramsym nosuch") is not None
    assert "--stepz" in check_inline(parser, "paramsym discover --stepz 3")


def test_every_guide_command_is_read() -> None:
    """No command escapes the check: every code line or span naming ``paramsym WORD`` is extracted."""
    unread = [f"docs/guide/{page.name}:{no}: `{what}`" for page in sorted(GUIDES.glob("*.md"))
              for no, what in unread_mentions(page.read_text())]
    assert not unread, "commands the extractor does not read (write them as `paramsym ...` lines):\n" + "\n".join(unread)


def test_every_guide_command_parses() -> None:
    parser = build_parser()
    failures = []
    commands = _all_commands()
    for page, no, cmd, inline in commands:
        reason = (check_inline if inline else check_command)(parser, cmd)
        if reason:
            failures.append(f"docs/guide/{page}:{no}: `{cmd}`: {reason}")
    assert commands and not failures, "\n".join(failures)


def test_examples_named_in_guides_exist() -> None:
    missing = []
    for page in sorted(GUIDES.glob("*.md")):
        for name in sorted(set(re.findall(r"examples/[a-z0-9_/]+\.py", page.read_text()))):
            if not (ROOT / name).is_file():
                missing.append(f"{page.name}: {name}")
    assert not missing, missing


def test_relative_links_resolve() -> None:
    broken = []
    for page in sorted(GUIDES.glob("*.md")):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.name}: {target}")
    assert not broken, broken


def python_blocks(text: str) -> list[tuple[int, list[str]]]:
    """``(line number, lines)`` of each ```python fenced block."""
    blocks, current, start = [], None, 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("```"):
            if current is None and line[3:].strip().lower() == "python":
                current, start = [], no
            elif current is not None:
                blocks.append((start, current))
                current = None
            continue
        if current is not None:
            current.append(raw)
    return blocks


def test_python_snippets_are_excerpts_of_examples() -> None:
    """Code lives in one place: a guide's Python block starts with ``# from examples/NAME.py`` and
    each of its lines is a line of that script, in the script's order (indentation aside; a line
    ``...`` marks an elision)."""
    problems, n = [], 0
    for page in sorted(GUIDES.glob("*.md")):
        for no, lines in python_blocks(page.read_text()):
            n += 1
            head = re.fullmatch(r"#\s*from\s+(examples/[\w/]+\.py)", lines[0].strip()) if lines else None
            if head is None:
                problems.append(f"{page.name}:{no}: the block must start with '# from examples/NAME.py'")
                continue
            source = ROOT / head.group(1)
            if not source.is_file():
                problems.append(f"{page.name}:{no}: {head.group(1)} does not exist")
                continue
            script = [s.strip() for s in source.read_text().splitlines()]
            pos = 0
            for line in (s.strip() for s in lines[1:]):
                if not line or re.fullmatch(r"\.\.\.(\s+#.*)?", line):  # blank lines, elisions `...  # comment`
                    continue
                try:
                    pos = script.index(line, pos) + 1
                except ValueError:
                    problems.append(f"{page.name}:{no}: not in {head.group(1)} (in this order): {line!r}")
                    break
    assert n >= 5 and not problems, "\n".join(problems)


#: sub-commands cheap enough to *run* in the default test selection (pure group math, file
#: round trips, listings and help); the heavy ones are exercised by tests/e2e/test_examples.py and
#: by their own tests.
RUNNABLE = {("group",), ("attention", "count"), ("attention", "table"), ("attention", "clusterings"),
            ("attention", "build"), ("attention", "classify"), ("list",)}


def _runnable(words: list[str]) -> bool:
    if {"-h", "--help", "--version"} & set(words):
        return True
    return tuple(words[1:2]) in RUNNABLE or tuple(words[1:3]) in RUNNABLE


def test_cheap_guide_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cheap commands of each page run, in the page's order, in a fresh directory, with exit 0
    (``classify`` reads the file ``build`` wrote just before it)."""
    from paramsym.cli import main

    ran, failures = 0, []
    for page in sorted(GUIDES.glob("*.md")):
        work = tmp_path / page.stem
        work.mkdir()
        monkeypatch.chdir(work)
        for no, cmd in fenced_commands(page.read_text()):
            words = shlex.split(cmd, comments=True)
            if not _runnable(words):
                continue
            out, err = io.StringIO(), io.StringIO()
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = main(words[1:])
            except SystemExit as exc:  # --help / --version
                code = exc.code or 0
            ran += 1
            if code != 0:
                failures.append(f"docs/guide/{page.name}:{no}: `{cmd}` exited {code}: {err.getvalue().strip()[-300:]}")
    assert ran >= 15 and not failures, "\n".join(failures) or f"only {ran} commands ran"
