"""Reloading a finished discovery run: its trained action, or the action with its problem, scales and configuration."""

from __future__ import annotations

import os
from typing import NamedTuple

import torch
from torch import nn

from ..actions.base import GroupAction
from ..actions.learned import LearnedAction
from ..errors import BlockMismatchError, ConfigError, RunDirError, RunFileError
from ..groups.lie import MatrixLieGroup
from ..runs.rundir import RunDir, load_tensors
from ..targets import Target
from .config import DiscoverConfig
from .files import check_block, load_config, read_block
from .objectives import Scales
from .problems import DiscoveryProblem, problem_scales, resolve_problem

__all__ = ["TrainedRun", "learned_action", "load_learned_action", "load_trained", "run_target"]


def _as_run(run_dir: RunDir | str | os.PathLike) -> RunDir:
    return run_dir if isinstance(run_dir, RunDir) else RunDir.open_existing(run_dir)


def load_learned_action(run_dir: RunDir | str | os.PathLike, target: Target | None = None) -> LearnedAction:
    """The trained action of a finished run, in eval mode (public as ``paramsym.discovery.load_action``).

    Args:
        run_dir: the run directory.
        target: the target the run was trained on; its block (names, shapes, selected entries) is
            checked against the run's ``block.json``. Optional (recommended for custom targets).

    Raises:
        RunDirError: not a finished discovery run; RunFileError: a corrupt file;
        BlockMismatchError: ``target``'s block differs (the message lists the differences).
    """
    run = _as_run(run_dir)
    cfg = load_config(run)
    if target is not None:
        if run.has("block.json"):
            check_block(read_block(run), target, where=str(run.path))
    if not run.has("action.safetensors"):
        raise RunDirError(f"{str(run.path)!r} has no action.safetensors: the run did not finish; "
                          f"continue it with `paramsym discover --resume {run.path}`.")
    tensors = load_tensors(run.file("action.safetensors"))
    center = tensors.get("theta_center")
    if center is None:
        raise RunFileError(f"{str(run.file('action.safetensors'))!r} holds no learned action (no 'theta_center').")
    p = int(center.numel())
    if target is not None and target.p != p:
        raise BlockMismatchError(f"the target has p = {target.p} block entries; the run's action acts on p = {p}.")
    with torch.random.fork_rng(devices=[]):  # the placeholder initialisation is overwritten below
        group = MatrixLieGroup(cfg.group.size, cfg.group.generators)
        action = LearnedAction(group, p, theta_center=torch.zeros(p), theta_scale=1.0, out_scale=1.0,
                               width=cfg.action.width, depth=cfg.action.depth, kind=cfg.action.kind,
                               flow_steps=cfg.action.flow_steps, basis=tensors.get("basis"))
    try:
        action.load_state_dict(tensors)
    except RuntimeError as exc:
        msg = " ".join(str(exc).split())[:300]
        raise RunFileError(f"{str(run.file('action.safetensors'))!r} does not fit the run's config.json ({msg}).") from None
    return action.eval()


class TrainedRun(NamedTuple):
    """A finished preset run, rebuilt: its action, problem, scales and configuration."""

    action: LearnedAction
    problem: DiscoveryProblem
    scales: Scales
    cfg: DiscoverConfig


def load_trained(run_dir: RunDir | str | os.PathLike, problem: DiscoveryProblem | None = None) -> TrainedRun:
    """Rebuild a finished run for further analysis (the problem: the preset's, or ``problem``)."""
    run = _as_run(run_dir)
    cfg = load_config(run)
    problem = problem if problem is not None else resolve_problem(cfg)
    scales = problem_scales(problem, cfg)
    return TrainedRun(load_learned_action(run, problem.target), problem, scales, cfg)


# -- a finished run's target and action, checked together (paramsym teleport --action) ----------
def run_target(run_dir: str | os.PathLike | RunDir, *, model: nn.Module | None = None, batch=None) -> Target:
    """The target of a discovery run: the run's own (``model=None``), or ``model``'s block on ``batch``.

    Raises:
        RunDirError / RunFileError: not a discovery run directory.
        ConfigError: a run trained on a custom target without a ``model``, or a model without a batch.
        BlockMismatchError: the model lacks tensors of the run's block (both lists are named).
    """
    run = _as_run(run_dir)
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
        raise BlockMismatchError(f"the run {str(run.path)!r} acts on the tensors {names}; the model lacks {missing} "
                                 f"(its parameters: {list(dict(model.named_parameters()))}). Pass a model of the run's architecture.")
    return Target(model, names, batch, name=type(model).__name__)


def learned_action(run_dir: str | os.PathLike | RunDir, *, model: nn.Module | None = None,
                   batch=None) -> tuple[GroupAction, Target]:
    """``(action, target)``: a finished run's learned action (float64) on :func:`run_target`'s target
    (in its own dtype; convert with ``target.to(torch.float64)`` where needed).

    Raises:
        the errors of :func:`run_target` and of :func:`~paramsym.discovery.run.load_learned_action`.
    """
    run = _as_run(run_dir)
    target = run_target(run, model=model, batch=batch)
    action = load_learned_action(run, target=target).double()
    return action, target
