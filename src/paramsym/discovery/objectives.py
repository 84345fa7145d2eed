"""Discovery objectives ([Discovery] §5.1–5.2). Pure functions of an action, a target and sampled points.

With fixed scales ``s_F`` (output), ``s_θ`` (parameters) and ``β`` (field magnitude in units
of ``s_θ``), for points θ, sampled elements g and generators ``h_i``:

========================  =====================================================================
``invariance``            ``mean_i ‖D_θF(θ)[v_i(θ)]‖² / s_F²``
``transport``             ``‖D_g a(g,θ)[h g] − v_h(a(g,θ))‖² / (s_θ β)²``, h a random generator
``composition``           ``‖a(g2 g1, θ) − a(g2, a(g1, θ))‖² / (s_θ β)²`` (both sides in full)
``preservation``          ``‖F(a(g,θ)) − F(θ)‖² / s_F²``
``scale_penalty``         ``mean_i ((E‖v_i/s_θ‖² − β²) / β²)²`` (squared deviation, in units β²)
``diversity_penalty``     ``Σ_{i≠j} (E⟨v_i,v_j⟩)² / (E‖v_i‖² E‖v_j‖²)`` (uncentered, squared cosine)
``sparsity_penalty``      ``mean |h_i|`` (L1 of the normalised generators)
========================  =====================================================================

Every loss is an average over the batch; each is exactly zero for an exact invariant action
(tested against GL(2) on ``UV`` and positive rescaling) and nonzero for the counterexamples
``a(t, θ) = θ + t + t²`` (composition) and a non-invariant translation (invariance).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import jvp, vmap

from ..actions.base import GroupAction, StepQuantities

TargetFn = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class Scales:
    """Fixed normalisation: output scale ``s_F``, parameter scale ``s_θ``, field magnitude ``β``."""

    s_F: float
    s_theta: float
    beta: float

    @property
    def motion(self) -> float:
        """``s_θ β``, the unit of transport and composition residuals."""
        return self.s_theta * self.beta


def output_jvp(target: TargetFn, theta: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """``(F(θ), D_θF(θ)[v])`` for batches: ``theta`` ``(n, p)``, ``v`` ``(n, p)`` → two ``(n, q)``."""
    return vmap(lambda th, vv: jvp(target, (th,), (vv,)))(theta, v)


def output_directional(target: TargetFn, theta: Tensor, v: Tensor) -> Tensor:
    """``D_θF(θ)[v]`` for batches: ``theta`` ``(n, p)``, ``v`` ``(n, p)`` → ``(n, q)``."""
    return output_jvp(target, theta, v)[1]


# -- loss formulas (one definition each), from precomputed quantities ---------------------------

def invariance_loss(target: TargetFn, theta: Tensor, fields: Tensor, scales: Scales) -> Tensor:
    """``mean_{θ,i} ‖D_θF(θ)[v_i(θ)]‖² / s_F²`` for fields ``(n, r, p)`` at ``theta`` ``(n, p)``."""
    return invariance_and_output(target, theta, fields, scales)[0]


def invariance_and_output(target: TargetFn, theta: Tensor, fields: Tensor, scales: Scales) -> tuple[Tensor, Tensor]:
    """:func:`invariance_loss` and ``F(θ)`` ``(n, q)``: the forward-mode pass computes ``F(θ)`` anyway
    (the primal of the JVP), so the preservation term need not evaluate the target at θ again."""
    n, r, p = fields.shape
    out, dF = output_jvp(target, theta.repeat_interleave(r, 0), fields.reshape(n * r, p))
    return dF.pow(2).sum(-1).mean() / scales.s_F**2, out[::r]


def motion_loss(residual: Tensor, scales: Scales) -> Tensor:
    """``mean ‖residual‖² / (s_θ β)²`` over the batch (rows of ``residual``): transport and composition."""
    return residual.pow(2).sum(-1).mean() / scales.motion**2


def transport_loss(transported: Tensor, field_at_moved: Tensor, scales: Scales) -> Tensor:
    """``mean ‖D_g a(g,θ)[h g] − v_h(a(g,θ))‖² / (s_θ β)²``."""
    return motion_loss(transported - field_at_moved, scales)


def composition_loss(direct: Tensor, two_step: Tensor, scales: Scales) -> Tensor:
    """``mean ‖a(g2 g1, θ) − a(g2, a(g1, θ))‖² / (s_θ β)²``."""
    return motion_loss(direct - two_step, scales)


def preservation_loss(target: TargetFn, theta: Tensor, moved: Tensor, scales: Scales, base: Tensor | None = None
                      ) -> Tensor:
    """``mean ‖F(a(g,θ)) − F(θ)‖² / s_F²``; ``base``: ``F(θ)`` if already computed."""
    base = vmap(target)(theta) if base is None else base
    return (vmap(target)(moved) - base).pow(2).sum(-1).mean() / scales.s_F**2


# -- the same losses from an action (generic GroupAction methods) --------------------------------

def invariance(action: GroupAction, target: TargetFn, theta: Tensor, scales: Scales, fields: Tensor | None = None) -> Tensor:
    """``L_inv = mean_{θ,i} ‖D_θF(θ)[v_i(θ)]‖² / s_F²``; ``fields`` (n, r, p) may be passed in."""
    return invariance_loss(target, theta, action.fields_all(theta) if fields is None else fields, scales)


def transport(action: GroupAction, theta: Tensor, g: Tensor, h: Tensor, scales: Scales) -> Tensor:
    """``L_trans = mean ‖D_g a(g,θ)[h g] − v_h(a(g,θ))‖² / (s_θ β)²`` (one h per sample)."""
    return transport_loss(action.transported_many(g, h, theta), action.field_many(h, action.act_many(g, theta)), scales)


def composition(action: GroupAction, theta: Tensor, g1: Tensor, g2: Tensor, scales: Scales) -> Tensor:
    """``L_comp = mean ‖a(g2 g1, θ) − a(g2, a(g1, θ))‖² / (s_θ β)²``."""
    return composition_loss(action.act_many(g2 @ g1, theta), action.act_many(g2, action.act_many(g1, theta)), scales)


def preservation(action: GroupAction, target: TargetFn, theta: Tensor, g: Tensor, scales: Scales) -> Tensor:
    """``L_pres = mean ‖F(a(g,θ)) − F(θ)‖² / s_F²``."""
    return preservation_loss(target, theta, action.act_many(g, theta), scales)


def step_quantities(
    action: GroupAction, theta: Tensor, theta_mu: Tensor, g1: Tensor, g2: Tensor, h: Tensor,
    *, infinitesimal: bool, finite: bool, shared: int = 0, residuals: bool = False,
) -> StepQuantities:
    """:class:`StepQuantities` by the generic :class:`GroupAction` methods.

    ``shared`` (the first rows of ``theta_mu`` that are rows of ``theta``) lets a fused version
    reuse fields, and ``residuals`` lets it return the residual form; here every field is evaluated
    and every quantity is a block vector, so neither changes anything.

    Actions may provide a fused ``step_quantities`` method with the same signature and values
    (the :class:`~paramsym.actions.learned.LearnedAction` does; tested against this one).
    """
    moved = action.act_many(g1, theta)
    q = StepQuantities(fields_mu=action.fields_all(theta_mu), moved=moved)
    if infinitesimal:
        q.fields = action.fields_all(theta)
        q.transported = action.transported_many(g1, h, theta)
        q.field_at_moved = action.field_many(h, moved)
    if finite:
        q.direct = action.act_many(g2 @ g1, theta)
        q.two_step = action.act_many(g2, moved)
    return q


def scale_penalty(fields: Tensor, scales: Scales) -> Tensor:
    """``mean_i ((E_θ‖v_i/s_θ‖² − β²)/β²)²`` for fields ``(n, r, p)`` (uncentered moments)."""
    m = (fields / scales.s_theta).pow(2).sum(-1).mean(0)
    return ((m - scales.beta**2) / scales.beta**2).pow(2).mean()


def diversity_penalty(fields: Tensor) -> Tensor:
    """``Σ_{i≠j} (E⟨v_i,v_j⟩)² / (E‖v_i‖² E‖v_j‖²)``; zero for one generator."""
    n, r, _ = fields.shape
    if r < 2:
        return fields.new_zeros(())
    gram = torch.einsum("nip,njp->ij", fields, fields) / n
    d = gram.diagonal().clamp_min(torch.finfo(fields.dtype).tiny)
    cos2 = gram.pow(2) / (d[:, None] * d[None, :])
    off = ~torch.eye(r, dtype=torch.bool, device=fields.device)
    return cos2[off].sum()  # summed over i ≠ j (not all minus the diagonal ≈ r: that floors at r·ε)


def sparsity_penalty(generators: Tensor) -> Tensor:
    """Mean absolute entry of the (normalised) generators."""
    return generators.abs().mean()
