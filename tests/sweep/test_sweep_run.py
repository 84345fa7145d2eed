"""The sweep protocol end to end on the tiny spec (local backend): the table is the median over
seeds of the trials' own metrics.json, continuation resumes the candidate's checkpoint, an
interrupted sweep resumes to the same table, and finished trials are never recomputed."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import pytest

from paramsym.errors import BackendUnavailableError, ConfigError, RunDirError, SweepSpecError
from paramsym.sweep import METRICS, load_spec, run_sweep

TINY = Path(__file__).resolve().parents[2] / "examples" / "sweeps" / "tiny.yaml"


def _metrics(out: Path, tid: str) -> dict:
    return json.loads((out / "trials" / tid / "metrics.json").read_text())


def _snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "trials").rglob("*")) if p.is_file()}


def test_table_is_the_median_over_seeds_of_the_trials_metrics(finished, tiny_spec) -> None:
    out, table = finished
    assert json.loads((out / "table.json").read_text()) == table
    assert "| hybrid |" in (out / "table.md").read_text()
    row = table["variants"]["hybrid"]
    assert row["seeds"] == tiny_spec.replication_seeds and row["n"] == 2 and len(row["trials"]) == 2
    per = [_metrics(out, t) for t in row["trials"]]
    assert [m["seed"] for m in per] == [1, 2] and all(m["steps"] == 20 for m in per)
    for key in METRICS:
        assert row["median"][key] == statistics.median(m["verdict"]["declared"][key] for m in per)
    assert row["fits"] == sum(m["verdict"]["fits"] for m in per)
    # the replicated recipe is the continued candidate with the smallest composition error
    cont = table["stages"]["continue"]
    assert len(cont) == tiny_spec.continue_top == 1 and row["point"] == cont[0]["point"]
    cands = table["stages"]["candidates"]
    comp = {json.dumps(c["point"]): _metrics(out, c["trials"][0])["verdict"]["declared"]["composition_err_p95"]
            for c in cands}
    fits = {json.dumps(c["point"]): _metrics(out, c["trials"][0])["verdict"]["fits"] for c in cands}
    best = min(comp, key=lambda k: (not fits[k], comp[k]))
    assert json.dumps(cont[0]["point"]) == best
    assert sorted(c["rank"] for c in cands) == [1, 2]


def test_continuation_resumes_the_candidate_checkpoint(finished, tiny_spec) -> None:
    out, table = finished
    (cont,) = table["stages"]["continue"]
    cand = next(c for c in table["stages"]["candidates"] if c["point"] == cont["point"])
    trial = json.loads((out / "trials" / cont["trials"][0] / "trial.json").read_text())
    assert trial["parent"] == cand["trials"][0] and trial["steps"] == tiny_spec.continue_steps
    env = json.loads((out / "trials" / cont["trials"][0] / "env.json").read_text())
    assert env["starts"][-1]["resumed_from_step"] == tiny_spec.candidate_steps
    hist_c = json.loads((out / "trials" / cand["trials"][0] / "history.json").read_text())
    hist = json.loads((out / "trials" / cont["trials"][0] / "history.json").read_text())
    assert hist[: len(hist_c)] == hist_c and hist[-1]["step"] == tiny_spec.continue_steps
    assert _metrics(out, cont["trials"][0])["steps"] == tiny_spec.continue_steps
    report = (out / "trials" / cont["trials"][0] / "report.md").read_text()
    assert "sets `figures: false`" in report and not (out / "trials" / cont["trials"][0] / "figures").exists()


def test_interrupted_sweep_resumes_to_the_same_table(tmp_path, finished, tiny_spec, pool) -> None:
    _, reference = finished
    out = tmp_path / "interrupted"
    seen: list[str] = []

    def stop_in_replication(row: dict) -> None:
        seen.append(row["id"])
        if len(seen) == 4:  # 2 candidates, 1 continued, the first of 2 replications
            raise KeyboardInterrupt  # as a Ctrl-C in the driver

    with pytest.raises(KeyboardInterrupt):
        run_sweep(tiny_spec, out, backend=pool, progress=False, on_trial=stop_in_replication)
    assert not (out / "table.json").exists()
    done = {p.parent.name for p in (out / "trials").glob("*/metrics.json")}
    assert set(seen) <= done and 4 <= len(done) <= 5
    with pytest.raises(RunDirError, match="not empty.*--resume"):
        run_sweep(tiny_spec, out, backend=pool, progress=False)
    before = {t: (out / "trials" / t / "metrics.json").read_bytes() for t in done}
    edited = dataclasses.replace(tiny_spec, candidate_steps=tiny_spec.candidate_steps + 1)
    with pytest.raises(SweepSpecError, match="the spec differs from the one the sweep .* was started with "
                       r"\(keys \['candidate_steps'\]\)"):
        run_sweep(edited, out, backend=pool, resume=True, progress=False)
    assert json.loads((out / "config.json").read_text())["spec"]["candidate_steps"] == tiny_spec.candidate_steps
    table = run_sweep(tiny_spec, out, backend=pool, resume=True, progress=False)
    assert table == reference
    # the resumed sweep's metrics.json equals the uninterrupted one's, byte for byte
    assert (out / "metrics.json").read_bytes() == (finished[0] / "metrics.json").read_bytes()
    starts = json.loads((out / "env.json").read_text())["starts"]
    assert [s["resumed"] for s in starts] == [False, True] and starts[-1]["backend"] == "local"
    stages = json.loads((out / "stages.json").read_text())
    assert sum(s["reused"] for s in stages) == len(done) and sum(s["run"] for s in stages) == 5 - len(done)
    assert all((out / "trials" / t / "metrics.json").read_bytes() == b for t, b in before.items())


def test_a_finished_sweep_resumes_without_training(finished, tiny_spec, capsys) -> None:
    from paramsym.cli import main

    out, table = finished
    before = _snapshot(out), {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert main(["sweep", str(TINY), "--resume", str(out), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out) == table
    assert main(["sweep", "--resume", str(out), "--json", "--quiet"]) == 0  # the spec read from config.json
    assert json.loads(capsys.readouterr().out) == table
    # a finished sweep is reported: nothing rerun, no file rewritten
    assert (_snapshot(out), {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}) == before


def test_unreachable_ray_address_fails_fast_and_keeps_the_trials(finished, tiny_spec, capsys) -> None:
    from paramsym.cli import main

    out, _ = finished
    before = _snapshot(out)
    with pytest.raises(BackendUnavailableError) as info:
        run_sweep(tiny_spec, out, backend="ray", address="127.0.0.1:9", resume=True, progress=False)
    msg = str(info.value)
    assert "127.0.0.1:9" in msg and "ray start --head --port=9" in msg and "--backend local" in msg and "--resume" in msg
    assert main(["sweep", str(TINY), "--resume", str(out), "--backend", "ray", "--address", "nohost"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "BackendUnavailableError" in err and "HOST:PORT" in err
    assert _snapshot(out) == before


def test_cli_named_errors(tmp_path, capsys) -> None:
    from paramsym.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("preset: sigmoid-scalar\nsearch: {train.lr: [1e-3]}\nvalidaton_seeds: [0]\n")
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "SweepSpecError" in err and "Did you mean 'validation_seeds'?" in err and err.count("\n") == 1
    assert main(["sweep", str(TINY), "--address", "127.0.0.1:6379", "--out", str(tmp_path / "o")]) == 2
    assert "--address is for --backend ray" in capsys.readouterr().err
    assert main(["sweep", str(TINY), "--workers", "0"]) == 2
    assert "--workers must be an integer >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # --resume takes its DIR, as in every command (a usage error)
        main(["sweep", str(TINY), "--resume"])
    assert usage.value.code == 2 and "--resume: expected one argument" in capsys.readouterr().err
    assert main(["sweep", str(TINY), "--resume", str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert main(["sweep"]) == 2
    assert "give the sweep spec" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    with pytest.raises(ConfigError, match="--backend must be 'local' or 'ray'"):
        run_sweep(load_spec(str(TINY)), tmp_path / "o", backend="dask")


def test_sweep_directory_is_a_run_of_kind_sweep(finished, tiny_spec, capsys) -> None:
    from paramsym.cli import main
    from paramsym.config import to_dict
    from paramsym.runs.execute import load_run_config
    from paramsym.runs.rundir import RunDir

    out, table = finished
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["kind"] == "sweep" and cfg["spec"] == to_dict(tiny_spec) and cfg["provenance"]["config_hash"]
    assert load_run_config(RunDir(out)).spec == tiny_spec
    assert json.loads((out / "metrics.json").read_text()) == table == json.loads((out / "table.json").read_text())
    (out / "report.md").unlink()
    assert main(["report", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert text.startswith("# Sweep `tiny` on `sigmoid-scalar`") and "## Stages" in text and "| candidates | 2 |" in text and "| hybrid |" in text
