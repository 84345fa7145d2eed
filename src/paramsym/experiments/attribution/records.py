"""What every attribution preset writes beside the run verb's files: ``metrics.json``.

An attribution preset is ``run(cfg, out, *, progress=True) -> summary`` (registered in
:mod:`paramsym.experiments.attribution.presets`), called by the ``attribution`` kind through
:func:`paramsym.runs.execute.execute`, which writes ``config.json`` (``"kind": "attribution"``,
``"preset"``, ``"config"``: the resolved configuration, ``"provenance"``), ``env.json`` and
``report.md``. The preset writes into the run directory ``out``:

* figures under ``out.figures`` and its own files (flows, trained model, checkpoints);
* ``metrics.json`` holding at least ``{"summary": <the returned dict>}`` (:func:`finish_run`;
  the kind returns it to ``execute``, which writes the same bytes again);

and returns the **summary** (JSON-able), which ``paramsym attribute --json`` prints::

    {"preset": str, "stage": str | None,
     "lifts": [LiftRecord.to_json(), ...],   # c*, b* at the start (residual, rank, verdict)
     "flows": [FlowRecord.to_json(), ...],   # one per (flow mode, direction)
     "paper": {...} | None}                  # the source's numbers, for side-by-side
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...attribution.flows import LiftRecord
from ...runs.rundir import RunDir

__all__ = ["finish_run", "flow_record", "lift_records"]


def lift_records(att) -> list[LiftRecord]:
    """The two summary rows of an :class:`~paramsym.attribution.problem.Attribution`: ``c*`` and ``b*``."""
    return [
        LiftRecord("c*", "eta", att.c.residual, att.c.rank, att.c.target_norm, float(att.c.direction.norm()),
                   att.c.liftable(), att.c.verdict("symmetry direction η (c* = J⁺η)")),
        LiftRecord("b*", "-delta", att.b.residual, att.b.rank, att.b.target_norm, float(att.b.direction.norm()),
                   att.b.liftable(), att.b.verdict("equivariance direction −δ (b* = J⁺(−δ))")),
    ]


def finish_run(
    out: RunDir,
    *,
    preset: str,
    config: Any,
    summary: Mapping[str, Any],
    metrics: Mapping[str, Any] | None = None,
    seed: int | None = None,
    **config_extra: Any,
) -> None:
    """Write ``metrics.json`` (``config.json`` and ``env.json`` are the run verb's,
    :func:`paramsym.runs.execute.execute`).

    Args:
        out: the run directory.
        preset: preset name.
        config: the resolved configuration (a dataclass or a mapping).
        summary: the ``--json`` summary (stored as ``metrics["summary"]``).
        metrics: further metrics for the report (merged beside ``summary``).
        seed: recorded in ``env.json``.
        config_extra: extra top-level config keys (e.g. ``stage``).
    """
    full = dict(metrics or {})
    full["summary"] = dict(summary)
    out.write_json("metrics.json", full)


def flow_record(r: dict[str, Any], mode: str, direction: str) -> dict[str, Any]:
    """The flow record ``mode`` (``resolved``/``fixed``) along ``direction`` of a run's summary ``r["flows"]``."""
    for f in r["flows"]:
        if f["flow"] == mode and f["direction"] == direction:
            return f
    raise KeyError(f"no {mode} {direction} flow in the run")
