"""docs/DESIGN.md's module map is the package tree: every module and sub-package of
``src/paramsym`` is named in the layout block under its package, and nothing else is.

The layout block is the fenced block under ``## Layout``. Inside it, a line whose first token is
``name/`` opens a package at that indentation (nested packages sit deeper); a line whose first
token sits at or left of an open package's indentation closes it. Every token ``name.py`` on a
line (not inside backticks, not part of a path such as ``a/b.py``) is a module of the innermost
open package; ``src/paramsym/`` is the root. ``__init__.py`` of sub-packages is implied.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "paramsym"
DESIGN = ROOT / "docs" / "DESIGN.md"

_MODULE = re.compile(r"(?<![\w/.`-])([a-z_][a-z0-9_]*\.py)\b")
_PACKAGE = re.compile(r"^([a-z_][a-z0-9_]*)/$")


def _layout_block(text: str) -> list[str]:
    section = text.split("\n## Layout\n", 1)[1]
    block = section.split("```", 2)[1]
    lines = block.split("\n")
    start = next(i for i, line in enumerate(lines) if line.strip() == "src/paramsym/")
    out = []
    for line in lines[start + 1:]:
        if line and not line.startswith(" "):  # back at the repository's top level (tests/, benchmarks/)
            break
        out.append(line)
    return out


def _strip_code(line: str) -> str:
    return re.sub(r"`[^`]*`", "", line)


def documented(text: str) -> tuple[set[str], set[str]]:
    """(packages, modules) named by the layout block, as paths relative to ``src/paramsym``."""
    stack: list[tuple[int, str]] = []
    packages: set[str] = set()
    modules: set[str] = set()
    for line in _layout_block(text):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        first = line.split()[0]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        prefix = stack[-1][1] + "/" if stack else ""
        m = _PACKAGE.match(first)
        if m:
            path = prefix + m.group(1)
            packages.add(path)
            stack.append((indent, path))
            rest = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
            prefix = path + "/"
        else:
            rest = line
        for name in _MODULE.findall(_strip_code(rest)):
            if name != "__init__.py" or not prefix:  # a sub-package's __init__.py is implied
                modules.add(prefix + name)
    return packages, modules


def actual() -> tuple[set[str], set[str]]:
    packages: set[str] = set()
    modules: set[str] = set()
    for path in SRC.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(SRC).as_posix()
        if path.name == "__init__.py" and path.parent != SRC:
            packages.add(path.parent.relative_to(SRC).as_posix())
            continue
        modules.add(rel)
    return packages, modules


def test_the_layout_names_every_package_and_module_of_the_tree_and_nothing_else() -> None:
    doc_packages, doc_modules = documented(DESIGN.read_text())
    packages, modules = actual()
    assert doc_packages == packages, (f"packages in the tree, not in DESIGN.md: {sorted(packages - doc_packages)}; "
                                      f"in DESIGN.md, not in the tree: {sorted(doc_packages - packages)}")
    assert doc_modules == modules, (f"modules in the tree, not in DESIGN.md: {sorted(modules - doc_modules)}; "
                                    f"in DESIGN.md, not in the tree: {sorted(doc_modules - modules)}")


def test_the_parser_reads_nesting_and_ignores_paths_and_code() -> None:
    text = ("x\n## Layout\n\n```\nREADME.md\nsrc/paramsym/\n  errors.py   named errors (see `other.py`)\n"
            "  runs/       rundir.py, kinds.py\n                 continues: execute.py; not a/b.py\n"
            "    deep/     leaf.py\n  top.py      back at the root\ntests/       t.py\n```\n")
    packages, modules = documented(text)
    assert packages == {"runs", "runs/deep"}
    assert modules == {"errors.py", "runs/rundir.py", "runs/kinds.py", "runs/execute.py", "runs/deep/leaf.py", "top.py"}
