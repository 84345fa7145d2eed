"""The ``sweep`` run kind (``paramsym sweep``): its configuration :class:`SweepConfig` holds the
:class:`~.spec.SweepSpec` (``config.json``: ``{"kind": "sweep", "spec": {...}, "provenance": ...}``).

``quick()`` is a toy sweep (the shape of ``examples/sweeps/tiny.yaml``); :func:`run` runs the protocol
(:func:`~.driver.run_protocol`) on the run-time ``engine`` (a backend: local processes or Ray;
not configuration, recorded in ``env.json``) and returns the table as the metrics;
:func:`render` writes ``report.md`` from ``metrics.json``. Runs go through
:func:`~.launch.run_sweep`, which opens the directory and picks the backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .spec import SweepSpec

__all__ = ["KIND", "SweepConfig", "kind_spec", "render", "run"]

KIND = "sweep"


@dataclass(frozen=True)
class SweepConfig:
    """One ``paramsym sweep`` run: its spec (the YAML file, validated)."""

    spec: SweepSpec = field(default_factory=SweepSpec)

    @classmethod
    def quick(cls) -> SweepConfig:
        """A tiny sweep (seconds per trial): the protocol on a toy budget, for smoke runs and tests."""
        return cls(SweepSpec(name="quick", preset="sigmoid-scalar", variants=["hybrid"], quick=True,
                             base={"action.width": 16, "verdict.samples": 32, "verdict.curve_points": 2,
                                   "verdict.curve_times": 5, "train.checkpoint_every": 5},
                             search={"train.lr": [1e-3, 2e-3]}, candidate_steps=10, continue_top=1, continue_steps=20,
                             replication_seeds=[1, 2], validation_seeds=[0], figures=False))


def run(cfg: SweepConfig, out, *, progress: bool = False, engine: Any = None,
        on_trial: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The protocol of ``cfg.spec`` in run directory ``out`` on ``engine`` (default: one local worker)."""
    from .driver import run_protocol

    spec = cfg.spec
    if engine is None:
        from .backends import make_backend

        engine = make_backend("local", 1, None)
        try:
            return run_protocol(spec, out, engine, progress=progress, on_trial=on_trial)
        finally:
            engine.close()
    return run_protocol(spec, out, engine, progress=progress, on_trial=on_trial)


def render(run_dir) -> str:
    """``report.md`` of a sweep: the table (``table.md``), then the stages' trial counts."""
    from .table import render_table

    lines = [render_table(run_dir.read_json("metrics.json")).rstrip("\n"), ""]
    if run_dir.has("stages.json"):
        lines += ["## Stages", "", "| stage | trials | run | reused | failed |", "|---|---|---|---|---|"]
        lines += [f"| {s['stage']} | {s['trials']} | {s['run']} | {s['reused']} | {s['failed']} |"
                  for s in run_dir.read_json("stages.json")]
        lines += [""]
    return "\n".join(lines)


def kind_spec():
    """The ``sweep`` run kind's :class:`~paramsym.runs.kinds.KindSpec` (named in :data:`~paramsym.runs.kinds.KINDS`)."""
    from ..runs.kinds import KindSpec

    return KindSpec(SweepConfig, run, render, managed=True)
