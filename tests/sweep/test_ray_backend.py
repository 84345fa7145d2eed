"""The Ray Tune backend on a local Ray instance (``ray.init(num_cpus=2)``) gives the same trial
metrics and the same table as the local process pool, for the same spec and seeds.

The spec is the tiny one without the continue stage (2 candidates, 2 replications: two Tuners),
to keep Ray's start-up and per-stage actor start-up within the test budget; continuation from a
checkpoint is the same ``run_trial`` code on either backend (tested with the local backend).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

ray = pytest.importorskip("ray", reason="the ray extra (pip install 'paramsym[ray]')")


def test_ray_backend_matches_the_local_backend(tmp_path, tiny_spec, pool) -> None:
    from paramsym.experiments.sweep import run_sweep

    spec = dataclasses.replace(tiny_spec, continue_top=0)
    local = run_sweep(spec, tmp_path / "local", backend=pool, progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        table = run_sweep(spec, tmp_path / "ray", backend="ray", workers=2, progress=False)
    finally:
        ray.shutdown()
    assert table == local
    trials = sorted(p.name for p in (tmp_path / "ray" / "trials").iterdir())
    assert trials == sorted(p.name for p in (tmp_path / "local" / "trials").iterdir()) and len(trials) == 4
    for t in trials:  # every trial's own verdict and learned generators, bit for bit
        ours = json.loads((tmp_path / "ray" / "trials" / t / "metrics.json").read_text())
        ref = json.loads((tmp_path / "local" / "trials" / t / "metrics.json").read_text())
        assert ours["verdict"] == ref["verdict"] and ours["generators"] == ref["generators"]
    assert (tmp_path / "ray" / "ray" / "stage-candidates").is_dir()  # it ran through Ray Tune
