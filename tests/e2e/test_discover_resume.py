"""End to end: `paramsym discover` writes a complete run directory, and a run killed with
SIGKILL mid-training continues with `--resume` to exactly the metrics of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SMALL = [
    "--preset", "sigmoid-scalar", "--steps", "600", "--quiet",
    "--set", "train.checkpoint_every=100", "--set", "action.width=64",
    "--set", "verdict.samples=64", "--set", "verdict.rhos=[0.5]", "--set", "verdict.factors=[1,2]",
    "--set", "verdict.curve_points=4", "--set", "verdict.curve_times=11",
]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["MPLBACKEND"] = "Agg"
    return env


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "paramsym.cli", *args]


def _metrics(run: Path) -> dict:
    m = json.loads((run / "metrics.json").read_text())
    return {k: m[k] for k in ("verdict", "final_losses", "generators", "scales")}


def test_sigkill_then_resume_matches_uninterrupted(tmp_path: Path) -> None:
    full = tmp_path / "full"
    subprocess.run(_cli("discover", *SMALL, "--out", str(full)), check=True, env=_env(), capture_output=True, timeout=600)
    for name in ("config.json", "env.json", "metrics.json", "history.json", "curves.json", "action.safetensors", "report.md"):
        assert (full / name).exists(), name
    starts = json.loads((full / "env.json").read_text())["starts"]
    assert len(starts) == 1 and starts[0]["resumed_from_step"] is None
    assert {"torch", "python", "seed", "git_sha", "host", "time_utc"} <= set(starts[0])
    cells = json.loads((full / "metrics.json").read_text())["verdict"]["cells"]
    assert {"rho", "factors", "output_err_p95", "composition_err_p95", "inverse_err_p95", "subdivision_err_p95",
            "transport_err_p95", "motion_median", "fits"} <= set(cells[0])

    killed = tmp_path / "killed"
    proc = subprocess.Popen(_cli("discover", *SMALL, "--out", str(killed)), env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = killed / "checkpoint" / "state.json"
    deadline = time.time() + 300
    while time.time() < deadline and not state.exists():
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert state.exists(), "no checkpoint was written before the deadline"
    assert not (killed / "metrics.json").exists(), "the run finished before it could be killed"
    step = json.loads(state.read_text())["step"]
    assert 0 < step < 600

    subprocess.run(_cli("discover", "--resume", str(killed), "--quiet"), check=True, env=_env(), capture_output=True, timeout=600)
    assert _metrics(killed) == _metrics(full)
    starts = json.loads((killed / "env.json").read_text())["starts"]  # the history of starts is kept
    assert [s["resumed_from_step"] for s in starts] == [None, step]


def test_resume_refuses_new_config_and_finished_runs(tmp_path: Path) -> None:
    out = subprocess.run(_cli("discover", "--resume", str(tmp_path), "--quiet"), env=_env(), capture_output=True, text=True)
    assert out.returncode == 2
    assert "not a paramsym run directory" in out.stderr
    assert "Traceback" not in out.stderr
    out = subprocess.run(_cli("discover", "--resume", str(tmp_path), "--steps", "5"), env=_env(), capture_output=True, text=True)
    assert out.returncode == 2 and "saved configuration" in out.stderr


@pytest.mark.parametrize("args, needle", [
    (["discover", "--preset", "nope"], "unknown preset"),
    (["discover", "--set", "train.lrr=1"], "unknown config key"),
    (["discover", "--set", "train.steps=abc"], "expected an integer"),
    (["discover", "--set", "objective.variant=magic"], "expected one of"),
])
def test_bad_cli_input_is_one_clear_line(args: list[str], needle: str, tmp_path: Path) -> None:
    out = subprocess.run(_cli(*args, "--out", str(tmp_path / "x")), env=_env(), capture_output=True, text=True)
    assert out.returncode == 2
    assert needle in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "x").exists()


def test_list_and_report(tmp_path: Path) -> None:
    out = subprocess.run(_cli("list", "--json"), env=_env(), capture_output=True, text=True, check=True)
    names = {row["name"] for row in json.loads(out.stdout)}
    assert {"linear2x2", "relu242", "sigmoid-scalar", "sigmoid-two-input", "tanh-student", "gelu-student",
            "relu2881-unit", "relu2881-all"} <= names
    run = tmp_path / "r"
    subprocess.run(_cli("discover", *SMALL[:2], "--steps", "20", "--quiet", "--set", "action.width=16",
                        "--set", "verdict.samples=32", "--set", "verdict.rhos=[0.5]", "--set", "verdict.factors=[1,2]",
                        "--set", "verdict.curve_points=2", "--set", "verdict.curve_times=5", "--out", str(run)),
                   env=_env(), check=True, capture_output=True)
    (run / "report.md").unlink()
    for png in (run / "figures").glob("*.png"):
        png.unlink()
    out = subprocess.run(_cli("report", str(run)), env=_env(), capture_output=True, text=True, check=True)
    text = (run / "report.md").read_text()
    assert "Declared cell" in text and "figures/curves.png" in text
    assert (run / "figures" / "curves.png").exists() and (run / "figures" / "grid_output_err_p95.png").exists()
