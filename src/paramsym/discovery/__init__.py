"""Learned symmetry discovery: objectives, problems (reference targets), training, command.

``discover(target, perturb_std)`` learns a symmetry of your own target (``discover("linear2x2")``
runs a preset with its tuned recipe); ``load_action(run_dir, target=...)`` reloads a trained
action; ``resume_run(run_dir)`` continues an interrupted run; ``paramsym discover`` runs the
reference presets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import DiscoverConfig
    from .run import DiscoveryResult, discover, resume_run, start_run
    from .run import load_learned_action as load_action

__all__ = ["discover", "DiscoveryResult", "DiscoverConfig", "load_action", "resume_run", "start_run"]

_ALIASES = {"load_action": "load_learned_action"}


def __getattr__(name: str):
    if name == "DiscoverConfig":
        from .config import DiscoverConfig

        return DiscoverConfig
    if name in __all__:
        from . import run

        return getattr(run, _ALIASES.get(name, name))
    raise AttributeError(name)
