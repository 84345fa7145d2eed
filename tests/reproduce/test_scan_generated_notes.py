"""Results that lived only in development notes are measurement claims with generated blocks (issue 16, item 5).

Synthetic run results (the keys the runs return) go through each new claim's ``measure`` and the
block renderers: every criterion flips just outside its bound, and the rendered tables carry the
numbers formatted from the values (nothing typed), with no hand number outside the block.
"""

import pytest

from paramsym.reproduce.docs import BLOCKS, placeholder
from paramsym.reproduce.measurements import MEASUREMENT_CLAIMS
from paramsym.reproduce.registry import RUNS
from paramsym.reproduce.scan import hand_numbers, strip_generated

BY_ID = {c.id: c for c in MEASUREMENT_CLAIMS}


def _row(cid, values, **extra):
    return {"claim": cid, "budget": "full", "error": None, "values": values, **extra}


def _method(test, train=0.05, err=2e-16, sec=0.1):
    return {"train_barrier": train, "test_barrier": test, "function_error": err, "seconds": sec}


def _rebasin(ours=0.0149, theirs=0.0183, err=2e-16):
    return {"32": {"before": _method(0.78, 0.86, 0.0, 0.0), "rebasin": _method(theirs), "permutation": _method(ours, err=err),
                   "permutation+rescaling": _method(0.0192)}}


def test_rebasin_comparison_criterion_flips_at_1_1_times_the_peer_and_renders_every_method():
    c = BY_ID["align-rebasin"]
    assert c.measure(_rebasin(0.0149, 0.0183)).holds
    assert c.measure(_rebasin(1.099 * 0.02, 0.02)).holds and not c.measure(_rebasin(1.101 * 0.02, 0.02)).holds
    assert not c.measure(_rebasin(err=2e-10)).holds  # B's function changed
    text = BLOCKS["align-rebasin"].render({"align-rebasin": _row("align-rebasin", c.measure(_rebasin()).values)})
    assert "| 32 | rebasin 0.0.47 `PermutationCoordinateDescent` | 0.05 | 0.0183 | 2e-16 | 0.1 |" in text
    assert "| 32 | paramsym permutation | 0.05 | 0.0149 |" in text and "Not in this (`--quick`) run: 16" in text
    assert RUNS["align-rebasin"].exact and c.run == "align-rebasin"


def _gn(gd_div=5, ada_div=4):
    def rows(n_div):
        return [{"seed": s, "loss_start": 1800.0, "loss_final": None if s < n_div else 1.5, "loss_final_baseline": 2.0,
                 "loss_after_teleport": 4e4, "grad_norm_factor": 23.1, "diverged": s < n_div} for s in range(5)]
    return {"gd": rows(gd_div), "adagrad": rows(ada_div)}


def test_grad_norm_negative_result_needs_4_of_5_diverged_runs_per_optimizer():
    c = BY_ID["teleport-grad-norm"]
    assert c.measure(_gn(5, 4)).holds and not c.measure(_gn(5, 3)).holds and not c.measure(_gn(3, 5)).holds
    m = c.measure(_gn(5, 0))
    assert m.ours == "gd: diverged in 5/5 seeds, adagrad: diverged in 0/5 seeds" and not m.holds
    text = BLOCKS["teleport-grad-norm"].render({"teleport-grad-norm": _row("teleport-grad-norm", m.values)})
    assert "| gd | 0 | 23.1 | 1.8e+03 | 4e+04 | not finite | 2 | yes |" in text
    assert "| adagrad | 4 | 23.1 | 1.8e+03 | 4e+04 | 1.5 | 2 | no |" in text


def _modadd(before=3.7, perm=5.72, full=6.08, err=7e-16, orth=0.33, permres=1.0):
    d = {"before": 339.9, "permutation": 246.9, "full": 185.0}
    return {"steps": 3000,
            "align": {"barrier_before": before, "barrier_before_train": 3.62, "barrier_permutation": perm,
                      "barrier_permutation_train": 6.0, "barrier_full": full, "barrier_full_train": 6.25,
                      "function_error": err, "function_error_permutation": 6.1e-16, "distance": d,
                      "endpoints": {"A": {"test_loss": 0.099, "test_acc": 1.0}, "B": {"test_loss": 0.202, "test_acc": 1.0}}},
            "diagnostics": {"top_frequencies_A": [4, 6, 8, 11], "top_frequencies_B": [4, 6, 8, 11],
                            "top4_power_share_A": 0.86, "top4_power_share_B": 0.88,
                            "embedding_residual": {"identity": 1.42, "permutation": permres, "orthogonal": orth},
                            "without_residual_permutation": {"barrier_permutation": 3.97, "barrier_permutation_train": 3.96,
                                                             "barrier_full": 3.96, "barrier_full_train": 3.86,
                                                             "distance": {"permutation": 325.3, "full": 310.0}}}}


def test_modadd_negative_result_criterion_and_block():
    c = BY_ID["align-modadd-transformer"]
    assert c.measure(_modadd()).holds
    assert not c.measure(_modadd(perm=3.69)).holds  # the permutation lowered the barrier: no negative result
    assert not c.measure(_modadd(full=3.6)).holds
    assert not c.measure(_modadd(err=2e-10)).holds
    assert not c.measure(_modadd(orth=0.51)).holds and c.measure(_modadd(orth=0.49)).holds  # the rotation's share
    text = BLOCKS["align-modadd"].render({"align-modadd-transformer": _row("align-modadd-transformer",
                                                                           c.measure(_modadd()).values)})
    assert "| before | 3.62 | 3.7 | 339.9 | — |" in text and "| + attention GL(d_k), GL(d_v) per head | 6.25 | 6.08 | 185 |" in text
    assert "best orthogonal map 0.33" in text and "A [4, 6, 8, 11]" in text and "86 % / 88 %" in text
    assert not RUNS["align-modadd"].exact  # --quick trains 200 steps: its numbers never fill the block


def _td(ratio=479.8, unc=14.9, motion=5.2e-4, comp_h=0.074, comp_f=0.113, cpu=377.0):
    def row(v, r, u, m, c, s):
        return {"seed": 0, "steps": 3000, "rho": 7.0, "train_seconds": 300.0, "run_cpu_seconds": s, "ratio_random": r,
                "ratio_uncompensated": u, "motion_median": m, "composition_stored_median": c, "composition_stored_p95": 0.76}
    per = {"hybrid": [row("hybrid", ratio, unc, motion, comp_h, cpu)], "finite": [row("finite", 299.8, 17.8, 7.9e-4, comp_f, 332.0)]}
    med = {v: rs[0] for v, rs in per.items()}
    return {"per_seed": per, "median": med}


def test_learned_transformer_objectives_criterion_is_the_issues_joint_target():
    c = BY_ID["transformer-learned-objectives"]
    assert c.run == "transformer" and c.measure(_td()).holds
    for bad in ({"ratio": 99.9}, {"unc": 9.99}, {"motion": 4.99e-4}, {"comp_h": 0.114}, {"cpu": 901.0}):
        assert not c.measure(_td(**bad)).holds, bad
    text = BLOCKS["transformer-objectives"].render({"transformer-learned-objectives": _row(
        "transformer-learned-objectives", c.measure(_td()).values)})
    # columns: objective, seed, steps, eval ρ, β (— for runs before issue 17), train CPU s, ratios, motion, composition
    assert "| hybrid | 0 | 3000 | 7 | — | 377 | 479.8 | 14.9 | 0.0520 % | 7.400 % (76.00 %) |" in text
    assert "| finite | 0 | 3000 | 7 | — | 332 | 299.8 | 17.8 |" in text


def test_learned_transformer_block_reads_the_paper_claim_rows_and_says_their_provenance():
    rows = {"transformer-drift-random-learned": _row("x", {"ratio_random": 479.8}),
            "transformer-drift-uncompensated-learned": _row("x", {"ratio_uncompensated": 14.9}),
            "transformer-motion": _row("x", {"motion_median": 0.000523}),
            "transformer-composition": _row("x", {"finite": 0.11261, "hybrid": 0.07374})}
    text = BLOCKS["transformer-learned"].render(rows)
    assert "| — | 479.8 | 14.9 | 0.0523 % | 11.261 % → 7.374 % |" in text  # a run of the one-unit protocol
    assert "no code version recorded" in text
    # the multi-unit protocol: one row per unit, from the claims' per-unit values
    multi = {"transformer-drift-random-learned": _row("x", {"ratio_random": 300.0, "per_unit": {"L1": 300.0, "L3": 900.0}}),
             "transformer-drift-uncompensated-learned": _row("x", {"ratio_uncompensated": 5.0,
                                                                    "per_unit": {"L1": 5.0, "L3": 17.5}}),
             "transformer-motion": _row("x", {"motion_median": 0.08, "per_unit": {"L1": 0.36, "L3": 0.08}}),
             "transformer-composition": _row("x", {"finite": 0.003, "hybrid": 0.002, "per_unit": {
                 "L1": {"finite": 0.0026, "hybrid": 0.0023}, "L3": {"finite": 0.003, "hybrid": 0.002}}})}
    text = BLOCKS["transformer-learned"].render(multi)
    assert "| L1 | 300.0 | 5.0 | 36.0000 % | 0.260 % → 0.230 % |" in text
    assert "| L3 | 900.0 | 17.5 | 8.0000 % | 0.300 % → 0.200 % |" in text
    rows["transformer-drift-random-learned"] |= {"code_version": "0123456789abcdef", "date_utc": "2026-12-01T20:00"}
    assert "code `0123456789ab`" in BLOCKS["transformer-learned"].render(rows) and "2026-12-01" in \
        BLOCKS["transformer-learned"].render(rows)


def _learned(steps=0, status="left_level_set", refused=1.5e-4):
    return {"discovery_steps": 3000, "discover_status": {}, "teleport": {
        "status": status, "steps": steps, "refused_change": refused, "tol": 1e-6, "rel_loss_change": 0.0,
        "param_change": 0.0, "loss_before": 1.0, "loss_after": 1.0}}


def test_learned_teleport_negative_result_holds_only_when_no_step_is_accepted():
    c = BY_ID["teleport-learned"]
    assert c.measure(_learned()).holds
    assert not c.measure(_learned(steps=1)).holds  # a step was accepted: the field teleports
    assert not c.measure(_learned(status="converged", refused=None)).holds
    assert not c.measure(_learned(refused=1e-6)).holds  # the refused change must exceed the tolerance
    text = BLOCKS["teleport-learned"].render({"teleport-learned": _row("teleport-learned", c.measure(_learned()).values)})
    assert "| 3000 | `left_level_set` | 0 | 0.00015 | 1e-06 | 0 | 0 |" in text


@pytest.mark.parametrize("name", ["align-rebasin", "align-modadd", "teleport-grad-norm", "teleport-learned",
                                  "transformer-learned", "transformer-objectives"])
def test_new_blocks_name_registered_claims_and_their_placeholders_hold_no_number(name):
    assert all(cid in {c.id for c in MEASUREMENT_CLAIMS} or cid.startswith("transformer-") for cid in BLOCKS[name].claims)
    assert not hand_numbers(placeholder(name)) and strip_generated(placeholder(name)).strip() == ""


def test_rebasin_comparison_without_the_package_is_a_named_error(monkeypatch):
    import sys

    from paramsym.errors import InputFileError
    from paramsym.reproduce.peers.rebasin import compare

    monkeypatch.setitem(sys.modules, "rebasin", None)  # as if not installed (import raises ImportError)
    with pytest.raises(InputFileError, match=r"rebasin 0\.0\.47.*pip install 'paramsym\[compare\]'"):
        compare((32,))
