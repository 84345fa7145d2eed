"""Every run of ``paramsym reproduce`` starts from an empty ``--out``.

The engine writes its record (``out/<run>/reproduce.json``, status ``running``) *before* the
wrapped run starts, so every run must accept a directory holding only that record. The annulus
rows refused it (their other-run check saw the record) and no default-run test noticed: this
module is that test, for every entry of ``RUNS`` (paper runs and measurement runs).

Each run goes through the real engine (:func:`~paramsym.reproduce.engine.run_one`)
from an empty ``--out`` at the quick budget:

* runs that take about a second run to the end and must finish without error (:data:`REAL`;
  ``tests/reproduce/test_cli_quick.py`` runs ``groups`` and ``sanity-frozen`` to the end too);
* the others run their real ``go()`` — the engine's record, the experiment's config and
  sub-run planning, the attribution preset's other-run check — up to their first expensive
  step, which is replaced by a function raising :class:`Reached` (:data:`CUT`). The row's error
  must be that ``Reached``: a directory check that refuses the engine's directory raises its
  own error first and fails the test;
* runs of ``paramsym`` commands in a subprocess (``run_cli``) run their real ``go()`` with each
  command replaced by the command's own ``--out`` check (``RunDir.fresh``, what
  :func:`paramsym.cli.options.open_run` applies to ``--out``) on the directory it would get,
  which must lie inside the run's directory; the command's output is then an empty object.

A run added to the registry without an entry here fails :func:`test_every_run_is_covered`.
"""

import dataclasses
import types
from pathlib import Path

import pytest

from paramsym.reproduce.engine import RECORD, run_one
from paramsym.reproduce.registry import RUNS
from paramsym.runs.rundir import RunDir


class Reached(Exception):  # noqa: N818 - a marker, not an error
    """The run got past its directory checks to its first expensive step."""


#: runs cheap enough to run to the end here (seconds)
REAL = ("reynolds", "action-checks")


def _cli_check(root: Path, calls: list[list[str]]):
    """``run_cli`` without the subprocess: the ``--out`` it would pass must be inside the run
    directory ``root`` and pass the command's own check (missing or empty: ``RunDir.fresh``, as
    ``open_run`` and ``discover``'s ``start_run``; ``attention table`` rewrites its directory)."""

    def run_cli(args, out, name="result.json"):
        calls.append(list(args))
        if "--out" in args:
            target = Path(args[args.index("--out") + 1])
            assert root in target.parents, f"{args[0]} --out {target} is not inside the run directory {root}"
            # `attention table --out` (re)writes its directory; the other commands take a new or empty one
            RunDir(target) if args[:2] == ["attention", "table"] else RunDir.fresh(target)
        if "--resume" in args:  # open_run: the directory of an earlier run of the command
            target = Path(args[args.index("--resume") + 1])
            assert root in target.parents and (target / "config.json").is_file(), f"{args[0]} --resume {target}"
        return {}

    return run_cli


def _patch_run_cli(monkeypatch, fake) -> None:
    """Replace ``run_cli`` in every module that calls it by its own name: ``runs`` and each area
    module of the ``measurements`` package."""
    from paramsym.reproduce import measurements, runs

    for mod in (runs, *(m for m in vars(measurements).values()
                        if isinstance(m, types.ModuleType) and hasattr(m, "run_cli"))):
        monkeypatch.setattr(mod, "run_cli", fake)


def _stop(*_, **__):
    raise Reached("first expensive step")


#: run → the attributes replaced by the stop (the first expensive step of its ``go()``)
CUT = {
    "objectives": ("paramsym.discovery.run.run_discovery",),
    "lifting": ("paramsym.discovery.run.run_discovery",),
    "transformer": ("paramsym.experiments.discovery.transformer.run.unit_problem",),
    "annulus-wedge": ("paramsym.experiments.attribution.annulus.run.build_problem",),
    "annulus-full": ("paramsym.experiments.attribution.annulus.run.build_problem",),
    "annulus-init": ("paramsym.experiments.attribution.annulus.run.build_problem",),
    "annulus-lifts": ("paramsym.experiments.attribution.annulus.run.build_problem",),
    "hamiltonian": ("paramsym.experiments.attribution.hamiltonian.train.train_hamiltonian",),
    "sanity-trainable": ("paramsym.experiments.attribution.sanity.run.lifting_sanity",),
    "sanity-frozen": ("paramsym.experiments.attribution.sanity.run.lifting_sanity",),
    "teleport-grad-norm": ("paramsym.kinds.teleport_mlp.train_preset",),
    "align-modadd": ("paramsym.kinds.align_presets.load_preset",),
    "align-pairs": ("paramsym.kinds.align_presets.load_preset",),
    "align-rebasin": ("paramsym.reproduce.peers.rebasin.compare",),
    "census-mergekit": ("paramsym.census.mergekit_compare.compare",),
    # commands run in a subprocess (run_cli)
    "compensation": "cli", "affine": "cli", "census": "cli", "teleport-presets": "cli", "teleport-digits": "cli",
    "align-digits": "cli", "compensation-models": "cli", "teleport-learned": "cli", "groups": "cli", "attention": "cli",
}


def test_every_run_is_covered():
    assert set(REAL).isdisjoint(CUT)
    assert set(REAL) | set(CUT) == set(RUNS), "a run without a start-from-empty check: add it to REAL or CUT"


def _record_has_provenance(rec):
    assert rec["code_version"] and len(rec["config_hash"]) == 16 and rec["budget"] == "quick"
    assert rec["status"] == "finished"


@pytest.mark.parametrize("name", REAL)
def test_cheap_runs_finish_from_an_empty_out(name, tmp_path):
    rec = run_one(name, tmp_path, quick=True)
    assert rec["error"] is None, rec["error"]
    _record_has_provenance(rec)
    assert (tmp_path / name / RECORD).exists() and any(p.name != RECORD for p in (tmp_path / name).iterdir())


@pytest.mark.parametrize("name", sorted(CUT))
def test_expensive_runs_pass_their_directory_checks_from_an_empty_out(name, tmp_path, monkeypatch):

    calls: list[list[str]] = []
    if CUT[name] == "cli":
        _patch_run_cli(monkeypatch, _cli_check(tmp_path / name, calls))
    else:
        for target in CUT[name]:
            monkeypatch.setattr(target, _stop)
    planned: list[Path] = []
    if name in ("objectives", "lifting"):  # their sub-run planning (the directory check) runs before the stop
        from paramsym.runs import reuse

        real = reuse.plan_subrun
        monkeypatch.setattr(reuse, "plan_subrun", lambda path, *a, **k: planned.append(path) or real(path, *a, **k))
    rec = run_one(name, tmp_path, quick=True)
    if CUT[name] == "cli":
        assert rec["error"] is None and calls, rec["error"]
    else:
        assert rec["error"] is not None and rec["error"].startswith("Reached:"), rec["error"]
    if name in ("objectives", "lifting"):
        assert planned and all(p.parent == tmp_path / name for p in planned)
    _record_has_provenance(rec)


def test_the_checks_can_fail(tmp_path, monkeypatch):
    """A command given the run's own directory as ``--out`` sees the record and refuses (the bug of the
    annulus rows); so does a go() whose directory check counts the record."""
    from paramsym.errors import RunDirError

    d = tmp_path / "x"
    d.mkdir()
    (d / RECORD).write_text("{}")
    with pytest.raises(RunDirError, match="not empty"):
        _cli_check(tmp_path, [])(["compensate", "--out", str(d)], tmp_path)
    with pytest.raises(AssertionError, match="not inside"):
        _cli_check(d, [])(["compensate", "--out", str(tmp_path / "y")], d)

    def strict(out, reuse="refuse"):  # the annulus check before the fix: any file means "another run"
        if any(out.iterdir()):
            raise RunDirError(f"--out {str(out)!r} is not empty")
        raise Reached("first expensive step")

    monkeypatch.setitem(RUNS, "reynolds", dataclasses.replace(RUNS["reynolds"], full=strict, quick=strict))
    rec = run_one("reynolds", tmp_path / "out", quick=True)
    assert rec["error"].startswith("RunDirError") and "not empty" in rec["error"]


@pytest.mark.parametrize("name", sorted(n for n, c in CUT.items() if c == "cli"))
def test_command_runs_resume_an_interrupted_call_in_place(name, tmp_path, monkeypatch):
    """The engine resumes an interrupted run (record ``running``, same provenance) in its directory: a
    command's ``--out`` directory left by that call must not be refused (``compensate --out`` was)."""
    import json

    from paramsym.reproduce.engine import plan_run

    calls: list[list[str]] = []
    _patch_run_cli(monkeypatch, _cli_check(tmp_path / name, calls))
    run_one(name, tmp_path, quick=True)
    for args in calls:  # what the interrupted commands left: their run directories, begun
        if "--out" in args:
            target = Path(args[args.index("--out") + 1])
            target.mkdir(parents=True, exist_ok=True)
            (target / "config.json").write_text("{}")
    path = tmp_path / name / RECORD
    path.write_text(json.dumps({**json.loads(path.read_text()), "status": "running"}))
    assert plan_run(name, tmp_path, quick=True)["action"] == "resume"
    rec = run_one(name, tmp_path, quick=True)
    assert rec["error"] is None, rec["error"]


def test_exact_runs_compute_the_full_numbers_at_quick():
    """A quick row is evaluated only for ``exact`` runs (a trained claim's quick row is never ``holds: true``):
    an exact run's quick configuration is its full one, or the full one on a subset of its presets."""
    for name, spec in RUNS.items():
        if not spec.exact:
            continue
        quick, full = spec.config(True), spec.config(False)
        if quick != full:
            assert set(quick) == set(full) == {"presets"} and set(quick["presets"]) < set(full["presets"]), name
