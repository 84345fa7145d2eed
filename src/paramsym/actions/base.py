"""The group-action protocol: ``act(g, θ)`` and its infinitesimal field by JVP.

An action of a matrix group ``G ⊂ GL(s)`` on a parameter block ``θ ∈ R^p`` is a smooth map
``a(g, θ)`` defined for every (ambient) ``s × s`` matrix ``g`` near ``G``. Subclasses implement
:meth:`GroupAction.act` for *one* element and *one* point; batched versions use ``vmap``.
Derived quantities ([Discovery] §3.1–3.2):

* infinitesimal field  ``v_h(θ) = D_g a(g, θ)|_{g=I} [h]``            (:meth:`field`)
* transported field    ``D_g a(g, θ)[h g]``  (right-invariant direction) (:meth:`transported`)

For an exact action, ``transported(g, h, θ) == field(h, act(g, θ))`` (eq. 4); the verdict and
the training losses measure the failure of exactly that.
"""

from __future__ import annotations

import abc
import copy
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor, nn
from torch.func import jvp, vmap

from ..groups.lie import GroupSamples, MatrixLieGroup

M = TypeVar("M", bound=nn.Module)


def float64_copy(action: M) -> M:
    """A float64 copy of ``action`` in eval mode: the copy every measurement evaluates.

    The caller's action (its dtype, its train/eval mode, its parameters) is left untouched, so a
    measurement never changes what it measures; float64 keeps rounding (≈ 1e-16 relative) far
    below the invariance residuals being judged.
    """
    return copy.deepcopy(action).double().eval()


@dataclass
class StepQuantities:
    """Everything one training step needs, for shared samples ``g1, g2, h`` at points θ.

    ``fields``: ``v_i(θ)`` (n, r, p) · ``fields_mu``: ``v_i`` at the regulariser points ·
    ``moved``: ``a(g1, θ)`` · ``direct``: ``a(g2 g1, θ)`` · ``two_step``: ``a(g2, a(g1, θ))`` ·
    ``transported``: ``D_g a(g1, θ)[h g1]`` · ``field_at_moved``: ``v_h(a(g1, θ))``.
    Entries not requested are ``None``. Built by
    :func:`paramsym.discovery.objectives.step_quantities` (generic) or an action's own fused
    ``step_quantities`` method (:class:`~paramsym.actions.learned.LearnedAction`).

    Residual form (a fused method asked for ``residuals=True``, on an action in reduced coordinates
    ``E`` with orthonormal columns): ``comp_residual`` ``= Eᵀ(direct − two_step)`` and
    ``trans_residual`` ``= Eᵀ(transported − field_at_moved)`` replace those four block vectors (left
    ``None``), and ``fields_mu`` is ``Eᵀ v`` (n, r, q). The losses and regularisers only use norms and
    inner products of these, which ``E`` preserves (``‖E y‖ = ‖y‖``), so nothing is expanded to the block
    that is only differenced and squared.
    """

    fields_mu: Tensor
    moved: Tensor
    fields: Tensor | None = None
    direct: Tensor | None = None
    two_step: Tensor | None = None
    transported: Tensor | None = None
    field_at_moved: Tensor | None = None
    comp_residual: Tensor | None = None
    trans_residual: Tensor | None = None


class GroupAction(nn.Module, abc.ABC):
    """Base class of every action on a parameter block.

    Attributes:
        group: the :class:`MatrixLieGroup` acting (generators and sampling).
        p: dimension of the parameter block.
    """

    group: MatrixLieGroup
    p: int

    @abc.abstractmethod
    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        """``a(g, θ)`` for one ``(s, s)`` matrix ``g`` and one ``(p,)`` point ``θ``."""

    # -- derived, single sample -----------------------------------------------------------
    def field(self, h: Tensor, theta: Tensor) -> Tensor:
        """``v_h(θ) = D_g a(g, θ)|_{g=I}[h]`` (JVP in the group argument, θ held fixed)."""
        eye = torch.eye(h.shape[-1], dtype=h.dtype, device=h.device)
        return jvp(lambda g: self.act(g, theta), (eye,), (h,))[1]

    def transported(self, g: Tensor, h: Tensor, theta: Tensor) -> Tensor:
        """``D_g a(g, θ)[h g]``: the derivative along the right-invariant field at ``g``."""
        return jvp(lambda gg: self.act(gg, theta), (g,), (h @ g,))[1]

    # -- batched ---------------------------------------------------------------------------
    def act_many(self, g: Tensor, theta: Tensor) -> Tensor:
        """Batched ``a(g_k, θ_k)``; ``g`` is ``(n, s, s)``, ``theta`` ``(n, p)`` or ``(p,)``."""
        if theta.ndim == 1:
            return vmap(self.act, in_dims=(0, None))(g, theta)
        return vmap(self.act)(g, theta)

    def act_samples(self, samples: GroupSamples, theta: Tensor) -> Tensor:
        """Batched action of sampled elements."""
        return self.act_many(self.group.matrices(samples).to(theta.dtype), theta)

    def field_many(self, h: Tensor, theta: Tensor) -> Tensor:
        """Batched fields; ``h`` is ``(n, s, s)`` or ``(s, s)``, ``theta`` ``(n, p)``."""
        if h.ndim == 2:
            return vmap(self.field, in_dims=(None, 0))(h, theta)
        return vmap(self.field)(h, theta)

    def transported_many(self, g: Tensor, h: Tensor, theta: Tensor) -> Tensor:
        """Batched :meth:`transported`; all arguments batched along dimension 0."""
        return vmap(self.transported)(g, h, theta)

    def fields_all(self, theta: Tensor) -> Tensor:
        """Fields of every generator at every point: ``(n, r, p)``."""
        gens = self.group.generators().to(theta.dtype)
        n, r = theta.shape[0], gens.shape[0]
        # one flat vmap over (point, generator) pairs: nested vmap + jvp of linalg.solve
        # mis-batches in torch 2.13, so avoid nesting.
        h = gens.repeat(n, 1, 1)
        th = theta.repeat_interleave(r, 0)
        return vmap(self.field)(h, th).reshape(n, r, -1)
