"""Ranking and aggregation against values worked out by hand."""

from __future__ import annotations

import math

from paramsym.sweep import SelectSpec
from paramsym.sweep.table import aggregate, rank, render_table, score


def _row(seed: int, comp: float, out: float, fits: bool = True, **extra) -> dict:
    base = {k: 0.0 for k in ("inverse_err_p95", "subdivision_err_p95", "transport_err_p95", "motion_median",
                              "motion_rel_median")}
    return {**base, "id": f"t{seed}-{comp}", "seed": seed, "fits": fits, "composition_err_p95": comp,
            "output_err_p95": out, "rho": 0.5, "factors": 1, **extra}


def test_score_is_the_median_over_seeds_and_fits_on_every_seed() -> None:
    sel = SelectSpec()
    sc = score([_row(0, 3.0, 1.0), _row(1, 1.0, 5.0), _row(2, 2.0, 2.0, fits=False)], sel)
    assert sc == {"fits_all": False, "composition_err_p95": 2.0, "output_err_p95": 2.0}
    failed = score([_row(0, 3.0, 1.0), {"id": "x", "error": "ConvergenceError: ..."}], sel)
    assert failed["fits_all"] is False and math.isinf(failed["composition_err_p95"])


def test_rank_fits_first_then_metric_then_tiebreak_then_grid_order() -> None:
    pts = [({"p": 0}, {"fits_all": False, "composition_err_p95": 0.1, "output_err_p95": 1.0}),
           ({"p": 1}, {"fits_all": True, "composition_err_p95": 0.5, "output_err_p95": 2.0}),
           ({"p": 2}, {"fits_all": True, "composition_err_p95": 0.5, "output_err_p95": 1.0}),
           ({"p": 3}, {"fits_all": True, "composition_err_p95": 0.2, "output_err_p95": 9.0}),
           ({"p": 4}, {"fits_all": True, "composition_err_p95": 0.2, "output_err_p95": 9.0})]
    assert rank(pts, SelectSpec()) == [3, 4, 2, 1, 0]
    assert rank(pts, SelectSpec(require_fits=False)) == [0, 3, 4, 2, 1]
    assert rank(pts, SelectSpec(mode="max", tiebreak=[])) == [1, 2, 3, 4, 0]
    inf = [({"p": 0}, {"fits_all": False, "composition_err_p95": math.inf, "output_err_p95": math.inf}),
           ({"p": 1}, {"fits_all": False, "composition_err_p95": 0.3, "output_err_p95": 0.0})]
    assert rank(inf, SelectSpec(mode="max", require_fits=False)) == [1, 0]  # a failed point is last either way


def test_aggregate_medians_fits_and_failures() -> None:
    rows = [_row(1, 0.3, 1e-3), _row(2, 0.1, 3e-3, fits=False), _row(3, 0.2, 2e-3)]
    agg = aggregate(rows)
    assert agg["median"]["composition_err_p95"] == 0.2 and agg["median"]["output_err_p95"] == 2e-3
    assert (agg["fits"], agg["n"], agg["seeds"], agg["failed"]) == (2, 3, [1, 2, 3], [])
    assert agg["per_seed"]["composition_err_p95"] == [0.3, 0.1, 0.2]
    agg = aggregate([rows[0], rows[1], {"id": "bad", "seed": 4, "error": "x"}])
    assert agg["median"]["composition_err_p95"] == 0.2 and agg["fits"] == 1 and agg["n"] == 3
    assert agg["failed"] == ["bad"] and agg["per_seed"]["composition_err_p95"] == [0.3, 0.1, None]


def test_render_table_lists_each_variant_and_stage() -> None:
    rows = [_row(1, 0.3, 1e-3), _row(2, 0.1, 3e-3, fits=False)]
    table = {"name": "t", "preset": "sigmoid-scalar", "replicate_steps": 20, "replication_seeds": [1, 2],
             "validation_seeds": [0], "rho": 0.5, "factors": 1,
             "select": {"metric": "composition_err_p95", "mode": "min"},
             "variants": {"hybrid": {"point": {"train.lr": 0.002}, **aggregate(rows)}},
             "stages": {"candidates": [{"variant": "hybrid", "point": {"train.lr": 0.002}, "steps": 10,
                                        "score": {"composition_err_p95": 0.2, "fits_all": True}, "rank": 1}]}}
    text = render_table(table)
    assert "| hybrid | train.lr=0.002 | 0.002 | 0.2 (0.3, 0.1) |" in text and "| 1/2 |" in text
    assert "## Selection: candidates (10 steps" in text and "continue" not in text.split("## Selection")[1]
