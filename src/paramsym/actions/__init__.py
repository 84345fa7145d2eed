"""Group actions on parameter blocks: the protocol, learned actions (eq. 7) and exact ones."""

from .base import GroupAction
from .learned import LearnedAction

__all__ = ["GroupAction", "LearnedAction"]
