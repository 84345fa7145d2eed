"""Symmetry teleportation: gradient ascent on a loss level set along a group orbit.

Given a parameter vector ``θ ∈ R^p``, a loss ``L`` (on a fixed batch) and a group action
``a(g, θ)`` that leaves ``L`` invariant, ``L(a(g, θ)) = L(θ)`` for ``g ∈ G``, teleportation moves
θ along its orbit to a point where an *orbit objective* ``J`` is larger, by default the squared
gradient norm

    J(θ) = ‖∇L(θ)‖²,

which makes the next descent steps longer (Zhao et al., *Symmetry Teleportation for Accelerated
Optimization*, NeurIPS 2022). The group element is ``g = exp(Σ_i t_i T_i)`` for the generators
``T_i`` of the action's Lie algebra (``action.group.generators()``). Each ascent step starts a
fresh chart at the current point θ_k:

    θ_{k+1} = a(exp(η d̂ · T), θ_k),    d = ∇_δ J(a(exp(δ · T), θ_k)) |_{δ=0} = Vᵀ ∇J(θ_k),

where ``V`` holds the infinitesimal fields ``v_i(θ_k)`` and ``d̂ = d/‖d‖`` (autograd through
``matrix_exp`` and the action gives ``d``). The step length ``η`` is found by backtracking
(Armijo): a candidate is accepted when it is finite, ``J`` rises by at least ``c η ‖d‖``, and
(optionally) the gradient-norm factor stays ≤ ``max_factor``; after an accepted step ``η``
doubles. The element applied is ``g = Π_k exp(η_k d̂_k · T)`` (latest step on the left); for an
abelian group it equals ``exp(Σ_k η_k d̂_k · T)``.

Level-set check: after every accepted step the relative loss change to the *starting* loss,
``|L(θ_{k+1}) − L(θ_0)| / |L(θ_0)|``, is measured; above ``tol`` the step is refused (the
previous point is kept and the status says so) or, with ``strict=True``,
:class:`~paramsym.errors.LevelSetError` is raised. An exact action keeps it at rounding level
(≤ 1e-10 in float64); a data-dependent action (compensating) only on its batch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor

from ..errors import ActionError, ConfigError, LevelSetError, ShapeError
from .fast import monomial_exponents

__all__ = ["TeleportResult", "teleport", "grad_norm_objective", "descent_objective", "generators_of", "relative_change"]

Objective = Callable[[Tensor], Tensor]


@dataclass
class TeleportResult:
    """Outcome of one teleport.

    Attributes:
        theta: the teleported point ``a(g, θ)`` (detached; ``θ`` itself when nothing was accepted).
        g: the group element applied, ``(s, s)``.
        status: ``"ok"`` (improved, all steps on the level set), ``"no_improvement"`` (no
            ascent step was accepted), ``"left_level_set"`` (a step beyond ``tol`` was refused;
            the earlier accepted steps are kept) or ``"capped"`` (``max_factor`` reached).
        loss_before, loss_after: ``L(θ)`` and ``L(a(g, θ))``.
        rel_loss_change: ``|L(a(g, θ)) − L(θ)| / |L(θ)|``.
        grad_norm_before, grad_norm_after: ``‖∇L‖`` at both points; ``factor`` their ratio.
        objective_before, objective_after: ``J`` at both points.
        steps: accepted ascent steps; ``evaluations``: objective evaluations; ``seconds``: wall time.
        refused_change: the relative loss change of a refused step (``None`` if none was refused).
    """

    theta: Tensor
    g: Tensor
    status: str
    loss_before: float
    loss_after: float
    rel_loss_change: float
    grad_norm_before: float
    grad_norm_after: float
    factor: float
    objective_before: float
    objective_after: float
    steps: int
    evaluations: int
    seconds: float
    refused_change: float | None = None
    history: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        """JSON-able numbers (no tensors)."""
        out = asdict(self)
        out.pop("theta")
        out.pop("g")
        return out


def relative_change(after: float, before: float) -> float:
    """``|after − before| / max(|before|, 1e-300)``."""
    return abs(after - before) / max(abs(before), 1e-300)


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


def generators_of(action, dtype: torch.dtype) -> Tensor:
    """The Lie-algebra generators ``T_i`` ``(r, s, s)`` of an action's group, in ``dtype``.

    Raises:
        ActionError: the action has no continuous group (a discrete action cannot teleport).
    """
    try:
        gens = action.group.generators()
    except ActionError as exc:
        raise ActionError(f"teleport needs a continuous group; {type(action).__name__} has none ({exc})") from exc
    return gens.detach().to(dtype)


def _loss_and_grad(loss_fn: Callable[[Tensor], Tensor], theta: Tensor) -> tuple[float, float]:
    th = theta.detach().requires_grad_(True)
    loss = loss_fn(th)
    (grad,) = torch.autograd.grad(loss, th)
    return float(loss.detach()), float(grad.norm())


def teleport(
    action,
    theta: Tensor,
    loss_fn: Callable[[Tensor], Tensor],
    *,
    objective: Objective | None = None,
    steps: int = 10,
    step_size: float = 0.1,
    tol: float = 1e-6,
    strict: bool = False,
    max_factor: float | None = None,
    radius: float | None = None,
    armijo: float = 1e-4,
    max_backtracks: int = 30,
    generator: torch.Generator | None = None,
    explore: float = 0.0,
) -> TeleportResult:
    """Teleport θ along the orbit of ``action`` to increase ``objective`` (module docstring).

    Args:
        action: a :class:`~paramsym.actions.base.GroupAction` on θ (``act(g, θ)``, continuous
            ``group``): a catalogue action, a compensating action, a learned action, or one of
            :mod:`paramsym.teleport.functions`.
        theta: the point ``(p,)``; ``p`` must equal ``action.p``.
        loss_fn: ``θ ↦ L(θ)`` (a scalar tensor, differentiable in θ), on a fixed batch.
        objective: ``θ ↦ J(θ)`` to maximise; default :func:`grad_norm_objective` of ``loss_fn``.
            An objective with ``needs_element = True`` is called as ``J(θ', g)`` with the element
            ``g`` (relative to the starting θ) that produced ``θ'`` (e.g.
            :class:`~paramsym.teleport.objectives.LinearizedLookahead`).
        steps: maximum accepted ascent steps.
        step_size: initial algebra step length ``η`` (``‖δ‖``) of the line search.
        tol: largest accepted relative loss change to the starting loss.
        strict: raise :class:`LevelSetError` instead of refusing a step that leaves the level set.
        max_factor: stop once ``‖∇L(a(g, θ))‖ / ‖∇L(θ)‖`` would exceed this (``None``: no cap).
        radius: trust region: the accepted step lengths ``Σ_k η_k`` (the path length in the
            algebra) stay ≤ ``radius`` (``None``: unbounded). For rescalings ``radius = r`` keeps
            every unit's scale within ``[e^{−r}, e^{r}]``.
        armijo: sufficient-increase constant ``c``.
        max_backtracks: halvings of ``η`` before giving up on a step.
        generator, explore: the first direction is ``d + explore ‖d‖ ξ`` with ``ξ`` a random
            unit vector from ``generator`` (``explore = 0``: pure gradient ascent).

    Returns:
        :class:`TeleportResult`.

    Raises:
        ShapeError: θ does not have the action's length.
        ConfigError: bad ``steps``, ``step_size`` or ``tol``.
        LevelSetError: ``strict`` and an accepted step left the level set.
    """
    start = time.perf_counter()
    import numbers

    from ..actions.base import GroupAction

    if not isinstance(action, GroupAction):
        raise ActionError(f"teleport: action must be a paramsym GroupAction (a catalogue, compensating, learned or "
                          f"teleport.functions action); received {type(action).__name__}.")
    if not callable(loss_fn):
        raise ConfigError(f"teleport: loss_fn must be a callable θ -> scalar loss; received {type(loss_fn).__name__}.")

    if not isinstance(theta, Tensor) or not theta.is_floating_point() or theta.is_meta:
        what = type(theta).__name__ if not isinstance(theta, Tensor) else f"a {theta.dtype} tensor on {theta.device}"
        raise ShapeError(f"teleport: θ must be a floating-point tensor with values (not on the meta device); received "
                         f"{what}. Pass the flat float block vector, e.g. target.theta0.")

    def _real(v, integral=False):
        kinds = numbers.Integral if integral else numbers.Real
        return isinstance(v, kinds) and not isinstance(v, bool) and math.isfinite(v)

    if not (_real(steps, True) and _real(step_size) and _real(tol) and (max_factor is None or _real(max_factor))
            and (radius is None or _real(radius))):
        raise ConfigError(f"teleport: steps must be an integer and step_size, tol, max_factor, radius finite numbers; "
                          f"received steps={steps!r}, step_size={step_size!r}, tol={tol!r}, max_factor={max_factor!r}, "
                          f"radius={radius!r}.")
    if theta.ndim != 1 or theta.numel() != int(getattr(action, "p", theta.numel())):
        raise ShapeError(f"teleport: θ has shape {tuple(theta.shape)} but {type(action).__name__} acts on p = "
                         f"{getattr(action, 'p', '?')} parameters; pass the flat block vector the action was built on.")
    if steps < 0 or not step_size > 0 or not tol >= 0 or (max_factor is not None and not max_factor > 1) \
            or (radius is not None and not radius > 0):
        raise ConfigError(f"teleport: need steps ≥ 0, step_size > 0, tol ≥ 0, max_factor > 1 and radius > 0 (or None); received "
                          f"steps={steps}, step_size={step_size}, tol={tol}, max_factor={max_factor}, radius={radius}.")
    theta0 = theta.detach()
    gens = generators_of(action, theta0.dtype)
    obj = objective if objective is not None else grad_norm_objective(loss_fn)
    loss0, gn0 = _loss_and_grad(loss_fn, theta0)
    if not math.isfinite(loss0):
        raise ConfigError(f"teleport: the loss at θ is {loss0}; teleport needs a finite starting loss.")
    eye = torch.eye(gens.shape[-1], dtype=theta0.dtype)
    flat = gens.reshape(gens.shape[0], -1)

    # an abelian diagonal algebra (rescalings) exponentiates entrywise: exp(diag x) = diag(exp x)
    diag_algebra = bool((gens - torch.diag_embed(torch.diagonal(gens, dim1=-2, dim2=-1)) == 0).all())
    diag_flat = torch.diagonal(gens, dim1=-2, dim2=-1)

    C = monomial_exponents(action, theta0, diag_flat) if diag_algebra else None

    def move(delta: Tensor, th: Tensor) -> tuple[Tensor, Tensor]:
        if diag_algebra:
            x = delta @ diag_flat
            g = torch.diag(torch.exp(x))
            if C is not None:  # monomial action: a(diag(e^x), θ) = θ ⊙ exp(C x)
                return g, th * torch.exp(C @ x)
        else:
            g = torch.linalg.matrix_exp((delta @ flat).reshape(gens.shape[1:]))
        return g, action.act(g, th)

    with_g = bool(getattr(obj, "needs_element", False))

    def call(th: Tensor, g: Tensor) -> Tensor:
        return obj(th, g) if with_g else obj(th)

    def value(th: Tensor, g: Tensor) -> float:
        with torch.enable_grad():
            return float(call(th.detach().requires_grad_(True), g.detach()).detach())

    cur, g_total, j_cur = theta0, eye.clone(), value(theta0, eye)
    j0, gn_cur, loss_cur = j_cur, gn0, loss0
    travelled = 0.0
    status, n_acc, evals, refused, eta, hist = "no_improvement", 0, 1, None, float(step_size), [j_cur]
    for k in range(steps):
        delta = torch.zeros(gens.shape[0], dtype=theta0.dtype, requires_grad=True)
        g_d, th = move(delta, cur)
        (d,) = torch.autograd.grad(call(th, g_d @ g_total), delta)
        d = d.detach()
        dn = float(d.norm())
        if not math.isfinite(dn) or dn == 0.0:
            break
        d0 = d
        if k == 0 and explore > 0:
            xi = torch.randn(d.shape, generator=generator, dtype=d.dtype)
            d = d + explore * dn * xi / xi.norm()
            if float(d.norm()) == 0.0:
                d = xi
        direction = d / d.norm()
        slope = float(d0 @ direction)
        accepted = False
        if radius is not None:
            if radius - travelled <= 1e-12 * radius:
                break
            eta = min(eta, radius - travelled)
        for _ in range(max_backtracks):
            with torch.no_grad():
                g, cand = move(eta * direction, cur)
            j_new = value(cand, g @ g_total) if bool(torch.isfinite(cand).all()) else float("nan")
            evals += 1
            if math.isfinite(j_new) and j_new >= j_cur + armijo * eta * max(slope, 0.0):
                if max_factor is None:  # the gradient norm is needed only at the end
                    with torch.no_grad():
                        loss_new, gn_new = float(loss_fn(cand)), float("nan")
                else:
                    loss_new, gn_new = _loss_and_grad(loss_fn, cand)
                if max_factor is not None and gn_new > max_factor * gn0:
                    eta /= 2
                    status = "capped"
                    continue
                accepted = True
                break
            eta /= 2
        if not accepted:
            break
        change = relative_change(loss_new, loss0)
        if not change <= tol:
            if strict:
                raise LevelSetError(
                    f"teleport step {k + 1} with {type(action).__name__} changed the loss from {loss0:.6g} to "
                    f"{loss_new:.6g} (relative {change:.3g} > tol {tol:.3g}): the action does not leave this loss "
                    "invariant (a data-dependent action on another batch, a wrong action for the model, or too "
                    "large a step for an approximate action). Use an exact action, a smaller step_size, or raise tol.")
            refused, status = change, "left_level_set"
            break
        cur, g_total, j_cur, gn_cur, loss_cur = cand.detach(), g @ g_total, j_new, gn_new, loss_new
        travelled += eta
        n_acc += 1
        hist.append(j_cur)
        status = "ok" if status != "capped" else status
        eta *= 2
        if status == "capped":
            break
    if n_acc and C is not None:  # the returned point comes from the action itself
        with torch.no_grad():
            cur = action.act(g_total, theta0).detach()
        gn_cur = float("nan")
    if n_acc and not math.isfinite(gn_cur):
        loss_cur, gn_cur = _loss_and_grad(loss_fn, cur)
        change = relative_change(loss_cur, loss0)
        if not change <= tol:
            if strict:
                raise LevelSetError(f"teleport with {type(action).__name__}: the final point changed the loss from "
                                    f"{loss0:.6g} to {loss_cur:.6g} (relative {change:.3g} > tol {tol:.3g}).")
            # refuse the whole teleport: return the starting point
            refused, status, n_acc = change, "left_level_set", 0
            cur, g_total, loss_cur, gn_cur, j_cur = theta0, eye.clone(), loss0, gn0, j0
    return TeleportResult(
        theta=cur, g=g_total, status=status if n_acc or status == "left_level_set" else "no_improvement",
        loss_before=loss0, loss_after=loss_cur, rel_loss_change=relative_change(loss_cur, loss0),
        grad_norm_before=gn0, grad_norm_after=gn_cur, factor=gn_cur / max(gn0, 1e-300),
        objective_before=j0, objective_after=j_cur, steps=n_acc, evaluations=evals,
        seconds=time.perf_counter() - start, refused_change=refused, history=hist)
