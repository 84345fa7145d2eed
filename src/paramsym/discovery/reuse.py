"""Reusing a finished discovery run: its target and its learned action, checked together.

:func:`run_target` is the model a run's action applies to — the run's own preset target
(rebuilt from its ``config.json``), or a caller's ``model`` on a ``batch`` whose block has the
run's tensor names; :func:`learned_action` reloads the trained action on that target
(:func:`paramsym.discovery.run.load_learned_action`, which checks the block's names, shapes
and selected entries and raises :class:`~paramsym.errors.BlockMismatchError` on a difference).
Used by ``paramsym teleport --action RUN_DIR``.
"""

from __future__ import annotations

import os

from torch import nn

from ..actions.base import GroupAction
from ..errors import BlockMismatchError, ConfigError
from ..runs import RunDir
from ..targets import Target

__all__ = ["learned_action", "run_target"]


def run_target(run_dir: str | os.PathLike | RunDir, *, model: nn.Module | None = None, batch=None) -> Target:
    """The target of a discovery run: the run's own (``model=None``), or ``model``'s block on ``batch``.

    Raises:
        RunDirError / RunFileError: not a discovery run directory.
        ConfigError: a run trained on a custom target without a ``model``, or a model without a batch.
        BlockMismatchError: the model lacks tensors of the run's block (both lists are named).
    """
    from .run import load_config, read_block, resolve_problem

    run = run_dir if isinstance(run_dir, RunDir) else RunDir.open_existing(run_dir)
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
    from .run import load_learned_action

    run = run_dir if isinstance(run_dir, RunDir) else RunDir.open_existing(run_dir)
    target = run_target(run, model=model, batch=batch)
    action = load_learned_action(run, target=target).double()
    return action, target
