"""Learned symmetry discovery: objectives, problems (reference targets), training, command.

``discover(target, perturb_std)`` learns a symmetry of your own target; ``paramsym discover``
runs the reference presets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .run import DiscoveryResult, discover

__all__ = ["discover", "DiscoveryResult"]


def __getattr__(name: str):
    if name in __all__:
        from . import run

        return getattr(run, name)
    raise AttributeError(name)
