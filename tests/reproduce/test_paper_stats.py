"""The registry of the papers' statistics (issue 33): every paper claim has one, the claims compute exactly it,
and every ambiguous reading is listed.

The measured quantity of each seed-aggregated claim is recomputed here from synthetic per-seed rows with numpy
(median over seeds of the registry's within-seed key), while every other statistic the claim could have read
instead (the within-seed median, a pre-aggregated ``median`` block, the mean over seeds) gives another number.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from paramsym.paper_stats import STATS, across_seeds, ambiguous, geometric_mean
from paramsym.reproduce import CLAIMS

BY_ID = {c.id: c for c in CLAIMS}
PAPER = [c for c in CLAIMS if not c.source.startswith("[Measurement]")]
#: distinct per-seed multipliers: median 1.0, mean 1.3
SPREAD = (0.5, 0.7, 1.0, 1.3, 3.0)


def _t1_result():
    """Table 1's run: every key differs per seed and between variants; the run's ``median`` block is poisoned."""
    per = {}
    for v, base in (("hybrid", 1.0), ("finite", 7.0)):
        per[v] = [{"seed": i, "composition_err_p95": 3e-4 * base * k, "composition_err_median": 1e-5 * k,
                   "motion_rel_median": 0.11 * k * (1 + 0.1 * (v == "finite")), "motion_median": 0.4 * k,
                   "fits": 1} for i, k in enumerate(SPREAD)]
    poisoned = {"composition_err_p95": math.nan, "motion_rel_median": math.nan, "motion_median": math.nan, "fits": 5}
    return {"per_seed": per, "median": {"hybrid": dict(poisoned), "finite": dict(poisoned)},
            "composition_ratio_finite_over_hybrid": math.nan, "motion_ratio_finite_over_hybrid": math.nan}


def _td_result():
    """A two-unit transformer run: within-seed medians and p95 differ; no pre-aggregated medians at all."""
    per = {"hybrid": [], "finite": []}
    for u, scale in (("L1", 1.0), ("L3", 2.0)):
        for v, base in (("hybrid", 1.0), ("finite", 6.0)):
            per[v] += [{"unit": u, "seed": 6 + i, "rho": 0.5, "ratio_random": 200 * scale * k,
                        "ratio_uncompensated": 60 * scale * k, "motion_median": 8e-4 * scale * k,
                        "composition_error": 1e-5 * base * k, "composition_error_p95": 3e-4 * base * scale * k}
                       for i, k in enumerate(SPREAD)]
    return {"per_seed": per, "rho": 0.5}


def _median_over_seeds(rows, key, unit=None):
    return float(np.median([r[key] for r in rows if unit is None or r.get("unit") == unit]))


#: claim → (result, [(measured quantity read from Measured.values, the registry statistic recomputed by numpy)])
def _cases():
    t1, td = _t1_result(), _td_result()
    h, f = t1["per_seed"]["hybrid"], t1["per_seed"]["finite"]
    th, tf = td["per_seed"]["hybrid"], td["per_seed"]["finite"]

    def reg(cid, rows, unit=None):
        return _median_over_seeds(rows, STATS[cid].key, unit)

    return {
        "table1-composition-hybrid": (t1, [(lambda v: v["hybrid"], reg("table1-composition-hybrid", h))]),
        "table1-composition-finite": (t1, [(lambda v: v["finite"], reg("table1-composition-finite", f))]),
        "table1-composition-ratio": (t1, [(lambda v: v["ratio"], reg("table1-composition-ratio", f)
                                           / reg("table1-composition-ratio", h))]),
        "table1-motion": (t1, [(lambda v: v["motion_rel_median"], reg("table1-motion", h))]),
        **{cid: (td, [(lambda v, u=u: v["per_unit"][u], reg(cid, th, u)) for u in ("L1", "L3")])
           for cid in ("transformer-drift-random-learned", "transformer-drift-uncompensated-learned",
                       "transformer-motion")},
        "transformer-composition": (td, [(lambda v, u=u, s=s: v["per_unit"][u][s],
                                          reg("transformer-composition", rows, u))
                                         for u in ("L1", "L3") for s, rows in (("hybrid", th), ("finite", tf))]),
    }


def test_every_paper_claim_has_a_statistic_with_its_source():
    assert {c.id for c in PAPER} == set(STATS)
    for cid, s in STATS.items():
        assert s.claim == cid and s.statistic and s.quote and s.model and s.radius, cid
        assert (s.within is None) == (s.key is None) or s.across is None, cid
        if s.across is not None:
            assert s.within in ("p95", "median") and s.across == "median" and s.key, cid


def test_the_papers_global_statistic_is_what_the_seed_aggregated_claims_use():
    """[Discovery] §6: errors are medians over seeds of within-seed p95, motion uses medians."""
    for cid, s in STATS.items():
        if s.across is None or not cid.startswith(("table1-", "transformer-", "lifting-")):
            continue
        is_error = "composition" in (s.key or "") or "error" in (s.key or "")
        assert s.within == ("p95" if is_error else "median"), cid


@pytest.mark.parametrize("cid", sorted(_cases()))
def test_the_claim_measures_exactly_the_registrys_statistic(cid):
    result, checks = _cases()[cid]
    m = BY_ID[cid].measure(result)
    for read, want in checks:
        assert math.isclose(read(m.values), want, rel_tol=1e-12), (cid, read(m.values), want)


def test_every_seed_aggregated_claim_is_checked():
    aggregated = {c for c, s in STATS.items() if s.across == "median" and c != "lifting-subnetwork-ratio"}
    assert aggregated == set(_cases())


def test_the_synthetic_results_tell_the_statistics_apart():
    """The check above would catch a claim reading another statistic: each alternative gives another number."""
    rows = _td_result()["per_seed"]["hybrid"]
    l1 = [r for r in rows if r["unit"] == "L1"]
    p95_median = _median_over_seeds(l1, "composition_error_p95")
    assert p95_median != _median_over_seeds(l1, "composition_error")  # the within-seed median
    assert p95_median != float(np.mean([r["composition_error_p95"] for r in l1]))  # the mean over seeds


def test_ambiguous_statistics_are_listed_with_the_reading_chosen():
    listed = ambiguous()
    print("\n".join(f"{c}: {r}" for c, r in listed.items()))
    assert set(listed) == {"table1-composition-ratio", "lifting-subnetwork-ratio", "transformer-drift-random-learned",
                           "transformer-drift-uncompensated-learned", "transformer-motion"}
    assert all(len(r) > 40 for r in listed.values())
    assert "geometric mean" in listed["lifting-subnetwork-ratio"]
    assert "0.8–1.25" in listed["table1-composition-ratio"]


def test_transformer_composition_registry_is_the_papers_p95_and_factor():
    s = STATS["transformer-composition"]
    assert (s.within, s.across, s.key) == ("p95", "median", "composition_error_p95")
    assert "0.321%" in s.quote and "0.058%" in s.quote and "95th-percentile" in s.quote
    assert "5.45" in BY_ID["transformer-composition"].criterion  # 0.321 / 0.058 = 5.5× at printed precision


def test_aggregates():
    assert across_seeds([3.0, 1.0, 2.0]) == 2.0 and across_seeds([1.0, 2.0, 4.0, 10.0]) == 3.0
    assert math.isclose(geometric_mean([2.0, 8.0]), 4.0)
    with pytest.raises(ValueError):
        across_seeds([])
