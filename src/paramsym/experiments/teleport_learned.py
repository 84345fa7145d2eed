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
from ..runs import RunDir
from ..teleport.learned import LEARNED_TOL, teleport_learned

__all__ = ["learned_teleport", "LEARNED_TOL"]


def learned_teleport(run_dir: str | os.PathLike, *, model: nn.Module | None = None, batch=None,
                     **options: Any) -> dict[str, Any]:
    """One teleport of a model's block with the learned action of a discovery run.

    ``model``/``batch``: the model to teleport and its inputs X (``None``: the run's own preset
    target). ``options`` are those of :func:`~paramsym.teleport.learned.teleport_learned`
    (``targets``, ``tol``, ``steps``, ``step_size``, ``objective``, ``seed``, ``keep_theta``).
    Returns its dict with ``run_dir`` first.
    """
    run = RunDir.open_existing(run_dir)
    action, target = learned_action(run, model=model, batch=batch)
    return {"run_dir": str(run.path), **teleport_learned(action, target, **options)}
