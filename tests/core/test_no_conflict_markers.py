"""No merge-conflict markers left in the project's text (a union merge once left one in docs/census.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^(<{7}|>{7}|={7})( |$)", re.MULTILINE)


def test_no_conflict_markers() -> None:
    files = [p for d in ("src", "tests", "docs", "benchmarks") for p in (ROOT / d).rglob("*")
             if p.suffix in {".py", ".md", ".toml", ".yaml", ".yml", ".json"} and p.is_file()]
    files += [ROOT / n for n in ("README.md", "CHANGELOG.md", "pyproject.toml") if (ROOT / n).exists()]
    assert len(files) > 50
    bad = [f"{p.relative_to(ROOT)}:{p.read_text(errors='replace')[:m.start()].count(chr(10)) + 1}"
           for p in files for m in MARKER.finditer(p.read_text(errors="replace"))]
    assert not bad, f"conflict markers: {bad}"
