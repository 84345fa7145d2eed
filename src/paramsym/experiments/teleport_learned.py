"""Teleport with a learned action from a ``paramsym discover`` run directory.

``paramsym teleport --action RUN_DIR`` (and :func:`learned_teleport`) reload the run's trained
action with :func:`paramsym.discovery.load_action` (the run's block — tensor names, shapes,
selected entries — checked against the model's; a difference raises
:class:`~paramsym.discovery.run.BlockMismatchError` naming the tensors and shapes) and teleport the
model's block θ along it by :func:`paramsym.teleport.teleport`, in float64.

The model: the run's own target (a preset run's network and probe inputs X, rebuilt from the
run's ``config.json``), or any ``model`` whose block has the recorded names and shapes, with a
batch X. The loss is a regression loss on the probe batch,

    L(θ) = ½ mean((F_X(θ) − Y)²),   Y ~ N(0, 1) from ``torch.Generator().manual_seed(seed)``,

(or the caller's ``targets`` Y); the objective is the teleport's default ``‖∇L‖²`` (or the
caller's). A learned action only approximates a symmetry, so the level-set tolerance is the
issue's 1e-6 relative loss change (not the 1e-10 of exact actions): every accepted ascent step
is checked, a step beyond it is refused (status ``left_level_set``, its change reported as
``refused_change``). The report says whether the final change is within the tolerance; it does
not claim more accuracy than was measured.
"""

from __future__ import annotations

import os
import time

import torch
from torch import nn

from ..errors import ConfigError

__all__ = ["learned_teleport", "LEARNED_TOL"]

#: level-set tolerance (relative loss change) of a teleport with a learned action
LEARNED_TOL = 1e-6


def _target_of(run, model: nn.Module | None, batch):
    """The discovery ``Target`` to teleport: the run's own, or ``model``'s block on ``batch``."""
    from ..discovery.run import load_config, read_block, resolve_problem
    from ..targets import Target

    if model is None:
        cfg = load_config(run)
        try:
            return resolve_problem(cfg).target
        except ConfigError as exc:
            raise ConfigError(f"the run {str(run.path)!r} was trained on a custom target ({exc}); pass the model and "
                              "its batch (learned_teleport(run_dir, model=..., batch=...)).") from None
    if batch is None:
        raise ConfigError("learned_teleport: a model needs its batch X (the inputs the loss is evaluated on); received none.")
    names = [e["name"] for e in read_block(run)["entries"]]
    missing = [n for n in names if n not in dict(model.named_parameters())]
    if missing:
        from ..discovery.run import BlockMismatchError

        raise BlockMismatchError(f"the run {str(run.path)!r} acts on the tensors {names}; the model lacks {missing} "
                                 f"(its parameters: {list(dict(model.named_parameters()))}). Pass a model of the run's architecture.")
    return Target(model, names, batch, name=type(model).__name__)


def _finished_discovery(run_dir):
    """The finished ``paramsym discover`` run at ``run_dir``, else a named :class:`RunDirError`."""
    import os

    from ..errors import RunDirError
    from ..runs import RunDir

    if not os.path.isfile(os.path.join(run_dir, "config.json")):
        raise RunDirError(f"--action {str(run_dir)!r} is not a run directory (no config.json); pass the directory of a "
                          "finished `paramsym discover` run (its --out).")
    run = RunDir.open_existing(run_dir)
    kind = run.kind()
    if kind != "discovery":
        raise RunDirError(f"--action {str(run_dir)!r} holds a {kind!r} run; expected a `paramsym discover` run (kind "
                          "'discovery'), whose learned action is teleported.")
    if not run.has("metrics.json"):
        raise RunDirError(f"--action {str(run_dir)!r} is an unfinished discovery run (no metrics.json: it was stopped "
                          f"before the end); finish it with `paramsym discover --resume {run_dir}` first.")
    return run


def learned_teleport(run_dir: str | os.PathLike, *, model: nn.Module | None = None, batch=None,
                     targets: torch.Tensor | None = None, tol: float = LEARNED_TOL, steps: int = 10,
                     step_size: float = 0.1, objective=None, seed: int = 0, keep_theta: bool = False) -> dict:
    """One teleport of a model's block with the learned action of a discovery run (module docstring).

    Args:
        run_dir: a finished ``paramsym discover`` run directory.
        model: the model to teleport (``None``: the run's own preset target); its block must have
            the run's tensor names and shapes.
        batch: the inputs X for ``model`` (ignored without one).
        targets: regression targets Y of the output's shape (default: N(0, 1) from ``seed``).
        tol: level-set tolerance (relative loss change), default 1e-6.
        steps, step_size, objective: passed to :func:`paramsym.teleport.teleport`.
        seed: seed of the default targets.
        keep_theta: also return the teleported block ``theta`` (a tensor; not JSON).

    Returns:
        A JSON-ready dict: ``run_dir``, ``tensors`` (names and shapes of the block), ``p``,
        ``status``, ``loss_before``/``loss_after``, ``rel_loss_change``, ``tol``, ``within_tol``
        (``rel_loss_change ≤ tol``, measured), ``refused_change``, ``steps`` (accepted),
        ``grad_norm_factor``, ``param_change`` (``‖θ' − θ‖ / ‖θ‖``: whether it moved), ``seconds``.

    Raises:
        RunDirError / RunFileError: not a finished discovery run; BlockMismatchError: the model's
        block differs from the run's (names, shapes); ConfigError: a custom-target run without a
        model, or bad targets.
    """
    from ..discovery import load_action
    from ..teleport import teleport

    run = _finished_discovery(run_dir)
    target = _target_of(run, model, batch)
    action = load_action(run, target=target).double()
    target = target.to(torch.float64)
    theta = target.theta0.detach()
    with torch.no_grad():
        out0 = target(theta)
    if targets is None:
        y = torch.randn(out0.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    else:
        y = torch.as_tensor(targets, dtype=torch.float64).reshape(-1)
        if y.numel() != out0.numel():
            raise ConfigError(f"learned_teleport: targets must have {out0.numel()} entries (the model's output on the "
                              f"batch, shape {tuple(target.out_shape)}); received {tuple(torch.as_tensor(targets).shape)}.")

    def loss_fn(th: torch.Tensor) -> torch.Tensor:
        return 0.5 * (target(th) - y).pow(2).mean()

    t0 = time.perf_counter()
    res = teleport(action, theta, loss_fn, objective=objective, steps=steps, step_size=step_size, tol=tol)
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        out1 = target(res.theta)
    out = {
        "run_dir": str(run.path), "action": type(action).__name__,
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
