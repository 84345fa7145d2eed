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
abelian group it equals ``exp(Σ_k η_k d̂_k · T)``. The settings (``steps``, ``η``, ``tol``, ``c``,
…) are one :class:`AscentConfig`; the objectives are in :mod:`paramsym.teleport.objectives`.

Level-set check: after every accepted step the relative loss change to the *starting* loss,
``|L(θ_{k+1}) − L(θ_0)| / |L(θ_0)|``, is measured; above ``tol`` the step is refused (the
previous point is kept and the status says so) or, with ``strict=True``,
:class:`~paramsym.errors.LevelSetError` is raised. An exact action keeps it at rounding level
(≤ 1e-10 in float64); a data-dependent action (compensating) only on its batch.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor

from ..errors import ActionError, ConfigError, LevelSetError, ShapeError
from .chart import OrbitChart, generators_of
from .objectives import Objective, grad_norm_objective

__all__ = ["AscentConfig", "TeleportResult", "teleport", "generators_of", "relative_change"]


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


def _loss_and_grad(loss_fn: Callable[[Tensor], Tensor], theta: Tensor) -> tuple[float, float]:
    th = theta.detach().requires_grad_(True)
    loss = loss_fn(th)
    (grad,) = torch.autograd.grad(loss, th)
    return float(loss.detach()), float(grad.norm())


def _real(v, integral: bool = False) -> bool:
    kinds = numbers.Integral if integral else numbers.Real
    return isinstance(v, kinds) and not isinstance(v, bool) and math.isfinite(v)


@dataclass
class AscentConfig:
    """The settings of one teleport's ascent along the orbit (module docstring).

    Attributes:
        steps: maximum accepted ascent steps (≥ 0).
        step_size: initial algebra step length ``η`` (``‖δ‖``) of the line search (> 0).
        tol: largest accepted relative loss change to the starting loss (≥ 0).
        strict: raise :class:`LevelSetError` instead of refusing a step that leaves the level set.
        max_factor: stop once ``‖∇L(a(g, θ))‖ / ‖∇L(θ)‖`` would exceed this (> 1; ``None``: no cap).
        radius: trust region: the accepted step lengths ``Σ_k η_k`` (the path length in the
            algebra) stay ≤ ``radius`` (> 0; ``None``: unbounded). For rescalings ``radius = r``
            keeps every unit's scale within ``[e^{−r}, e^{r}]``.
        armijo: sufficient-increase constant ``c`` (≥ 0).
        max_backtracks: halvings of ``η`` before giving up on a step (≥ 0).
        explore: the first direction is ``d + explore ‖d‖ ξ`` with ``ξ`` a random unit vector
            from the teleport's ``generator`` (≥ 0; ``0``: pure gradient ascent).
    """

    steps: int = 10
    step_size: float = 0.1
    tol: float = 1e-6
    strict: bool = False
    max_factor: float | None = None
    radius: float | None = None
    armijo: float = 1e-4
    max_backtracks: int = 30
    explore: float = 0.0

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the setting that is not a number in its range."""
        steps, step_size, tol, max_factor, radius = self.steps, self.step_size, self.tol, self.max_factor, self.radius
        if not (_real(steps, True) and _real(step_size) and _real(tol) and (max_factor is None or _real(max_factor))
                and (radius is None or _real(radius))):
            raise ConfigError(f"teleport: steps must be an integer and step_size, tol, max_factor, radius finite numbers; "
                              f"received steps={steps!r}, step_size={step_size!r}, tol={tol!r}, "
                              f"max_factor={max_factor!r}, radius={radius!r}.")
        if steps < 0 or not step_size > 0 or not tol >= 0 or (max_factor is not None and not max_factor > 1) \
                or (radius is not None and not radius > 0):
            raise ConfigError(f"teleport: need steps ≥ 0, step_size > 0, tol ≥ 0, max_factor > 1 and radius > 0 (or None); "
                              f"received steps={steps}, step_size={step_size}, tol={tol}, max_factor={max_factor}, "
                              f"radius={radius}.")
        if not (_real(self.armijo) and self.armijo >= 0 and _real(self.max_backtracks, True) and self.max_backtracks >= 0
                and _real(self.explore) and self.explore >= 0 and isinstance(self.strict, bool)):
            raise ConfigError(f"teleport: need armijo ≥ 0, an integer max_backtracks ≥ 0, explore ≥ 0 (finite numbers) "
                              f"and strict True or False; received armijo={self.armijo!r}, "
                              f"max_backtracks={self.max_backtracks!r}, explore={self.explore!r}, strict={self.strict!r}.")


class _Objective:
    """``J`` as the ascent calls it: ``J(θ')`` or, for ``needs_element``, ``J(θ', g)``."""

    def __init__(self, objective: Objective):
        self.fn = objective
        self.with_g = bool(getattr(objective, "needs_element", False))

    def __call__(self, theta: Tensor, g: Tensor) -> Tensor:
        return self.fn(theta, g) if self.with_g else self.fn(theta)

    def value(self, theta: Tensor, g: Tensor) -> float:
        """``J`` as a float at a detached point (grad enabled: ``J`` may differentiate ``L``)."""
        with torch.enable_grad():
            return float(self(theta.detach().requires_grad_(True), g.detach()).detach())


@dataclass
class _Step:
    """A candidate accepted by the line search: element ``g`` (this step), point, ``J``, ``L``, ``‖∇L‖``."""

    g: Tensor
    theta: Tensor
    objective: float
    loss: float
    grad_norm: float


@dataclass
class _Ascent:
    """The state of the ascent: the current point, the accumulated element and the bookkeeping."""

    theta: Tensor
    g: Tensor
    objective: float
    grad_norm: float
    loss: float
    eta: float
    history: list[float]
    travelled: float = 0.0
    status: str = "no_improvement"
    accepted: int = 0
    evaluations: int = 1
    refused: float | None = None

    def accept(self, step: _Step, eta: float) -> None:
        """Move to ``step`` (latest element on the left) and double ``η``."""
        self.theta, self.g = step.theta.detach(), step.g @ self.g
        self.objective, self.grad_norm, self.loss = step.objective, step.grad_norm, step.loss
        self.travelled += eta
        self.accepted += 1
        self.history.append(self.objective)
        self.status = "ok" if self.status != "capped" else self.status
        self.eta *= 2


def _check_point(theta: Tensor) -> None:
    """Raise :class:`ShapeError` unless θ is a floating-point tensor with values."""
    if not isinstance(theta, Tensor) or not theta.is_floating_point() or theta.is_meta:
        what = type(theta).__name__ if not isinstance(theta, Tensor) else f"a {theta.dtype} tensor on {theta.device}"
        raise ShapeError(f"teleport: θ must be a floating-point tensor with values (not on the meta device); received "
                         f"{what}. Pass the flat float block vector, e.g. target.theta0.")


def _check_length(action, theta: Tensor) -> None:
    """Raise :class:`ShapeError` unless θ is the flat block vector of the action's length ``p``."""
    if theta.ndim != 1 or theta.numel() != int(getattr(action, "p", theta.numel())):
        raise ShapeError(f"teleport: θ has shape {tuple(theta.shape)} but {type(action).__name__} acts on p = "
                         f"{getattr(action, 'p', '?')} parameters; pass the flat block vector the action was built on.")


def _direction(chart: OrbitChart, obj: _Objective, st: _Ascent, explore: float,
               generator: torch.Generator | None) -> tuple[Tensor, float] | None:
    """The unit ascent direction ``d̂`` in a fresh chart at the current point and the slope ``⟨d, d̂⟩``
    (``d = ∇_δ J(a(exp(δ · T), θ_k))|_{δ=0}``, perturbed by ``explore``); ``None`` when ``d`` is 0 or not finite."""
    delta = torch.zeros(chart.rank, dtype=st.theta.dtype, requires_grad=True)
    g_d, th = chart.move(delta, st.theta)
    (d,) = torch.autograd.grad(obj(th, g_d @ st.g), delta)
    d = d.detach()
    dn = float(d.norm())
    if not math.isfinite(dn) or dn == 0.0:
        return None
    d0 = d
    if explore > 0:
        xi = torch.randn(d.shape, generator=generator, dtype=d.dtype)
        d = d + explore * dn * xi / xi.norm()
        if float(d.norm()) == 0.0:
            d = xi
    direction = d / d.norm()
    return direction, float(d0 @ direction)


def _line_search(chart: OrbitChart, obj: _Objective, loss_fn: Callable[[Tensor], Tensor], st: _Ascent,
                 direction: Tensor, slope: float, cfg: AscentConfig, gn0: float) -> _Step | None:
    """Backtracking (Armijo) along ``direction`` from ``st.eta``, halving it on each refusal; the
    ``max_factor`` cap marks the ascent ``"capped"``. ``None``: no candidate accepted."""
    for _ in range(cfg.max_backtracks):
        with torch.no_grad():
            g, cand = chart.move(st.eta * direction, st.theta)
        j_new = obj.value(cand, g @ st.g) if bool(torch.isfinite(cand).all()) else float("nan")
        st.evaluations += 1
        if math.isfinite(j_new) and j_new >= st.objective + cfg.armijo * st.eta * max(slope, 0.0):
            if cfg.max_factor is None:  # the gradient norm is needed only at the end
                with torch.no_grad():
                    loss_new, gn_new = float(loss_fn(cand)), float("nan")
            else:
                loss_new, gn_new = _loss_and_grad(loss_fn, cand)
            if cfg.max_factor is not None and gn_new > cfg.max_factor * gn0:
                st.eta /= 2
                st.status = "capped"
                continue
            return _Step(g, cand, j_new, loss_new, gn_new)
        st.eta /= 2
    return None


def _level_set_refusal(action, change: float, loss0: float, loss_new: float, cfg: AscentConfig, what: str) -> None:
    """Raise :class:`LevelSetError` for a change above ``tol`` when ``strict`` (else the caller refuses)."""
    if cfg.strict:
        raise LevelSetError(
            f"{what} with {type(action).__name__} changed the loss from {loss0:.6g} to {loss_new:.6g} (relative "
            f"{change:.3g} > tol {cfg.tol:.3g}): the action does not leave this loss invariant (a data-dependent "
            "action on another batch, a wrong action for the model, or too large a step for an approximate action). "
            "Use an exact action, a smaller step_size, or raise tol.")


def _ascend(chart: OrbitChart, obj: _Objective, loss_fn: Callable[[Tensor], Tensor], st: _Ascent, cfg: AscentConfig,
            loss0: float, gn0: float, generator: torch.Generator | None) -> None:
    """Up to ``cfg.steps`` accepted ascent steps, each in a fresh chart at the current point; a step
    leaving the level set (relative loss change to ``loss0`` above ``tol``) is refused and stops."""
    for k in range(cfg.steps):
        found = _direction(chart, obj, st, cfg.explore if k == 0 else 0.0, generator)
        if found is None:
            break
        direction, slope = found
        if cfg.radius is not None:
            if cfg.radius - st.travelled <= 1e-12 * cfg.radius:
                break
            st.eta = min(st.eta, cfg.radius - st.travelled)
        step = _line_search(chart, obj, loss_fn, st, direction, slope, cfg, gn0)
        if step is None:
            break
        change = relative_change(step.loss, loss0)
        if not change <= cfg.tol:
            _level_set_refusal(chart.action, change, loss0, step.loss, cfg, f"teleport step {k + 1}")
            st.refused, st.status = change, "left_level_set"
            break
        st.accept(step, st.eta)
        if st.status == "capped":
            break


def _finish(chart: OrbitChart, loss_fn: Callable[[Tensor], Tensor], st: _Ascent, cfg: AscentConfig,
            theta0: Tensor, loss0: float, gn0: float, j0: float) -> None:
    """The returned point: re-applied by the action itself after the monomial fast path, its loss
    and gradient norm measured, and the whole teleport refused (back to θ) if it left the level set."""
    if st.accepted and chart.exponents is not None:  # the returned point comes from the action itself
        with torch.no_grad():
            st.theta = chart.action.act(st.g, theta0).detach()
        st.grad_norm = float("nan")
    if st.accepted and not math.isfinite(st.grad_norm):
        st.loss, st.grad_norm = _loss_and_grad(loss_fn, st.theta)
        change = relative_change(st.loss, loss0)
        if not change <= cfg.tol:
            _level_set_refusal(chart.action, change, loss0, st.loss, cfg, "teleport (the final point)")
            # refuse the whole teleport: return the starting point
            st.refused, st.status, st.accepted = change, "left_level_set", 0
            st.theta, st.g, st.loss, st.grad_norm, st.objective = theta0, chart.eye.clone(), loss0, gn0, j0


def teleport(
    action,
    theta: Tensor,
    loss_fn: Callable[[Tensor], Tensor],
    config: AscentConfig | None = None,
    *,
    objective: Objective | None = None,
    generator: torch.Generator | None = None,
) -> TeleportResult:
    """Teleport θ along the orbit of ``action`` to increase ``objective`` (module docstring).

    Args:
        action: a :class:`~paramsym.actions.base.GroupAction` on θ (``act(g, θ)``, continuous
            ``group``): a catalogue action, a compensating action, a learned action, or one of
            :mod:`paramsym.teleport.functions`.
        theta: the point ``(p,)``; ``p`` must equal ``action.p``.
        loss_fn: ``θ ↦ L(θ)`` (a scalar tensor, differentiable in θ), on a fixed batch.
        config: the ascent's settings (default ``AscentConfig()``).
        objective: ``θ ↦ J(θ)`` to maximise; default :func:`grad_norm_objective` of ``loss_fn``.
            An objective with ``needs_element = True`` is called as ``J(θ', g)`` with the element
            ``g`` (relative to the starting θ) that produced ``θ'`` (e.g.
            :class:`~paramsym.teleport.objectives.LinearizedLookahead`).
        generator: source of ``ξ`` for ``config.explore`` (unused when it is 0).

    Returns:
        :class:`TeleportResult`.

    Raises:
        ActionError: ``action`` is not a :class:`~paramsym.actions.base.GroupAction`.
        ShapeError: θ does not have the action's length.
        ConfigError: a setting of ``config`` out of its range (named), a non-finite starting loss, or
            a ``loss_fn`` that is not callable.
        LevelSetError: ``config.strict`` and an accepted step left the level set.
    """
    start = time.perf_counter()
    from ..actions.base import GroupAction

    if not isinstance(action, GroupAction):
        raise ActionError(f"teleport: action must be a paramsym GroupAction (a catalogue, compensating, learned or "
                          f"teleport.functions action); received {type(action).__name__}.")
    if not callable(loss_fn):
        raise ConfigError(f"teleport: loss_fn must be a callable θ -> scalar loss; received {type(loss_fn).__name__}.")
    cfg = config if config is not None else AscentConfig()
    if not isinstance(cfg, AscentConfig):
        raise ConfigError(f"teleport: config must be a paramsym.teleport.AscentConfig; received {type(cfg).__name__}.")
    _check_point(theta)
    cfg.validate()
    _check_length(action, theta)
    theta0 = theta.detach()
    chart = OrbitChart(action, theta0)
    obj = _Objective(objective if objective is not None else grad_norm_objective(loss_fn))
    loss0, gn0 = _loss_and_grad(loss_fn, theta0)
    if not math.isfinite(loss0):
        raise ConfigError(f"teleport: the loss at θ is {loss0}; teleport needs a finite starting loss.")
    j0 = obj.value(theta0, chart.eye)
    st = _Ascent(theta0, chart.eye.clone(), j0, gn0, loss0, eta=float(cfg.step_size), history=[j0])
    _ascend(chart, obj, loss_fn, st, cfg, loss0, gn0, generator)
    _finish(chart, loss_fn, st, cfg, theta0, loss0, gn0, j0)
    return TeleportResult(
        theta=st.theta, g=st.g, status=st.status if st.accepted or st.status == "left_level_set" else "no_improvement",
        loss_before=loss0, loss_after=st.loss, rel_loss_change=relative_change(st.loss, loss0),
        grad_norm_before=gn0, grad_norm_after=st.grad_norm, factor=st.grad_norm / max(gn0, 1e-300),
        objective_before=j0, objective_after=st.objective, steps=st.accepted, evaluations=st.evaluations,
        seconds=time.perf_counter() - start, refused_change=st.refused, history=st.history)
