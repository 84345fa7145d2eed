"""The null space of the stacked invariance system ``K`` from its Gram matrix ``H = KᵀK``.

Steps 2 and 3 of :mod:`paramsym.exact.affine` (its module docstring states the precision):

* the bottom eigenvectors of ``H``: all of them by ``eigh`` (``L ≤ dense_limit``), else the bottom
  ``k`` by shift-invert subspace iteration (:func:`bottom_subspace`);
* refinement: ``K V`` reduced by a streaming QR (``R`` of ``[R; K_chunk V]``), whose SVD gives the
  smallest singular values of ``K`` itself and the rotated basis (:func:`refined_null_space`);
* the held-out check of each recovered generator (:func:`held_out_residuals`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .ansatz import Ansatz
from .spectrum import RankDecision, decide_rank

__all__ = ["NullSpace", "bottom_subspace", "held_out_residuals", "refined_null_space"]


def bottom_subspace(h: Tensor, k: int, gen: torch.Generator, iters: int = 5) -> tuple[Tensor, float]:
    """Bottom-k eigenvectors of PSD ``h`` by shift-invert subspace iteration; and λ_max."""
    n = h.shape[0]
    x = torch.randn(n, 1, generator=gen, dtype=h.dtype)
    for _ in range(15):  # power iteration for λ_max (the shift and σ_max)
        x = h @ x
        x = x / x.norm()
    lam_max = float(x.T @ h @ x)
    mu = 1e-11 * lam_max
    diag = h.diagonal()
    for _ in range(6):
        diag += mu
        chol, bad = torch.linalg.cholesky_ex(h)
        diag -= mu
        if int(bad) == 0:
            break
        mu *= 10
    v = torch.linalg.qr(torch.randn(n, k, generator=gen, dtype=h.dtype)).Q
    for _ in range(iters):  # (H + μI)⁻¹ v = C⁻ᵀ C⁻¹ v; cholesky_solve would copy C (8 L² bytes) each call
        y = torch.linalg.solve_triangular(chol, v, upper=False)
        v = torch.linalg.qr(torch.linalg.solve_triangular(chol.mT, y, upper=True)).Q
    w, u = torch.linalg.eigh(v.T @ h @ v)
    return v @ u, lam_max


@dataclass
class NullSpace:
    """One refined null-space computation.

    Attributes:
        v: ``(L, k)`` the bottom eigenvectors of ``H``; ``w``: all eigenvalues of ``H`` (dense path
            only, else ``None``); ``s``, ``wh``: singular values (descending) and right singular
            vectors of ``K V``; ``lam_max``: the largest eigenvalue of ``H``; ``method``: ``"dense"``
            or ``"subspace"``; ``decision``: the rank decision on ``s``; ``k``: the refined size
            (doubled while every computed singular value was null).
    """

    v: Tensor
    w: Tensor | None
    s: Tensor
    wh: Tensor
    lam_max: float
    method: str
    decision: RankDecision
    k: int

    def basis(self) -> Tensor:
        """``(d, L)`` orthonormal null-space basis in ansatz coordinates (the last ``d`` rotated vectors)."""
        d = self.decision.dimension
        return (self.v @ self.wh.T)[:, self.k - d :].T.contiguous() if d else self.v[:, :0].T

    def spectrum(self) -> Tensor:
        """The computed singular values of ``K``, descending: on the dense path the unrefined ones
        (``√`` of ``H``'s eigenvalues above the refined ``k``) then the refined ``k``."""
        L = self.v.shape[0]
        if self.method == "dense" and self.k < L:
            return torch.cat([self.w[self.k :].clamp_min(0).sqrt().flip(0), self.s])
        return self.s


def refined_null_space(h: Tensor, ansatz: Ansatz, jacs: list[Tensor], thetas: Tensor, k: int, tol: float, rule: str,
                       gen: torch.Generator, dense_limit: int) -> NullSpace:
    """Bottom eigenvectors of ``h``, refined by a streaming QR of ``K V`` (module docstring)."""
    L = h.shape[0]
    w = None
    while True:
        if L <= dense_limit:
            w, vecs = torch.linalg.eigh(h)
            lam_max, method = float(w[-1]), "dense"
            v = vecs[:, :k]
        else:
            v, lam_max = bottom_subspace(h, k, gen)
            method = "subspace"
        r = torch.zeros(0, k, dtype=torch.float64)
        offset = 0
        for jac in jacs:
            m = jac.shape[0]
            kv = ansatz.apply(jac, thetas[offset : offset + m], v)
            offset += m
            r = torch.linalg.qr(torch.cat([r, kv]), mode="r").R
        _, s, wh = torch.linalg.svd(r)
        decision = decide_rank(s, math.sqrt(max(lam_max, 0.0)), tol, rule)
        if decision.saturated and k < L:
            k = min(L, 2 * k)
            continue
        return NullSpace(v, w, s, wh, lam_max, method, decision, k)


def held_out_residuals(ansatz: Ansatz, coeffs: Tensor, pts: Tensor, jac: Tensor) -> Tensor:
    """``max_j ‖J_j v(θ_j)‖ / (‖J_j‖₂ ‖v(θ_j)‖)`` per generator (rows of ``coeffs``)."""
    if coeffs.shape[0] == 0:
        return torch.zeros(0, dtype=torch.float64)
    vf = ansatz.fields(coeffs, pts)  # (m, d, p)
    jn = torch.linalg.matrix_norm(jac, ord=2)
    num = torch.einsum("mqp,mdp->mdq", jac, vf).norm(dim=-1)
    return (num / (jn[:, None] * vf.norm(dim=-1).clamp_min(1e-300))).amax(0)
