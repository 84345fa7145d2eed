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
