"""A `paramsym sweep` process killed with SIGKILL mid-way (no chance to clean up) resumes with
``--resume`` and writes the same table as the uninterrupted sweep (slow: two CLI processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TINY = Path(__file__).resolve().parents[2] / "examples" / "sweeps" / "tiny.yaml"


@pytest.mark.slow
def test_sigkilled_sweep_resumes_to_the_same_table(tmp_path, finished) -> None:
    _, reference = finished
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    cmd = [sys.executable, "-m", "paramsym.cli", "sweep", str(TINY), "--out", str(out), "--workers", "1", "--quiet"]
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    try:
        while len(list(out.glob("trials/*/metrics.json"))) < 2:  # the candidate stage finished
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the sweep did not finish two trials in 300 s"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its worker processes
        proc.wait()
    assert not (out / "table.json").exists()
    done = len(list(out.glob("trials/*/metrics.json")))
    resume = [sys.executable, "-m", "paramsym.cli", "sweep", str(TINY), "--resume", str(out), "--workers", "1", "--quiet"]
    res = subprocess.run([*resume, "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == reference
    stages = json.loads((out / "stages.json").read_text())
    assert sum(s["reused"] for s in stages) == done and sum(s["run"] for s in stages) == 5 - done
