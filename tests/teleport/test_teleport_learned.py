"""Teleporting with a learned action from a (tiny) ``paramsym discover`` run directory.

A 3-step discovery run is far from a symmetry; these tests check that the teleport is made, that
its loss change is measured against the 1e-6 tolerance and reported as it is (never that the
action is accurate), and the named errors for a model the action does not apply to.
"""

from __future__ import annotations

import json

import pytest
import torch

from paramsym.cli import main
from paramsym.kinds.teleport_learned import LEARNED_TOL, learned_teleport

_TINY = {"train.steps": 3, "action.width": 16, "action.depth": 1, "verdict.samples": 20, "verdict.rhos": [0.5],
         "verdict.factors": [1], "verdict.curve_points": 2, "verdict.curve_times": 3}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from paramsym.discovery import DiscoverConfig, discover
    from paramsym.discovery.config import with_overrides

    out = tmp_path_factory.mktemp("learned") / "relu242"
    with torch.random.fork_rng(devices=[]):
        discover("relu242", cfg=with_overrides(DiscoverConfig.for_preset("relu242"), _TINY), out=str(out))
    return str(out)


def _loss(target, theta, y):
    return float(0.5 * (target(theta) - y).pow(2).mean())


def test_default_tolerance_is_checked_and_reported(run_dir):
    res = learned_teleport(run_dir)
    assert res["tol"] == LEARNED_TOL == 1e-6
    assert res["tensors"] == {"fc1.weight": [4, 2], "fc2.weight": [2, 4]} and res["p"] == 16
    assert res["within_tol"] == (res["rel_loss_change"] <= 1e-6)
    assert res["within_tol"]  # refused steps are undone, so what is kept is within the tolerance
    if res["status"] == "left_level_set":  # the refused step's change is reported and was above tol
        assert res["refused_change"] > 1e-6
    if res["steps"] == 0:  # nothing accepted: nothing moved
        assert res["param_change"] == 0.0 and res["loss_after"] == res["loss_before"]
    json.dumps(res)


def test_loose_tolerance_moves_and_reports_the_true_loss_change(run_dir):
    """With tol = 1 the steps are accepted; the reported change equals one recomputed from θ'."""
    from paramsym.discovery.problems import build_problem

    res = learned_teleport(run_dir, tol=1.0, steps=3, keep_theta=True)
    assert res["steps"] >= 1 and res["param_change"] > 1e-4  # the learned action moved θ
    target = build_problem("relu242", 0).target.to(torch.float64)  # independent rebuild of the run's target
    y = torch.randn(target.q, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    before, after = _loss(target, target.theta0, y), _loss(target, res["theta"], y)
    assert res["loss_before"] == pytest.approx(before, rel=1e-12)
    assert res["rel_loss_change"] == pytest.approx(abs(after - before) / before, rel=1e-9, abs=1e-15)
    assert res["within_tol"] == (res["rel_loss_change"] <= 1.0)


def test_a_model_of_another_shape_is_a_named_error(run_dir):
    from paramsym.discovery.run import BlockMismatchError
    from paramsym.models.reference import reference_mlp

    wide = reference_mlp([2, 5, 2], "relu", generator=torch.Generator().manual_seed(0))
    with pytest.raises(BlockMismatchError, match=r"fc1\.weight: shape \(5, 2\) vs recorded \(4, 2\)"):
        learned_teleport(run_dir, model=wide, batch=torch.randn(8, 2))
    with pytest.raises(BlockMismatchError, match=r"lacks \['fc1\.weight', 'fc2\.weight'\]"):
        learned_teleport(run_dir, model=torch.nn.Linear(2, 2), batch=torch.randn(8, 2))


def test_a_matching_model_is_teleported(run_dir):
    from paramsym.models.reference import reference_mlp

    other = reference_mlp([2, 4, 2], "relu", generator=torch.Generator().manual_seed(5))
    res = learned_teleport(run_dir, model=other, batch=torch.randn(16, 2, generator=torch.Generator().manual_seed(1)))
    assert res["tensors"] == {"fc1.weight": [4, 2], "fc2.weight": [2, 4]}
    assert res["within_tol"] == (res["rel_loss_change"] <= 1e-6)


def test_cli_action(run_dir, capsys, tmp_path):
    d = tmp_path / "learned"
    assert main(["teleport", "--action", run_dir, "--json", "--out", str(d)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tol"] == 1e-6 and out["within_tol"] == (out["rel_loss_change"] <= 1e-6) and "seconds" in out
    metrics = json.loads((d / "metrics.json").read_text())
    assert json.loads((d / "config.json").read_text())["kind"] == "teleport-learned"
    assert metrics == {k: v for k, v in out.items() if k != "seconds"}
    assert main(["report", str(d)]) == 0
    assert "relative loss change" in (d / "report.md").read_text()
    assert main(["teleport", "--action", run_dir, "--preset", "booth"]) == 2
    assert "ConfigError" in capsys.readouterr().err
    assert main(["teleport", "--action", run_dir, "--seeds", "3"]) == 2
    assert "takes no --seeds" in capsys.readouterr().err


def test_teleport_learned_takes_any_action_and_target():
    """The teleport area's part alone (no run directory): with an exact action (positive
    rescaling of a bias-free ReLU MLP's hidden units) the block moves, the output and loss stay."""
    from paramsym.actions.catalogue import RescalingAction
    from paramsym.errors import ConfigError
    from paramsym.models.reference import reference_mlp
    from paramsym.targets import Target
    from paramsym.teleport.learned import teleport_learned

    net = reference_mlp([2, 4, 2], "relu", bias=False, generator=torch.Generator().manual_seed(3))
    target = Target(net, ["fc1.weight", "fc2.weight"], torch.randn(16, 2, generator=torch.Generator().manual_seed(4)))
    action = RescalingAction(target.block, "fc1.weight", "fc2.weight")
    res = teleport_learned(action, target, tol=1e-10, steps=5)
    assert res["steps"] >= 1 and res["param_change"] > 1e-3
    assert res["rel_loss_change"] <= 1e-10 and res["output_change"] <= 1e-10 and res["within_tol"]
    assert res["grad_norm_factor"] > 1.0  # the objective ‖∇L‖² was raised
    with pytest.raises(ConfigError, match="targets must have 32 entries"):
        teleport_learned(action, target, targets=torch.zeros(3))
