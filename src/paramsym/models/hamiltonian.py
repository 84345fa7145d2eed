"""Separable learned Hamiltonians on the Mexican-hat system, a leapfrog integrator and training.

The physical system ([Attribution] §3.2) is a particle in the plane with

    H(q, p; α) = ½‖p‖² + ½ α ‖q‖² + ¼ ‖q‖⁴,        q, p ∈ R²,

whose force ``F(q; α) = −∂H/∂q = −(α + ‖q‖²) q`` is exactly equivariant under rotations:
``F(R q) = R F(q)`` for every ``R ∈ SO(2)``. For ``α < 0`` the potential is a Mexican hat with
its rim at ``‖q‖² = −α``.

The learned model is a *separable* Hamiltonian ``H_θ(q, p; α) = K_θ1(p) + V_θ2(q, α)`` (α is
concatenated to q as a third input of V), two MLPs with 3 hidden tanh layers of width 32, Xavier
initialised weights and zero biases. It is integrated by the leapfrog (Störmer–Verlet) map

    p_½ = p − (Δt/2) ∂_q V(q),   q' = q + Δt ∂_p K(p_½),   p' = p_½ − (Δt/2) ∂_q V(q'),

which is symplectic and time-reversible, so for a fixed Δt its energy error stays bounded and is
O(Δt²) (global position error O(Δt²) as well).

The function analysed by the attribution experiment is the learned force
``F_θ(q; α) = −∇_q V_θ2(q, α)`` as a pure function of V's parameters (:func:`force_function`).

Everything here is pure math plus a small training loop; randomness comes from an explicit
``torch.Generator``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..errors import ConfigError, NonFiniteError, ShapeError
from .mlp import mlp

__all__ = [
    "mexican_hat_potential", "mexican_hat_hamiltonian", "mexican_hat_force", "leapfrog_step", "leapfrog", "rk4", "ScalarMLP", "SeparableHamiltonian",
    "force_function", "TrajectoryData", "generate_trajectories", "trajectory_windows", "trajectory_loss", "l1_penalty", "train_hamiltonian",
]

GradFn = Callable[[Tensor], Tensor]

# --------------------------------------------------------------------------------------------
# Ground truth: the Mexican-hat Hamiltonian
# --------------------------------------------------------------------------------------------


def _alpha_like(alpha: float | Tensor, q: Tensor) -> Tensor:
    """Broadcast α (a number, or a tensor broadcastable to ``q.shape[:-1]``) to ``[..., 1]``."""
    a = torch.as_tensor(alpha, dtype=q.dtype, device=q.device)
    try:
        shape = torch.broadcast_shapes(a.shape, q.shape[:-1])
    except RuntimeError:
        shape = None
    if shape != q.shape[:-1]:
        raise ShapeError(
            f"alpha has shape {tuple(a.shape)}; expected a scalar or a shape broadcastable to "
            f"{tuple(q.shape[:-1])} to match q of shape {tuple(q.shape)}."
        )
    return a.expand(q.shape[:-1]).unsqueeze(-1)


def mexican_hat_potential(q: Tensor, alpha: float | Tensor) -> Tensor:
    """``V(q; α) = ½ α ‖q‖² + ¼ ‖q‖⁴`` for ``q`` of shape ``[..., 2]``; returns shape ``[...]``."""
    r2 = (q * q).sum(-1)
    a = _alpha_like(alpha, q).squeeze(-1)
    return 0.5 * a * r2 + 0.25 * r2 * r2


def mexican_hat_hamiltonian(q: Tensor, p: Tensor, alpha: float | Tensor) -> Tensor:
    """``H(q, p; α) = ½‖p‖² + ½ α ‖q‖² + ¼ ‖q‖⁴``; ``q``, ``p`` of shape ``[..., 2]``."""
    return 0.5 * (p * p).sum(-1) + mexican_hat_potential(q, alpha)


def mexican_hat_force(q: Tensor, alpha: float | Tensor) -> Tensor:
    """Closed-form force ``F(q; α) = −∂V/∂q = −(α + ‖q‖²) q`` (shape of ``q``).

    Invariant: ``F(R q) = R F(q)`` for every rotation ``R`` (vanishing rotational Lie derivative
    ``DF(q) Ω q − Ω F(q) = 0`` with ``Ω = [[0, −1], [1, 0]]``).
    """
    a = _alpha_like(alpha, q)
    return -(a + (q * q).sum(-1, keepdim=True)) * q


# --------------------------------------------------------------------------------------------
# Integrators
# --------------------------------------------------------------------------------------------


def leapfrog_step(q: Tensor, p: Tensor, dt: float, grad_v: GradFn, grad_k: GradFn) -> tuple[Tensor, Tensor]:
    """One leapfrog (Störmer–Verlet, kick–drift–kick) step of a separable Hamiltonian.

    ``p_½ = p − (Δt/2) ∂_qV(q)``, ``q' = q + Δt ∂_pK(p_½)``, ``p' = p_½ − (Δt/2) ∂_qV(q')``.

    Args:
        q, p: positions and momenta, shape ``[..., 2]``.
        dt: time step Δt.
        grad_v: ``q ↦ ∂V/∂q`` (the negative force).
        grad_k: ``p ↦ ∂K/∂p`` (the velocity).
    """
    p_half = p - 0.5 * dt * grad_v(q)
    q_new = q + dt * grad_k(p_half)
    p_new = p_half - 0.5 * dt * grad_v(q_new)
    return q_new, p_new


def leapfrog(
    q0: Tensor, p0: Tensor, dt: float, steps: int, grad_v: GradFn, grad_k: GradFn
) -> tuple[Tensor, Tensor]:
    """Integrate ``steps`` leapfrog steps; returns ``(qs, ps)`` of shape ``[steps + 1, ..., 2]``.

    Symplectic and second order: for a fixed horizon the global error is O(Δt²) and the energy
    error stays bounded, O(Δt²), over exponentially long times.
    """
    if steps < 0:
        raise ConfigError(f"leapfrog: steps must be ≥ 0, received {steps}.")
    qs, ps = [q0], [p0]
    q, p = q0, p0
    for _ in range(steps):
        q, p = leapfrog_step(q, p, dt, grad_v, grad_k)
        qs.append(q)
        ps.append(p)
    return torch.stack(qs), torch.stack(ps)


def rk4(
    q0: Tensor, p0: Tensor, dt: float, steps: int, grad_v: GradFn, grad_k: GradFn, substeps: int = 1
) -> tuple[Tensor, Tensor]:
    """Classical Runge–Kutta (order 4) reference integrator of ``q̇ = ∂_pK``, ``ṗ = −∂_qV``.

    Each of the ``steps`` output intervals Δt is split into ``substeps`` RK4 steps; returns
    ``(qs, ps)`` of shape ``[steps + 1, ..., 2]`` sampled every Δt. Used to generate accurate
    ground-truth trajectories (global error O((Δt/substeps)⁴)).
    """
    h = dt / substeps

    def rhs(q: Tensor, p: Tensor) -> tuple[Tensor, Tensor]:
        return grad_k(p), -grad_v(q)

    qs, ps = [q0], [p0]
    q, p = q0, p0
    for _ in range(steps):
        for _ in range(substeps):
            k1q, k1p = rhs(q, p)
            k2q, k2p = rhs(q + 0.5 * h * k1q, p + 0.5 * h * k1p)
            k3q, k3p = rhs(q + 0.5 * h * k2q, p + 0.5 * h * k2p)
            k4q, k4p = rhs(q + h * k3q, p + h * k3p)
            q = q + (h / 6.0) * (k1q + 2 * k2q + 2 * k3q + k4q)
            p = p + (h / 6.0) * (k1p + 2 * k2p + 2 * k3p + k4p)
        qs.append(q)
        ps.append(p)
    return torch.stack(qs), torch.stack(ps)


# --------------------------------------------------------------------------------------------
# The learned separable Hamiltonian
# --------------------------------------------------------------------------------------------


class ScalarMLP(nn.Module):
    """``R^d → R`` MLP with ``depth`` hidden tanh layers of width ``width``.

    Weights are Xavier-uniform initialised from ``generator`` and biases are zero.
    """

    def __init__(
        self,
        in_features: int,
        width: int = 32,
        depth: int = 3,
        *,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
    ):
        super().__init__()
        self.net = mlp([in_features] + [width] * depth + [1], "tanh", init="xavier", generator=generator, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        """Return ``[...]`` scalars for inputs ``[..., in_features]``."""
        return self.net(x).squeeze(-1)


class SeparableHamiltonian(nn.Module):
    """``H_θ(q, p; α) = K_θ1(p) + V_θ2(q, α)``: a kinetic MLP on ``p`` and a potential MLP on
    ``(q, α)``.

    Args:
        width, depth: hidden width and number of hidden layers of both MLPs (32 and 3).
        generator: the random generator for the Xavier initialisation.
        dtype: parameter dtype (float64 by default; the attribution works in float64).
    """

    def __init__(
        self,
        width: int = 32,
        depth: int = 3,
        *,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float64,
    ):
        super().__init__()
        self.kinetic = ScalarMLP(2, width, depth, generator=generator, dtype=dtype)
        self.potential = ScalarMLP(3, width, depth, generator=generator, dtype=dtype)

    def forward(self, q: Tensor, p: Tensor, alpha: float | Tensor) -> Tensor:
        """``H_θ(q, p; α)`` for ``q``, ``p`` of shape ``[..., 2]``."""
        return self.kinetic(p) + self.potential_energy(q, alpha)

    def potential_energy(self, q: Tensor, alpha: float | Tensor) -> Tensor:
        """``V_θ2(q, α)``, shape ``[...]``."""
        return self.potential(torch.cat([q, _alpha_like(alpha, q)], dim=-1))

    def grad_v(self, q: Tensor, alpha: float | Tensor, create_graph: bool = False) -> Tensor:
        """``∂V_θ2/∂q`` by autograd (``create_graph=True`` when training through it)."""
        with torch.enable_grad():
            qq = q if q.requires_grad else q.detach().requires_grad_(True)
            v = self.potential_energy(qq, alpha).sum()
            (g,) = torch.autograd.grad(v, qq, create_graph=create_graph)
        return g

    def grad_k(self, p: Tensor, create_graph: bool = False) -> Tensor:
        """``∂K_θ1/∂p`` by autograd."""
        with torch.enable_grad():
            pp = p if p.requires_grad else p.detach().requires_grad_(True)
            k = self.kinetic(pp).sum()
            (g,) = torch.autograd.grad(k, pp, create_graph=create_graph)
        return g

    def rollout(
        self, q0: Tensor, p0: Tensor, alpha: float | Tensor, dt: float, steps: int,
        create_graph: bool = False,
    ) -> tuple[Tensor, Tensor]:
        """Leapfrog rollout of the learned Hamiltonian; ``(qs, ps)`` of shape ``[steps+1, ..., 2]``."""
        return leapfrog(
            q0, p0, dt, steps,
            lambda q: self.grad_v(q, alpha, create_graph),
            lambda p: self.grad_k(p, create_graph),
        )


def force_function(potential: nn.Module) -> Callable[[dict[str, Tensor], Tensor], Tensor]:
    """The learned force ``F_θ(q; α) = −∇_q V_θ(q, α)`` as a pure function of V's parameters.

    Args:
        potential: the potential network (``SeparableHamiltonian.potential``), mapping
            ``[..., 3]`` inputs ``(q₁, q₂, α)`` to scalars.

    Returns:
        ``f(params, x) -> Tensor[N, 2]`` for ``params`` a ``dict[str, Tensor]`` keyed like
        ``potential.named_parameters()`` and ``x`` of shape ``[N, 3]``. It is built from
        ``torch.func.functional_call`` and ``torch.func.grad`` so that it composes with
        ``vmap``/``jacrev``/``jvp`` in both arguments.
    """

    def energy_sum(x: Tensor, params: dict[str, Tensor]) -> Tensor:
        return torch.func.functional_call(potential, params, (x,)).sum()

    def f(params: dict[str, Tensor], x: Tensor) -> Tensor:
        if x.shape[-1] != 3:
            raise ShapeError(
                f"force input x has shape {tuple(x.shape)}; expected [N, 3] rows (q1, q2, alpha)."
            )
        g = torch.func.grad(energy_sum)(x, params)
        return -g[..., :2]

    return f


# --------------------------------------------------------------------------------------------
# Data and training
# --------------------------------------------------------------------------------------------


@dataclass
class TrajectoryData:
    """Ground-truth trajectories sampled every Δt.

    Attributes:
        q, p: shape ``[T + 1, B, 2]`` (time first).
        alpha: shape ``[B]``, the α of each trajectory.
        dt: the sampling interval.
    """

    q: Tensor
    p: Tensor
    alpha: Tensor
    dt: float

    @property
    def num_steps(self) -> int:
        return self.q.shape[0] - 1


def generate_trajectories(
    alphas: Sequence[float],
    n_initial: int,
    num_steps: int,
    dt: float,
    *,
    generator: torch.Generator,
    q_radius: float = 1.0,
    p_radius: float = 0.5,
    substeps: int = 20,
    dtype: torch.dtype = torch.float64,
) -> TrajectoryData:
    """Simulate the Mexican-hat system from random initial conditions (RK4 with substeps).

    Initial ``q`` is uniform in the disc of radius ``q_radius``, ``p`` uniform in the disc of
    radius ``p_radius``; ``n_initial`` conditions per α.

    Raises:
        ConfigError: empty α list or non-positive sizes.
        NonFiniteError: a trajectory diverged (it cannot for these energies; checked anyway).
    """
    if len(alphas) == 0 or n_initial < 1 or num_steps < 1 or not dt > 0:
        raise ConfigError(
            f"generate_trajectories: need ≥1 alpha, n_initial ≥ 1, num_steps ≥ 1, dt > 0; received "
            f"alphas={list(alphas)}, n_initial={n_initial}, num_steps={num_steps}, dt={dt}."
        )

    def disc(n: int, radius: float) -> Tensor:
        r = radius * torch.sqrt(torch.rand(n, generator=generator, dtype=dtype))
        phi = 2 * math.pi * torch.rand(n, generator=generator, dtype=dtype)
        return torch.stack([r * torch.cos(phi), r * torch.sin(phi)], -1)

    alpha = torch.tensor([a for a in alphas for _ in range(n_initial)], dtype=dtype)
    n = alpha.numel()
    q0, p0 = disc(n, q_radius), disc(n, p_radius)
    qs, ps = rk4(
        q0, p0, dt, num_steps,
        lambda q: -mexican_hat_force(q, alpha),
        lambda p: p,
        substeps=substeps,
    )
    if not (torch.isfinite(qs).all() and torch.isfinite(ps).all()):
        raise NonFiniteError("ground-truth trajectories diverged; lower the initial radii or dt.")
    return TrajectoryData(qs, ps, alpha, dt)


def trajectory_windows(
    data: TrajectoryData, horizon: int, stride: int = 1
) -> tuple[Tensor, Tensor, Tensor]:
    """Length-``horizon`` windows of every trajectory, starting every ``stride`` samples
    (multiple shooting).

    Returns ``(q, p, alpha)`` with ``q``, ``p`` of shape ``[horizon + 1, W, 2]`` and ``alpha``
    of shape ``[W]``, where ``W = B · ⌈(T − horizon + 1) / stride⌉``.
    """
    if not 1 <= horizon <= data.num_steps:
        raise ConfigError(
            f"train.horizon must be in [1, {data.num_steps}] (the trajectory length), received {horizon}."
        )
    if stride < 1:
        raise ConfigError(f"train.stride must be ≥ 1, received {stride}.")
    starts = range(0, data.num_steps - horizon + 1, stride)
    q = torch.cat([data.q[s : s + horizon + 1] for s in starts], dim=1)
    p = torch.cat([data.p[s : s + horizon + 1] for s in starts], dim=1)
    alpha = data.alpha.repeat(len(starts))
    return q, p, alpha


def trajectory_loss(
    model: SeparableHamiltonian, q: Tensor, p: Tensor, alpha: Tensor, dt: float,
    create_graph: bool = True,
) -> Tensor:
    """Mean over windows of ``Σ_t (‖q_t − q̂_t‖ + ‖p_t − p̂_t‖)``, t = 1..horizon.

    ``q̂, p̂`` is the leapfrog rollout of the learned Hamiltonian from ``(q_0, p_0)``.
    """
    horizon = q.shape[0] - 1
    qh, ph = model.rollout(q[0], p[0], alpha, dt, horizon, create_graph=create_graph)
    err = (qh[1:] - q[1:]).norm(dim=-1) + (ph[1:] - p[1:]).norm(dim=-1)
    return err.sum(0).mean()


def l1_penalty(model: nn.Module) -> Tensor:
    """``Σ_i |θ_i|`` over all parameters."""
    return sum(w.abs().sum() for w in model.parameters())


def train_hamiltonian(
    model: SeparableHamiltonian,
    data: TrajectoryData,
    *,
    epochs: int,
    lr: float = 1e-3,
    l1: float = 1e-5,
    horizon: int = 5,
    stride: int = 1,
    progress: bool = True,
    callback: Callable[[int, float], None] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    start_epoch: int = 0,
) -> list[float]:
    """Full-batch Adam on :func:`trajectory_loss` ``+ l1 · Σ|θ|`` over all windows.

    Args:
        model: the separable Hamiltonian (trained in place).
        data: ground-truth trajectories.
        epochs: number of full-batch Adam steps.
        lr, l1: Adam learning rate and L1 weight (1e-3 and 1e-5 in the source).
        horizon: rollout length of each training window.
        stride: spacing of window starts along each trajectory.
        progress: show a tqdm progress bar.
        callback: called as ``callback(epoch, loss)`` after each step (used to checkpoint).
        optimizer: an Adam optimiser over ``model.parameters()`` to continue (resume); a new
            one with ``lr`` by default.
        start_epoch: first epoch index (when resuming); runs epochs ``start_epoch..epochs-1``.

    Returns:
        The trajectory-loss history (without the L1 term) of the epochs run here.

    Raises:
        NonFiniteError: the loss became NaN/inf (lower the learning rate).
    """
    from tqdm.auto import tqdm

    q, p, alpha = trajectory_windows(data, horizon, stride)
    opt = optimizer if optimizer is not None else torch.optim.Adam(model.parameters(), lr=lr)
    history: list[float] = []
    bar = tqdm(range(start_epoch, epochs), desc="train Hamiltonian", disable=not progress, leave=False)
    for epoch in bar:
        opt.zero_grad()
        loss = trajectory_loss(model, q, p, alpha, data.dt)
        total = loss + l1 * l1_penalty(model)
        if not torch.isfinite(total):
            raise NonFiniteError(
                f"training loss became {float(total)} at epoch {epoch}; lower train.lr (now {lr})."
            )
        total.backward()
        opt.step()
        history.append(float(loss.detach()))
        if progress and epoch % 20 == 0:
            bar.set_postfix(loss=f"{history[-1]:.4g}")
        if callback is not None:
            callback(epoch, history[-1])
    return history
