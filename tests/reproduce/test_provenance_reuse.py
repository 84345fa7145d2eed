"""Provenance and reuse: a finished run is reused only when its config hash and code version match.

Editing a run's configuration (or a discovery recipe, or the code) makes ``paramsym reproduce
CLAIM --out SAME_DIR`` refuse with a named error (default), rerun keeping the old directory
(``--rerun``) or reuse it marked stale (``--reuse-stale``) — never reuse silently. Bad input
(corrupt or foreign records, foreign files, refused option combinations) is a one-line named
error with exit status 2, and nothing in ``--out`` is lost.
"""

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from paramsym.cli import main
from paramsym.config import to_dict
from paramsym.errors import ForeignRunError, StaleRunError
from paramsym.reproduce import RUNS, reproduce
from paramsym.reproduce.engine import RECORD, run_config
from paramsym.runs import provenance as pv

CHEAP = "hamiltonian-reynolds"  # run `reynolds`: an exact check, well under a second


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with the sha256 of its bytes (to show nothing changed)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_rows_and_records_carry_provenance_and_reuse_keeps_the_seconds(tmp_path):
    [row] = reproduce([CHEAP], quick=True, out=tmp_path)
    rec = json.loads((tmp_path / "reynolds" / RECORD).read_text())
    assert row["code_version"] == rec["code_version"] == pv.code_version()
    assert row["config_hash"] == rec["config_hash"] == pv.config_hash(run_config("reynolds", True))
    assert rec["command"] == row["command"] == RUNS["reynolds"].command and rec["budget"] == "quick"
    assert rec["status"] == "finished" and row["seconds"] > 0 and row["cpu_seconds"] >= 0 and row["date_utc"]
    assert not row["reused"] and not row["stale"]
    [again] = reproduce([CHEAP], quick=True, out=tmp_path)
    assert again["reused"] and again["seconds"] == row["seconds"] and again["date_utc"] == row["date_utc"]
    # the full budget hashes differently (budget is part of the configuration)
    assert pv.config_hash(run_config("reynolds", False)) != row["config_hash"]


def test_editing_a_run_config_refuses_reruns_or_marks_stale(tmp_path, monkeypatch):
    reproduce([CHEAP], quick=True, out=tmp_path)
    before = _tree(tmp_path)
    spec = RUNS["reynolds"]
    monkeypatch.setitem(RUNS, "reynolds", dataclasses.replace(spec, config=lambda quick: {"edited": 1}))
    with pytest.raises(StaleRunError, match="config_hash") as e:
        reproduce([CHEAP], quick=True, out=tmp_path)
    assert "--rerun" in str(e.value) and "--reuse-stale" in str(e.value) and "\n" not in str(e.value)
    assert _tree(tmp_path) == before  # refused before anything was written
    [stale] = reproduce([CHEAP], quick=True, out=tmp_path, reuse="stale")
    assert stale["reused"] and stale["stale"] and "config_hash" in stale["stale_reason"] and stale["holds"] is True
    assert _tree(tmp_path) == before
    [fresh] = reproduce([CHEAP], quick=True, out=tmp_path, reuse="rerun")
    assert not fresh["reused"] and not fresh["stale"]
    assert fresh["config_hash"] == pv.config_hash(run_config("reynolds", True)) != stale["config_hash"]
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("reynolds.stale-")]
    assert len(kept) == 1 and _tree(kept[0]) == {k.split("/", 1)[1]: v for k, v in before.items()}  # nothing lost
    [reused] = reproduce([CHEAP], quick=True, out=tmp_path)  # the new run matches now
    assert reused["reused"] and not reused["stale"]


def test_a_record_made_before_provenance_is_stale_but_may_be_reused_marked(tmp_path):
    reproduce([CHEAP], quick=True, out=tmp_path)
    path = tmp_path / "reynolds" / RECORD
    rec = json.loads(path.read_text())
    old = {k: rec[k] for k in ("run", "budget", "command", "seconds", "cpu_seconds", "error", "result")}  # format 1
    path.write_text(json.dumps(old))
    with pytest.raises(StaleRunError, match="no provenance"):
        reproduce([CHEAP], quick=True, out=tmp_path)
    [row] = reproduce([CHEAP], quick=True, out=tmp_path, reuse="stale")
    assert row["stale"] and row["reused"] and row["code_version"] is None and row["seconds"] == old["seconds"]


def test_other_code_is_stale(tmp_path, monkeypatch):
    reproduce([CHEAP], quick=True, out=tmp_path)
    monkeypatch.setattr(pv, "code_version", lambda: "0123456789abcdef0123456789abcdef01234567")
    with pytest.raises(StaleRunError, match="made by code"):
        reproduce([CHEAP], quick=True, out=tmp_path)


def _edit_finite_recipe(monkeypatch, lr=5e-3):
    """Edit one value of the ``sigmoid-scalar`` finite-objective recipe (``train.lr``), as a maintainer would."""
    from paramsym.discovery import problems

    orig = problems.RECIPES["sigmoid-scalar"]

    def edited(preset, variant):
        cfg = orig(preset, variant)
        return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, lr=lr)) if variant == "finite" else cfg

    monkeypatch.setitem(problems.RECIPES, "sigmoid-scalar", edited)


def test_a_recipe_edit_makes_a_finished_subrun_stale(tmp_path, monkeypatch):
    """The discovery sub-runs of objectives/lifting/transformer: provenance of the resolved config, recipe included."""
    from paramsym.experiments.discovery.table1 import run as objectives
    from paramsym.runs.reuse import PROVENANCE, plan_subrun

    cfg = objectives.ObjectivesConfig.quick()
    name, dcfg = "finite-seed0", objectives.subrun_configs(cfg)["finite-seed0"]
    sub = tmp_path / name
    sub.mkdir()
    (sub / "metrics.json").write_text("{}")
    (sub / PROVENANCE).write_text(json.dumps(pv.provenance(to_dict(dcfg))))
    assert plan_subrun(sub, dcfg)["action"] == "reuse"
    _edit_finite_recipe(monkeypatch)
    edited = objectives.subrun_configs(cfg)[name]
    assert edited.train.lr == 5e-3 != dcfg.train.lr
    with pytest.raises(StaleRunError, match="finite-seed0.*config_hash"):
        plan_subrun(sub, edited)
    assert plan_subrun(sub, edited, "stale")["stale"] and plan_subrun(sub, edited, "rerun")["action"] == "rerun"
    (sub / PROVENANCE).unlink()  # made before sub-runs recorded provenance: never reused silently
    with pytest.raises(StaleRunError, match="no provenance"):
        plan_subrun(sub, dcfg)
    # the reproduce-level hash of the objectives run covers every sub-run's recipe
    monkeypatch.undo()
    h = pv.config_hash(run_config("objectives", True))
    _edit_finite_recipe(monkeypatch)
    assert pv.config_hash(run_config("objectives", True)) != h


@pytest.mark.slow
def test_recipe_edit_end_to_end_on_the_quick_objectives_run(tmp_path, monkeypatch):
    """Train the quick Table 1 run, edit a recipe value, rerun into the same --out: refused, then rerun."""
    from paramsym.experiments.discovery.table1 import run as objectives
    from paramsym.runs.rundir import RunDir

    rows = reproduce(["table1-fits"], quick=True, out=tmp_path)
    assert rows[0]["holds"] is None and rows[0]["error"] is None  # a trained claim at --quick: not evaluated
    before = _tree(tmp_path)
    _edit_finite_recipe(monkeypatch)
    with pytest.raises(StaleRunError):
        reproduce(["table1-fits"], quick=True, out=tmp_path)
    with pytest.raises(StaleRunError, match="finite-seed0"):  # the experiment itself checks its sub-runs
        objectives.run(objectives.ObjectivesConfig.quick(), RunDir(tmp_path / "objectives"), progress=False)
    assert _tree(tmp_path) == before
    [row] = reproduce(["table1-fits"], quick=True, out=tmp_path, reuse="rerun")
    assert not row["reused"] and row["config_hash"] != rows[0]["config_hash"]


# ------------------------------------------------------------------------------- bad input (CLI, exit 2)


def _one_line_error(capsys, name):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and name in err, err
    return err


@pytest.mark.parametrize("content", ["{not json", json.dumps({"hello": 1}), json.dumps({"run": "groups",
                                                                                          "budget": "quick"})])
def test_corrupt_or_foreign_record_is_refused(tmp_path, capsys, content):
    d = tmp_path / "reynolds"
    d.mkdir()
    (d / RECORD).write_text(content)
    before = _tree(tmp_path)
    assert main(["reproduce", CHEAP, "--quick", "--out", str(tmp_path)]) == 2
    _one_line_error(capsys, "ForeignRunError")
    assert _tree(tmp_path) == before


def test_files_not_made_by_reproduce_are_never_touched(tmp_path, capsys):
    d = tmp_path / "reynolds"
    d.mkdir()
    (d / "notes.txt").write_text("mine\n")
    before = _tree(tmp_path)
    assert main(["reproduce", CHEAP, "--quick", "--out", str(tmp_path)]) == 2
    assert "not made by `paramsym reproduce`" in _one_line_error(capsys, "ForeignRunError")
    assert main(["reproduce", CHEAP, "--quick", "--out", str(tmp_path), "--rerun"]) == 2  # not even with --rerun
    _one_line_error(capsys, "ForeignRunError")
    assert _tree(tmp_path) == before


def test_another_claims_runs_in_out_are_left_alone(tmp_path, capsys):
    assert main(["reproduce", "lifting-sanity-trainable", "--quick", "--out", str(tmp_path), "--quiet"]) == 0
    (tmp_path / "README-mine.txt").write_text("a file of mine beside the runs\n")
    before = _tree(tmp_path)
    capsys.readouterr()
    assert main(["reproduce", CHEAP, "--quick", "--out", str(tmp_path), "--quiet"]) == 0
    after = _tree(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("reynolds/")} == before


def test_list_refuses_budget_and_output_options(tmp_path, capsys):
    assert main(["reproduce", "--quick", "--list"]) == 2
    assert "--list runs nothing" in _one_line_error(capsys, "ConfigError")
    assert main(["reproduce", "all", "table1-fits", "--quick", "--list"]) == 2
    _one_line_error(capsys, "--quick")
    assert main(["reproduce", "--list", "--out", str(tmp_path / "o")]) == 2 and not (tmp_path / "o").exists()
    capsys.readouterr()
    assert main(["reproduce", "--list", "table1-fits", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["claim"] == "table1-fits" and row["kind"] == "reproduction" and row["trained"] is True
    assert main(["reproduce", "--list", "bogus-claim"]) == 2
    _one_line_error(capsys, "UnknownClaimError")


def test_rerun_and_reuse_stale_exclude_each_other(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["reproduce", CHEAP, "--rerun", "--reuse-stale"])
    assert e.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_corrupt_docs_store_is_refused_before_running(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "reproductions.json").write_text("{broken")
    assert main(["reproduce", CHEAP, "--quick", "--write-docs", str(docs), "--out", str(tmp_path / "runs")]) == 2
    _one_line_error(capsys, "ForeignRunError")
    assert (docs / "reproductions.json").read_text() == "{broken" and not (tmp_path / "runs").exists()
    assert not (docs / "reproductions.md").exists()


def test_stale_run_is_a_cli_error_naming_the_options(tmp_path, capsys, monkeypatch):
    assert main(["reproduce", CHEAP, "--quick", "--out", str(tmp_path), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["reproduce", CHEAP, "--out", str(tmp_path), "--quiet"]) == 2  # the full budget asked
    err = _one_line_error(capsys, "StaleRunError")
    assert "quick budget, not the full" in err and "--rerun" in err and "--reuse-stale" in err
    with pytest.raises(ForeignRunError):  # a file where the --out directory belongs
        f = tmp_path / "file"
        f.write_text("x")
        reproduce([CHEAP], quick=True, out=f)


def test_a_wrapped_attribution_run_starts_in_a_directory_holding_only_the_record(tmp_path):
    """`paramsym reproduce` writes reproduce.json into out/<run> before the run starts; the annulus
    run's other-run check must treat that directory as empty (it refused every full annulus row),
    and still refuse one holding any other file."""
    from paramsym.errors import RunDirError
    from paramsym.experiments.attribution.presets import (
        AttributionConfig,
        check_resumable,
        resolve_attribution_config,
    )
    from paramsym.runs.rundir import RunDir

    cfg = AttributionConfig("annulus-wedge", resolve_attribution_config("annulus-wedge", quick=True))
    d = tmp_path / "annulus-wedge"
    d.mkdir()
    (d / RECORD).write_text("{}")
    assert check_resumable(RunDir(d), cfg) is False  # nothing to continue: a fresh run starts there
    (d / "metrics.json").write_text("{}")
    with pytest.raises(RunDirError, match="holds no config.json"):
        check_resumable(RunDir(d), cfg)
