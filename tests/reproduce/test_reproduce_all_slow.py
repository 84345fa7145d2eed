"""``paramsym reproduce all --quick``: every claim runs and is listed (slow: minutes)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from paramsym.experiments.reproduce import CLAIMS

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.mark.slow
def test_all_quick_lists_every_claim(tmp_path):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "paramsym.cli", "reproduce", "all", "--quick", "--json", "--out",
                        str(tmp_path / "runs")], capture_output=True, text=True, env=env, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.loads(p.stdout)
    assert [r["claim"] for r in rows] == [c.id for c in CLAIMS]
    assert all(r["error"] is None for r in rows), [(r["claim"], r["error"]) for r in rows if r["error"]]
    # the exact claims hold at the quick budget too
    exact = [r for r in rows if r["exact"]]
    assert exact and all(r["holds"] for r in exact), [(r["claim"], r["ours"]) for r in exact if not r["holds"]]
