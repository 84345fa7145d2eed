"""Hidden-basis GL(h), its chain version and positive rescaling (ReLU, LeakyReLU of any slope,
PReLU) on real nn.Linear MLPs with biases, float64: the verdict passes with output error ≤ 1e-10
and non-zero motion; closed forms (composition, inverse, the chain formula) hold exactly."""

from __future__ import annotations

import pytest
import torch
from catalogue_helpers import DT, discrete_verdict, gen
from torch import nn

from paramsym.actions.catalogue import (
    HiddenBasisAction,
    HiddenPermutationAction,
    LinearChainAction,
    RescalingAction,
    check_homogeneous,
    permutation_matrix,
)
from paramsym.errors import ActionError, ShapeError
from paramsym.targets import Target
from paramsym.testing import check_action


def _mlp(act: nn.Module, sizes=(3, 5, 2)) -> nn.Sequential:
    torch.manual_seed(0)
    layers = []
    for i in range(len(sizes) - 1):
        layers += [nn.Linear(sizes[i], sizes[i + 1]), act]
    net = nn.Sequential(*layers[:-1]).to(DT)
    with torch.no_grad():
        for m in net:
            if isinstance(m, nn.Linear):
                m.bias.add_(0.5)  # biases of order one
    return net


X = torch.randn(16, 3, generator=gen(1), dtype=DT)


@pytest.mark.parametrize("act", [nn.ReLU(), nn.LeakyReLU(0.1), nn.LeakyReLU(-0.7), nn.LeakyReLU(2.5), nn.PReLU(5)],
                         ids=["relu", "leaky0.1", "leaky-0.7", "leaky2.5", "prelu"])
def test_rescaling_passes_the_verdict(act):
    net = _mlp(act.to(DT))
    F = Target(net, ["0.weight", "0.bias", "2.weight"], X)
    action = RescalingAction(F.block, "0.weight", "2.weight", activation=net[1])
    check = check_action(action, F, samples=64)
    assert check.passed, check.summary()
    assert check.value("output") <= 1e-10 and check.value("output", 2) <= 1e-10
    assert check.value("motion") > 0.05
    assert action.dimension == 5 and action.order is None


def test_hidden_basis_and_chain_pass_the_verdict():
    net = _mlp(nn.Identity(), sizes=(3, 4, 3, 2))
    F = Target(net, ["0.weight", "0.bias", "2.weight"], X)
    check = check_action(HiddenBasisAction(F.block, "0.weight", "2.weight"), F, samples=64)
    assert check.passed and check.value("output") <= 1e-10 and check.value("motion") > 0.05, check.summary()
    G = Target(net, ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight"], X)
    chain = LinearChainAction(G.block, ["0.weight", "2.weight", "4.weight"])
    assert chain.dimension == 4 * 4 + 3 * 3 and chain.size == 7
    check = check_action(chain, G, samples=64)
    assert check.passed and check.value("output") <= 1e-10 and check.value("motion") > 0.05, check.summary()


def test_chain_closed_form_composition_and_inverse():
    net = _mlp(nn.Identity(), sizes=(3, 4, 3, 2))
    F = Target(net, ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight"], X)
    chain = LinearChainAction(F.block, ["0.weight", "2.weight", "4.weight"]).double()
    g1, g2 = chain.random_elements(2, gen(4), rho=1.0)
    a, b = g1[:4, :4], g1[4:, 4:]
    W = {n: p.detach() for n, p in net.named_parameters()}
    expect = torch.cat([(a @ W["0.weight"]).reshape(-1), a @ W["0.bias"],
                        (b @ W["2.weight"] @ torch.linalg.inv(a)).reshape(-1), b @ W["2.bias"],
                        (W["4.weight"] @ torch.linalg.inv(b)).reshape(-1)])
    theta = F.theta0
    assert torch.allclose(chain.act(g1, theta), expect, rtol=0, atol=1e-13)
    two = chain.act(g2, chain.act(g1, theta))
    assert (two - chain.act(g2 @ g1, theta)).abs().max() <= 1e-13 * theta.abs().max()
    assert (chain.act(torch.linalg.inv(g1), chain.act(g1, theta)) - theta).abs().max() <= 1e-13 * theta.abs().max()
    assert (chain.act(g1, theta) - theta).norm() > 0.1


def test_rescaling_random_elements_are_positive_diagonal_and_compose_exactly():
    net = _mlp(nn.LeakyReLU(0.2))
    F = Target(net, ["0.weight", "0.bias", "2.weight"], X)
    action = RescalingAction(F.block, "0.weight", "2.weight", activation="leaky_relu").double()
    g = action.random_elements(8, gen(2))
    assert torch.equal(g, torch.diag_embed(torch.diagonal(g, dim1=-2, dim2=-1))) and bool((g.diagonal(dim1=-2, dim2=-1) > 0).all())
    th = F.theta0
    assert torch.equal(action.act(g[1], action.act(g[0], th)), action.act(g[1] @ g[0], th)) or \
        (action.act(g[1], action.act(g[0], th)) - action.act(g[1] @ g[0], th)).abs().max() <= 1e-14 * th.abs().max()


@pytest.mark.parametrize("act", [nn.Tanh(), nn.GELU(), nn.Sigmoid(), nn.ReLU6(), "tanh", lambda z: z.clamp_min(0) + 0.1])
def test_non_homogeneous_activation_is_refused(act):
    net = _mlp(nn.ReLU())
    F = Target(net, ["0.weight", "0.bias", "2.weight"], X)
    with pytest.raises(ActionError, match="homogeneous"):
        RescalingAction(F.block, "0.weight", "2.weight", activation=act)


def test_homogeneous_callable_is_accepted_and_named():
    assert check_homogeneous(nn.LeakyReLU(0.3)) == "LeakyReLU(negative_slope=0.3)"
    assert check_homogeneous(torch.relu) == "relu"


def test_chain_bad_input():
    net = _mlp(nn.Identity(), sizes=(3, 4, 3, 2))
    blk = Target(net, ["0.weight", "2.weight", "4.weight", "4.bias"], X).block
    with pytest.raises(ActionError, match=r"4\.bias"):
        LinearChainAction(blk, ["0.weight", "2.weight", "4.weight"])
    blk = Target(net, ["0.weight", "2.weight", "4.weight"], X).block
    with pytest.raises(ShapeError, match="in order"):
        LinearChainAction(blk, ["0.weight", "4.weight", "2.weight"])
    with pytest.raises(ShapeError, match="at least two"):
        LinearChainAction(blk, ["0.weight"])


def test_hidden_permutation_with_any_activation():
    net = _mlp(nn.Tanh())
    F = Target(net, ["0.weight", "0.bias", "2.weight"], X)
    action = HiddenPermutationAction(F.block, "0.weight", "2.weight")
    assert action.order == 120 and action.dimension == 0 and action.log10_order == pytest.approx(2.0792, abs=1e-4)
    v = discrete_verdict(action, F)
    assert v["output"] <= 1e-10 and v["composition"] <= 1e-13 and v["inverse"] <= 1e-13 and v["min_motion"] > 0.05, v
    P = permutation_matrix([1, 0, 3, 4, 2])  # cycle type (2, 3): order 6
    th, moved = F.theta0, F.theta0
    for k in range(1, 7):
        moved = action.act(P, moved)
        assert torch.equal(moved, th) == (k == 6)
    with pytest.raises(ActionError, match=r"2\.bias"):
        HiddenPermutationAction(Target(net, ["0.weight", "2.weight", "2.bias"], X).block, "0.weight", "2.weight")


def test_check_action_on_a_discrete_action():
    """``check_action`` on a permutation action: elements from ``random_elements``, inverse = transpose,
    subdivision and transport skipped (and named); a wrong permutation (V rows only) fails on output."""
    from paramsym.testing import check_action

    net = _mlp(nn.Tanh())
    F = Target(net, ["0.weight", "0.bias", "2.weight"], X)
    action = HiddenPermutationAction(F.block, "0.weight", "2.weight")
    check = check_action(action, F, samples=32, factors=(1, 2))
    assert check.passed, check.summary()
    assert check.skipped == ("subdivision", "transport") and "skipped" in check.summary()
    assert {r.name for r in check.results} == {"output", "composition", "inverse", "motion"}
    assert check.value("output") <= 1e-10 and check.value("composition") <= 1e-13 and check.value("inverse") <= 1e-13
    assert check.value("motion") > 0.05 and check.value("output", 2) <= 1e-10
    assert len(check.results[0].worst["permutation"]) == 5

    class RowsOnly(HiddenPermutationAction):  # permutes V and b but not U's columns: not a symmetry
        def act(self, g, theta):
            U = theta[self.u_sl]
            return torch.cat([(g.to(theta.dtype) @ theta[self.v_sl].reshape(self.v_shape)).reshape(-1),
                              g.to(theta.dtype) @ theta[self.b_sl], U])

    bad = check_action(RowsOnly(F.block, "0.weight", "2.weight"), F, samples=32, factors=(1,))
    assert not bad.passed and [r.name for r in bad.failures] == ["output"]
    assert "P[" in bad.failures[0].describe()


def test_order_of_a_huge_permutation_group():
    """3072! has ~9,300 digits (more than Python converts to a string by default)."""
    import math

    net = nn.Sequential(nn.Linear(2, 3072), nn.ReLU(), nn.Linear(3072, 1))
    F = Target(net, ["0.weight", "0.bias", "2.weight"], torch.zeros(1, 2))
    action = HiddenPermutationAction(F.block, "0.weight", "2.weight")
    assert action.log10_order == pytest.approx(math.lgamma(3073) / math.log(10), rel=1e-12)
    assert action.order_text.startswith("10^9")


class _Gated(nn.Module):
    """``down(silu(gate x) ⊙ up x)``: linear in ``up``'s output (a SwiGLU FFN)."""

    def __init__(self, n: int = 4, h: int = 6, m: int = 3):
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(n, h), nn.Linear(n, h), nn.Linear(h, m)

    def forward(self, x):
        return self.down(nn.functional.silu(self.gate(x)) * self.up(x))


def test_sign_flip_on_gated_units_and_odd_activations_not_on_relu():
    """``{±1}^h``: exact where the later layer is linear in the unit (gated ``up`` rows, biases included) or
    σ is odd (tanh); a ReLU unit is not sign-symmetric (refuted by the same verdict); ``S² = I``."""
    from paramsym.actions.catalogue import SignFlipAction

    X = torch.randn(32, 4, generator=gen(1), dtype=DT)
    gated = _Gated().to(DT)
    F = Target(gated, ["up.weight", "up.bias", "down.weight"], X)
    action = SignFlipAction(F.block, "up.weight", "down.weight")
    assert action.order == 2**6 and action.dimension == 0 and action.kind == "sign_flip"
    v = discrete_verdict(action, F)
    assert v["output"] <= 1e-10 and v["composition"] <= 1e-13 and v["inverse"] <= 1e-13 and v["min_motion"] > 0.05, v
    S = torch.diag(torch.tensor([1.0, -1, 1, -1, -1, 1], dtype=DT))
    assert torch.equal(action.act(S, action.act(S, F.theta0)), F.theta0)
    G = Target(gated, ["gate.weight", "gate.bias", "down.weight"], X)  # the gate rows: not a symmetry (silu is not odd)
    assert discrete_verdict(SignFlipAction(G.block, "gate.weight", "down.weight"), G)["output"] > 1e-2
    tanh = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)).to(DT)
    T = Target(tanh, ["0.weight", "0.bias", "2.weight"], X)
    assert discrete_verdict(SignFlipAction(T.block, "0.weight", "2.weight"), T)["output"] <= 1e-10
    relu = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)).to(DT)
    R = Target(relu, ["0.weight", "0.bias", "2.weight"], X)
    assert discrete_verdict(SignFlipAction(R.block, "0.weight", "2.weight"), R)["output"] > 1e-2
