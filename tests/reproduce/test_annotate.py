"""Rows that say what they are (issue 33): statistic and deviations from the registry, stale computed from the
configuration this code runs, the elapsed wall (not a sum), and verdicts re-judged from what the store holds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from paramsym.paper_stats import OWN, STATS
from paramsym.reproduce.annotate import annotate, annotate_row
from paramsym.reproduce.docs import render_reproductions, write_docs
from paramsym.reproduce.engine import _elapsed, run_config
from paramsym.runs.provenance import config_hash
from paramsym.runs.reuse import elapsed_seconds

DOCS = Path(__file__).resolve().parents[2] / "docs"
STORE = json.loads((DOCS / "reproductions.json").read_text())["rows"]


def _row(cid, run, **kw):
    return {"claim": cid, "run": run, "budget": "full", "ours": "x", "holds": True, "error": None, "values": {},
            "code_version": "abc", "config_hash": config_hash(run_config(run, False)), "seconds": 10.0,
            "cpu_seconds": 9.0, "wall_rule": "elapsed", **kw}


def test_stale_is_computed_from_the_configuration_this_code_runs():
    fresh = annotate_row(_row("attention-c6-clusterings", "attention"), {})
    assert fresh["stale"] is False
    old = annotate_row(_row("attention-c6-clusterings", "attention", config_hash="0" * 16), {})
    assert old["stale"] is True and "0000000000000000" in old["stale_reason"]
    assert old["holds"] is True and old["ours"] == "x"  # its numbers are kept, only marked


def test_every_stored_row_carries_statistic_and_deviations():
    for cid, r in STORE.items():
        assert "statistic" in r and isinstance(r.get("deviations"), list), cid
        assert r["statistic"] == (STATS[cid].statistic if cid in STATS else OWN)
    assert any("seven recipes" in d for d in STORE["transformer-composition"]["deviations"])
    assert any("2N" in d for d in STORE["transformer-motion"]["deviations"])
    assert any("seed 0" in d for d in STORE["table1-composition-hybrid"]["deviations"])


def test_the_stored_rows_are_annotated_already():
    """docs/reproductions.json is what annotate makes of it (regenerated, not hand-edited)."""
    assert annotate(STORE) == STORE


def test_the_six_rows_say_what_they_are_and_stale_rows_say_so():
    kinds = {c: STORE[c]["kind"] for c in ("census-minilm-attention", "census-mha-bias", "lifting-sanity-trainable",
                                           "lifting-sanity-frozen", "groups-d4-regular", "hamiltonian-walk")}
    # related (shown, never counted): a [Measurement] row is one of our pages' own measurements
    assert set(kinds.values()) == {"related"}
    # stale is computed: the row's config hash against the one this code runs (every row with a run)
    for cid, r in STORE.items():
        if r.get("config_hash") and r.get("run"):
            assert r["stale"] is (r["config_hash"] != config_hash(run_config(r["run"], r["budget"] == "quick"))), cid
    # a row whose configuration is not the one this code runs is stale, with the reason named
    old = annotate({"table1-fits": {**STORE["table1-fits"], "config_hash": "0" * 16, "stale": False}})["table1-fits"]
    assert old["stale"] is True and "differs from the configuration this code runs" in old["stale_reason"]


def test_transformer_composition_is_judged_at_the_stored_p95():
    """Judged from the per-seed p95 the store kept for the same run (numpy here), not from medians; the held-out
    units drawn at run time are judged with the development units."""
    per = STORE["transformer-learned-objectives"]["values"]["objectives"]
    row = STORE["transformer-composition"]
    for unit, got in row["values"]["per_unit"].items():
        for v in ("hybrid", "finite"):
            want = float(np.median([x["composition_error_p95"] for x in per[v] if x["unit"] == unit]))
            assert got[v] == want
    hyb = [u["hybrid"] for u in row["values"]["per_unit"].values()]
    fac = [u["finite"] / u["hybrid"] for u in row["values"]["per_unit"].values()]
    assert row["holds"] is (max(hyb) <= 0.000585 and min(fac) >= 5.45)
    held = row["values"]["held_out"]
    assert len(held) == 3 and set(held) <= set(row["values"]["per_unit"]) and row["values"]["draw_seed"] == 20261205
    assert row["holds"] is False and row["stale"] is False


def test_the_lifting_row_shows_three_statistics_and_v1_from_its_protocol_v3_run():
    """Protocol v3's run (fresh seeds 10–14) judged by its statistic, the geometric mean, fixed before it ran."""
    r = STORE["lifting-subnetwork-ratio"]
    v = r["values"]
    assert r["stale"] is False and not r.get("rejudged") and r["wall_rule"] == "elapsed"
    assert v["seeds"] == [10, 11, 12, 13, 14]
    assert r["holds"] is (v["geometric_mean"] >= 5.75)
    assert np.isclose(v["geometric_mean"], np.exp(np.mean(np.log(v["ratios"]))))
    assert np.isclose(v["ratio_median"], np.median(v["ratios"]))
    assert v["ratio_at_rho_0_5"] == v["same_rho_ratio"][v["rhos"].index(0.5)]
    assert v["v1_ratio"] == 3.6 and "3.6×" in r["ours"]


def test_wall_seconds_are_elapsed_not_summed():
    assert elapsed_seconds([(0.0, 10.0), (5.0, 12.0), (20.0, 25.0)]) == 17.0
    assert elapsed_seconds([]) == 0.0
    reused = [{"seconds": 100.0, "date_utc": "2026-12-01T10:01:40+00:00"},
              {"seconds": 100.0, "date_utc": "2026-12-01T10:01:40+00:00"}]  # two parallel sub-runs, same span
    import datetime as dt

    t0 = dt.datetime.fromisoformat("2026-12-01T10:05:00+00:00").timestamp()
    assert _elapsed(t0, 3.0, reused) == 103.0  # not 203
    assert _elapsed(t0, 3.0, [{"seconds": 100.0}]) is None  # a span it cannot place: unknown, not a guess
    # a legacy row (made before rows recorded the elapsed wall) keeps its summed figure apart, with a note
    legacy = annotate({"transformer-composition": {**STORE["transformer-composition"], "wall_rule": None,
                                                   "seconds": 5660.0}})["transformer-composition"]
    assert legacy["seconds"] is None and legacy["seconds_summed"] == 5660.0
    assert "elapsed wall not recorded" in legacy["wall_note"]
    r = STORE["transformer-composition"]  # protocol v3's run: CPU summed over its sub-runs, no wall note
    assert r["wall_rule"] == "elapsed" and r["cpu_seconds"] > 5000 and "wall_note" not in r


def test_the_page_renders_deviations_statistic_and_the_wall_note(tmp_path):
    page = render_reproductions(STORE)
    line = next(x for x in page.splitlines() if x.startswith("| `transformer-composition`"))
    assert "Statistic: per unit: median over seeds of the within-seed p95" in line
    assert "Deviations: model: all-MiniLM-L6-v2" in line and "seven recipes" in line
    assert "| no |" in line and "held out, drawn with seed 20261205" in line
    (tmp_path / "reproductions.json").write_text(json.dumps({"rows": STORE}))
    write_docs([], tmp_path)
    assert json.loads((tmp_path / "reproductions.json").read_text())["rows"] == STORE


def test_a_run_that_reuses_parallel_sub_runs_records_the_elapsed_wall(tmp_path, monkeypatch):
    """run_one: two reused sub-runs that ran at the same time (100 s each) count 100 s of wall, 180 s of CPU."""
    import dataclasses
    import datetime as dt

    from paramsym.reproduce import engine
    from paramsym.runs.reuse import SUBRUNS

    end = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).isoformat(timespec="seconds")

    def fake(out, reuse):
        subs = {f"s{i}": {"reused": True, "stale": False, "seconds": 100.0, "cpu_seconds": 90.0, "date_utc": end}
                for i in range(2)}
        (out / SUBRUNS).write_text(json.dumps(subs))
        return {"c6": {"count": 33}}

    spec = dataclasses.replace(engine.RUNS["attention"], quick=fake, full=fake)
    monkeypatch.setitem(engine.RUNS, "attention", spec)
    rec = engine.run_one("attention", tmp_path, quick=True)
    assert rec["wall_rule"] == "elapsed"
    assert 100.0 <= rec["seconds"] < 110.0  # this call's own span is disjoint and short, not 200 s
    assert rec["cpu_seconds"] >= 180.0
    row = engine._row(engine.BY_ID["attention-c6-clusterings"], rec, None)
    assert row["wall_rule"] == "elapsed" and row["statistic"] == STATS["attention-c6-clusterings"].statistic
