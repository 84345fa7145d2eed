"""Actions: exact identity of the learned action, JVP fields against central finite differences
(float64) and closed forms, and the learned action's batched fast paths against the generic
``GroupAction`` vmap/jvp versions.

Finite differences are taken in the ambient matrix argument: ``v_h(θ) ≈ (a(I + εh, θ) −
a(I − εh, θ)) / 2ε`` and ``D_g a[hg] ≈ (a(g + εhg, θ) − a(g − εhg, θ)) / 2ε`` with ε = 1e-6
(truncation O(ε²), rounding O(1e-16/ε)).
"""

from __future__ import annotations

import pytest
import torch

from paramsym.actions.base import GroupAction
from paramsym.actions.catalogue import HiddenBasisAction, RescalingAction
from paramsym.actions.learned import LearnedAction
from paramsym.discovery.problems import build_problem
from paramsym.groups.lie import MatrixLieGroup

DT = torch.float64
EPS = 1e-6


def _learned(p: int = 6, s: int = 2, r: int = 3, width: int = 32, seed: int = 0) -> LearnedAction:
    gen = torch.Generator().manual_seed(seed)
    group = MatrixLieGroup(s, r, generator=gen)
    return LearnedAction(group, p, theta_center=torch.randn(p, generator=gen), theta_scale=0.3,
                         out_scale=1.7, g_scale=0.5, width=width, depth=3, generator=gen)


def _fd_field(action, h, theta):
    eye = torch.eye(h.shape[-1], dtype=DT)
    return (action.act(eye + EPS * h, theta) - action.act(eye - EPS * h, theta)) / (2 * EPS)


def _fd_transported(action, g, h, theta):
    d = h @ g
    return (action.act(g + EPS * d, theta) - action.act(g - EPS * d, theta)) / (2 * EPS)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_learned_action_identity_is_bitwise_exact(dtype):
    action = _learned().to(dtype)
    gen = torch.Generator().manual_seed(5)
    for n in (1, 2, 3, 7, 16, 33, 65):
        theta = torch.randn(n, action.p, generator=gen, dtype=torch.float64).to(dtype) * 3
        eye = torch.eye(2, dtype=dtype).expand(n, 2, 2)
        with torch.no_grad():
            assert torch.equal(action.act_many(eye, theta), theta), n
            assert torch.equal(GroupAction.act_many(action, eye, theta), theta), n
            assert torch.equal(action.act(torch.eye(2, dtype=dtype), theta[0]), theta[0])
            # rows with g = I stay exact inside a batch whose other rows move
            g = eye.clone()
            g[::2] = g[::2] + 0.1
            out = action.act_many(g, theta)
            assert torch.equal(out[1::2], theta[1::2]), n
            if n > 1:
                assert not torch.equal(out[::2], theta[::2])


def test_learned_action_fields_match_finite_differences():
    action = _learned().double()
    gen = torch.Generator().manual_seed(1)
    theta = action.theta_center.double() + 0.3 * torch.randn(2, action.p, generator=gen, dtype=DT)
    gens = action.group.generators().double()
    samples = action.group.sample(2, 0.8, 3, generator=gen)
    g = action.group.matrices(samples).double()
    for i in range(2):
        for j in range(gens.shape[0]):
            h = gens[j]
            fd = _fd_field(action, h, theta[i])
            assert torch.allclose(action.field(h, theta[i]), fd, rtol=1e-6, atol=1e-9)
            fdt = _fd_transported(action, g[i], h, theta[i])
            assert torch.allclose(action.transported(g[i], h, theta[i]), fdt, rtol=1e-6, atol=1e-9)
        # fast batched paths agree with the same finite differences
        fd_all = torch.stack([_fd_field(action, gens[j], theta[i]) for j in range(gens.shape[0])])
        assert torch.allclose(action.fields_all(theta)[i], fd_all, rtol=1e-6, atol=1e-9)


def test_learned_fast_paths_equal_generic_vmap_jvp():
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 2e-5)):
        action = _learned(p=7, s=3, r=4).to(dtype)
        gen = torch.Generator().manual_seed(2)
        n = 9
        theta = (action.theta_center + 0.3 * torch.randn(n, 7, generator=gen)).to(dtype)
        g = action.group.matrices(action.group.sample(n, 0.8, 3, generator=gen)).to(dtype)
        gens = action.group.generators().to(dtype)
        h = gens[torch.randint(0, 4, (n,), generator=gen)]
        with torch.no_grad():
            pairs = [
                (action.act_many(g, theta), GroupAction.act_many(action, g, theta)),
                (action.act_many(g, theta[0]), GroupAction.act_many(action, g, theta[0])),
                (action.field_many(h, theta), GroupAction.field_many(action, h, theta)),
                (action.field_many(gens[1], theta), GroupAction.field_many(action, gens[1], theta)),
                (action.transported_many(g, h, theta), GroupAction.transported_many(action, g, h, theta)),
                (action.fields_all(theta), GroupAction.fields_all(action, theta)),
            ]
        for k, (fast, generic) in enumerate(pairs):
            assert fast.shape == generic.shape, k
            scale = float(generic.abs().max())
            assert float((fast - generic).abs().max()) <= tol * max(scale, 1.0), (k, dtype)


def test_learned_fast_paths_backpropagate_like_generic():
    """The training losses backpropagate through the fast paths: gradients w.r.t. the network
    and the learned generators equal those through the generic vmap/jvp versions."""
    action = _learned(p=5, s=2, r=2).double()
    gen = torch.Generator().manual_seed(3)
    theta = action.theta_center.double() + 0.3 * torch.randn(6, 5, generator=gen, dtype=DT)
    samples = action.group.sample(6, 0.5, 2, generator=gen)

    def loss(fast: bool):
        g = action.group.matrices(samples)
        h = action.group.generators()[torch.tensor([0, 1, 0, 1, 0, 1])]
        if fast:
            return (action.transported_many(g, h, theta) - action.field_many(h, action.act_many(g, theta))).pow(2).sum()
        return (GroupAction.transported_many(action, g, h, theta)
                - GroupAction.field_many(action, h, GroupAction.act_many(action, g, theta))).pow(2).sum()

    grads = []
    for fast in (True, False):
        action.zero_grad()
        loss(fast).backward()
        grads.append([p.grad.clone() for p in action.parameters()])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-12)
    assert action.group.raw.grad is not None and float(action.group.raw.grad.abs().max()) > 0


def _catalogue_action_at_samples(preset: str, action_cls):
    """``(problem, action, θ, generators)``: the catalogue action ``action_cls`` on ``fc1``/``fc2``
    of the preset's block (float64), three θ sampled from the preset, the group's generators."""
    problem = build_problem(preset)
    target = problem.target.to(DT)
    action = action_cls(target.block, "fc1.weight", "fc2.weight").double()
    theta = problem.sample(3, torch.Generator().manual_seed(0), DT)
    return problem, action, theta, action.group.generators().double()


def test_hidden_basis_field_closed_form_and_finite_differences():
    _, action, theta, gens = _catalogue_action_at_samples("linear2x2", HiddenBasisAction)
    g = action.group.matrices(action.group.sample(3, 0.5, 2, generator=torch.Generator().manual_seed(1))).double()
    allf = action.fields_all(theta)
    for i in range(3):
        V = theta[i, :4].reshape(2, 2)
        U = theta[i, 4:].reshape(2, 2)
        for j in range(4):
            h = gens[j]
            closed = torch.cat([(h @ V).reshape(-1), (-U @ h).reshape(-1)])  # (g V, U g⁻¹)' at I
            assert torch.allclose(action.field(h, theta[i]), closed, rtol=1e-12, atol=1e-14)
            assert torch.allclose(allf[i, j], closed, rtol=1e-12, atol=1e-14)
            assert torch.allclose(_fd_field(action, h, theta[i]), closed, rtol=1e-7, atol=1e-9)
            assert torch.allclose(action.transported(g[i], h, theta[i]), _fd_transported(action, g[i], h, theta[i]),
                                  rtol=1e-6, atol=1e-9)
            # exact action: transport equals the field at the moved point
            assert torch.allclose(action.transported(g[i], h, theta[i]), action.field(h, action.act(g[i], theta[i])),
                                  rtol=1e-10, atol=1e-12)


def test_rescaling_field_closed_form_and_finite_differences():
    problem, action, theta, gens = _catalogue_action_at_samples("relu242", RescalingAction)
    for i in range(3):
        W1 = theta[i, :8].reshape(4, 2)
        W2 = theta[i, 8:].reshape(2, 4)
        for j in range(4):
            # the generator is E_jj: W_in[j] ↦ e^t W_in[j], W_out[:, j] ↦ e^{-t} W_out[:, j]
            assert torch.equal(gens[j], torch.diag(torch.eye(4, dtype=DT)[j]))
            d1 = torch.zeros_like(W1)
            d1[j] = W1[j]
            d2 = torch.zeros_like(W2)
            d2[:, j] = -W2[:, j]
            closed = torch.cat([d1.reshape(-1), d2.reshape(-1)])
            assert torch.allclose(action.field(gens[j], theta[i]), closed, rtol=1e-12, atol=1e-14)
            assert torch.allclose(_fd_field(action, gens[j], theta[i]), closed, rtol=1e-7, atol=1e-9)
        # the problem's analytic span contains every field
        Q, _ = torch.linalg.qr(problem.reference_span(theta[i]))
        F = action.fields_all(theta[i : i + 1])[0]
        assert torch.allclose((F @ Q) @ Q.T, F, atol=1e-12)
