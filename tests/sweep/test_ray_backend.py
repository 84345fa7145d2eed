"""The Ray Tune backend on a local Ray instance (``ray.init(num_cpus=2)``) gives the same trial
metrics and the same table as the local process pool, for the same spec and seeds: the tiny
spec's 5 trials (2 candidates, 1 continued from its candidate's checkpoint, 2 replications)."""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray", reason="the ray extra (pip install 'paramsym[ray]')")


def test_ray_backend_matches_the_local_backend(tmp_path, tiny_spec, finished) -> None:
    from paramsym.sweep import run_sweep

    local_out, local = finished
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        table = run_sweep(tiny_spec, tmp_path / "ray", backend="ray", workers=2, progress=False)
    finally:
        ray.shutdown()
    assert table == local
    trials = sorted(p.name for p in (tmp_path / "ray" / "trials").iterdir())
    assert trials == sorted(p.name for p in (local_out / "trials").iterdir()) and len(trials) == 5
    for t in trials:  # every trial's own verdict and learned generators, bit for bit
        ours = json.loads((tmp_path / "ray" / "trials" / t / "metrics.json").read_text())
        ref = json.loads((local_out / "trials" / t / "metrics.json").read_text())
        assert ours["verdict"] == ref["verdict"] and ours["generators"] == ref["generators"]
    # it ran through Ray Tune: one experiment, one Tune trial directory per sweep trial
    assert sorted(p.name for p in (tmp_path / "ray" / "ray" / "sweep").iterdir() if p.is_dir()) == trials


def test_a_ray_started_by_the_sweep_leaves_no_session_folder(tmp_path, tiny_spec, finished) -> None:
    """``--backend ray`` without a running Ray starts its own instance in a folder of its own and
    removes it at the end: nothing new under the temp directory or /tmp/ray (issue 36)."""
    import tempfile
    from pathlib import Path

    from paramsym.sweep import run_sweep

    def listing() -> set[str]:
        roots = {Path(tempfile.gettempdir()), Path("/tmp"), Path("/tmp/ray")}
        return {str(p) for r in roots if r.is_dir() for p in r.iterdir()}

    assert not ray.is_initialized()
    before = listing()
    table = run_sweep(tiny_spec, tmp_path / "ray", backend="ray", workers=1, progress=False)
    assert table == finished[1] and not ray.is_initialized()
    new = sorted(p for p in listing() - before if "ray" in p.lower())  # psray-*, /tmp/ray, /tmp/ray/session_*
    assert new == [], new
