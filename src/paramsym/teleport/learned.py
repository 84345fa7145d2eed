"""Teleporting with an approximate (learned) action on a regression loss, measured honestly.

:func:`teleport_learned` teleports a :class:`~paramsym.targets.Target`'s block θ with any
:class:`~paramsym.actions.base.GroupAction` — typically a learned one reloaded from a discovery
run (:func:`paramsym.discovery.reload.learned_action`) — in float64, on the regression loss of
the target's probe batch,

    L(θ) = ½ mean((F_X(θ) − Y)²),   Y ~ N(0, 1) from ``torch.Generator().manual_seed(seed)``,

(or the caller's ``targets`` Y); the objective is the teleport's default ``‖∇L‖²`` (or the
caller's). A learned action only approximates a symmetry, so the level-set tolerance is
:data:`LEARNED_TOL` = 1e-6 relative loss change (not the 1e-10 of exact actions): every accepted
ascent step is checked, a step beyond it is refused (status ``left_level_set``, its change
reported as ``refused_change``). The result says whether the final change is within the
tolerance; it does not claim more accuracy than was measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..actions.base import GroupAction
from ..errors import ConfigError
from ..targets import Target
from .core import AscentConfig, teleport

__all__ = ["LEARNED_TOL", "teleport_learned"]

#: level-set tolerance (relative loss change) of a teleport with a learned action
LEARNED_TOL = 1e-6


def teleport_learned(action: GroupAction, target: Target, *, targets: Tensor | None = None, tol: float = LEARNED_TOL,
                     steps: int = 10, step_size: float = 0.1, objective: Callable | None = None, seed: int = 0,
                     keep_theta: bool = False) -> dict[str, Any]:
    """One teleport of ``target``'s block θ₀ along ``action`` on the regression loss (module docstring).

    Args:
        action: the action (converted to float64).
        target: the model's block on its probe batch (converted to float64).
        targets: regression targets Y of the output's shape (default: N(0, 1) from ``seed``).
        tol: level-set tolerance (relative loss change), default 1e-6.
        steps, step_size: the ascent's settings (:class:`~paramsym.teleport.core.AscentConfig`, with ``tol``);
            objective: the orbit objective (:func:`paramsym.teleport.teleport`).
        seed: seed of the default targets.
        keep_theta: also return the teleported block ``theta`` (a tensor; not JSON).

    Returns:
        A JSON-ready dict: ``action``, ``tensors`` (names and shapes of the block), ``p``,
        ``status``, ``loss_before``/``loss_after``, ``rel_loss_change``, ``tol``, ``within_tol``
        (``rel_loss_change ≤ tol``, measured), ``refused_change``, ``steps`` (accepted),
        ``grad_norm_factor``, ``param_change`` (``‖θ' − θ‖ / ‖θ‖``: whether it moved),
        ``output_change``, ``seconds``.

    Raises:
        ConfigError: targets of the wrong size.
    """
    action = action.double()
    target = target.to(torch.float64)
    theta = target.theta0.detach()
    with torch.no_grad():
        out0 = target(theta)
    if targets is None:
        y = torch.randn(out0.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    else:
        y = torch.as_tensor(targets, dtype=torch.float64).reshape(-1)
        if y.numel() != out0.numel():
            raise ConfigError(f"targets must have {out0.numel()} entries (the model's output on the batch, shape "
                              f"{tuple(target.out_shape)}); received {tuple(torch.as_tensor(targets).shape)}.")

    def loss_fn(th: Tensor) -> Tensor:
        return 0.5 * (target(th) - y).pow(2).mean()

    t0 = time.perf_counter()
    res = teleport(action, theta, loss_fn, AscentConfig(steps=steps, step_size=step_size, tol=tol), objective=objective)
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        out1 = target(res.theta)
    out = {
        "action": type(action).__name__,
        "tensors": {e.name: list(e.shape) for e in target.block.entries}, "p": int(target.p),
        "status": res.status, "loss_before": res.loss_before, "loss_after": res.loss_after,
        "rel_loss_change": res.rel_loss_change, "tol": tol, "within_tol": bool(res.rel_loss_change <= tol),
        "refused_change": res.refused_change, "steps": res.steps, "grad_norm_factor": res.factor,
        "param_change": float((res.theta - theta).norm() / theta.norm().clamp_min(1e-300)),
        "output_change": float((out1 - out0).norm() / out0.norm().clamp_min(1e-300)),
        "seconds": seconds,
    }
    if keep_theta:
        out["theta"] = res.theta
    return out
