"""CLI helpers shared by the tests (imported by test modules; not collected): in-process runs
for the bad-input tests (:func:`run_cli`, :func:`refused`) and the command line in a subprocess
for the end-to-end tests (:func:`cli_argv`, :func:`cli_env`, :func:`kill_at_checkpoint`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from paramsym.cli import main

#: this checkout's ``src``: a CLI subprocess imports the code under test, not an installed copy
SRC = str(Path(__file__).resolve().parents[1] / "src")


def run_cli(capsys, argv: list) -> tuple[int, str, str]:
    """Run ``paramsym ARGV`` in-process; return (exit status, stdout, stderr)."""
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return rc, out, err


def refused(capsys, argv: list, *needles: str) -> str:
    """Run ``argv``; assert exit 2, one stderr line with ``error:`` and every needle; return the line."""
    rc, _, err = run_cli(capsys, argv)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "error:" in lines[0], (argv, rc, err)
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (argv, needle, lines[0])
    return lines[0]


def cli_argv(*args: str) -> list[str]:
    """The argv of ``paramsym ARGS`` run as ``python -m paramsym.cli`` in a subprocess."""
    return [sys.executable, "-m", "paramsym.cli", *args]


def cli_env() -> dict[str, str]:
    """The environment of a CLI subprocess: one thread, headless matplotlib, Hugging Face
    offline, and this checkout's ``src`` first on ``PYTHONPATH``."""
    return dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg", HF_HUB_OFFLINE="1",
                PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))


def kill_at_checkpoint(argv: list[str], run: Path, state: Path, timeout: float) -> int:
    """Start ``argv`` (a run writing into ``run``) in a subprocess and SIGKILL it as soon as its
    checkpoint file ``state`` appears (polling for at most ``timeout`` seconds).

    Asserts that the checkpoint was written and that the run had not finished (no
    ``run/metrics.json``); returns the checkpoint's ``step``.
    """
    proc = subprocess.Popen(argv, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while time.time() < deadline and not state.exists():
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert state.exists(), "no checkpoint was written before the deadline"
    assert not (run / "metrics.json").exists(), "the run finished before it could be killed"
    return json.loads(state.read_text())["step"]
