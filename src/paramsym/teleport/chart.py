"""The chart of one teleport step: algebra coordinates ``δ ↦ (g, a(g, θ))`` with ``g = exp(δ · T)``.

For the generators ``T_i`` ``(r, s, s)`` of an action's Lie algebra, a point δ ∈ R^r of the
algebra gives the group element ``g = exp(Σ_i δ_i T_i)`` and the moved point ``a(g, θ)``. Two
exact shortcuts, both giving the same ``g`` and point as the general path up to rounding:

* an abelian *diagonal* algebra (rescalings) exponentiates entrywise,
  ``exp(diag x) = diag(exp x)`` with ``x = δ · diag(T)``;
* a *monomial* action on it (:func:`~paramsym.teleport.fast.monomial_exponents`) moves θ as
  ``a(diag(e^x), θ) = θ ⊙ exp(C x)`` without calling the action.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import ActionError
from .fast import monomial_exponents

__all__ = ["OrbitChart", "generators_of"]


def generators_of(action, dtype: torch.dtype) -> Tensor:
    """The Lie-algebra generators ``T_i`` ``(r, s, s)`` of an action's group, in ``dtype``.

    Raises:
        ActionError: the action has no continuous group (a discrete action cannot teleport).
    """
    try:
        gens = action.group.generators()
    except ActionError as exc:
        raise ActionError(f"teleport needs a continuous group; {type(action).__name__} has none ({exc})") from exc
    return gens.detach().to(dtype)


class OrbitChart:
    """``δ ↦ (exp(δ · T), a(exp(δ · T), θ))`` for an action, in the dtype of ``theta0`` (module docstring).

    Attributes:
        action: the group action.
        gens: the generators ``T`` ``(r, s, s)``; ``eye``: the identity ``(s, s)``.
        diagonal: whether every generator is diagonal (entrywise exponential).
        exponents: ``C`` of the monomial fast path (``None``: the action is applied).
    """

    def __init__(self, action, theta0: Tensor):
        self.action = action
        self.gens = generators_of(action, theta0.dtype)
        self.eye = torch.eye(self.gens.shape[-1], dtype=theta0.dtype)
        self._flat = self.gens.reshape(self.gens.shape[0], -1)
        off_diagonal = self.gens - torch.diag_embed(torch.diagonal(self.gens, dim1=-2, dim2=-1))
        self.diagonal = bool((off_diagonal == 0).all())
        self._diag = torch.diagonal(self.gens, dim1=-2, dim2=-1)
        self.exponents = monomial_exponents(action, theta0, self._diag) if self.diagonal else None

    @property
    def rank(self) -> int:
        """``r``: the number of generators (the chart's coordinates)."""
        return int(self.gens.shape[0])

    def move(self, delta: Tensor, theta: Tensor) -> tuple[Tensor, Tensor]:
        """``(g, a(g, θ))`` for ``g = exp(Σ_i δ_i T_i)``; differentiable in δ."""
        if self.diagonal:
            x = delta @ self._diag
            g = torch.diag(torch.exp(x))
            if self.exponents is not None:  # monomial action: a(diag(e^x), θ) = θ ⊙ exp(C x)
                return g, theta * torch.exp(self.exponents @ x)
        else:
            g = torch.linalg.matrix_exp((delta @ self._flat).reshape(self.gens.shape[1:]))
        return g, self.action.act(g, theta)
