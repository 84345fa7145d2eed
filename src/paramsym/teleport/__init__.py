"""Symmetry teleportation: move parameters along a loss level set (group orbit) to where the
gradient is larger, then keep descending (:mod:`.core`, its settings one :class:`AscentConfig`; the chart
``δ ↦ exp(δ · T)`` in :mod:`.chart`; the orbit objectives in :mod:`.objectives`); inside training loops with the optimizer
state transformed (:mod:`.optim`); products of commuting actions and MLP rescaling
(:mod:`.product`); the anchor's 2-D test functions with exact SO(2) actions (:mod:`.functions`)."""

from .core import AscentConfig, TeleportResult, teleport
from .objectives import LinearizedLookahead, descent_objective, grad_norm_objective
from .optim import Teleporter, covector_map, train_with_teleports, transform_state
from .product import ProductAction, mlp_rescaling

__all__ = ["AscentConfig", "TeleportResult", "teleport", "grad_norm_objective", "descent_objective", "Teleporter",
           "transform_state", "covector_map", "ProductAction", "mlp_rescaling", "LinearizedLookahead",
           "train_with_teleports"]
