"""What every attribution preset returns: its metrics, with the ``--json`` summary inside.

An attribution preset is ``run(cfg, out, *, progress=True) -> metrics`` (registered in
:mod:`paramsym.experiments.attribution.presets`), called by the ``attribution`` kind through
:func:`paramsym.runs.execute.execute`, the one writer of ``config.json`` (``"kind": "attribution"``,
``"preset"``, ``"config"``: the resolved configuration, ``"provenance"``), ``env.json``,
``metrics.json`` and ``report.md``. The preset writes into the run directory ``out`` only its own
files (flows, trained model, checkpoints; figures are drawn when the report is rendered), and
returns the metrics (:func:`run_metrics`: JSON-able, ``metrics["summary"]`` the **summary** that
``paramsym attribute --json`` prints)::

    {"preset": str, "stage": str | None,
     "lifts": [LiftRecord.to_json(), ...],   # c*, b* at the start (residual, rank, verdict)
     "flows": [FlowRecord.to_json(), ...],   # one per (flow mode, direction)
     "paper": {...} | None}                  # the source's numbers, for side-by-side
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...attribution.flows import LiftRecord

__all__ = ["flow_record", "lift_records", "run_metrics"]


def lift_records(att) -> list[LiftRecord]:
    """The two summary rows of an :class:`~paramsym.attribution.problem.Attribution`: ``c*`` and ``b*``."""
    return [
        LiftRecord("c*", "eta", att.c.residual, att.c.rank, att.c.target_norm, float(att.c.direction.norm()),
                   att.c.liftable(), att.c.verdict("symmetry direction η (c* = J⁺η)")),
        LiftRecord("b*", "-delta", att.b.residual, att.b.rank, att.b.target_norm, float(att.b.direction.norm()),
                   att.b.liftable(), att.b.verdict("equivariance direction −δ (b* = J⁺(−δ))")),
    ]


def run_metrics(summary: Mapping[str, Any], metrics: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The metrics a preset returns (``execute`` writes them to ``metrics.json``): ``metrics`` (further
    figures for the report) with ``"summary"`` (the ``--json`` summary) beside them."""
    full = dict(metrics or {})
    full["summary"] = dict(summary)
    return full


def flow_record(r: dict[str, Any], mode: str, direction: str) -> dict[str, Any]:
    """The flow record ``mode`` (``resolved``/``fixed``) along ``direction`` of a run's summary ``r["flows"]``."""
    for f in r["flows"]:
        if f["flow"] == mode and f["direction"] == direction:
            return f
    raise KeyError(f"no {mode} {direction} flow in the run")
