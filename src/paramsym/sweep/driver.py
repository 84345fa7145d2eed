"""The sweep driver: plan the stages, run them on a backend, select, replicate, tabulate.

Protocol (the papers' validation search, [Discovery] §6 / App. D):

1. **candidates** — every grid point of every variant on every validation seed, ``candidate_steps``;
2. **continue** — per variant, the ``continue_top`` best points (:func:`~.table.rank` on the
   medians over validation seeds) trained on to ``continue_steps`` (from the candidate's final
   checkpoint by default); the best of them is selected;
3. **replicate** — the selected point of each variant on fresh ``replication_seeds``,
   ``replicate_steps`` each, aggregated into the paper's table (:func:`~.table.aggregate`).

``OUT`` is a run directory of kind ``sweep`` (:mod:`.kind`, written through
:func:`paramsym.runs.execute.execute`): ``config.json`` (the spec's fields, kind
``sweep``, provenance), ``env.json`` (one entry per start or resume: backend, workers),
``trials/<id>/`` (one discovery run per trial, plus ``trial.json`` and ``summary.json``: the
checkpoints), ``metrics.json`` = ``table.json`` and ``table.md`` (written last; they depend only
on the spec and the trials' metrics, so an interrupted and resumed sweep writes the same
``metrics.json``, byte for byte, as an uninterrupted one), ``stages.json`` (timings and
counts), ``report.md``. A trial whose ``metrics.json`` exists is never run again. A sweep is
resumed with the spec it was started with (read from ``config.json`` when none is given); an
edited spec is refused (:class:`~paramsym.errors.SweepSpecError`), never mixed with the old
trials.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError, RunDirError, SweepSpecError
from ..groups.progress import progress_bar
from ..runs.rundir import RunDir, default_run_dir
from .spec import SweepSpec
from .table import aggregate, rank, render_table, score
from .trials import SUMMARY_FILE, make_trial, summarize, trial_config

__all__ = ["KIND", "budget", "default_out", "plan_candidates", "run_protocol"]

KIND = "sweep"


def default_out(spec: SweepSpec) -> Path:
    return default_run_dir("sweep", spec.name)


def _get(d: Mapping[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        d = d[part]
    return d


def _normalise(spec: SweepSpec, variant: str, point: dict[str, Any]) -> dict[str, Any]:
    """``point`` with each value as the configuration reads it (YAML ``1e-3`` → 0.001), checked."""
    from ..config import to_dict

    probe = make_trial(preset=spec.preset, variant=variant, base=spec.base, point=point, seed=0, steps=1,
                       quick=spec.quick, device=spec.device, figures=spec.figures, stage="plan")
    try:
        cfg = to_dict(trial_config(probe))
    except ConfigError as exc:
        where = f"variant {variant!r}, point {point}"
        raise SweepSpecError(f"{where}: {exc} Fix the value in the spec's search / base.") from None
    return {k: _get(cfg, k) for k in point}


def plan_candidates(spec: SweepSpec) -> dict[str, list[dict[str, Any]]]:
    """Per variant, the normalised grid points (validated against the configuration)."""
    plan: dict[str, list[dict[str, Any]]] = {}
    for v in spec.variants:
        points = [_normalise(spec, v, p) for p in spec.grid(v)]
        seen = {repr(sorted(p.items())) for p in points}
        if len(seen) != len(points):
            raise SweepSpecError(f"variant {v!r}: two grid points give the same configuration (values equal after "
                                 "parsing, e.g. 1e-3 and 0.001); list each value once.")
        plan[v] = points
    return plan


def budget(spec: SweepSpec) -> dict[str, Any]:
    """Trials and training steps per stage (checked against the configuration, nothing run).

    Continued trials count only their extra steps when they continue from a checkpoint.
    """
    points = plan_candidates(spec)
    nv, seeds = len(spec.validation_seeds), len(spec.replication_seeds)
    n_cand = sum(len(p) for p in points.values()) * nv
    n_cont = sum(min(spec.continue_top, len(p)) for p in points.values()) * nv
    extra = spec.continue_steps - (spec.candidate_steps if spec.continue_from_checkpoint else 0)
    stages = {"candidates": {"trials": n_cand, "steps": n_cand * spec.candidate_steps},
              "continue": {"trials": n_cont, "steps": n_cont * extra if spec.continue_top else 0},
              "replicate": {"trials": len(points) * seeds, "steps": len(points) * seeds * spec.final_steps}}
    return {"points": {v: len(p) for v, p in points.items()}, "stages": stages,
            "trials": sum(s["trials"] for s in stages.values()), "steps": sum(s["steps"] for s in stages.values())}


def _trial(spec: SweepSpec, variant: str, point: dict[str, Any], seed: int, steps: int, stage: str,
           parent: str | None = None) -> dict[str, Any]:
    return make_trial(preset=spec.preset, variant=variant, base=spec.base, point=point, seed=seed, steps=steps,
                      quick=spec.quick, device=spec.device, figures=spec.figures, stage=stage, parent=parent)


def _open_out(spec: SweepSpec | None, out: str | os.PathLike | None, resume: bool) -> RunDir:
    """The run directory: a fresh one (missing or empty), or with ``resume`` an existing sweep's,
    whose spec must equal ``spec`` (when given)."""
    from ..config import to_dict

    if out is None:
        if resume:
            raise RunDirError("--resume needs the directory of the sweep to continue: `paramsym sweep --resume DIR`.")
        return RunDir.fresh(default_out(spec), command="paramsym sweep")
    run = RunDir(out)
    if not resume:
        return RunDir.fresh(out, command="paramsym sweep")
    if not run.path.is_dir():
        raise RunDirError(f"--resume {str(run.path)!r}: no such directory; expected the directory of an earlier "
                          "`paramsym sweep SPEC --out DIR`. Check the path, or drop --resume to start a fresh sweep.")
    if not run.has("config.json") or run.kind() != KIND:
        raise RunDirError(f"{str(run.path)!r} is not a sweep directory (no config.json of kind 'sweep'); pass the "
                          "--out of an earlier `paramsym sweep`, or a new directory without --resume.")
    if spec is not None:
        stored = run.read_json("config.json").get("spec")
        if not isinstance(stored, dict) or stored != to_dict(spec):
            stored = stored if isinstance(stored, dict) else {}
            keys = sorted(k for k in set(stored) | set(to_dict(spec)) if stored.get(k) != to_dict(spec).get(k))
            raise SweepSpecError(f"the spec differs from the one the sweep in {str(run.path)!r} was started with "
                                 f"(keys {keys}); its trials belong to that spec. Resume with the original spec "
                                 "(or without SPEC: it is read from config.json), or start the edited spec with "
                                 "--out NEWDIR.")
    return run


class _Stage:
    """Runs one stage's trials (skipping finished ones) and prints its one-line summary."""

    def __init__(self, run: RunDir, backend: Any, progress: bool, on_trial: Callable[[dict], None] | None):
        self.run, self.backend, self.progress, self.on_trial = run, backend, progress, on_trial
        self.root = run.path / "trials"
        self.log: list[dict[str, Any]] = []

    def __call__(self, name: str, trials: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        t0 = time.time()
        rows: dict[str, dict[str, Any]] = {}
        todo = []
        for t in trials:
            d = RunDir(self.root / t["id"])
            if d.has("metrics.json"):
                rows[t["id"]] = summarize(t, d.read_json("metrics.json"))
            else:
                todo.append(t)
        reused = len(rows)
        source = self.backend.iterate(todo, self.root)
        items = progress_bar(source, total=len(todo), desc=f"sweep {name}", enabled=self.progress)
        try:
            for row in items:
                rows[row["id"]] = row
                d = RunDir(self.root / row["id"])
                d.write_json(SUMMARY_FILE if "error" not in row else "error.json", row)
                if self.on_trial is not None:
                    self.on_trial(row)
        finally:  # stopping early cancels the backend's queued trials (finished ones are kept)
            items.close()
            source.close()
        failed = [i for i, r in rows.items() if "error" in r]
        entry = {"stage": name, "trials": len(trials), "run": len(todo), "reused": reused, "failed": len(failed),
                 "seconds": round(time.time() - t0, 3)}
        self.log.append(entry)
        return rows

    def say(self, text: str) -> None:
        if self.progress:
            print(f"paramsym sweep: {text}", file=sys.stderr)


def _select(spec: SweepSpec, stage: str, points: dict[str, list[dict]], trials: dict[str, list[list[dict]]],
            rows: dict[str, dict]) -> tuple[list[dict[str, Any]], dict[str, list[int]]]:
    """Score and rank each variant's points; the stage's selection rows and per-variant order."""
    table, order = [], {}
    for v, pts in points.items():
        scored = [(p, score([rows[t["id"]] for t in trials[v][i]], spec.select)) for i, p in enumerate(pts)]
        order[v] = rank(scored, spec.select)
        for r, i in enumerate(order[v]):
            table.append({"variant": v, "point": pts[i], "steps": trials[v][i][0]["steps"],
                          "trials": [t["id"] for t in trials[v][i]], "score": scored[i][1], "rank": r + 1})
    return table, order


def run_protocol(spec: SweepSpec, run: RunDir, engine: Any, *, progress: bool = True,
                 on_trial: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The three stages in ``run`` on ``engine``; writes ``stages.json``, ``table.json``, ``table.md``;
    returns the table (the sweep kind's ``run``)."""
    points = plan_candidates(spec)
    stage = _Stage(run, engine, progress, on_trial)
    table = _protocol(spec, points, stage)
    run.write_json("stages.json", stage.log)
    run.write_json("table.json", table)
    run.write_text("table.md", render_table(table))
    return table


def _protocol(spec: SweepSpec, points: dict[str, list[dict]], stage: _Stage) -> dict[str, Any]:
    seeds = spec.validation_seeds
    cand = {v: [[_trial(spec, v, p, s, spec.candidate_steps, "candidates") for s in seeds] for p in pts]
            for v, pts in points.items()}
    rows = stage("candidates", [t for v in cand.values() for ts in v for t in ts])
    sel_cand, order = _select(spec, "candidates", points, cand, rows)
    stage.say(_line(stage.log[-1], spec, points, order, sel_cand))
    stages = {"candidates": sel_cand}
    chosen = {v: points[v][order[v][0]] for v in points}
    if spec.continue_top > 0:
        top = {v: [points[v][i] for i in order[v][: spec.continue_top]] for v in points}
        parents = {v: [cand[v][i] for i in order[v][: spec.continue_top]] for v in points}
        cont = {v: [[_trial(spec, v, p, s, spec.continue_steps, "continue",
                            parent=parents[v][j][k]["id"] if spec.continue_from_checkpoint else None)
                     for k, s in enumerate(seeds)] for j, p in enumerate(pts)] for v, pts in top.items()}
        rows = stage("continue", [t for v in cont.values() for ts in v for t in ts])
        sel_cont, order2 = _select(spec, "continue", top, cont, rows)
        stage.say(_line(stage.log[-1], spec, top, order2, sel_cont))
        stages["continue"] = sel_cont
        chosen = {v: top[v][order2[v][0]] for v in top}
    rep = {v: [_trial(spec, v, chosen[v], s, spec.final_steps, "replicate") for s in spec.replication_seeds]
           for v in points}
    rows = stage("replicate", [t for ts in rep.values() for t in ts])
    variants = {v: {"point": chosen[v], "trials": [t["id"] for t in ts], **aggregate([rows[t["id"]] for t in ts])}
                for v, ts in rep.items()}
    log = stage.log[-1]
    stage.say(f"replicate: {log['trials']} trials ({log['run']} run, {log['reused']} reused, {log['failed']} failed) "
              f"in {log['seconds']:.1f} s; " + "; ".join(
                  f"{v}: {spec.select.metric} median {r['median'].get(spec.select.metric, float('nan')):.3g}, "
                  f"fits {r['fits']}/{r['n']}" for v, r in variants.items()))
    first = next(iter(variants.values()))
    return {"kind": "sweep-table", "name": spec.name, "preset": spec.preset, "select": to_plain(spec.select),
            "validation_seeds": list(seeds), "replication_seeds": list(spec.replication_seeds),
            "candidate_steps": spec.candidate_steps, "continue_steps": spec.continue_steps if spec.continue_top else None,
            "replicate_steps": spec.final_steps, "rho": first.get("rho"), "factors": first.get("factors"),
            "variants": variants, "stages": stages}


def to_plain(obj: Any) -> Any:
    from ..config import to_dict

    return to_dict(obj)


def _line(log: dict, spec: SweepSpec, points: dict, order: dict, table: list[dict]) -> str:
    best = []
    for v in points:
        row = next(r for r in table if r["variant"] == v and r["rank"] == 1)
        val = row["score"][spec.select.metric]
        best.append(f"{v} best {', '.join(f'{k}={x:g}' if isinstance(x, float) else f'{k}={x}' for k, x in row['point'].items())}"
                    f" ({spec.select.metric} {val:.3g}{'' if row['score']['fits_all'] else ', does not fit'})")
    return (f"{log['stage']}: {log['trials']} trials ({log['run']} run, {log['reused']} reused, {log['failed']} failed) "
            f"in {log['seconds']:.1f} s; " + "; ".join(best))
