"""docs/exact.md's Python example runs as written; `paramsym affine` prints the promised JSON
keys and named errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from paramsym.cli import main

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def test_docs_example_runs(capsys):
    blocks = FENCE.findall((ROOT / "docs/exact.md").read_text(encoding="utf-8"))
    assert blocks
    ns: dict = {"__name__": "docs_exact"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/exact.md block {i + 1}", "exec"), ns)  # noqa: S102
    capsys.readouterr()


def test_cli_json_and_errors(capsys):
    threads = torch.get_num_threads()
    try:
        assert main(["affine", "--preset", "relu242", "--json", "--quiet"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["dimension"] == 4 == out["expected"]
        assert out["gap"] > 1e8 and len(out["singular_values"]) >= 5
        assert out["commutativity"] < 1e-10
        assert main(["affine", "--preset", "nope"]) == 2
        assert "ConfigError" in capsys.readouterr().err
        assert main(["affine", "--preset", "relu242", "--tol", "1.5"]) == 2
        assert "ToleranceError" in capsys.readouterr().err
        assert main(["affine", "--preset", "relu242", "--samples", "2"]) == 2
        err = capsys.readouterr().err
        assert "TooFewSamplesError" in err and "sample points are needed" in err
        assert main(["affine", "--preset", "relu242", "--max-memory", "64KiB"]) == 2
        err = capsys.readouterr().err
        assert "TooLargeError" in err and "affine solve" in err and "--max-memory" in err
        assert main(["affine", "--preset", "relu242", "--max-memory", "lots"]) == 2
        assert "MemoryBudgetError" in capsys.readouterr().err  # a ConfigError
        assert main(["affine", "--list"]) == 0
        assert "attention-d8h2-bias" in capsys.readouterr().out
    finally:
        torch.set_num_threads(threads)
