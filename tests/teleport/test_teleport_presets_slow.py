"""The 5-seed comparisons of issue 11 (slow: minutes). Run with ``-m slow``."""

from __future__ import annotations

import math

import pytest

from paramsym.kinds.teleport_mlp import run
from paramsym.kinds.teleport_presets import TeleportConfig

pytestmark = pytest.mark.slow


def test_regression_mlp_five_seeds_gd_and_adagrad():
    out = run(TeleportConfig("regression-mlp", seeds=(0, 1, 2, 3, 4)))
    assert out["max_loss_change"] <= 1e-10  # exact rescaling, float64
    for opt in ("gd", "adagrad"):
        runs = [r for r in out["runs"] if r["optimizer"] == opt]
        assert all(math.isfinite(x) for r in runs for x in r["teleport"]["losses"])  # no divergence
        assert all(max(r["teleport"]["losses"][6:]) <= r["teleport"]["losses"][5] for r in runs)
        fast = [r for r in runs if (r["steps_to_target"]["teleport"] or 10**9) <= 150]
        assert len(fast) >= 4, (opt, [r["steps_to_target"] for r in runs])
        assert out["optimizers"][opt]["grad_norm_factor"] > 1


def test_digits_mlp_ten_seeds_sgd_and_adam():
    out = run(TeleportConfig("digits-mlp"))  # the preset's 10 seeds
    assert out["seeds"] == 10
    assert out["max_loss_change"] <= 1e-10
    for opt in ("sgd", "adam"):
        d = out["optimizers"][opt]
        assert d["step_ratio"] > 1, d["step_ratios"]
        assert d["reached"] == d["baseline_reached"] == 10
        # the criterion: the validation accuracy (median over seeds, at the step the target
        # training loss is first reached) does not drop with teleports
        assert d["val_acc_at_target_teleport"] >= d["val_acc_at_target_baseline"], d
