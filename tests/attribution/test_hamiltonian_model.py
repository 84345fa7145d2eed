"""Tests of the Mexican-hat system, the leapfrog integrator and the learned separable Hamiltonian.

References are independent of the code under test: closed-form harmonic-oscillator solutions,
autograd of the closed-form Hamiltonian, explicit rotation matrices and central finite differences.
"""

from __future__ import annotations

import math

import pytest
import torch

from paramsym.errors import ConfigError, ShapeError
from paramsym.models.hamiltonian import (
    ScalarMLP,
    SeparableHamiltonian,
    force_function,
    generate_trajectories,
    leapfrog,
    mexican_hat_force,
    mexican_hat_hamiltonian,
    rk4,
    train_hamiltonian,
    trajectory_loss,
    trajectory_windows,
)

D = torch.float64


def rot(phi: float) -> torch.Tensor:
    c, s = math.cos(phi), math.sin(phi)
    return torch.tensor([[c, -s], [s, c]], dtype=D)


def test_force_is_minus_autograd_of_hamiltonian():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(50, 2, generator=g, dtype=D).requires_grad_(True)
    p = torch.randn(50, 2, generator=g, dtype=D)
    alpha = torch.randn(50, generator=g, dtype=D)
    h = mexican_hat_hamiltonian(q, p, alpha).sum()
    (dh_dq,) = torch.autograd.grad(h, q)
    torch.testing.assert_close(mexican_hat_force(q.detach(), alpha), -dh_dq, rtol=0, atol=1e-13)
    # closed form written out by hand
    r2 = (q.detach() ** 2).sum(-1, keepdim=True)
    torch.testing.assert_close(mexican_hat_force(q.detach(), alpha), -(alpha[:, None] + r2) * q.detach())


def test_true_force_is_rotation_equivariant_and_has_zero_lie_derivative():
    g = torch.Generator().manual_seed(2)
    q = torch.randn(40, 2, generator=g, dtype=D)
    for alpha in (-1.1, 0.0, 0.6):
        for phi in (0.3, math.radians(73), 2.5):
            R = rot(phi)
            torch.testing.assert_close(
                mexican_hat_force(q @ R.T, alpha), mexican_hat_force(q, alpha) @ R.T, rtol=0, atol=1e-13
            )
        omega = torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=D)
        _, dF = torch.func.jvp(lambda x, a=alpha: mexican_hat_force(x, a), (q,), (q @ omega.T,))
        lie = dF - mexican_hat_force(q, alpha) @ omega.T
        assert float(lie.abs().max()) < 1e-13


def _orders_on_harmonic_oscillator(integrate, refinements) -> list[float]:
    """Observed convergence orders ``log₂(e_k / e_{k+1})`` of ``integrate(q0, p0, T, k, ∇V, ∇K)``
    (positions over time) at each refinement ``k`` (each twice the last), where ``e_k`` is the
    error at ``T = 5`` against the exact oscillator ``q(t) = q0 cos ωt + p0/ω sin ωt`` (ω = 1.3,
    V = ω²‖q‖²/2, K = ‖p‖²/2)."""
    omega, T = 1.3, 5.0
    q0 = torch.tensor([[1.0, -0.5]], dtype=D)
    p0 = torch.tensor([[0.2, 0.7]], dtype=D)
    gv, gk = (lambda q: omega**2 * q), (lambda p: p)
    exact = q0 * math.cos(omega * T) + p0 / omega * math.sin(omega * T)
    errors = [float((integrate(q0, p0, T, k, gv, gk)[-1] - exact).norm()) for k in refinements]
    return [math.log2(errors[i] / errors[i + 1]) for i in range(len(errors) - 1)]


def test_leapfrog_second_order_against_exact_harmonic_oscillator():
    orders = _orders_on_harmonic_oscillator(  # n steps of T / n
        lambda q0, p0, T, n, gv, gk: leapfrog(q0, p0, T / n, n, gv, gk)[0], (100, 200, 400))
    assert all(abs(o - 2.0) < 0.05 for o in orders), orders


def test_rk4_fourth_order_against_exact_harmonic_oscillator():
    orders = _orders_on_harmonic_oscillator(  # 10 steps of T / 10, each in `sub` substeps
        lambda q0, p0, T, sub, gv, gk: rk4(q0, p0, T / 10, 10, gv, gk, substeps=sub)[0], (10, 20, 40))
    assert all(abs(o - 4.0) < 0.1 for o in orders), orders


def test_leapfrog_energy_error_bounded_and_order_two_on_mexican_hat():
    """Symplectic: energy error O(Δt²) and bounded (no drift) over 40 time units."""
    q0 = torch.tensor([[0.3, 0.1], [0.9, -0.2]], dtype=D)
    p0 = torch.tensor([[0.0, 0.4], [-0.3, 0.1]], dtype=D)
    alpha = torch.tensor([-1.1, 0.8], dtype=D)
    gv = lambda q: -mexican_hat_force(q, alpha)  # noqa: E731
    gk = lambda p: p  # noqa: E731
    T = 40.0
    max_err = []
    for dt in (0.1, 0.05):
        n = int(round(T / dt))
        qs, ps = leapfrog(q0, p0, dt, n, gv, gk)
        H = mexican_hat_hamiltonian(qs, ps, alpha)
        err = (H - H[0]).abs()
        max_err.append(float(err.max()))
        first, second = float(err[: n // 2].max()), float(err[n // 2 :].max())
        assert second < 1.5 * first  # bounded, no secular drift
    assert max_err[0] < 5e-3
    ratio = max_err[0] / max_err[1]
    assert 3.5 < ratio < 4.5, ratio  # O(Δt²)


def test_leapfrog_is_time_reversible():
    q0 = torch.tensor([[0.5, 0.2]], dtype=D)
    p0 = torch.tensor([[0.1, -0.3]], dtype=D)
    gv = lambda q: -mexican_hat_force(q, -0.6)  # noqa: E731
    qs, ps = leapfrog(q0, p0, 0.1, 50, gv, lambda p: p)
    qb, pb = leapfrog(qs[-1], ps[-1], -0.1, 50, gv, lambda p: p)
    torch.testing.assert_close(qb[-1], q0, rtol=0, atol=1e-12)
    torch.testing.assert_close(pb[-1], p0, rtol=0, atol=1e-12)


def test_scalar_mlp_xavier_init_and_zero_biases():
    g = torch.Generator().manual_seed(0)
    m = ScalarMLP(3, 32, 3, generator=g)
    linears = [l for l in m.net if isinstance(l, torch.nn.Linear)]
    assert [tuple(l.weight.shape) for l in linears] == [(32, 3), (32, 32), (32, 32), (1, 32)]
    for l in linears:
        fan_out, fan_in = l.weight.shape
        assert float(l.weight.detach().abs().max()) <= math.sqrt(6 / (fan_in + fan_out))
        assert float(l.bias.detach().abs().max()) == 0.0
    assert sum(p.numel() for p in m.parameters()) == 3 * 32 + 32 + 2 * (32 * 32 + 32) + 33
    assert sum(p.numel() for p in SeparableHamiltonian().kinetic.parameters()) == 2241


def test_learned_gradients_match_finite_differences():
    g = torch.Generator().manual_seed(3)
    m = SeparableHamiltonian(generator=g)
    q = torch.randn(7, 2, generator=g, dtype=D)
    p = torch.randn(7, 2, generator=g, dtype=D)
    a = torch.randn(7, generator=g, dtype=D)
    h = 1e-6
    fd_v = torch.stack(
        [(m.potential_energy(q + h * e, a) - m.potential_energy(q - h * e, a)) / (2 * h) for e in torch.eye(2, dtype=D)],
        -1,
    )
    fd_k = torch.stack([(m.kinetic(p + h * e) - m.kinetic(p - h * e)) / (2 * h) for e in torch.eye(2, dtype=D)], -1)
    torch.testing.assert_close(m.grad_v(q, a), fd_v, rtol=0, atol=1e-8)
    torch.testing.assert_close(m.grad_k(p), fd_k, rtol=0, atol=1e-8)


def test_force_function_pure_in_params_and_composes_with_jacrev():
    g = torch.Generator().manual_seed(4)
    m = SeparableHamiltonian(generator=g)
    f = force_function(m.potential)
    params = {k: v.detach() for k, v in m.potential.named_parameters()}
    q = torch.randn(5, 2, generator=g, dtype=D)
    x = torch.cat([q, torch.full((5, 1), -0.6, dtype=D)], -1)
    torch.testing.assert_close(f(params, x), -m.grad_v(q, -0.6), rtol=0, atol=1e-14)
    # one Jacobian column against a central finite difference in that parameter
    jac = torch.func.jacrev(f)(params, x)["net.fc2.weight"]  # [5, 2, 32, 32]
    h = 1e-6
    plus = {k: v.clone() for k, v in params.items()}
    minus = {k: v.clone() for k, v in params.items()}
    plus["net.fc2.weight"][3, 7] += h
    minus["net.fc2.weight"][3, 7] -= h
    fd = (f(plus, x) - f(minus, x)) / (2 * h)
    torch.testing.assert_close(jac[:, :, 3, 7], fd, rtol=0, atol=1e-8)
    with pytest.raises(ShapeError, match="q1, q2, alpha"):
        f(params, q)


def test_trajectories_and_windows():
    g = torch.Generator().manual_seed(5)
    data = generate_trajectories([-1.1, 0.6], 3, 12, 0.1, generator=g)
    assert data.q.shape == (13, 6, 2) and data.alpha.tolist() == [-1.1] * 3 + [0.6] * 3
    H = mexican_hat_hamiltonian(data.q, data.p, data.alpha)
    assert float((H - H[0]).abs().max()) < 1e-9  # RK4 with 20 substeps conserves H closely
    assert float(data.q[0].norm(dim=-1).max()) <= 1.0 and float(data.p[0].norm(dim=-1).max()) <= 0.5
    q, p, a = trajectory_windows(data, 4, stride=4)
    assert q.shape == (5, 6 * 3, 2) and a.shape == (18,)
    torch.testing.assert_close(q[:, 6], data.q[4:9, 0])  # second window of trajectory 0
    with pytest.raises(ConfigError, match="horizon"):
        trajectory_windows(data, 13)
    with pytest.raises(ShapeError, match="alpha"):
        mexican_hat_force(torch.zeros(4, 2, dtype=D), torch.zeros(3, dtype=D))


def test_true_hamiltonian_has_zero_trajectory_loss_and_training_is_reproducible():
    g = torch.Generator().manual_seed(6)
    data = generate_trajectories([-0.8, 1.1], 4, 10, 0.1, generator=g)
    q, p, a = trajectory_windows(data, 5, stride=5)

    class TrueH(SeparableHamiltonian):
        def potential_energy(self, q, alpha):
            return mexican_hat_hamiltonian(q, torch.zeros_like(q), alpha)

        def grad_k(self, p, create_graph=False):
            return p

    # the exact Hamiltonian integrated by leapfrog at Δt = 0.1 differs from the RK4 truth by O(Δt²)
    exact_loss = float(trajectory_loss(TrueH(), q, p, a, 0.1, create_graph=False))
    assert exact_loss < 0.02

    def fit(seed: int):
        gen = torch.Generator().manual_seed(seed)
        m = SeparableHamiltonian(generator=gen)
        hist = train_hamiltonian(m, data, epochs=15, lr=1e-3, horizon=5, stride=5, progress=False)
        return m, hist

    m1, h1 = fit(7)
    m2, h2 = fit(7)
    assert h1[-1] < h1[0]
    assert h1 == h2
    for (n1, w1), (_, w2) in zip(m1.named_parameters(), m2.named_parameters()):
        assert torch.equal(w1, w2), n1
