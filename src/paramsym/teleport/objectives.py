"""Orbit objectives that predict the progress of the next training steps (the linearised lookahead).

``‖∇L‖²`` is unbounded on most orbits (rescaling one layer up and the next down makes the
gradient arbitrarily large, and the next fixed-step-size steps diverge). The objectives here score
a point by the loss the *actual* optimiser would reach from it:

* :func:`descent_objective`: ``L(θ) − L(θ_m)`` after ``m`` real gradient
  steps (exact, costs ``m`` double backward passes per evaluation);
* :class:`LinearizedLookahead`: for a squared loss ``L = ½ ‖f(θ) − Y‖²`` on a batch, the model is
  linearised at the teleported point, ``f(θ' + Δ) ≈ f(θ') + J' Δ``, and ``m`` steps of
  preconditioned gradient descent ``Δ ← Δ − lr P' J'ᵀ r`` give the residual

      r_m = (I − lr K')^m r,    K' = J' P' J'ᵀ,

  so the objective is ``−½ ‖r_m‖²`` (higher is better; unstable points, ``lr λ(K') > 2``, score
  badly by themselves). For an action that preserves the outputs ``f`` on the batch (every exact
  action), ``r' = r`` and ``J' = J(θ') = J(θ) A(g)ᵀ`` with the covector map ``A(g)`` of
  :func:`paramsym.teleport.optim.covector_map`, so ``J`` and ``r`` are computed once, at θ, and
  every evaluation on the orbit costs one batched vector-Jacobian product of the action. For an
  action *linear in θ* ``A(g)`` does not depend on the point (used here: it is evaluated at θ).
  With ``second_moment=v`` (AdaGrad's ``sum``, Adam's ``exp_avg_sq``), ``P' = diag(1/(√v' + ε))``
  with ``v' = a² v`` and ``a = A(g) 1`` — the transform of :func:`~paramsym.teleport.optim.transform_state`
  for a diagonal ``A`` (rescalings); the preconditioner is frozen over the ``m`` steps.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.func import jacrev, vjp, vmap

from ..errors import ConfigError
from .fast import monomial_exponents

__all__ = ["LinearizedLookahead", "Objective", "descent_objective", "grad_norm_objective"]

#: an orbit objective ``θ ↦ J(θ)`` (or ``(θ, g) ↦ J`` when it has ``needs_element = True``)
Objective = Callable[[Tensor], Tensor]


def grad_norm_objective(loss_fn: Callable[[Tensor], Tensor]) -> Objective:
    """``J(θ) = ‖∇L(θ)‖²`` as a differentiable function of θ (double backward)."""

    def objective(theta: Tensor) -> Tensor:
        if not theta.requires_grad:
            theta = theta.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(loss_fn(theta), theta, create_graph=True)
        return grad.pow(2).sum()

    return objective


def descent_objective(loss_fn: Callable[[Tensor], Tensor], lr: float, lookahead: int = 1) -> Objective:
    """``J(θ) = L(θ) − L(θ_m)`` with ``θ_{j+1} = θ_j − lr ∇L(θ_j)``, ``θ_0 = θ``, ``m = lookahead``:
    the decrease of ``m`` plain gradient steps. On the level set ``L(θ)`` is constant, so this
    maximises the progress of the next steps at the learning rate actually used — unlike
    ``‖∇L‖²``, it never prefers a point where the step ``lr`` overshoots (curvature ≫ 2/lr)."""

    def objective(theta: Tensor) -> Tensor:
        if not theta.requires_grad:
            theta = theta.detach().requires_grad_(True)
        start = loss_fn(theta)
        th = theta
        for _ in range(lookahead):
            (grad,) = torch.autograd.grad(loss_fn(th), th, create_graph=True)
            th = th - lr * grad
        return start - loss_fn(th)

    return objective


class LinearizedLookahead:
    """``−½ ‖(I − lr K(g))^m r‖²`` on the orbit of ``θ₀`` (module docstring).

    Args:
        action: an action linear in θ that preserves the outputs of ``outputs`` (e.g. rescaling).
        theta: the starting point θ₀ ``(p,)``.
        outputs: ``θ ↦ f(θ)`` (any shape) on the batch.
        targets: ``Y`` (same shape as ``f(θ)``); the loss is ``½ ‖f − Y‖²``.
        lr: the optimiser's learning rate.
        horizon: ``m``, the number of steps looked ahead.
        second_moment: optional ``v`` ``(p,)`` for an adaptive preconditioner; ``eps`` its ε.

    Calling it with ``(θ', g)`` (``θ' = a(g, θ₀)``) returns the objective; the teleport passes ``g``
    because ``needs_element`` is set.
    """

    needs_element = True

    def __init__(self, action, theta: Tensor, outputs: Callable[[Tensor], Tensor], targets: Tensor, lr: float,
                 horizon: int = 100, second_moment: Tensor | None = None, eps: float = 1e-10):
        if not lr > 0 or not isinstance(horizon, int) or horizon < 1:
            raise ConfigError(f"LinearizedLookahead: need lr > 0 and an integer horizon ≥ 1; received lr={lr}, "
                              f"horizon={horizon!r}.")
        self.action, self.theta, self.lr, self.m, self.eps = action, theta.detach(), float(lr), horizon, eps
        with torch.no_grad():
            self.r = (outputs(self.theta) - targets).reshape(-1).detach()
        self.J = jacrev(lambda th: outputs(th).reshape(-1))(self.theta).detach()
        self.v = None if second_moment is None else second_moment.detach().to(self.theta.dtype)
        gens = action.group.generators().detach().to(self.theta.dtype)
        diag = torch.diagonal(gens, dim1=-2, dim2=-1)
        self.monomial = None
        if bool((gens == torch.diag_embed(diag)).all()):
            self.monomial = monomial_exponents(action, self.theta, diag)
        # a monomial action is diagonal linear; otherwise test it
        self.diagonal = self.monomial is not None or _is_diagonal_linear(action, self.theta)

    def _scaled_jacobian(self, g: Tensor) -> tuple[Tensor, Tensor]:
        """``J' = J A(g)ᵀ`` and ``a = A(g) 1``; for a diagonal linear action ``A(g) = diag(a(g⁻¹, 1))``."""
        if self.monomial is not None:  # a(g, ·) = diag(exp(C log diag g)), so A(g) = diag(exp(−C log diag g))
            a = torch.exp(-(self.monomial @ torch.log(torch.diagonal(g))))
            return self.J * a, a
        g_inv = torch.linalg.inv(g)
        if self.diagonal:
            a = self.action.act(g_inv, torch.ones_like(self.theta))
            return self.J * a, a
        _, pull = vjp(lambda th: self.action.act(g_inv, th), self.theta)
        return vmap(lambda row: pull(row)[0])(self.J), pull(torch.ones_like(self.theta))[0]

    def __call__(self, theta_moved: Tensor, g: Tensor) -> Tensor:
        Jg, a = self._scaled_jacobian(g)
        if self.v is None:
            K = Jg @ Jg.T
        else:
            K = (Jg / ((a.abs() * self.v.sqrt()) + self.eps)) @ Jg.T
        step = torch.eye(K.shape[0], dtype=K.dtype) - self.lr * K
        r = torch.linalg.matrix_power(step, self.m) @ self.r
        return -0.5 * r.pow(2).sum()


def _is_diagonal_linear(action, theta: Tensor) -> bool:
    """Whether ``a(g, ·)`` is a diagonal linear map for a random element near the identity:
    ``a(g, x ⊙ θ) = a(g, 1) ⊙ x ⊙ θ`` for random ``x`` (one check, relative 1e-12)."""
    gens = action.group.generators().detach().to(theta.dtype)
    gen = torch.Generator().manual_seed(0)
    t = torch.randn(gens.shape[0], generator=gen, dtype=theta.dtype) * 0.1
    g = torch.linalg.matrix_exp(torch.einsum("i,ijk->jk", t, gens))
    x = torch.randn(theta.shape, generator=gen, dtype=theta.dtype)
    with torch.no_grad():
        lhs = action.act(g, x)
        rhs = action.act(g, torch.ones_like(theta)) * x
    return bool(torch.allclose(lhs, rhs, rtol=1e-12, atol=1e-12 * float(rhs.abs().max())))
