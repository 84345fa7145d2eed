"""Analysis of learned actions against known answers.

:func:`span_alignment` measures how well learned fields lie in the span of a known symmetry:
at each point θ, with ``B(θ)`` a ``(p, k)`` basis of the analytic symmetry directions and
``P_B`` the orthogonal projector onto its column span,

    cos(θ) = ‖P_B v(θ)‖ / ‖v(θ)‖ ∈ [0, 1]

(1 when the field lies in the span; the cosine of the angle between v and its projection).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..actions.base import GroupAction, float64_copy


def span_alignment(
    action: GroupAction,
    reference_span: Callable[[Tensor], Tensor],
    theta: Tensor,
) -> dict[str, float | list[float]]:
    """Cosines between learned fields and their projections on the known span, at ``theta``.

    Args:
        action: the learned action (evaluated on a float64 copy).
        reference_span: ``θ ↦ (p, k)`` basis of the known symmetry directions at θ.
        theta: ``(n, p)`` held-out points.

    Returns:
        ``{"median", "min", "p05", "per_generator_median"}`` over points and generators.
    """
    act = float64_copy(action)
    theta = theta.double()
    with torch.no_grad():
        V = act.fields_all(theta)  # (n, r, p)
    cos = torch.empty(V.shape[0], V.shape[1], dtype=torch.float64)
    for i in range(theta.shape[0]):
        Q, _ = torch.linalg.qr(reference_span(theta[i]).double())
        proj = (V[i] @ Q) @ Q.T  # (r, p)
        cos[i] = proj.norm(dim=-1) / V[i].norm(dim=-1).clamp_min(1e-300)
    flat = cos.reshape(-1)
    return {
        "median": float(flat.median()),
        "min": float(flat.min()),
        "p05": float(torch.quantile(flat, 0.05)),
        "per_generator_median": cos.median(0).values.tolist(),
        "points": int(theta.shape[0]),
    }
