"""Every ```python code block of docs/discovery.md and README.md runs as written (in a fresh
namespace per file, blocks in order), so the documentation cannot drift from the API."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = ["docs/discovery.md", "README.md"]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python fenced blocks of a Markdown text, in order."""
    return [m.group(1) for m in FENCE.finditer(text)]


def test_extraction_finds_blocks():
    text = "a\n```python\nx = 1\n```\n```\nshell\n```\n```python\ny = x + 1\n```\n"
    assert python_blocks(text) == ["x = 1\n", "y = x + 1\n"]


@pytest.mark.parametrize("name", FILES)
def test_python_examples_run(name, capsys):
    blocks = python_blocks((ROOT / name).read_text(encoding="utf-8"))
    assert blocks, f"{name} has no ```python block"
    namespace: dict = {"__name__": f"docs_example_{Path(name).stem}"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{name} (python block {i + 1})", "exec"), namespace)  # noqa: S102
    capsys.readouterr()
