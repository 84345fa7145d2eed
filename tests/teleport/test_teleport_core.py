"""Teleportation core: level set kept, objective raised, refusals, the anchor's 2-D functions."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.func import functional_call, jacrev

from paramsym.actions.linear import RescalingAction
from paramsym.actions.permutation import HiddenPermutationAction
from paramsym.errors import ActionError, ConfigError, LevelSetError, ShapeError
from paramsym.models.mlp import mlp
from paramsym.params import ParameterBlock
from paramsym.teleport import (
    AscentConfig,
    ProductAction,
    grad_norm_objective,
    mlp_rescaling,
    teleport,
)
from paramsym.teleport.fast import monomial_exponents
from paramsym.teleport.functions import BoothRotation, RosenbrockRotation, booth, rosenbrock
from paramsym.teleport.objectives import LinearizedLookahead

F64 = torch.float64


def test_booth_teleport_reaches_the_closed_form_maximum_of_the_gradient_norm():
    # f = ‖u‖², u = A p − b, ∇f = 2 Aᵀ u; on the circle ‖u‖ = r the max of ‖∇f‖² is 4 λ_max(A Aᵀ) r² = 36 r²
    p = torch.tensor([5.0, -5.0], dtype=F64)
    r2 = float(booth(p))
    res = teleport(BoothRotation().double(), p, booth, AscentConfig(steps=100, step_size=0.1, tol=1e-10))
    assert res.status == "ok" and res.steps > 0
    assert abs(res.objective_after - 36 * r2) / (36 * r2) < 1e-8
    assert res.rel_loss_change <= 1e-12
    assert float((res.theta - p).norm()) > 1.0  # it moved
    assert res.factor == pytest.approx(math.sqrt(res.objective_after / res.objective_before))


def test_booth_gd_with_one_teleport_matches_the_anchor():
    from paramsym.kinds.teleport_mlp import run
    from paramsym.kinds.teleport_presets import TeleportConfig

    out = run(TeleportConfig("booth"))
    assert out["loss_at_step_9"]["baseline"] == pytest.approx(3.1215, abs=1e-3)
    assert out["loss_at_step_9"]["teleport"] <= 4.9e-3
    assert out["max_loss_change"] <= 1e-10


def test_rosenbrock_five_seeds():
    from paramsym.kinds.teleport_mlp import run
    from paramsym.kinds.teleport_presets import TeleportConfig

    out = run(TeleportConfig("rosenbrock", seeds=(0, 1, 2, 3, 4)))
    for r in out["runs"]:
        assert min(r["teleport"]["losses"][:201]) < 1e-2
        assert r["teleport"]["losses"][-1] <= 1e-6
        assert r["baseline"]["losses"][-1] > 1e-2  # plain GD is far slower
    assert out["max_loss_change"] <= 1e-10


def test_rotations_are_exact_and_move():
    gen = torch.Generator().manual_seed(0)
    for act, f in ((BoothRotation().double(), booth), (RosenbrockRotation().double(), rosenbrock)):
        p = torch.randn(2, generator=gen, dtype=F64)
        for t in (0.3, -1.2, 2.5):
            g = torch.tensor([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]], dtype=F64)
            q = act.act(g, p)
            assert abs(float(f(q) - f(p))) <= 1e-12 * max(1.0, float(f(p)))
            assert float((q - p).norm()) > 1e-3
            assert torch.allclose(act.act(g.T, q), p, atol=1e-12)  # inverse


def _relu_net(seed: int = 0):
    model = mlp([5, 7, 6, 3], "relu", dtype=F64, generator=torch.Generator().manual_seed(seed))
    gen = torch.Generator().manual_seed(seed + 100)
    x, y = torch.randn(20, 5, generator=gen, dtype=F64), torch.randn(20, 3, generator=gen, dtype=F64)
    params = {n: p.detach() for n, p in model.named_parameters()}
    return model, params, x, y


def test_mlp_rescaling_teleport_stays_on_the_level_set_and_on_held_out_inputs():
    model, params, x, y = _relu_net()
    block, action = mlp_rescaling(params)
    action = action.double()
    theta = block.gather(params)

    def loss(th):
        return 0.5 * (functional_call(model, block.scatter(th, params), (x,)) - y).pow(2).sum()

    res = teleport(action, theta, loss, AscentConfig(steps=10, step_size=0.5, tol=1e-10, max_factor=5.0))
    assert res.steps > 0 and res.factor > 1.2
    assert res.rel_loss_change <= 1e-10
    assert float((res.theta - theta).norm() / theta.norm()) > 0.05  # parameters moved
    held = torch.randn(50, 5, generator=torch.Generator().manual_seed(7), dtype=F64)
    before = functional_call(model, params, (held,))
    after = functional_call(model, block.scatter(res.theta, params), (held,))
    assert float((after - before).norm() / before.norm()) <= 1e-10
    assert res.factor <= 5.0 + 1e-9
    # the line search used the monomial fast path; the returned point is the action's own
    assert torch.equal(res.theta, action.act(res.g, theta))
    C = monomial_exponents(action, theta, torch.ones(1, 13, dtype=F64))
    assert C is not None and set(C.unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert int((C != 0).sum()) == 7 * 5 + 7 + 2 * 6 * 7 + 6 + 3 * 6  # W1, b1, W2 (both sides), b2, W3


def test_product_action_equals_the_factors_applied_in_turn():
    _, params, _, _ = _relu_net()
    block, action = mlp_rescaling(params)
    d1 = torch.rand(7, generator=torch.Generator().manual_seed(1), dtype=F64) + 0.5
    d2 = torch.rand(6, generator=torch.Generator().manual_seed(2), dtype=F64) + 0.5
    out = block.unflatten(action.double().act(torch.diag(torch.cat([d1, d2])), block.gather(params)))
    # independent closed form: W1 ↦ D1 W1, b1 ↦ D1 b1, W2 ↦ D2 W2 D1⁻¹, b2 ↦ D2 b2, W3 ↦ W3 D2⁻¹
    assert torch.allclose(out["fc1.weight"], d1[:, None] * params["fc1.weight"], atol=1e-14)
    assert torch.allclose(out["fc1.bias"], d1 * params["fc1.bias"], atol=1e-14)
    assert torch.allclose(out["fc2.weight"], d2[:, None] * params["fc2.weight"] / d1[None, :], atol=1e-14)
    assert torch.allclose(out["fc2.bias"], d2 * params["fc2.bias"], atol=1e-14)
    assert torch.allclose(out["fc3.weight"], params["fc3.weight"] / d2[None, :], atol=1e-14)
    assert "fc3.bias" not in block.names
    assert action.dimension == 13


def test_non_invariant_action_is_refused_or_raises_in_strict_mode():
    # rescaling is not a symmetry of a tanh network: the check must catch it
    model = mlp([4, 6, 2], "tanh", dtype=F64, generator=torch.Generator().manual_seed(0))
    params = {n: p.detach() for n, p in model.named_parameters()}
    x = torch.randn(10, 4, generator=torch.Generator().manual_seed(1), dtype=F64)
    block = ParameterBlock.from_params(params, ["fc1.weight", "fc1.bias", "fc2.weight"])
    action = RescalingAction(block, "fc1.weight", "fc2.weight", activation=None).double()
    theta = block.gather(params)

    def loss(th):
        return functional_call(model, block.scatter(th, params), (x,)).pow(2).sum()

    res = teleport(action, theta, loss, AscentConfig(steps=5, step_size=0.5, tol=1e-8))
    assert res.status == "left_level_set" and res.refused_change > 1e-8
    assert res.steps == 0 and torch.equal(res.theta, theta)  # nothing accepted
    with pytest.raises(LevelSetError, match="relative"):
        teleport(action, theta, loss, AscentConfig(steps=5, step_size=0.5, tol=1e-8, strict=True))


def test_bad_inputs_raise_named_errors():
    act = BoothRotation().double()
    with pytest.raises(ShapeError, match="p = 2"):
        teleport(act, torch.zeros(3, dtype=F64), booth)
    with pytest.raises(ConfigError, match="step_size"):
        teleport(act, torch.zeros(2, dtype=F64), booth, AscentConfig(step_size=0.0))
    for bad in ({"armijo": -1e-4}, {"max_backtracks": 2.5}, {"explore": math.nan}, {"strict": "yes"}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            teleport(act, torch.zeros(2, dtype=F64), booth, AscentConfig(**bad))
    with pytest.raises(ConfigError, match="AscentConfig"):
        teleport(act, torch.zeros(2, dtype=F64), booth, {"steps": 3})
    _, params, _, _ = _relu_net()
    block = ParameterBlock.from_params(params, ["fc1.weight", "fc1.bias", "fc2.weight"])
    perm = HiddenPermutationAction(block, "fc1.weight", "fc2.weight")
    with pytest.raises(ActionError, match="continuous group"):
        teleport(perm, block.gather(params), lambda th: th.sum())
    with pytest.raises(ShapeError, match="not whole in the block"):
        ProductAction(block, [(["fc9.weight"], perm)])


def test_linearized_lookahead_on_the_orbit_equals_recomputing_at_the_moved_point():
    model, params, x, y = _relu_net(3)
    block, action = mlp_rescaling(params)
    action = action.double()
    theta = block.gather(params)

    def outputs(th):
        return functional_call(model, block.scatter(th, params), (x,))

    obj = LinearizedLookahead(action, theta, outputs, y, lr=1e-2, horizon=7)
    g = torch.diag(torch.rand(13, generator=torch.Generator().manual_seed(4), dtype=F64) + 0.5)
    moved = action.act(g, theta)
    # reference: Jacobian and residual recomputed at the moved point, 7 explicit steps
    J = jacrev(lambda th: outputs(th).reshape(-1))(moved)
    r = (outputs(moved) - y).reshape(-1)
    for _ in range(7):
        r = r - 1e-2 * (J @ (J.T @ r))
    assert float(obj(moved, g)) == pytest.approx(float(-0.5 * r.pow(2).sum()), rel=1e-10)
    assert obj.diagonal


def test_grad_norm_objective_matches_the_closed_form_gradient():
    x, y = 0.3, -0.7
    th = torch.tensor([x, y], dtype=F64)
    gx = -2 * (1 - x) - 400 * x * (y - x**2)  # ∂f/∂x of Rosenbrock
    gy = 200 * (y - x**2)
    assert float(grad_norm_objective(rosenbrock)(th).detach()) == pytest.approx(gx**2 + gy**2, rel=1e-13)


def test_discrete_or_mismatched_model_is_refused_by_the_teleporter():
    from paramsym.teleport import Teleporter

    model, params, _, _ = _relu_net()
    block, action = mlp_rescaling(params)
    other = mlp([5, 8, 6, 3], "relu", dtype=F64)
    with pytest.raises(ShapeError, match="fc1.weight"):
        Teleporter(other, None, action, block, every=1)
    with pytest.raises(ConfigError, match="every"):
        Teleporter(model, None, action, block, every=0)
    lin = nn.Sequential(nn.Linear(5, 3))
    with pytest.raises(ShapeError, match="not a parameter"):
        Teleporter(lin, None, action, block, every=1)


def test_compensating_action_teleport_keeps_the_batch_loss_not_other_inputs():
    from paramsym.actions.compensating import CompensatingAction, select_compensators
    from paramsym.models.adapters import Projection
    from paramsym.targets import FFNBoundaryTarget

    gen = torch.Generator().manual_seed(0)
    net = nn.Sequential(nn.Linear(5, 12), nn.Tanh(), nn.Linear(12, 3)).double()
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=F64) * 0.5)
    x = torch.randn(4, 5, generator=gen, dtype=F64)
    kw = dict(up=Projection("0.weight", "0.bias", "out_in", (12, 5)), down=Projection("2.weight", "2.bias", "out_in", (3, 12)),
              activation=nn.Tanh())
    every = FFNBoundaryTarget(net, x, units=range(12), block=["up.weight"], **kw)
    others = list(range(1, 12))
    picked, _ = select_compensators(every.features()[:, others].T, 4)
    target = FFNBoundaryTarget(net, x, units=[0] + [others[i] for i in picked], inputs=every.h, **kw)
    action = CompensatingAction(target)
    theta = target.theta0
    y = torch.randn(target(theta).shape, generator=gen, dtype=F64)

    def loss(th):  # any loss of the boundary output on the batch
        return 0.5 * (target(th) - y).pow(2).sum()

    res = teleport(action, theta, loss, AscentConfig(steps=5, step_size=0.3, tol=1e-6, max_factor=3.0))
    assert res.steps > 0 and res.factor > 1.05
    assert res.rel_loss_change <= 1e-6
    assert float((res.theta - theta).norm()) > 0.05
    # the host network itself: same outputs on the batch, different on fresh inputs (data-dependent)
    edited = target.install(res.theta)
    fresh = torch.randn(6, 5, generator=gen, dtype=F64)
    with torch.no_grad():
        assert float((edited(x) - net(x)).norm() / net(x).norm()) <= 1e-6
        assert float((edited(fresh) - net(fresh)).norm() / net(fresh).norm()) > 1e-3
