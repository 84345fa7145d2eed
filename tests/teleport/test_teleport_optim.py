"""Optimizer state moves with a teleport: checked against optimizers run on transformed gradients."""

from __future__ import annotations

import pytest
import torch
from torch.func import functional_call

from paramsym.actions.linear import HiddenBasisAction
from paramsym.errors import ConfigError
from paramsym.models.mlp import mlp
from paramsym.params import ParameterBlock
from paramsym.teleport import AscentConfig, Teleporter, covector_map, mlp_rescaling, transform_state

F64 = torch.float64


def _setup(seed=0):
    model = mlp([4, 6, 5, 3], "relu", dtype=F64, generator=torch.Generator().manual_seed(seed))
    gen = torch.Generator().manual_seed(seed + 1)
    x, y = torch.randn(16, 4, generator=gen, dtype=F64), torch.randn(16, 3, generator=gen, dtype=F64)
    return model, x, y


def _scales(d1, d2):
    """Closed-form per-tensor scale of θ' = M θ for the rescaling by (D1, D2) of the 4-6-5-3 MLP."""
    return {"fc1.weight": d1[:, None].expand(6, 4), "fc1.bias": d1, "fc2.weight": d2[:, None] / d1[None, :],
            "fc2.bias": d2, "fc3.weight": (1 / d2)[None, :].expand(3, 5)}


@pytest.mark.parametrize("name", ["sgd", "adam", "adagrad", "rmsprop"])
def test_state_transform_equals_the_optimizer_run_on_transformed_gradients(name):
    model, x, y = _setup()
    make = {
        "sgd": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9),
        "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True),
        "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=1e-2),
        "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-3),
    }[name]
    opt = make(model.parameters())
    grads = []
    for _ in range(4):
        opt.zero_grad()
        (model(x) - y).pow(2).sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        opt.step()
    named = dict(model.named_parameters())
    block, action = mlp_rescaling(named)
    action = action.double()
    gen = torch.Generator().manual_seed(5)
    d1, d2 = torch.rand(6, generator=gen, dtype=F64) + 0.5, torch.rand(5, generator=gen, dtype=F64) + 0.5
    g = torch.diag(torch.cat([d1, d2]))
    theta_new = action.act(g, block.gather({n: p.detach() for n, p in named.items()}))
    info = transform_state(opt, named, block, action, g, theta_new)
    assert info["diagonal"] in (True, None)
    # reference: a fresh optimizer on copies, fed the gradients in the teleported coordinates,
    # ∇L(θ') = M⁻ᵀ ∇L(θ) = ∇L(θ) / scale (closed form for a diagonal M)
    scale = _scales(d1, d2)
    ref_params = {n: torch.zeros_like(p, requires_grad=True) for n, p in named.items()}
    ref = make(list(ref_params.values()))
    for gr in grads:
        for n, p in ref_params.items():
            p.grad = gr[n] / scale[n] if n in scale else gr[n].clone()
        ref.step()
    for n, p in named.items():
        for key, value in opt.state[p].items():
            if key == "step":
                continue
            assert torch.allclose(value, ref.state[ref_params[n]][key], rtol=1e-11, atol=1e-14), (n, key)


def test_gradient_at_the_teleported_point_is_the_mapped_covector_for_a_non_diagonal_action():
    # a linear pair (no activation) with GL(h): A = J⁻ᵀ is dense; the reference is autograd at θ'
    lin = torch.nn.Sequential(torch.nn.Linear(3, 4, dtype=F64), torch.nn.Linear(4, 2, dtype=F64))
    names = ["0.weight", "0.bias", "1.weight"]
    params = {n: p.detach() for n, p in lin.named_parameters()}
    block = ParameterBlock.from_params(params, names)
    action = HiddenBasisAction(block, "0.weight", "1.weight").double()
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(0), dtype=F64)

    def loss(th):
        return functional_call(lin, block.scatter(th, params), (x,)).pow(3).sum()

    theta = block.gather(params)
    g = torch.linalg.matrix_exp(0.3 * torch.randn(4, 4, generator=torch.Generator().manual_seed(1), dtype=F64))
    moved = action.act(g, theta)
    grad = torch.func.grad(loss)(theta)
    assert torch.allclose(covector_map(action, g, moved)(grad), torch.func.grad(loss)(moved), rtol=1e-10, atol=1e-12)
    assert abs(float(loss(moved) - loss(theta))) < 1e-10 * abs(float(loss(theta)))

    # second moments: (A ∘ A) v against a dense A built by the inverse map's Jacobian
    model = lin
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    opt.zero_grad()
    model(x).pow(3).sum().backward()
    opt.step()
    named = dict(model.named_parameters())
    theta = block.gather({n: p.detach() for n, p in named.items()})
    moved = action.act(g, theta)
    v = block.gather({n: opt.state[named[n]]["exp_avg_sq"].clone() for n in names})
    A = torch.autograd.functional.jacobian(lambda th: action.act(torch.linalg.inv(g), th), moved).T
    info = transform_state(opt, named, block, action, g, moved)
    assert info["diagonal"] is False
    got = block.gather({n: opt.state[named[n]]["exp_avg_sq"] for n in names})
    assert torch.allclose(got, (A * A) @ v, rtol=1e-10, atol=1e-18)


def test_teleporter_transforms_state_not_resets_and_keeps_the_loss():
    model, x, y = _setup(2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    named = dict(model.named_parameters())
    block, action = mlp_rescaling(named)
    tele = Teleporter(model, opt, action.double(), block, every=3,
                      config=AscentConfig(steps=5, step_size=0.5, tol=1e-10, max_factor=3.0))

    def loss_params(params):
        return (functional_call(model, params, (x,)) - y).pow(2).sum()

    for k in range(4):
        if tele.due(k):
            before = {n: opt.state[p]["exp_avg"].clone() for n, p in named.items()}
            res = tele.teleport(loss_params)
            assert res.steps > 0 and res.rel_loss_change <= 1e-10
            after = {n: opt.state[p]["exp_avg"] for n, p in named.items()}
            assert not torch.allclose(after["fc1.weight"], before["fc1.weight"])  # moved, not kept
            assert float(after["fc1.weight"].abs().sum()) > 0  # and not reset
            assert torch.equal(after["fc3.bias"], before["fc3.bias"])  # outside the block
        opt.zero_grad()
        (model(x) - y).pow(2).sum().backward()
        opt.step()
    assert [tele.due(k) for k in range(7)] == [False, False, False, True, False, False, True]


def test_unknown_optimizer_state_is_refused():
    model, x, y = _setup()
    opt = torch.optim.Adadelta(model.parameters())
    (model(x) - y).pow(2).sum().backward()
    opt.step()
    named = dict(model.named_parameters())
    block, action = mlp_rescaling(named)
    theta = block.gather({n: p.detach() for n, p in named.items()})
    g = torch.eye(11, dtype=F64)
    with pytest.raises(ConfigError, match="acc_delta|square_avg"):
        transform_state(opt, named, block, action.double(), g, theta)


def test_monomial_fast_path_of_the_covector_map_equals_the_vjp():
    from paramsym.teleport.fast import monomial_exponents

    model, _, _ = _setup(3)
    named = dict(model.named_parameters())
    block, action = mlp_rescaling(named)
    action = action.double()
    theta = block.gather({n: p.detach() for n, p in named.items()})
    g = torch.diag(torch.rand(11, generator=torch.Generator().manual_seed(9), dtype=F64) + 0.5)
    moved = action.act(g, theta)
    c = torch.randn(theta.shape, generator=torch.Generator().manual_seed(10), dtype=F64)
    slow = covector_map(action, g, moved)(c)  # VJP of the inverse action (no cache yet)
    assert monomial_exponents(action, theta, torch.ones(1, 11, dtype=F64)) is not None
    fast = covector_map(action, g, moved)(c)
    assert torch.allclose(fast, slow, rtol=1e-13, atol=0)
