"""Lifting through a matrix-free ``J`` (JVP/VJP): the same lift as :mod:`.lift` without a dense ``J``.

* ``method="gram"`` — the same truncated pseudo-inverse (and gauge) as the dense path from
  ``J Jᵀ`` (and ``J D⁻² Jᵀ`` for the column gauge) assembled by ``M`` VJP/JVP pairs: exact,
  memory ``O(M² + p)``. ``gauge="paper"`` forms ``V_k = Jᵀ U_k Σ_k⁻¹`` by ``k`` VJPs and solves
  the paper's constrained system (:func:`.gauges.paper_direction`).
* ``method="lsmr"`` — LSMR (``scipy.sparse.linalg.lsmr``) on a ``LinearOperator`` built from JVP
  and VJP, memory ``O(p)``. Started from 0 its iterates stay in ``Im Jᵀ``; with ``damp = 0`` it
  converges to the *untruncated* ``J⁺t``. With ``damp = λ`` it solves
  ``min ‖Jc − t‖² + λ²‖c‖²``, whose solution ``Σ_k σ_k/(σ_k² + λ²) (u_kᵀt) v_k`` replaces the
  truncation's step filter ``1[σ_k ≥ τσ_1]`` by the smooth filter ``σ_k²/(σ_k² + λ²)``. The
  default ``λ = τ σ_1`` (``σ_1`` by power iteration) thus agrees with the truncated pinv on
  components with ``σ_k ≫ λ``, halves those at ``σ_k = λ`` and suppresses (but does not zero)
  those below; the two coincide exactly when no singular value lies below ``τσ_1`` and
  ``damp = 0``. (LSMR supports ``gauge`` ``"none"`` and ``"column"``.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..errors import ShapeError
from ..linop import LinearOperator
from .gauges import paper_dead_mask, paper_direction, projection_residual_hint
from .jacobian import check_outputs
from .lift import DEAD_TOL, GAUGES, LIFT_TOL, RTOL, LiftResult, _eps_floor, _relres, _resolved

__all__ = ["largest_singular_value", "lift_matrix_free"]




def largest_singular_value(op, iters: int = 30, seed: int = 0) -> float:
    """``σ_1(J)`` by power iteration on ``JᵀJ`` (relative accuracy improves as ``(σ_2/σ_1)^{2·iters}``)."""
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(op.shape[1], generator=g, dtype=op.dtype)
    v /= v.norm()
    s = 0.0
    for _ in range(iters):
        w = op.rmatvec(op.matvec(v))
        nw = float(w.norm())
        if nw == 0:
            return 0.0
        s = nw ** 0.5
        v = w / nw
    return s


def lift_matrix_free(
    op: LinearOperator,
    target: Tensor,
    *,
    method: str = "lsmr",
    rtol: float = RTOL,
    gauge: str = "none",
    damp: float | None = None,
    atol: float = 1e-12,
    btol: float = 1e-12,
    maxiter: int | None = None,
    dead_tol: float = DEAD_TOL,
    chunk_size: int = 32,
) -> LiftResult:
    """Lift ``target`` through a matrix-free ``J`` (see the module docstring).

    Args:
        op: any :class:`paramsym.linop.LinearOperator` (a ``JacobianOperator``, a
            :class:`~paramsym.linop.StackedOperator` of them, a ``DenseOperator``).
        target: length ``M``.
        method: ``"lsmr"`` (memory ``O(p)``, Tikhonov-filtered) or ``"gram"`` (exact truncated
            pinv from ``J Jᵀ``, memory ``O(M² + p)``).
        rtol: truncation τ (``gram``) and, for ``lsmr`` without ``damp``, ``λ = τ σ_1``.
        gauge: ``"none"``, ``"column"`` (column norms by ``M`` VJPs) or ``"paper"`` (``gram`` only).
        damp: LSMR damping λ (default ``rtol · σ_1``; 0 → untruncated ``J⁺t``).
        atol, btol, maxiter: LSMR stopping rules (``maxiter`` default ``4·min(M, p)``).
    """
    if gauge not in GAUGES:
        raise ValueError(f"gauge must be one of {GAUGES}, received {gauge!r}.")
    t = torch.as_tensor(target, dtype=op.dtype).reshape(-1)
    if t.numel() != op.shape[0]:
        raise ShapeError(f"the target has {t.numel()} entries; J has {op.shape[0]} rows.")
    check_outputs(t, "the lifting target")
    p = op.shape[1]
    if gauge == "paper" and method != "gram":
        raise ValueError(f"gauge='paper' needs method='gram' (it uses J's own singular vectors), received {method!r}.")
    col = op.column_norms(chunk_size) if gauge in ("column", "paper") else None
    if col is not None:
        cmax = float(col.max())
        dead = paper_dead_mask(col, dead_tol) if gauge == "paper" else col <= dead_tol * cmax
        D = torch.where(dead, torch.ones_like(col), col)
    else:
        dead = torch.zeros(p, dtype=torch.bool)
        D = None
    info: dict[str, Any] = {}
    if method == "gram":
        K = op.gram(chunk_size=chunk_size)
        evals, U = torch.linalg.eigh(K)
        evals, U = evals.flip(0), U.flip(1)
        sigma = evals.clamp_min(0).sqrt()
        rank = _resolved(sigma, rtol, _eps_floor(K, "gram"))
        Uk, sk = U[:, :rank], sigma[:rank]
        if gauge == "none":
            c = op.rmatvec(Uk @ ((Uk.T @ t) / sk**2))
        elif gauge == "paper":
            live = ~dead
            Vk = (torch.stack([op.rmatvec(u) for u in Uk.T], 1) / sk)[live]  # J_Lᵀ U_k Σ_k⁻¹
            c = torch.zeros(p, dtype=op.dtype)
            c[live] = paper_direction(Vk, (Uk.T @ t) / sk, D[live])
            info["projection_residual"] = float((t - Uk @ (Uk.T @ t)).norm() / t.norm())
        else:
            # c = D⁻¹ (J D⁻¹)⁺_k t from K_D = J D⁻² Jᵀ, as the dense path
            w = torch.where(dead, torch.zeros_like(D), 1.0 / D)
            KD = op.gram(chunk_size=chunk_size, weights=w**2)
            ev, V = torch.linalg.eigh(KD)
            ev, V = ev.flip(0), V.flip(1)
            kD = min(rank, _resolved(ev.clamp_min(0).sqrt(), 0.0, _eps_floor(KD, "gram")))
            V, ev = V[:, :kD], ev[:kD]
            c = w**2 * op.rmatvec(V @ ((V.T @ t) / ev))
            info["gauge_rank"] = kD
            info["gauge_image_shift"] = float((V @ (V.T @ t) - Uk @ (Uk.T @ t)).norm() / t.norm())
        info["gram_rank"] = rank
        coords = U.T @ t
        info["rtol_hint"] = projection_residual_hint(sigma, coords, float(t.norm()), rtol, _eps_floor(K, "gram"),
                                                     LIFT_TOL, outside=float((t - U @ coords).norm()))
    elif method == "lsmr":
        from scipy.sparse.linalg import LinearOperator, lsmr

        sigma, rank = None, None
        if damp is None:
            s1 = largest_singular_value(op)
            damp = rtol * s1
            info["sigma_max_estimate"] = s1
        A = op.to_scipy()
        if D is not None:
            dinv = np.where(dead.numpy(), 0.0, 1.0 / D.numpy())
            base = A
            A = LinearOperator(
                op.shape,
                matvec=lambda v: base.matvec(dinv * v),
                rmatvec=lambda u: dinv * base.rmatvec(u),
                dtype=np.float64,
            )
        if maxiter is None:
            maxiter = 4 * min(op.shape)
        out = lsmr(A, t.numpy(), damp=float(damp), atol=atol, btol=btol, maxiter=maxiter)
        z = torch.from_numpy(out[0])
        c = z if D is None else torch.where(dead, torch.zeros_like(z), z / D)
        info.update({"damp": float(damp), "iterations": int(out[2]), "istop": int(out[1])})
    else:
        raise ValueError(f"method must be 'lsmr' or 'gram', received {method!r}.")
    c = torch.where(dead, torch.zeros_like(c), c)
    reached = op.matvec(c)
    res, tn = _relres(reached, t)
    return LiftResult(
        direction=c,
        residual=res,
        rank=rank,
        sigma=sigma,
        dead=dead,
        column_norms=col,
        target_norm=tn,
        reached=reached,
        gauge=gauge,
        method=method,
        rtol=rtol,
        info=info,
    )
