"""The paper's column-normalised gauge and the "smaller τ would pass" hint, on a factorised ``J``.

**Paper gauge** ([Attribution] App. A.5 as implemented by the authors'
``tangent_projection(normalize_columns=True)``; ``gauge="paper"`` in :class:`.lift.DenseLift`).
With ``J = U Σ Vᵀ`` *J's own* SVD truncated to the ``k`` resolved singular values
(``σ_i ≥ τσ_1``) and ``D = diag(‖J_{:,i}‖)`` the column norms, the direction is

    c̃ = argmin ‖c̃‖₂  subject to  V_kᵀ D⁻¹ c̃ = Σ_k⁻¹ U_kᵀ t,      c = D⁻¹ c̃,

i.e. among all ``c`` whose component in the resolved right-singular subspace equals the plain
truncated pinv ``J_k⁺ t`` (``V_kᵀ c = Σ_k⁻¹U_kᵀt``, so ``U_kU_kᵀ J c = P_k t``), the one of least
``‖D c‖``. Only the ``k`` resolved rows are constrained; the system ``V_kᵀ D⁻¹`` is ``k × p``
with full row rank (condition 1.7e2–4e2 on the annulus networks), so the minimum-norm solution
``c̃ = W (WᵀW)⁻¹ a`` with ``W = D⁻¹V_k``, ``a = Σ_k⁻¹U_kᵀt`` is well posed; it is computed by a
thin QR of ``W`` (``W = QR``, ``c̃ = Q R⁻ᵀ a``). Dead columns ``‖J_{:,i}‖ ≤ 1e-8`` (absolute, as
the authors' code; the relative ``DEAD_TOL`` rule is applied as well) get ``c_i = 0`` and are
left out of the SVD.

Residual of the paper gauge: :class:`~.lift.LiftResult.residual` is, as for every gauge, the
measured ``‖J c − t‖/‖t‖``. Here ``J c = P_k t + J_⊥ c`` with ``J_⊥ = J − U_kΣ_kV_kᵀ`` (the
unresolved part of ``J``): besides the unresolved part of ``t`` it contains the *leak* ``J_⊥ c``
of the gauge's component outside ``span V_k``. The number the authors' code reports is the
projection residual ``‖(I − P_k) t‖/‖t‖`` (independent of the gauge), stored as
``info["projection_residual"]``; ``info["gauge_leak"] = ‖J c − P_k t‖/‖t‖``.

**Residual hint**: for the Gram and SVD routes every left singular vector is at hand, so the
projection residual at a smaller truncation ``τ'`` costs one ``Uᵀt``:
``r(τ') = ‖t − Σ_{σ_i ≥ τ'σ_1} u_i u_iᵀ t‖/‖t‖``, summed over the complement (the tail
coordinates ``u_iᵀt``, ``σ_i < τ'σ_1``, plus the part of ``t`` outside ``span U``; never as
``‖t‖² − ‖P t‖²``, whose floor is ``√ε``: :func:`tail_norms`). :func:`projection_residual_hint` returns the
largest ``τ'`` (from 1e-4 down to 1e-12) that the factorisation resolves (``τ' ≥`` its rounding
floor) and whose ``r(τ') ≤`` the liftability threshold — it is what the verdict suggests.
"""

from __future__ import annotations

import torch
from torch import Tensor

#: absolute dead-column threshold of the paper's construction
PAPER_DEAD_ABS = 1e-8
#: the truncations the verdict may suggest, largest first
HINT_RTOLS = (1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12)

__all__ = ["HINT_RTOLS", "PAPER_DEAD_ABS", "paper_dead_mask", "paper_direction", "projection_residual_hint", "tail_norms"]


def paper_dead_mask(col: Tensor, dead_tol: float) -> Tensor:
    """Dead columns of the paper gauge: ``‖J_{:,i}‖ ≤ 1e-8`` or ``≤ dead_tol · max_j ‖J_{:,j}‖``."""
    cmax = float(col.max()) if col.numel() else 0.0
    return (col <= PAPER_DEAD_ABS) | (col <= dead_tol * cmax)


def paper_direction(Vk: Tensor, a: Tensor, D: Tensor) -> Tensor:
    """Minimum-norm ``c̃`` of ``V_kᵀ D⁻¹ c̃ = a``, returned as ``c = D⁻¹ c̃`` (live columns).

    Args:
        Vk: ``[p, k]`` resolved right singular vectors of ``J_L`` (orthonormal columns).
        a: ``[k]`` the right-hand side ``Σ_k⁻¹ U_kᵀ t``.
        D: ``[p]`` column norms of ``J_L`` (all > 0).

    Returns:
        ``c = D⁻¹ W (WᵀW)⁻¹ a`` with ``W = D⁻¹ V_k`` (by a thin QR of ``W``).
    """
    if Vk.shape[1] == 0:
        return torch.zeros(Vk.shape[0], dtype=Vk.dtype)
    W = Vk / D[:, None]
    Q, R = torch.linalg.qr(W)
    y = torch.linalg.solve_triangular(R.T, a[:, None], upper=False)[:, 0]
    return (Q @ y) / D


def projection_residual_hint(
    sigma: Tensor, coords: Tensor, target_norm: float, rtol: float, floor: float, tol: float,
    *, outside: float,
) -> dict[str, float] | None:
    """The largest smaller truncation at which ``t`` would be liftable, from ``coords = Uᵀt``.

    The residual is summed over the complement, never subtracted from ``‖t‖²``:
    ``r(τ')² ‖t‖² = Σ_{i ≥ k'} (u_iᵀt)² + ‖t − U Uᵀ t‖²`` (the tail coordinates plus the part of
    ``t`` outside ``span U``, ``outside``). Both terms are sums of non-negative numbers, so ``r`` is
    accurate to rounding relative to *itself*; ``sqrt(‖t‖² − ‖P t‖²)`` would have an absolute floor
    of ``√ε ≈ 1.5e-8`` (its value there depends on the machine's summation order).

    Args:
        sigma: all singular values (descending) that ``coords`` refers to.
        coords: ``u_iᵀ t`` for the same singular vectors.
        target_norm: ``‖t‖``.
        rtol: the truncation in use (only smaller ``τ'`` are tried).
        floor: relative rounding floor of the factorisation (``τ' < floor`` is not resolved).
        tol: liftability threshold on the projection residual.
        outside: ``‖t − U Uᵀ t‖``, the part of ``t`` not described by ``coords`` (0 when ``U`` is
            square, e.g. all eigenvectors of the Gram matrix; a thin SVD's ``U`` needs it).

    Returns:
        ``{"rtol": τ', "residual": r(τ'), "rank": k'}``; ``{"floor": floor, "tried": bool}`` when no
        ``τ'`` between ``floor`` and ``rtol`` passes (``tried`` is False when there is none);
        ``None`` for a zero target or a zero ``J``.
    """
    if target_norm <= 0 or sigma.numel() == 0 or float(sigma[0]) <= 0:
        return None
    s1 = float(sigma[0])
    tail = tail_norms(coords, outside)
    tried = False
    for tau in HINT_RTOLS:
        if tau >= rtol or tau < floor:
            continue
        tried = True
        k = int((sigma >= tau * s1).sum())
        r = float(tail[k]) / target_norm
        if r <= tol:
            return {"rtol": tau, "residual": r, "rank": k}
    return {"floor": floor, "tried": tried}


def tail_norms(coords: Tensor, outside: float = 0.0) -> Tensor:
    """``tail[k] = sqrt(Σ_{i ≥ k} coords_i² + outside²)`` for ``k = 0 … n`` (length ``n + 1``).

    The norm of ``t − Σ_{i<k} u_i u_iᵀ t`` from an orthonormal ``U`` with ``coords = Uᵀt`` and
    ``outside = ‖t − U Uᵀ t‖``: a reversed cumulative sum of squares (no subtraction), so each
    entry is accurate relative to itself, however small (module docstring).
    """
    sq = coords.detach().to(torch.float64).square()
    rev = torch.cumsum(sq.flip(0), 0).flip(0)
    rev = torch.cat([rev, rev.new_zeros(1)])
    return (rev + float(outside) ** 2).sqrt()
