"""The closed-form compensating action (Corollary 4.6) on small two-layer blocks, float64.

Independent references: the host network itself (``nn.Sequential`` / a hand-written gated block)
run on X and on fresh inputs; the group law checked against the translation of the summed
element; the support counted on the installed weights.
"""

import pytest
import torch
from torch import nn

from paramsym.actions.compensating import (
    CompensatingAction,
    select_compensators,
    translation_element,
)
from paramsym.errors import ActionError, ConvergenceError, MaskError, ShapeError
from paramsym.models.adapters import Projection
from paramsym.targets import FFNBoundaryTarget

N, n, H, m = 4, 5, 12, 3


def _proj(net, name):
    mod = dict(net.named_modules())[name]
    return Projection(f"{name}.weight", f"{name}.bias" if mod.bias is not None else None, "out_in",
                      tuple(mod.weight.shape))


class Gated(nn.Module):
    """``down(silu(gate x) ⊙ up x)`` — the Llama FFN, written out."""

    def __init__(self, bias: bool):
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(n, H, bias=bias), nn.Linear(n, H, bias=bias), nn.Linear(H, m)

    def forward(self, x):
        return self.down(nn.functional.silu(self.gate(x)) * self.up(x))


def _setup(kind: str, seed: int = 0, unit: int = 0):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    if kind == "gated":
        net, act, gate = Gated(bias=True).double(), nn.functional.silu, "gate"
        up, down = "up", "down"
    else:
        actmod = {"tanh": nn.Tanh(), "gelu": nn.GELU(), "softplus": nn.Softplus()}[kind]
        net, act, gate = nn.Sequential(nn.Linear(n, H), actmod, nn.Linear(H, m)).double(), actmod, None
        up, down = "0", "2"
    X = torch.randn(N, n, dtype=torch.float64, generator=g)
    kw = dict(up=_proj(net, up), down=_proj(net, down), gate=None if gate is None else _proj(net, gate), activation=act)
    everything = FFNBoundaryTarget(net, X, units=range(H), block=["up.weight"], **kw)
    others = [u for u in range(H) if u != unit]
    picked, _ = select_compensators(everything.features()[:, others].T, N)
    T = FFNBoundaryTarget(net, X, units=[unit] + [others[i] for i in picked], inputs=everything.h, **kw)
    return net, X, T, CompensatingAction(T), g


@pytest.mark.parametrize("kind", ["tanh", "gelu", "softplus", "gated"])
def test_preserves_outputs_group_law_and_moves(kind):
    net, X, T, a, g = _setup(kind)
    th0 = T.theta0
    t1 = 0.3 * torch.randn(a.dimension, dtype=torch.float64, generator=g)
    t2 = 0.3 * torch.randn(a.dimension, dtype=torch.float64, generator=g)
    th1 = a.act(translation_element(t1), th0)
    assert (th1 - th0).norm() > 0.1  # it moves the parameters
    F0 = T(th0)
    assert (T(th1) - F0).norm() / F0.norm() <= 1e-10
    # the whole host network on X (independent of the target's formula)
    edited = T.install(th1)
    with torch.no_grad():
        y0, y1 = net(X), edited(X)
        assert (y1 - y0).norm() / y0.norm() <= 1e-10
        X2 = torch.randn(N, n, dtype=torch.float64, generator=g)
        assert (edited(X2) - net(X2)).norm() / net(X2).norm() > 1e-3  # data-dependent: fresh inputs change
    # telescoping group law and inverse
    two = a.act(translation_element(t2), th1)
    assert (two - a.act(translation_element(t1 + t2), th0)).norm() / th0.norm() <= 1e-10
    assert (a.act(translation_element(-t1), th1) - th0).norm() / th0.norm() <= 1e-10


@pytest.mark.parametrize("kind", ["tanh", "gated"])
def test_one_coordinate_translation_changes_at_most_k_plus_1_units(kind):
    net, X, T, a, _ = _setup(kind)
    k = len(T.units) - 1
    for i in (0, a.dimension - 1):
        t = torch.zeros(a.dimension, dtype=torch.float64)
        t[i] = 0.5
        edited = T.install(a.act(translation_element(t), T.theta0))
        changed = set()
        for (name, p0), p1 in zip(net.named_parameters(), edited.parameters(), strict=True):
            d = (p1 - p0).detach().abs()
            if name.endswith("down.weight") or name == "2.weight":
                changed |= set(d.sum(0).nonzero().reshape(-1).tolist())
            elif d.dim() == 2:
                changed |= set(d.sum(1).nonzero().reshape(-1).tolist())
            elif not (name.endswith("down.bias") or name == "2.bias"):
                changed |= set(d.nonzero().reshape(-1).tolist())
            else:
                assert float(d.sum()) == 0.0
        assert 1 < len(changed) <= k + 1 and T.units[0] in changed


def test_field_is_the_derivative_of_the_action():
    _, _, T, a, g = _setup("tanh")
    t = torch.randn(a.dimension, dtype=torch.float64, generator=g)
    h = translation_element(t) - torch.eye(a.size, dtype=torch.float64)
    v = a.field(h, T.theta0)
    eps = 1e-6
    fd = (a.act(translation_element(eps * t), T.theta0) - a.act(translation_element(-eps * t), T.theta0)) / (2 * eps)
    assert (v - fd).norm() / v.norm() < 1e-7


def test_from_linears_matches_projections():
    net, X, T, _, _ = _setup("tanh")
    T2 = FFNBoundaryTarget.from_linears(net, X, up="0", down="2", activation=torch.tanh, units=T.units)
    assert torch.equal(T2.theta0, T.theta0) and torch.allclose(T2(T2.theta0), T(T.theta0), rtol=0, atol=1e-15)
    with pytest.raises(MaskError, match="linear layers"):
        FFNBoundaryTarget.from_linears(net, X, up="1", down="2", activation=torch.tanh, units=[0])


def test_bad_input_named_errors():
    net, X, T, a, _ = _setup("tanh")
    kw = dict(up=_proj(net, "0"), down=_proj(net, "2"), activation=torch.tanh)
    with pytest.raises(ShapeError, match="compensators"):  # prefix longer than the compensators can absorb
        CompensatingAction(FFNBoundaryTarget(net, X, units=[0, 1, 2], inputs=T.h, **kw))
    with pytest.raises(ShapeError, match="shorter prefix"):
        select_compensators(T.features().T, N - 1)
    with pytest.raises(ShapeError, match=r"\[0, 12\)"):
        FFNBoundaryTarget(net, X, units=[0, 12], inputs=T.h, **kw)
    # singular features: duplicated compensators' incoming weights
    dup = nn.Sequential(nn.Linear(n, H), nn.Tanh(), nn.Linear(H, m)).double()
    with torch.no_grad():
        dup[0].weight[2:] = dup[0].weight[1]
        dup[0].bias[2:] = dup[0].bias[1]
    Td = FFNBoundaryTarget(dup, X, units=[0, 1, 2, 3, 4], up=_proj(dup, "0"), down=_proj(dup, "2"), activation=torch.tanh)
    with pytest.raises(ConvergenceError, match="condition number"):
        CompensatingAction(Td)
    # a block holding coordinates the action leaves untouched
    with pytest.raises(ActionError):
        CompensatingAction(FFNBoundaryTarget(net, X, units=T.units, inputs=T.h, block=["up.weight", "up.bias", "down.weight"], **kw))


def test_verdict_passes_at_perturbed_points():
    """The library's verdict (paramsym.testing.check_action) on points around θ0."""
    from paramsym.testing import check_action

    _, _, T, a, g = _setup("gated")
    pts = T.theta0 + 0.05 * torch.randn(8, T.p, dtype=torch.float64, generator=g)
    res = check_action(a.double(), T, pts, samples=24)
    assert res.passed, res
