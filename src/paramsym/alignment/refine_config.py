"""The settings of the ``refined`` alignment stage (:mod:`paramsym.alignment.refine`), standard library only.

Kept apart from the optimisation (which needs torch) so that the ``align`` run kind's
configuration (:class:`paramsym.kinds.align.AlignConfig`, whose ``refine`` field this is) is
importable when the command line is built, without torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["RefineConfig"]


@dataclass(frozen=True)
class RefineConfig:
    """Budget and settings of the ``refined`` stage (:mod:`paramsym.alignment.refine`).

    Attributes:
        steps: Adam steps.
        lr: Adam learning rate (on ``S``, ``X``, ``Y``, which start at 0).
        batch: training examples per step.
        alpha: ``None``: ``α ~ U(0, 1)`` per step; a number in ``(0, 1)``: that ``α``.
        max_condition: ``κ``, the bound on each head map's condition number.
        eval_every: steps between evaluations of the midpoint training loss.
        eval_examples: that loss is on a fixed random subset of this many training examples
            (drawn once by the generator; the whole split when it is smaller).
        dtype: ``"float32"`` or ``"float64"``, the precision of the optimisation.
        progress: show a progress bar.
    """

    steps: int = 200
    lr: float = 1e-2
    batch: int = 256
    alpha: float | None = None
    max_condition: float = 1e2
    eval_every: int = 25
    eval_examples: int = 4096
    dtype: str = "float32"
    progress: bool = False

    def validate(self) -> None:
        """A named :class:`ConfigError` for the first bad field."""
        for name in ("steps", "batch", "eval_every", "eval_examples"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "steps" else 1):
                raise ConfigError(f"refine.{name} must be an integer >= {0 if name == 'steps' else 1}; received {v!r}.")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"refine.lr must be a finite number > 0; received {self.lr!r}.")
        if self.alpha is not None and not (isinstance(self.alpha, (int, float)) and 0 < self.alpha < 1):
            raise ConfigError(f"refine.alpha must be None (α ~ U(0, 1)) or a number in (0, 1); received {self.alpha!r}.")
        if not (isinstance(self.max_condition, (int, float)) and self.max_condition > 1):
            raise ConfigError(f"refine.max_condition must be a number > 1; received {self.max_condition!r}.")
        if self.dtype not in ("float32", "float64"):
            raise ConfigError(f"refine.dtype must be 'float32' or 'float64'; received {self.dtype!r}.")
