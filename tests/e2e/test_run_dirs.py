"""Dead ends of a new user, through the real command line in a subprocess: an output path that
cannot be written, a corrupted run directory on `--resume`, a truncated `metrics.json` on
`report`. Each gives exit 2 and exactly one line on stderr (a named error naming the path),
never a traceback, and never removes the run's files. Also: a run killed before its first
checkpoint resumes from step 0."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_checks import cli_argv, cli_env

TINY = [
    "--preset", "sigmoid-scalar", "--steps", "20", "--quiet",
    "--set", "train.checkpoint_every=10", "--set", "action.width=16",
    "--set", "verdict.samples=32", "--set", "verdict.rhos=[0.5]", "--set", "verdict.factors=[1,2]",
    "--set", "verdict.curve_points=2", "--set", "verdict.curve_times=5",
]


def _cli(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(cli_argv(*args), env=cli_env(), capture_output=True, text=True, timeout=600, check=check)


def _one_named_line(out: subprocess.CompletedProcess, *needles: str) -> str:
    assert out.returncode == 2, (out.returncode, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr and "Error:" in lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("cli") / "run"
    _cli("discover", *TINY, "--out", str(run), check=True)
    return run


def _unfinished_copy(finished: Path, dest: Path) -> Path:
    """A copy of a finished run that looks interrupted (no metrics.json, a checkpoint at step 20)."""
    shutil.copytree(finished, dest)
    (dest / "metrics.json").unlink()
    return dest


@pytest.mark.parametrize("out", ["/proc/paramsym-test/run", "/sys/paramsym-test"])
def test_discover_out_on_a_system_directory(out: str) -> None:
    line = _one_named_line(_cli("discover", *TINY, "--out", out), "RunFileError", out)
    assert "writable" in line


def test_discover_out_below_an_existing_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("not a directory")
    _one_named_line(_cli("discover", *TINY, "--out", str(f / "run")), "RunFileError", str(f))
    assert f.read_text() == "not a directory"


def test_discover_out_is_an_existing_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("not a directory")
    _one_named_line(_cli("discover", *TINY, "--out", str(f)), "RunFileError", str(f))
    assert f.read_text() == "not a directory"


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: max(1, p.stat().st_size // 2)])


def _garbage(p: Path) -> None:
    p.write_bytes(os.urandom(max(64, p.stat().st_size)))


def _tensor_file(run: Path) -> Path:
    return next((run / "checkpoint").glob("tensors-*.safetensors"))


@pytest.mark.parametrize("what, corrupt, needle", [
    ("tensors", _truncate, "safetensors"),
    ("tensors", _garbage, "safetensors"),
    ("state", _truncate, "state.json"),
    ("config", _truncate, "config.json"),
    ("config", _garbage, "config.json"),
])
def test_resume_of_a_corrupted_run_is_one_named_line(finished_run: Path, tmp_path: Path, what, corrupt, needle) -> None:
    """Every checkpoint of that kind corrupted (with one intact older checkpoint the run falls back
    to it: tests/e2e/test_bad_inputs.py::test_truncated_newest_checkpoint_falls_back)."""
    run = _unfinished_copy(finished_run, tmp_path / "run")
    ckpt = run / "checkpoint"
    targets = {"tensors": sorted(ckpt.glob("tensors-*.safetensors")),
               "state": [ckpt / "state.json", *sorted(ckpt.glob("state-*.json"))],
               "config": [run / "config.json"]}[what]
    for target in targets:
        if target.exists():
            corrupt(target)
    before = _files(run)
    _one_named_line(_cli("discover", "--resume", str(run), "--quiet"), needle, str(run))
    assert _files(run) == before  # nothing removed or rewritten


def test_report_on_a_truncated_metrics_json(finished_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    _truncate(run / "metrics.json")
    before = _files(run)
    _one_named_line(_cli("report", str(run)), "RunFileError", "metrics.json")
    assert _files(run) == before


def test_resume_of_a_run_killed_before_its_first_checkpoint(finished_run: Path, tmp_path: Path) -> None:
    """Only config.json and env.json: --resume trains from step 0 to the uninterrupted result."""
    run = tmp_path / "early"
    run.mkdir()
    for name in ("config.json", "env.json"):
        shutil.copy(finished_run / name, run / name)
    _cli("discover", "--resume", str(run), "--quiet", check=True)
    a, b = (json.loads((r / "metrics.json").read_text()) for r in (run, finished_run))
    assert {k: a[k] for k in ("verdict", "final_losses", "generators")} == {k: b[k] for k in ("verdict", "final_losses", "generators")}
    starts = json.loads((run / "env.json").read_text())["starts"]
    assert [s["resumed_from_step"] for s in starts] == [None, 0]


def test_config_error_leaves_no_directory(tmp_path: Path) -> None:
    out = tmp_path / "never"
    _one_named_line(_cli("discover", *TINY, "--set", "problem.perturb_std=-1", "--out", str(out)), "perturb_std")
    assert not out.exists()


def test_files_respect_the_umask(finished_run: Path) -> None:
    # the module fixture ran under the test process's umask (inherited); compare with it
    mask = os.umask(0o022)
    os.umask(mask)
    for p in [finished_run / "metrics.json", finished_run / "action.safetensors", _tensor_file(finished_run),
              finished_run / "figures" / "curves.png"]:
        assert (p.stat().st_mode & 0o777) == 0o666 & ~mask, p


@pytest.mark.parametrize("name, content, needle", [
    ("curves.json", b"null", "expected a JSON object"),
    ("curves.json", b'{"t": [0.0]}', "lacks learned_median"),
    ("metrics.json", b'{"preset": "x"}', "lacks objective"),
    ("history.json", b'{"step": 1}', "expected a JSON list"),
])
def test_report_names_the_file_of_the_wrong_form(finished_run: Path, tmp_path: Path, name, content, needle) -> None:
    # the discovery report checks each file's form itself (paramsym.discovery.report.read_checked)
    from paramsym.discovery.report import render
    from paramsym.errors import RunFileError
    from paramsym.runs.rundir import RunDir

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    (run / name).write_bytes(content)
    with pytest.raises(RunFileError, match=needle) as info:
        render(RunDir(run))
    assert name in str(info.value)


def test_refused_resume_writes_nothing_even_without_block_json(finished_run: Path, tmp_path: Path) -> None:
    # env.json is read before block.json or config.json is (re)written
    run = _unfinished_copy(finished_run, tmp_path / "run")
    (run / "block.json").unlink()
    _garbage(run / "env.json")
    before = _files(run)
    _one_named_line(_cli("discover", "--resume", str(run), "--quiet"), "RunFileError", "env.json")
    assert _files(run) == before and not (run / "block.json").exists()
