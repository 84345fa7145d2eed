"""Exact actions on standard ``nn.Linear`` MLPs *with biases* (float64): the output is unchanged
to rounding, the parameters (weights and the earlier bias) actually move, entries the action
would leave untouched are refused by name, and layer pairs are named (earlier, later)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.func import vmap

from paramsym.actions.catalogue import HiddenBasisAction, RescalingAction
from paramsym.errors import ActionError, ShapeError
from paramsym.targets import Target
from paramsym.testing import assert_invariant, check_action

DT = torch.float64


def _mlp(act: nn.Module, n: int = 3, h: int = 5, m: int = 2) -> nn.Sequential:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(n, h), act, nn.Linear(h, m)).to(DT)
    with torch.no_grad():  # biases of order one, so that forgetting one shows
        net[0].bias.copy_((0.3 + 0.2 * torch.arange(h, dtype=DT)) * (-1.0) ** torch.arange(h))
    return net


BLOCK = ["0.weight", "0.bias", "2.weight"]


def _moved(action, target, n=32, rho=0.8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    g = action.group.matrices(action.group.sample(n, rho, exact_factors=1, generator=gen)).to(DT)
    theta = target.theta0.expand(n, -1)
    return theta, action.act_many(g, theta)


@pytest.mark.parametrize("kind", ["rescaling", "hidden_basis"])
def test_output_unchanged_and_parameters_move(kind):
    if kind == "rescaling":
        net, cls = _mlp(nn.ReLU()), RescalingAction
    else:
        net, cls = _mlp(nn.Identity()), HiddenBasisAction
    X = torch.randn(16, 3, generator=torch.Generator().manual_seed(1), dtype=DT)
    F = Target(net, BLOCK, X)
    action = cls(F.block, "0.weight", "2.weight")
    theta, moved = _moved(action, F)
    out = (vmap(F)(moved) - vmap(F)(theta)).abs().max()
    assert out <= 1e-12 * max(1.0, float(vmap(F)(theta).abs().max()))
    motion = (moved - theta).norm(dim=-1)
    assert bool((motion > 0).all())
    # the bias moves as well (every unit has a nonzero bias)
    bias = F.block.names.index("0.bias")
    entry = F.block.entries[bias]
    assert bool(((moved - theta)[:, entry.offset : entry.offset + entry.size].norm(dim=-1) > 0).all())
    # the test-kit agrees: every metric passes
    check = assert_invariant(action, F, F.theta0 + 0.1 * torch.randn(8, F.p, generator=torch.Generator().manual_seed(2), dtype=DT),
                             samples=32)
    assert check.value("output") < 1e-12 and check.value("motion") > 0.05


def test_rescaling_closed_form_with_bias():
    net = _mlp(nn.ReLU())
    F = Target(net, BLOCK, torch.randn(4, 3, dtype=DT))
    action = RescalingAction(F.block, earlier="0.weight", later="2.weight")
    d = torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25], dtype=DT)
    moved = action.act(torch.diag(d), F.theta0)
    W1, b1, W2 = net[0].weight.detach(), net[0].bias.detach(), net[2].weight.detach()
    expect = torch.cat([(d[:, None] * W1).reshape(-1), d * b1, (W2 / d[None, :]).reshape(-1)])
    assert torch.equal(moved, expect)


def test_hidden_basis_closed_form_with_bias():
    net = _mlp(nn.Identity(), h=3)
    F = Target(net, BLOCK, torch.randn(4, 3, dtype=DT))
    action = HiddenBasisAction(F.block, earlier="0.weight", later="2.weight")
    g = torch.tensor([[1.0, 0.2, 0.0], [0.1, 1.5, 0.3], [0.0, -0.4, 0.8]], dtype=DT)
    moved = action.act(g, F.theta0)
    V, b, U = net[0].weight.detach(), net[0].bias.detach(), net[2].weight.detach()
    expect = torch.cat([(g @ V).reshape(-1), g @ b, (U @ torch.linalg.inv(g)).reshape(-1)])
    assert torch.allclose(moved, expect, rtol=0, atol=1e-14)


def test_without_the_bias_in_the_block_the_standard_mlp_fails():
    """The issue's case: rescaling only the weights of a biased ReLU MLP is not a symmetry."""
    net = _mlp(nn.ReLU())
    F = Target(net, ["0.weight", "2.weight"], torch.randn(16, 3, generator=torch.Generator().manual_seed(1), dtype=DT))
    action = RescalingAction(F.block, "0.weight", "2.weight")
    assert not check_action(action, F, samples=32).passed


@pytest.mark.parametrize("cls", [RescalingAction, HiddenBasisAction])
def test_untouched_entries_are_refused_by_name(cls):
    net = _mlp(nn.ReLU())
    F = Target(net, ["0.weight", "0.bias", "2.weight", "2.bias"], torch.randn(4, 3, dtype=DT))
    with pytest.raises(ActionError, match=r"2\.bias.*leave untouched"):
        cls(F.block, "0.weight", "2.weight")
    # an explicit earlier bias that is not the weight's twin
    with pytest.raises(ActionError, match="untouched"):
        cls(Target(net, ["0.weight", "2.weight", "2.bias"], torch.randn(4, 3, dtype=DT)).block, "0.weight", "2.weight")


@pytest.mark.parametrize("cls", [RescalingAction, HiddenBasisAction])
def test_layer_pairs_are_earlier_then_later(cls):
    net = _mlp(nn.ReLU(), n=3, h=5, m=2)
    block = Target(net, BLOCK, torch.randn(4, 3, dtype=DT)).block
    with pytest.raises(ShapeError, match=r"\(earlier, later\)"):
        cls(block, "2.weight", "0.weight")
    with pytest.raises(ActionError, match="earlier="):
        cls(block)


@pytest.mark.parametrize("cls, old", [
    (RescalingAction, {"in_name": "0.weight", "out_name": "2.weight"}),
    (HiddenBasisAction, {"v_name": "0.weight", "u_name": "2.weight"}),
])
def test_old_keywords_still_work_with_a_deprecation_warning(cls, old):
    net = _mlp(nn.ReLU())
    block = Target(net, BLOCK, torch.randn(4, 3, dtype=DT)).block
    with pytest.warns(DeprecationWarning, match="earlier|later"):
        a = cls(block, **old)
    b = cls(block, "0.weight", "2.weight")
    g = torch.diag(torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25], dtype=DT))
    if cls is HiddenBasisAction:
        g = g + 0.1 * torch.ones(5, 5, dtype=DT)
    theta = torch.linspace(-1, 1, block.size, dtype=DT)
    assert torch.equal(a.act(g, theta), b.act(g, theta))
    with pytest.raises(TypeError, match="unexpected keyword"):
        cls(block, "0.weight", "2.weight", bogus="x")
