"""Reloading a finished discovery run: its trained action, or the action with its problem, scales and configuration."""

from __future__ import annotations

import os
from typing import NamedTuple

import torch

from ..actions.learned import LearnedAction
from ..errors import BlockMismatchError, RunDirError, RunFileError
from ..groups.lie import MatrixLieGroup
from ..runs import RunDir, load_tensors
from ..targets import Target
from .config import DiscoverConfig
from .files import check_block, load_config, read_block
from .objectives import Scales
from .problems import DiscoveryProblem, resolve_problem, scale_generator

__all__ = ["TrainedRun", "load_learned_action", "load_trained"]


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
                               width=cfg.action.width, depth=cfg.action.depth)
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
    scales = problem.scales(cfg.objective.beta, scale_generator(cfg), memory_bytes=cfg.train.memory_gb * 2**30 / 4)
    return TrainedRun(load_learned_action(run, problem.target), problem, scales, cfg)
