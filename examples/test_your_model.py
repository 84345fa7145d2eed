"""Test your own PyTorch model: is an action a symmetry of it? (guide: docs/guide/testing-your-own-model.md)

Wraps a small ReLU network as a paramsym ``Target`` (a pure function ``F_X(θ)`` of a block of its
parameters on a fixed batch X), checks two exact actions from the catalogue with
``paramsym.testing.check_action(action, target, points)``, and shows that a wrong claim — a general
change of hidden basis across a ReLU — is caught. The two ``test_*`` functions are what you would
put into your own pytest suite; ``python examples/test_your_model.py`` runs them too.

    python examples/test_your_model.py [--smoke]

The last line of the output is a JSON summary.
"""

from __future__ import annotations

import argparse
import json

import torch
from torch import nn

from paramsym.actions.base import GroupAction
from paramsym.actions.catalogue import HiddenBasisAction, HiddenPermutationAction, RescalingAction
from paramsym.groups.lie import MatrixLieGroup
from paramsym.params import ParameterBlock
from paramsym.targets import Target
from paramsym.testing import assert_invariant, check_action

BLOCK = ["0.weight", "0.bias", "2.weight"]  # V, b (the earlier bias) and U around the ReLU


def make_model(seed: int = 0) -> nn.Module:
    """Your model: here a (3, 16, 2) ReLU network with biases."""
    gen = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 2))
    with torch.no_grad():
        for prm in model.parameters():
            prm.copy_(0.5 * torch.randn(prm.shape, generator=gen))
    return model


def make_target(model: nn.Module, n: int = 64, seed: int = 1) -> Target:
    """F_X(θ): the model's output on a fixed batch X, as a function of the block θ = (V, b, U)."""
    X = torch.randn(n, 3, generator=torch.Generator().manual_seed(seed))
    return Target(model, BLOCK, X)


def points_near(target: Target, n: int = 32, scale: float = 0.1, seed: int = 2) -> torch.Tensor:
    """Parameter points θ0 + ε around the model's own weights (the check is run at each)."""
    gen = torch.Generator().manual_seed(seed)
    return target.theta0 + scale * torch.randn(n, target.p, generator=gen)


class ScaleOneUnit(GroupAction):
    """Your own action: the 1-dimensional group {e^t} scales hidden unit ``j``'s incoming weights
    and bias by e^t and its outgoing weights by e^-t (one factor of the catalogue's rescaling)."""

    def __init__(self, block: ParameterBlock, j: int = 0):
        super().__init__()
        self.group = MatrixLieGroup(1, 1, generators=torch.ones(1, 1, 1), learned=False)  # exp(t·[1])
        self.p = block.size
        where = block.unflatten(torch.arange(block.size, dtype=torch.float64))  # flat position of each entry
        up = torch.zeros(self.p, dtype=torch.bool)
        down = torch.zeros(self.p, dtype=torch.bool)
        up[where["0.weight"][j].long()] = True
        up[where["0.bias"][j].long()] = True
        down[where["2.weight"][:, j].long()] = True
        self.register_buffer("up", up)
        self.register_buffer("down", down)

    def act(self, g: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        d = g[0, 0]  # the group element is a 1×1 matrix e^t
        return theta * torch.where(self.up, d, torch.where(self.down, 1 / d, torch.ones_like(d)))


def test_rescaling_is_a_symmetry() -> None:
    """Positive rescaling of hidden units preserves a ReLU network's output and moves θ."""
    F = make_target(make_model())
    action = RescalingAction(F.block, "0.weight", "2.weight", activation=nn.ReLU())
    assert_invariant(action, F, points_near(F), samples=64)  # raises AssertionError with details


def test_basis_change_across_relu_is_not_a_symmetry() -> None:
    """GL(h) on the hidden space is a symmetry only of a *linear* hidden layer: the kit must say no."""
    F = make_target(make_model())
    wrong = HiddenBasisAction(F.block, "0.weight", "2.weight")
    try:
        assert_invariant(wrong, F, points_near(F), samples=64, metrics=["output"])
    except AssertionError as exc:
        assert "output error" in str(exc)
    else:
        raise AssertionError("a change of hidden basis across a ReLU passed the invariance check")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="fewer samples per cell (CI)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    samples = 32 if args.smoke else 256

    F = make_target(make_model())
    pts = points_near(F)
    checks = {
        "rescaling": RescalingAction(F.block, "0.weight", "2.weight", activation=nn.ReLU()),
        "permutation": HiddenPermutationAction(F.block, "0.weight", "2.weight"),
        "wrong_gl": HiddenBasisAction(F.block, "0.weight", "2.weight"),
        "own_action": ScaleOneUnit(F.block, j=0),
    }
    summary: dict[str, dict] = {}
    for name, action in checks.items():
        result = check_action(action, F, pts, samples=samples, rho=1.0, seed=0)
        print(result.summary(), end="\n\n")  # the table: one row per metric, one column per factor count
        summary[name] = {
            "passed": result.passed,
            "output_err_p95": result.value("output", factors=1),
            "output_tolerance": result.tolerances["output_err_p95"],
            "motion_median": result.value("motion", factors=1),
            "failed": sorted({r.name for r in result.failures}),
        }
    test_rescaling_is_a_symmetry()
    test_basis_change_across_relu_is_not_a_symmetry()
    summary["pytest_functions"] = "passed"
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
