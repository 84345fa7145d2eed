"""Targets ``F_X(θ)``: agreement with the model's own output, ``install``, output selection,
boundary outputs computed by hand from the host network's hidden activations, and lifting
(Proposition 4.1): a change of a unit's weights that preserves its boundary output preserves the
full network output."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch.func import vmap

from paramsym.discovery.problems import build_problem
from paramsym.errors import MaskError, NonFiniteError, ParamsymError, ShapeError
from paramsym.models.reference import reference_mlp as MLP
from paramsym.targets import BoundaryTarget, FunctionTarget, Target


def _mlp(seed=0, bias=True):
    return MLP([3, 5, 2], "tanh", bias=bias, generator=torch.Generator().manual_seed(seed))


def test_target_at_theta0_equals_model_output_and_install_matches():
    net = _mlp()
    with torch.no_grad():
        net.fc1.bias.copy_(torch.linspace(-0.5, 0.5, 5))
    X = torch.randn(7, 3, generator=torch.Generator().manual_seed(1))
    target = Target(net, ["fc1.weight[:, 0]", "fc1.bias", "fc2.weight"], X)
    assert target.p == 5 + 5 + 10 and target.q == 14
    with torch.no_grad():
        assert torch.equal(target(target.theta0), net(X).reshape(-1))
    thetas = target.theta0 + 0.3 * torch.randn(4, target.p, generator=torch.Generator().manual_seed(2))
    batched = vmap(target)(thetas)
    for k in range(4):
        model = target.install(thetas[k])
        with torch.no_grad():
            assert torch.allclose(model(X).reshape(-1), batched[k], atol=1e-6)
            assert torch.equal(model.fc1.weight[:, 1:], net.fc1.weight[:, 1:])
    # the user's model is never modified, nor switched to eval mode
    assert net.training and net.fc1.weight.requires_grad


def test_target_dtype_conversion():
    net = _mlp()
    X = torch.randn(4, 3)
    t64 = Target(net, "fc2.weight", X).to(torch.float64)
    assert t64.theta0.dtype == torch.float64
    out = t64(t64.theta0)
    assert out.dtype == torch.float64
    with torch.no_grad():
        assert torch.allclose(out, net.double()(X.double()).reshape(-1), atol=1e-12)


class _Dict(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 3)

    def forward(self, x, scale=1.0):
        y = self.lin(x) * scale
        return SimpleNamespace(logits=y, hidden=None)


def test_output_selection_hf_like_tuple_kwargs_and_callable():
    torch.manual_seed(0)
    m = _Dict()
    x = torch.randn(4, 2)
    t = Target(m, "lin.weight", {"x": x, "scale": 2.0})
    with torch.no_grad():
        assert torch.equal(t(t.theta0), (m.lin(x) * 2.0).reshape(-1))
    t2 = Target(m, "lin.bias", (x,), output=lambda out: out.logits[:, :1])
    assert t2.q == 4
    with torch.no_grad():
        assert torch.equal(t2(t2.theta0), m.lin(x)[:, 0])

    class Tup(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x), x

    tup = Tup()
    with torch.no_grad():
        assert torch.equal(Target(tup, "lin.weight", x)(Target(tup, "lin.weight", x).theta0), tup.lin(x).reshape(-1))

    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return {"y": self.lin(x)}

    with pytest.raises(ShapeError, match="output=callable"):
        Target(Bad(), "lin.weight", x)
    with pytest.raises(ShapeError, match="batch must be"):
        Target(tup, "lin.weight", 3.0)


def test_non_finite_parameters_or_batch_are_named():
    net = _mlp()
    X = torch.randn(4, 3)
    bad = X.clone()
    bad[2, 1] = float("nan")
    with pytest.raises(NonFiniteError, match="batch input 0 has 1 non-finite"):
        Target(net, "fc2.weight", bad)
    with torch.no_grad():
        net.fc1.weight[0, 0] = float("inf")
    with pytest.raises(NonFiniteError, match="parameter 'fc1.weight'"):
        Target(net, "fc2.weight", X)


def test_function_target():
    t = FunctionTarget(lambda th: torch.stack([th.sum(), th.pow(2).sum()]), torch.tensor([1.0, 2.0]))
    assert t.p == 2 and t.q == 2
    assert torch.equal(t(torch.tensor([1.0, 2.0])), torch.tensor([3.0, 5.0]))
    assert t.to(torch.float64).theta0.dtype == torch.float64
    with pytest.raises(ParamsymError, match="no model"):
        t.install(torch.zeros(2))


def _relu2881():
    problem = build_problem("relu2881-unit")
    return problem, problem.target, problem.host


def test_boundary_output_equals_hand_computation_from_hidden_activations():
    """Unit 0 of the first hidden layer of the ReLU (2,8,8,1) host: its contribution to the
    next pre-activations is ``relu(X w_in) w_out`` with ``w_in = fc1.weight[0]``,
    ``w_out = fc2.weight[:, 0]``; together with the other units it sums to fc2's input."""
    problem, target, host = _relu2881()
    net = host.model
    X = host.batch
    captured = {}
    handle = net.fc2.register_forward_pre_hook(lambda mod, inp: captured.__setitem__("a1", inp[0].detach()))
    with torch.no_grad():
        net(X)
    handle.remove()
    a1 = captured["a1"]  # hidden activations relu(X W1ᵀ), (16, 8)
    W2 = net.fc2.weight.detach()
    by_hand = a1[:, :1] * W2[:, 0][None, :]  # (16, 8)
    with torch.no_grad():
        boundary = target(target.theta0).reshape(16, 8)
    assert torch.allclose(boundary, by_hand, rtol=1e-6, atol=1e-7)
    # the other units' contributions complete the next layer's pre-activations
    rest = sum(a1[:, j : j + 1] * W2[:, j][None, :] for j in range(1, 8))
    assert torch.allclose(boundary + rest, a1 @ W2.T, atol=1e-6)
    assert target.block.names == ["fc1.weight", "fc2.weight"] and target.p == 10


def test_lifting_boundary_preserving_change_preserves_full_output():
    problem, target, host = _relu2881()
    t64, h64 = target.to(torch.float64), host.to(torch.float64)
    theta = t64.theta0
    idx = problem.host_index
    full0 = h64(h64.theta0)
    # positive rescaling of unit 0: incoming × c, outgoing / c (exact for ReLU)
    for c in (0.3, 1.7, 4.0):
        moved = theta.clone()
        moved[:2] *= c
        moved[2:] /= c
        assert torch.allclose(t64(moved), t64(theta), rtol=1e-13, atol=1e-14)
        host_theta = h64.theta0.clone()
        host_theta[idx] = moved
        assert torch.allclose(h64(host_theta), full0, rtol=1e-13, atol=1e-14)
        # the host's unit weights really changed
        assert float((host_theta - h64.theta0).norm()) > 0.1
    # a change that does not preserve the boundary output changes the full output too
    bad = theta.clone()
    bad[:2] *= 1.5
    assert float((t64(bad) - t64(theta)).norm()) > 1e-3
    host_theta = h64.theta0.clone()
    host_theta[idx] = bad
    assert float((h64(host_theta) - full0).norm()) > 1e-3
    # host_index really points at the unit's weights inside the host block
    assert torch.equal(h64.theta0[idx], theta)


def test_boundary_target_refuses_blocks_outside_the_subnetwork():
    net = MLP([2, 8, 8, 1], "relu", generator=torch.Generator().manual_seed(0))
    X = torch.randn(5, 2)
    with pytest.raises(MaskError, match="outside the boundary"):
        BoundaryTarget(net, ["fc1.weight[0]", "fc2.weight[:, 1]"], X, in_layer="fc1", out_layer="fc2",
                       units=[0], activation=torch.relu)
    with pytest.raises(MaskError, match="outside the boundary"):
        BoundaryTarget(net, ["fc1.weight[0]", "fc3.weight"], X, in_layer="fc1", out_layer="fc2",
                       units=[0], activation=torch.relu)
    # a valid boundary target leaves the user's model as it was (training mode included)
    assert net.training
    BoundaryTarget(net, ["fc1.weight[0]"], X, in_layer="fc1", out_layer="fc2", units=[0], activation=torch.relu)
    assert net.training
    with pytest.raises(MaskError, match="linear layers"):
        BoundaryTarget(net, ["fc1.weight[0]"], X, in_layer="act", out_layer="fc2", units=[0], activation=torch.relu)


def test_module_function_per_sample_view_matches_target_and_the_model():
    """The per-sample f(params, x) (attribution's view) and the fixed-batch Target share one
    model copy path: same outputs, float64 conversion on the copy only."""
    from paramsym.targets import ModuleFunction

    net = _mlp(seed=3)
    X = torch.randn(6, 3, generator=torch.Generator().manual_seed(4))
    mf = ModuleFunction(net, ["fc2.weight", "fc1.bias"], dtype=torch.float64)
    f, params = mf.per_sample(), mf.block_params()
    assert list(params) == ["fc2.weight", "fc1.bias"] and params["fc2.weight"].dtype == torch.float64
    with torch.no_grad():
        ref = net(X).double()
    assert net.fc1.weight.dtype == torch.float32  # the caller's model is untouched
    y = f(params, X.double())
    assert y.shape == (6, 2) and y.dtype == torch.float64
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-6)
    target = Target(net, ["fc2.weight", "fc1.bias"], X)
    theta = target.block.gather(target.params)
    with torch.no_grad():
        torch.testing.assert_close(target(theta).double(), f(mf.block.unflatten(theta.double()), X.double()).reshape(-1),
                                   rtol=1e-5, atol=1e-6)
    # moving a block tensor moves f; the other parameters stay fixed
    moved = {**params, "fc1.bias": params["fc1.bias"] + 1.0}
    assert not torch.allclose(f(moved, X.double()), y)
    with pytest.raises(MaskError, match="whole tensors"):
        ModuleFunction(net, "fc1.weight[0]").per_sample()
    with pytest.raises(ShapeError, match="leading batch"):
        ModuleFunction(net, "fc1.bias").per_sample(lambda apply, x: apply(x)[0])({}, X)


def test_model_output_is_the_one_extractor_of_target_and_census():
    """``model_output``: a tensor as is, ``.logits`` (HF heads), ``.last_hidden_state`` (HF base
    models), a leading tensor of a tuple; the Target and the census read the same tensor."""
    transformers = pytest.importorskip("transformers")
    from paramsym.census import census
    from paramsym.targets import model_output

    t = torch.ones(2, 3)
    assert model_output(t) is t and model_output((t, "x")) is t
    assert model_output(SimpleNamespace(logits=t, last_hidden_state=2 * t)) is t
    assert model_output(SimpleNamespace(last_hidden_state=t)) is t
    with pytest.raises(ShapeError, match="cannot take a tensor from the model output of type dict"):
        model_output({"a": t})
    cfg = transformers.BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                  vocab_size=40, max_position_embeddings=16)
    torch.manual_seed(0)
    bert = transformers.AutoModel.from_config(cfg, attn_implementation="eager").eval()
    ids = {"input_ids": torch.randint(0, 40, (1, 6), generator=torch.Generator().manual_seed(0))}
    target = Target(bert, ["encoder.layer.0.intermediate.dense.weight"], ids)
    with torch.no_grad():
        ref = bert(**ids).last_hidden_state.double()
    torch.testing.assert_close(target(target.theta0).reshape(ref.shape).double(), ref, rtol=1e-6, atol=1e-6)
    assert census(bert, ids, copy_model=True).all_verified  # the census evaluates through the same extractor
