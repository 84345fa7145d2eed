"""A new user's dead ends (issue 7) through the real command line, in a subprocess: each is one
named line on stderr with exit status 2, or works. The other dead ends of the issue are tested
where their subject lives (tests/e2e/test_run_dirs.py, tests/attention/test_cli_limits.py,
tests/e2e/test_registry.py, tests/e2e/test_fast_commands.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-m", "paramsym.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("argv, needles", [
    (["attention", "build", "--group", "C2", "--heads", "2", "--index", "0", "--out", "/proc/x/layer"],
     ["paramsym attention build: error: ", "Error: ", "/proc/x"]),
    (["attention", "classify", "w.safetensors", "--group", "D4", "--tol", "-1"],
     ["paramsym attention classify: error: ConfigError: ", "--tol", "> 0", "'-1'"]),
    (["discover", "--out", "/proc/x", "--steps", "5", "--device", "cpu"],
     ["paramsym discover: error: RunFileError: ", "/proc/x", "writable"]),
    (["discover", "--seeds", "0"], ["paramsym discover: error: unrecognized arguments: --seeds 0; see paramsym discover --help"]),
    (["discover", "--steps", "-3"], ["ConfigError: --steps must be an integer >= 1; received -3"]),
    (["discover", "--device", "tpu"], ["ConfigError: --device must be cpu, cuda or cuda:N", "'tpu'"]),
    (["experiment", "lifting", "--seeds", "1,1", "--quick"], ["ConfigError: --seeds lists seed(s) [1] more than once"]),
    (["experiment", "objectives", "--seeds", "0,-2"], ["ConfigError: --seeds must be comma-separated integers >= 0"]),
    # the transformer experiment resolves its sub-runs' configs before anything is written
    (["experiment", "transformer", "--set", "nonsense.key=1"], ["ConfigError: unknown config key 'nonsense.key'"]),
    (["experiment", "transformer", "--variants", "hybrid,bogus"], ["ConfigError: variants must be distinct and among"]),
    (["attribute", "--preset", "lifting-sanity", "--threads", "0"], ["ConfigError: --threads must be an integer >= 1"]),
    (["discover", "--set", "train.lr=.nan"], ["ConfigError: train.lr: expected a finite number"]),
])
def test_dead_end_is_one_named_line(tmp_path: Path, argv: list[str], needles: list[str]) -> None:
    out = _cli(*argv, cwd=tmp_path)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_clusterings_limit_lists_that_many(tmp_path: Path) -> None:
    out = _cli("attention", "clusterings", "--group", "C6", "--heads", "3", "--limit", "5", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert [ln for ln in out.stdout.splitlines() if ln.startswith("[")] == [f"[{i}]" for i in range(5)]
    assert "listed the first 5 of 33" in out.stdout
