"""The runs behind the paper claims: one entry per experiment or command, at two budgets.

A :class:`RunSpec` names one computation whose output several claims read (the objectives
comparison feeds five Table 1 claims, one annulus run feeds three flow claims). ``full(out)``
runs the documented budget, ``quick(out)`` the reduced one (the experiment's own ``quick()``
config); both write a run directory ``out`` and return its result dictionary. Nothing here
re-implements an experiment: trained runs call the experiments' ``run(cfg, out)``, exact ones
run the documented ``paramsym`` command with ``--json`` in a subprocess (so the numbers are the
command's, byte for byte) and keep its output as ``result.json``.

``exact=True`` marks runs whose quick budget computes the full run's numbers (closed forms, exact
solvers, counts; for ``affine`` and ``census`` on a subset of the presets): their numbers may be
written into the documentation from a ``--quick`` run.
``full_time`` is the documented wall time of the full budget on the 2-core CPU machine of this
project (one torch thread); where it was not measured the entry says so.

``config(quick)`` is the *resolved* configuration of the run at that budget, as data: the
experiment's config and every sub-run's resolved discovery configuration (recipe included), the
attribution preset's resolved config, or the command lines of an exact run. Its
:func:`paramsym.runs.provenance.config_hash` decides, with the code version, whether a finished run
may be reused (:mod:`.engine`). ``full(out, reuse)`` / ``quick(out, reuse)`` pass ``reuse``
(``"refuse"``, ``"rerun"``, ``"stale"``; :mod:`paramsym.runs.reuse`) to experiments
that keep sub-runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RunDirError

__all__ = ["RUNS", "RunSpec", "budgeted", "kept", "run_cli"]


@dataclass(frozen=True)
class RunSpec:
    """One computation shared by claims.

    Attributes:
        name: run name (also the sub-directory of ``--out``).
        command: the ``paramsym`` command line that makes the full run by hand.
        full: ``full(out: Path, reuse: str) -> dict`` at the documented budget.
        quick: ``quick(out: Path, reuse: str) -> dict`` at the reduced budget (``--quick``).
        full_time: documented full-run time (words, with the machine).
        exact: the quick budget computes the same numbers as the full one.
        config: ``config(quick: bool) -> data``, the resolved configuration at that budget.
    """

    name: str
    command: str
    full: Callable[[Path, str], dict[str, Any]]
    quick: Callable[[Path, str], dict[str, Any]]
    full_time: str
    exact: bool = False
    config: Callable[[bool], Any] = lambda quick: {}

    def run(self, out: Path, quick: bool, reuse: str = "refuse") -> dict[str, Any]:
        """Run at the budget into ``out``."""
        return (self.quick if quick else self.full)(out, reuse)


def run_cli(args: list[str], out: Path, name: str = "result.json") -> dict[str, Any]:
    """Run ``python -m paramsym.cli ARGS`` (one thread; offline as every command); parse stdout as JSON; keep it.

    Raises:
        RunDirError: the command failed (its exit status and last stderr line are in the message)
            or printed no JSON.
    """
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # offline: the model loader reads local files only
    proc = subprocess.run([sys.executable, "-m", "paramsym.cli", *args], capture_output=True, text=True, env=env,
                          check=False)
    (out / (name[:-5] + ".stderr.txt")).write_text(proc.stderr[-20000:])
    if proc.returncode not in (0, 1):  # census exits 1 when an entry is unverified; the JSON still says so
        last = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise RunDirError(f"`paramsym {' '.join(args)}` exited with status {proc.returncode}: {last}")
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise RunDirError(f"`paramsym {' '.join(args)}` printed no JSON (stdout begins {proc.stdout[:80]!r}); "
                          f"see {out / (name[:-5] + '.stderr.txt')}.") from None
    (out / name).write_text(json.dumps(data, indent=1))
    return data


Make = Callable[[bool], Callable[[Path, str], dict[str, Any]]]


def budgeted(compute: Callable[[bool, Path], dict[str, Any]]) -> Make:
    """``make(quick) -> go(out, reuse)`` (a :class:`RunSpec`'s ``full``/``quick``) from ``compute(quick, out)``,
    for runs that keep no sub-runs (``reuse`` does not apply)."""

    def make(quick: bool) -> Callable[[Path, str], dict[str, Any]]:
        def go(out: Path, reuse: str = "refuse") -> dict[str, Any]:
            return compute(quick, out)

        return go

    return make


def kept(compute: Callable[[bool, Path], dict[str, Any]]) -> Make:
    """A run computed in this process: ``compute(quick, out)``'s result, kept as ``out/result.json``
    (``out`` also holds whatever else the computation keeps, e.g. trained models)."""

    def run(quick: bool, out: Path) -> dict[str, Any]:
        res = compute(quick, out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "result.json").write_text(json.dumps(res, indent=1))
        return res

    return budgeted(run)


# ------------------------------------------------------------------------------- trained experiments


def _objectives_cfg(quick: bool):
    from ..experiments.discovery.table1.run import ObjectivesConfig

    return ObjectivesConfig.quick() if quick else ObjectivesConfig.paper()


def _lifting_cfg(quick: bool):
    from ..experiments.discovery.lifting.run import LiftingConfig

    return LiftingConfig.quick() if quick else LiftingConfig.paper()


def _transformer_cfg(quick: bool):
    from ..experiments.discovery.transformer.run import TransformerDiscoveryConfig

    return TransformerDiscoveryConfig.quick() if quick else TransformerDiscoveryConfig.paper()


def _experiment_config(module: str, make_cfg: Callable[[bool], Any]) -> Callable[[bool], Any]:
    def config(quick: bool) -> dict[str, Any]:
        import importlib

        from ..config import to_dict

        mod = importlib.import_module(f"paramsym.experiments.{module}")
        cfg = make_cfg(quick)
        return {"kind": mod.KIND, "config": to_dict(cfg),
                "subruns": {k: to_dict(v) for k, v in mod.subrun_configs(cfg).items()}}

    return config


def _experiment(module: str, make_cfg: Callable[[bool], Any]) -> Callable[[bool], Callable]:
    def make(quick: bool) -> Callable[[Path, str], dict[str, Any]]:
        def go(out: Path, reuse: str = "refuse") -> dict[str, Any]:
            import importlib

            from ..runs.rundir import RunDir

            mod = importlib.import_module(f"paramsym.experiments.{module}")
            return mod.run(make_cfg(quick), RunDir(out), progress=False, reuse=reuse)

        return go

    return make


_objectives = _experiment("discovery.table1.run", _objectives_cfg)
_lifting = _experiment("discovery.lifting.run", _lifting_cfg)
_transformer = _experiment("discovery.transformer.run", _transformer_cfg)


def _attribution_cfg(preset: str, stage: str | None, paper: bool = False,
                     flows: tuple[str, ...] | None = None) -> Callable[[bool], Any]:
    def config(quick: bool) -> dict[str, Any]:
        from ..config import to_dict
        from ..experiments.attribution import presets as registry

        return {"preset": preset, "config": to_dict(registry.resolve_attribution_config(
            preset, stage=stage, quick=quick, paper=paper, flows=flows))}

    return config


def _attribution(preset: str, stage: str | None, paper: bool = False,
                 flows: tuple[str, ...] | None = None) -> Callable[[bool], Callable]:
    def make(quick: bool) -> Callable[[Path, str], dict[str, Any]]:
        def go(out: Path, reuse: str = "refuse") -> dict[str, Any]:
            from ..experiments.attribution import presets as registry
            from ..runs.rundir import RunDir

            cfg = registry.resolve_attribution_config(preset, stage=stage, quick=quick, paper=paper, flows=flows)
            summary = registry.run_attribution(preset, cfg, RunDir(out), progress=False)
            metrics = json.loads((out / "metrics.json").read_text())
            timing = json.loads((out / "timing.json").read_text()) if (out / "timing.json").exists() else {}
            return {**summary, "metrics": metrics, "timing": timing}

        return go

    return make


@kept
def _reynolds(quick: bool, out: Path) -> dict[str, Any]:
    from .exact_checks import reynolds_mexican_hat

    return reynolds_mexican_hat()


# ------------------------------------------------------------------------------- exact commands

AFFINE_FULL = ("linear2x2", "linear3x2", "relu242", "relu2881", "leakyrelu-bias", "tanh-mlp", "attention-d8h2",
               "attention-d8h2-bias")
AFFINE_QUICK = ("linear2x2", "linear3x2", "relu242", "leakyrelu-bias", "tanh-mlp", "attention-d8h2")


@budgeted
def _affine(quick: bool, out: Path) -> dict[str, Any]:
    return {p: run_cli(["affine", "--preset", p, "--json", "--quiet"], out, f"{p}.json")
            for p in (AFFINE_QUICK if quick else AFFINE_FULL)}


@budgeted
def _attention(quick: bool, out: Path) -> dict[str, Any]:
    return {
        "c6": run_cli(["attention", "clusterings", "--group", "C6", "--heads", "3", "--count-only", "--json"], out,
                      "c6.json"),
        "table": run_cli(["attention", "table", "--group", "D4", "--copies", "1..6", "--heads", "8", "--json",
                          "--out", str(out / "table")], out, "table.json"),
        "c96": run_cli(["attention", "count", "--group", "D4", "--copies", "96", "--heads", "8", "--json"], out,
                       "c96.json"),
        "growth": run_cli(["attention", "table", "--group", "D4", "--copies", "200,400,800,1000", "--heads", "8",
                           "--json"], out, "growth.json"),
    }


@budgeted
def _groups(quick: bool, out: Path) -> dict[str, Any]:
    return {"regular": run_cli(["group", "D4", "--rep", "regular", "--json", "--quiet"], out, "regular.json"),
            "copies16": run_cli(["group", "D4", "--rep", "copies:16", "--json", "--quiet"], out, "copies16.json")}


CENSUS_FULL = (("minilm", "float32"), ("bert-base", "float32"), ("gpt2", "float32"), ("pythia-tiny", "float64"),
               ("llama-tiny", "float64"), ("mlp-relu", "float64"), ("mlp-linear", "float64"), ("mha-bias", "float64"))
CENSUS_QUICK = tuple(p for p in CENSUS_FULL if p[0] not in ("bert-base", "gpt2"))


@budgeted
def _census(quick: bool, out: Path) -> dict[str, Any]:
    return {name: run_cli(["census", "--preset", name, "--dtype", dtype, "--json"], out, f"{name}.json")
            for name, dtype in (CENSUS_QUICK if quick else CENSUS_FULL)}


@budgeted
def _compensation(quick: bool, out: Path) -> dict[str, Any]:
    run = out / "run"
    if (run / "config.json").exists():  # an interrupted call of this run (the engine resumes it in place)
        return run_cli(["compensate", "--resume", str(run), "--json"], out)
    return run_cli(["compensate", "--model", "minilm", "--layer", "3", "--unit", "7", "--tokens", "16", "--json",
                    "--out", str(run)], out)


def _spec(name: str, command: str, make: Callable[[bool], Callable[[Path, str], dict[str, Any]]], full_time: str,
          exact: bool = False, config: Callable[[bool], Any] | None = None) -> RunSpec:
    return RunSpec(name, command, make(False), make(True), full_time, exact,
                   config or (lambda quick: {"command": command}))


def _budget_config(full: Any, quick_: Any) -> Callable[[bool], Any]:
    return lambda quick: quick_ if quick else full


ANNULUS_TIME = ("≈ 40 min per configuration, both flow modes, 200 Euler steps (docs/attribution.md, loaded 2-core "
                "machine)")

RUNS: dict[str, RunSpec] = {
    r.name: r
    for r in (
        _spec("objectives", "paramsym experiment objectives --seeds 1,2,3,4,5", _objectives,
              "≈ 11 min (10 runs × 10,000 steps, ≈ 1 min each since the faster step: `make run` measures ≈ 65 s for "
              "one; 2026-12-05, code 867508c: 645 s wall, 643 CPU s on one thread beside another run)", config=_experiment_config("discovery.table1.run", _objectives_cfg)),
        _spec("lifting", "paramsym experiment lifting --seeds 10,11,12,13,14 --unit-beta equal-field", _lifting,
              "10 runs × 5,000 steps, ≈ 45 CPU s each since the faster step (protocol v3: 622 s wall, 457 CPU s for all ten on one thread under load, code ab887be; v2: 1,184 s wall, 1,067 CPU s, code 60559f4)",
              config=_experiment_config("discovery.lifting.run", _lifting_cfg)),
        _spec("transformer", "paramsym experiment transformer", _transformer,
              "45 sub-runs (3 development units × hybrid, finite, flow × 3 seeds; 3 held-out units drawn at run time × "
              "hybrid, finite × 3 seeds), 92–151 CPU s each (≈ 89 CPU min; protocol v3 with the held-out draw: 5,319 CPU s "
              "summed over the sub-runs, which ran in the run's process and four side processes of the same code at once, "
              "02:20–03:43 UTC, code ab887be; docs/discovery.md)",
              config=_experiment_config("discovery.transformer.run", _transformer_cfg)),
        _spec("compensation", "paramsym compensate --model minilm --layer 3 --unit 7 --tokens 16 --json",
              _compensation, "≈ 15 s (closed form)", exact=True),
        _spec("annulus-wedge", "paramsym attribute --preset annulus-wedge --set protocol=paper --set gauge=paper",
              _attribution("annulus-wedge", "trained", paper=True), ANNULUS_TIME,
              config=_attribution_cfg("annulus-wedge", "trained", paper=True)),
        _spec("annulus-full", "paramsym attribute --preset annulus-full --set protocol=paper --set gauge=paper",
              _attribution("annulus-full", "trained", paper=True), ANNULUS_TIME,
              config=_attribution_cfg("annulus-full", "trained", paper=True)),
        _spec("annulus-init", "paramsym attribute --preset annulus-wedge --stage init --set protocol=paper "
              "--set gauge=paper", _attribution("annulus-wedge", "init", paper=True), ANNULUS_TIME,
              config=_attribution_cfg("annulus-wedge", "init", paper=True)),
        _spec("annulus-lifts", "paramsym reproduce annulus-eta-lifting-criterion",
              _attribution("annulus-wedge", "trained", flows=()),
              "measured 32 CPU-s (298 s wall under load): preset annulus-wedge (seed 42) without its flows — training "
              "200 epochs, one thin SVD", config=_attribution_cfg("annulus-wedge", "trained", flows=())),
        _spec("sanity-trainable", "paramsym attribute --preset lifting-sanity",
              _attribution("lifting-sanity", "trainable"), "≈ 2 s", exact=True,
              config=_attribution_cfg("lifting-sanity", "trainable")),
        _spec("sanity-frozen", "paramsym attribute --preset lifting-sanity --stage frozen",
              _attribution("lifting-sanity", "frozen"), "≈ 2 s", exact=True,
              config=_attribution_cfg("lifting-sanity", "frozen")),
        _spec("hamiltonian", "paramsym attribute --preset hamiltonian", _attribution("hamiltonian", None),
              "measured 257 CPU-s (1,613 s wall at load ≈ 10 on the 2 shared cores); docs/attribution.md had 209 s "
              "unloaded", config=_attribution_cfg("hamiltonian", None)),
        _spec("reynolds", "python -m paramsym.reproduce.exact_checks", _reynolds, "< 1 s", exact=True),
        _spec("affine", "paramsym affine --preset NAME --json (each preset)", _affine,
              "≈ 1–2 min for all 8 presets (relu2881: 7,832 unknowns, ≈ 30 s and 1.3 GiB; attention-d8h2-bias ≈ 10 s "
              "and 0.7 GiB since the bounded commutativity check); --quick runs the other 6, whose numbers are the "
              "full run's", exact=True, config=_budget_config({"presets": AFFINE_FULL}, {"presets": AFFINE_QUICK})),
        _spec("attention", "paramsym attention clusterings|table|count ... --json", _attention, "≈ 3 s", exact=True),
        _spec("groups", "paramsym group D4 --rep regular|copies:16 --json", _groups, "≈ 2 s", exact=True),
        _spec("census", "paramsym census --preset NAME --dtype D --json (8 presets)", _census,
              "≈ 3 min for the 8 presets (BERT-base and GPT-2 ≈ 30–50 s each); --quick skips those two, the other "
              "6 are the full run's", exact=True,
              config=_budget_config({"presets": CENSUS_FULL}, {"presets": CENSUS_QUICK})),
    )
}
