"""``paramsym teleport --action RUN_DIR``: a discovery run's learned action, teleported.

Composition only (the areas are independent): the run's target and action come from
:func:`paramsym.discovery.reload.learned_action` (block checked against the model's; a difference
raises :class:`~paramsym.errors.BlockMismatchError`), the teleport and its honest measurement
from :func:`paramsym.teleport.learned.teleport_learned` (regression loss on the probe batch,
level-set tolerance :data:`~paramsym.teleport.learned.LEARNED_TOL` = 1e-6).
"""

from __future__ import annotations

import os
from typing import Any

from torch import nn

from ..discovery.reload import learned_action
from ..runs.rundir import RunDir
from ..teleport.learned import LEARNED_TOL, teleport_learned

__all__ = ["learned_teleport", "LEARNED_TOL"]


def _finished_discovery(run_dir):
    """The finished ``paramsym discover`` run at ``run_dir``, else a named :class:`RunDirError`."""
    from ..errors import RunDirError

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
                     **options: Any) -> dict[str, Any]:
    """One teleport of a model's block with the learned action of a discovery run.

    ``model``/``batch``: the model to teleport and its inputs X (``None``: the run's own preset
    target). ``options`` are those of :func:`~paramsym.teleport.learned.teleport_learned`
    (``targets``, ``tol``, ``steps``, ``step_size``, ``objective``, ``seed``, ``keep_theta``).
    Returns its dict with ``run_dir`` first.
    """
    run = _finished_discovery(run_dir)
    action, target = learned_action(run, model=model, batch=batch)
    return {"run_dir": str(run.path), **teleport_learned(action, target, **options)}
