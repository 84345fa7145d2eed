"""Closed-form compensating actions (Corollary 4.6) — selection of compensating units.

For a two-layer block ``F_X(U, V) = U σ(V X)`` with batch ``X ∈ R^{n×N}``, a set B of k ≥ N
units whose feature matrix ``S_B = σ(V_B X) ∈ R^{k×N}`` has rank N can absorb any change of the
other units' output. :func:`select_compensators` picks B by column-pivoted QR of ``Sᵀ`` (the
greedy choice of the best-conditioned feature rows) and refuses a selection whose condition
number exceeds ``max_cond`` (default 1e4).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import torch
from torch import Tensor

from ..errors import ConvergenceError, ShapeError


def select_compensators(features: Tensor, k: int, max_cond: float = 1e4) -> tuple[list[int], float]:
    """Choose ``k`` compensating units from the feature matrix ``S = σ(V X)`` (H × N).

    Args:
        features: ``(H, N)`` unit features on the batch.
        k: number of compensators (must satisfy ``N ≤ k < H``).
        max_cond: largest accepted condition number of ``S_B``.

    Returns:
        ``(units, cond)``: the selected unit indices (pivot order) and ``cond(S_B)``.

    Raises:
        ShapeError: ``k`` out of range.
        ConvergenceError: the best selection is too ill-conditioned (the condition is named).
    """
    H, N = features.shape
    if not N <= k < H:
        raise ShapeError(
            f"need N ≤ k < H compensators for H = {H} units and a batch of N = {N}; received k = {k}."
        )
    S = features.detach().to(torch.float64).cpu().numpy()
    _, _, piv = scipy.linalg.qr(S.T, pivoting=True, mode="economic")
    units = [int(i) for i in piv[:k]]
    sv = np.linalg.svd(S[units], compute_uv=False)
    cond = float(sv[0] / sv[N - 1]) if sv[N - 1] > 0 else float("inf")
    if not cond <= max_cond:
        raise ConvergenceError(
            f"the selected compensating features S_B (units {units}) have condition number "
            f"{cond:.3g} > {max_cond:.0e}; the closed-form compensation would be unstable. Use a "
            "different batch, more units, or raise max_cond knowingly."
        )
    return units, cond
