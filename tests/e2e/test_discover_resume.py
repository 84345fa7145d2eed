"""End to end: `paramsym discover` writes a complete run directory, and a run killed with
SIGKILL mid-training continues with `--resume` to exactly the metrics of an uninterrupted run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_checks import cli_argv, cli_env, kill_at_checkpoint

SMALL = [
    "--preset", "sigmoid-scalar", "--steps", "600", "--quiet",
    "--set", "train.checkpoint_every=100", "--set", "action.width=64",
    "--set", "verdict.samples=64", "--set", "verdict.rhos=[0.5]", "--set", "verdict.factors=[1,2]",
    "--set", "verdict.curve_points=4", "--set", "verdict.curve_times=11",
]


def _metrics(run: Path) -> dict:
    m = json.loads((run / "metrics.json").read_text())
    return {k: m[k] for k in ("verdict", "final_losses", "generators", "scales")}


def test_sigkill_then_resume_matches_uninterrupted(tmp_path: Path) -> None:
    full = tmp_path / "full"
    subprocess.run(cli_argv("discover", *SMALL, "--out", str(full)), check=True, env=cli_env(), capture_output=True, timeout=600)
    for name in ("config.json", "env.json", "metrics.json", "history.json", "curves.json", "action.safetensors", "report.md"):
        assert (full / name).exists(), name
    starts = json.loads((full / "env.json").read_text())["starts"]
    assert len(starts) == 1 and starts[0]["resumed_from_step"] is None
    assert {"torch", "python", "seed", "git_sha", "host", "time_utc"} <= set(starts[0])
    cells = json.loads((full / "metrics.json").read_text())["verdict"]["cells"]
    assert {"rho", "factors", "output_err_p95", "composition_err_p95", "inverse_err_p95", "subdivision_err_p95",
            "transport_err_p95", "motion_median", "fits"} <= set(cells[0])

    killed = tmp_path / "killed"
    step = kill_at_checkpoint(cli_argv("discover", *SMALL, "--out", str(killed)), killed,
                              killed / "checkpoint" / "state.json", timeout=300)
    assert 0 < step < 600

    subprocess.run(cli_argv("discover", "--resume", str(killed), "--quiet"), check=True, env=cli_env(), capture_output=True, timeout=600)
    assert _metrics(killed) == _metrics(full)
    starts = json.loads((killed / "env.json").read_text())["starts"]  # the history of starts is kept
    assert [s["resumed_from_step"] for s in starts] == [None, step]


def test_resume_refuses_new_config_and_finished_runs(tmp_path: Path) -> None:
    out = subprocess.run(cli_argv("discover", "--resume", str(tmp_path), "--quiet"), env=cli_env(), capture_output=True, text=True)
    assert out.returncode == 2
    assert "not a paramsym run directory" in out.stderr
    assert "Traceback" not in out.stderr
    out = subprocess.run(cli_argv("discover", "--resume", str(tmp_path), "--steps", "5"), env=cli_env(), capture_output=True, text=True)
    assert out.returncode == 2 and "saved configuration" in out.stderr


@pytest.mark.parametrize("args, needle", [
    (["discover", "--preset", "nope"], "unknown preset"),
    (["discover", "--set", "train.lrr=1"], "unknown config key"),
    (["discover", "--set", "train.steps=abc"], "expected an integer"),
    (["discover", "--set", "objective.variant=magic"], "expected one of"),
])
def test_bad_cli_input_is_one_clear_line(args: list[str], needle: str, tmp_path: Path) -> None:
    out = subprocess.run(cli_argv(*args, "--out", str(tmp_path / "x")), env=cli_env(), capture_output=True, text=True)
    assert out.returncode == 2
    assert needle in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "x").exists()


def test_list_and_report(tmp_path: Path) -> None:
    out = subprocess.run(cli_argv("list", "--json"), env=cli_env(), capture_output=True, text=True, check=True)
    names = {row["name"] for row in json.loads(out.stdout)}
    assert {"linear2x2", "relu242", "sigmoid-scalar", "sigmoid-two-input", "tanh-student", "gelu-student",
            "relu2881-unit", "relu2881-all"} <= names
    run = tmp_path / "r"
    subprocess.run(cli_argv("discover", *SMALL[:2], "--steps", "20", "--quiet", "--set", "action.width=16",
                            "--set", "verdict.samples=32", "--set", "verdict.rhos=[0.5]", "--set", "verdict.factors=[1,2]",
                            "--set", "verdict.curve_points=2", "--set", "verdict.curve_times=5", "--out", str(run)),
                   env=cli_env(), check=True, capture_output=True)
    (run / "report.md").unlink()
    for png in (run / "figures").glob("*.png"):
        png.unlink()
    out = subprocess.run(cli_argv("report", str(run)), env=cli_env(), capture_output=True, text=True, check=True)
    text = (run / "report.md").read_text()
    assert "Declared cell" in text and "figures/curves.png" in text
    assert (run / "figures" / "curves.png").exists() and (run / "figures" / "grid_output_err_p95.png").exists()
