"""A tiny sweep run once per session with the local backend (2 workers): the reference the
resume, CLI and Ray tests compare against."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY = Path(__file__).resolve().parents[2] / "examples" / "sweeps" / "tiny.yaml"


@pytest.fixture(scope="session")
def tiny_spec():
    from paramsym.sweep import load_spec

    return load_spec(str(TINY))


@pytest.fixture(scope="session")
def pool():
    """One local backend (2 spawned workers) shared by the session's sweeps: workers import
    torch once."""
    from paramsym.sweep.backends import LocalBackend

    backend = LocalBackend(workers=2)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def finished(tmp_path_factory, tiny_spec, pool) -> tuple[Path, dict]:
    """``(out, table)`` of the uninterrupted tiny sweep."""
    from paramsym.sweep import run_sweep

    out = tmp_path_factory.mktemp("sweep") / "uninterrupted"
    table = run_sweep(tiny_spec, out, backend=pool, progress=False)
    return out, table
