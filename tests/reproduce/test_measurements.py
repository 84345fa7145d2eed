"""The measurement claims (teleport, alignment, compensation) read the commands' JSON and render blocks from it.

Synthetic command outputs (the keys `paramsym teleport/align/compensate --json` print) go through
each claim's ``measure`` and the block renderers: the criteria flip where the stated aim is
missed, and the rendered tables carry the numbers formatted from the values, nothing else.
"""

from command_checks import check_documented_command

from paramsym.reproduce.docs import BLOCKS
from paramsym.reproduce.measurements import MEASUREMENT_CLAIMS, MEASUREMENT_RUNS
from paramsym.reproduce.registry import CLAIMS, RUNS
from paramsym.reproduce.scan import hand_numbers

BY_ID = {c.id: c for c in MEASUREMENT_CLAIMS}


def _opt(ratios, reached=5, change=1e-16, finals=(1.0, 0.5)):
    n = len(ratios)
    return {"step_ratio": sorted(ratios)[n // 2], "step_ratios": ratios, "reached": reached, "seeds": n,
            "max_loss_change": change, "grad_norm_factor": 3.37, "teleport_time_fraction": 0.09,
            "final_loss_baseline": [finals[0]] * n, "final_loss_teleport": [finals[1]] * n}


def _preset(opts, lr, per_seed, change=1e-16):
    return {"optimizers": opts, "lr": lr, "per_seed": per_seed, "max_loss_change": change}


def _teleport(booth_step=9, gd_ratios=(6.8, 3.9, 20.0, 2.2, 0.99), rosen_final=6e-14):
    booth_seed = {"optimizer": "gd", "target": 4.9e-3, "steps_to_target": {"baseline": 28, "teleport": booth_step}}
    reg_seeds = [{"optimizer": "gd", "steps_to_target": {"baseline": 300, "teleport": None if r < 1 else int(300 / r)}}
                 for r in gd_ratios]
    return {
        "booth": _preset({"gd": _opt([28 / booth_step], 1, change=2.6e-14)}, {"gd": 0.08}, [booth_seed], 2.6e-14),
        "rosenbrock": _preset({"gd": _opt([5.0] * 5, finals=(0.111, rosen_final))}, {"gd": 1e-3}, []),
        "regression-mlp": _preset({"gd": _opt(list(gd_ratios), 4), "adagrad": _opt([6.25, 17.6, 14.3, 5.9, 2.65])},
                                  {"gd": 1e-4, "adagrad": 0.1}, reg_seeds),
    }


def test_teleport_claims_apply_their_aims_and_the_block_names_the_missing_preset():
    r = _teleport()
    assert all(BY_ID[c].measure(r).holds for c in ("teleport-booth", "teleport-rosenbrock", "teleport-regression-mlp"))
    digits = {"digits-mlp": _preset({"sgd": _opt([1.16] * 3, 3), "adam": _opt([1.04] * 3, 3)}, {"sgd": 0.1, "adam": 1e-3},
                                    [{"optimizer": "sgd", "steps_to_target": {"baseline": 442, "teleport": 387}}])}
    digits["digits-mlp"]["optimizers"]["sgd"].update(val_acc_at_target_baseline=0.9694, val_acc_at_target_teleport=0.9708,
                                                     val_acc_baseline=0.9721, val_acc_teleport=0.9735)
    assert BY_ID["teleport-digits-mlp"].measure(digits).holds
    slow = {"digits-mlp": {**digits["digits-mlp"], "optimizers": {"adam": _opt([0.98] * 3, 3)}}}
    assert not BY_ID["teleport-digits-mlp"].measure(slow).holds
    assert not BY_ID["teleport-booth"].measure(_teleport(booth_step=10)).holds
    assert not BY_ID["teleport-rosenbrock"].measure(_teleport(rosen_final=2e-6)).holds
    assert not BY_ID["teleport-regression-mlp"].measure(_teleport(gd_ratios=(6.8, 1.5, 20.0, 1.2, 0.99))).holds
    rows = {"teleport-booth": {"values": BY_ID["teleport-booth"].measure(r).values}}
    text = BLOCKS["teleport"].render(rows)
    assert "| `booth` | gd (0.08) | 1 | 28→9 | 3.11 |" in text and "300→—" in text and "2.6e-14" in text
    assert "Not in this (`--quick`) run: digits-mlp" in text  # no digits row
    rows["teleport-digits-mlp"] = {"values": BY_ID["teleport-digits-mlp"].measure(digits).values}
    text = BLOCKS["teleport"].render(rows)
    assert "| `digits-mlp` | sgd (0.1) | 3 | 442→387 | 1.16 |" in text and "| `digits-mlp` | sgd | 0.9694 → 0.9708 |" in text
    assert "Not in this" not in text
    assert not hand_numbers(BLOCKS["teleport"].marker() + "\n" + text + "\n<!-- end generated -->")


def _align(before=0.78, perm=0.0149, err=1.8e-16):
    ends = {"A": {"test_loss": 0.144, "test_acc": 0.964}, "B": {"test_loss": 0.148, "test_acc": 0.961}}
    return {"32": {"barrier_before": before, "barrier_before_train": 0.862, "barrier_permutation": perm,
                   "barrier_permutation_train": 0.0511, "barrier_full": 0.0192, "barrier_full_train": 0.0507,
                   "function_error": 2.3e-16, "function_error_permutation": err, "endpoints": ends,
                   "distance": {"before": 206.76, "permutation": 105.43, "full": 100.24}}}


def test_alignment_claim_and_block():
    c = BY_ID["align-digits-mlp"]
    assert c.measure(_align()).holds
    assert not c.measure(_align(perm=0.9)).holds and not c.measure(_align(err=1e-6)).holds
    text = BLOCKS["align-digits"].render({"align-digits-mlp": {"values": c.measure(_align()).values}})
    assert "| 32 | permutation | 0.0511 | 0.0149 | 105.4 | 1.8e-16 |" in text and "Not in this (`--quick`) run: 16" in text


def test_compensation_claim_and_block():
    c = BY_ID["compensation-models"]
    case = {"drift_relative": 3.95e-7, "ratio_random": 2500.4, "ratio_uncompensated": 325.2, "condition_number": 32.7,
            "units_changed": 17}
    r = {"all-MiniLM-L6-v2, layer 3 unit 7": case}
    assert c.measure(r).holds and c.measure(r).values["min_ratio"] == 325.2
    assert not c.measure({"x": {**case, "ratio_uncompensated": 9.0}}).holds
    text = BLOCKS["compensation-models"].render({"compensation-models": {"values": c.measure(r).values}})
    assert "| all-MiniLM-L6-v2, layer 3 unit 7 | 3.95e-07 | 2,500 | 325 | 32.7 | 17 |" in text
    assert "gpt2-tiny" in text.split("Not in this")[1]


def test_measurements_are_registered_beside_the_paper_claims():
    ids = [c.id for c in CLAIMS]
    assert ids[-len(MEASUREMENT_CLAIMS):] == [c.id for c in MEASUREMENT_CLAIMS]
    assert all(r.name in RUNS for r in MEASUREMENT_RUNS)
    # each documented command is a real one: paramsym lines parse with the CLI's parser, python -m
    # modules import, python -c imports exist, benchmark scripts exist and define the flags given
    problems = {r.name: check_documented_command(r.command) for r in MEASUREMENT_RUNS}
    assert not any(problems.values()), {k: v for k, v in problems.items() if v}
    # seeded and deterministic, --quick = the full numbers; only the 10-seed digits run is cut to 2 seeds
    assert [r.name for r in MEASUREMENT_RUNS if not r.exact] == ["teleport-digits", "align-modadd", "teleport-learned",
                                                                 "align-pairs"]
    for b in ("teleport", "align-digits", "compensation-models", "action-checks"):
        assert all(cid in BY_ID for cid in BLOCKS[b].claims)


def test_action_verdict_claim_and_block():
    c = BY_ID["actions-verdict"]
    case = {"output": 2.2e-15, "output2": 2.7e-15, "composition": 2.8e-16, "inverse": 9.5e-16, "motion": 0.132,
            "passed": True, "discrete": False}
    assert c.measure({"a": case}).holds
    assert not c.measure({"a": case, "b": {**case, "motion": 0.0}}).holds  # an action that does not move θ
    assert not c.measure({"a": {**case, "inverse": 1e-9}}).holds and not c.measure({"a": {**case, "passed": False}}).holds
    text = BLOCKS["action-checks"].render({"actions-verdict": {"values": c.measure({"a": case}).values}})
    assert "| a | 2.2e-15 / 2.7e-15 | 2.8e-16 | 9.5e-16 | 0.132 |" in text


def _stage(barrier, err=0.0, acc=0.9):
    return {"barrier": barrier, "barrier_train": barrier + 0.01, "distance": 12.5, "midpoint_test_acc": acc,
            "midpoint_test_loss": 1.0, "function_error": err, "seconds": 0.5}


def _pair(stages, rebasin):
    ends = {"A": {"test_loss": 0.2, "test_acc": 0.95}, "B": {"test_loss": 0.3, "test_acc": 0.94}}
    return {"stages": stages, "rebasin": rebasin, "endpoints": ends, "train_cpu_seconds": 61.0,
            "align_cpu_seconds": 9.0}


def test_transformer_pairs_claim_and_block_name_missing_stages_and_the_peer():
    """The pairs block: one row per stage the result holds, a 'missing' row where align() has no refined
    stage, the peer's failure or broken function named, and the verdict with its provenance."""
    c = BY_ID["align-transformer-pairs"]
    base = {"before": _stage(2.0), "permutation": _stage(1.5, 1e-16), "full": _stage(1.25, 2e-16)}
    r = {"pairs": {"vit-digits": _pair(base, {"barrier": 0.75, "barrier_train": 0.8, "distance": 3.0,
                                              "midpoint_test_acc": 0.5, "function_error": 1.3, "cpu_seconds": 11.0}),
                   "lm-stdlib": _pair(base, {"not_applicable": "it does not apply to GPT-2"})}}
    m = c.measure(r)
    assert m.holds is False and "refined stage missing" in m.ours and "modadd-transformer: missing" in m.ours
    row = {"values": m.values, "holds": m.holds, "ours": m.ours, "budget": "quick", "code_version": "abcdef1234567",
           "config_hash": "0123456789abcdef", "date_utc": "2026-12-05"}
    text = BLOCKS["align-pairs"].render({"align-transformer-pairs": row})
    assert "| vit-digits | permutation | 1.5 | 1.51 | 12.5 | 0.9 | 1e-16 | 0.5 (wall) |" in text
    assert "| lm-stdlib | refined | missing" in text
    assert "| vit-digits | rebasin 0.0.47 (changes B: not a symmetry here) | 0.75 |" in text
    assert "| lm-stdlib | rebasin 0.0.47 | not applicable (see below) |" in text and "Peer: it does not apply to GPT-2" in text
    assert "Aim met: no" in text and "code abcdef123456, config 0123456789abcdef" in text
    assert "Not in this (`--quick`) run: modadd-transformer" in text
