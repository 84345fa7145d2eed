"""Group actions on parameter blocks: the protocol, learned actions (eq. 7) and exact ones.

The exact actions live in their concept's module (:mod:`.linear`, :mod:`.translation`,
:mod:`.normalization`, :mod:`.permutation`, :mod:`.redistribution`, :mod:`.attention`,
:mod:`.compensating`); :func:`paramsym.actions.catalogue.catalogue` lists them with where they
apply (the function is not re-exported here: its name is that of its module).
"""

from .attention import QueryKeyAction, ValueOutputAction
from .base import GroupAction, StepQuantities
from .compensating import CompensatingAction
from .exact import DiagonalScalingAction, ExactAction
from .learned import LearnedAction
from .linear import HiddenBasisAction, LinearChainAction, RescalingAction
from .normalization import NormScaleAction
from .permutation import HeadPermutationAction, HiddenPermutationAction, SignFlipAction
from .redistribution import OVRedistributionAction
from .translation import KeyBiasTranslation, ValueBiasShift

__all__ = [
    "CompensatingAction", "DiagonalScalingAction", "ExactAction", "GroupAction", "HeadPermutationAction",
    "HiddenBasisAction", "HiddenPermutationAction", "KeyBiasTranslation", "LearnedAction", "LinearChainAction",
    "NormScaleAction", "OVRedistributionAction", "QueryKeyAction", "RescalingAction", "SignFlipAction",
    "StepQuantities", "ValueBiasShift", "ValueOutputAction",
]
