"""Group representations on tokens and the numerical equivariance check of an attention layer.

G acts on token sequences diagonally, ``g·x = (ρ(g) x_1, .., ρ(g) x_L)``, through an orthogonal
representation ``ρ`` on ``V = R^d``. A layer ``f`` is equivariant when ``f(g·x) = g·f(x)``; the
check reports, for each given matrix ``ρ(g)``,

    max over samples  ‖f(g·x) − g·f(x)‖ / (‖x‖ · Σ_h ‖R_h‖_F)

(Frobenius norms over all tokens; with a constant output offset ``c`` the denominator gains
``√L ‖c‖``) on random float64 token sequences. The denominator bounds the
size the output could have without cancellation between heads, so a layer whose output vanishes
identically (e.g. an ``X_0`` cluster, whose OV maps sum to zero) has error at rounding level
instead of 0/0; a layer with ``R = 0`` has error 0. Tokens are
drawn as ``N(0, σ²)`` with ``σ² = 1/max_h ‖M_h‖_F``, so that scores ``⟨x_i, M_h x_j⟩`` are of order
one and softmax is neither saturated nor flat.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import RepresentationError, ShapeError, check_finite
from .rmhsa import check_qk_ov, rmhsa

__all__ = ["token_matrices", "equivariance_errors", "equivariance_error", "sample_tokens"]


def token_matrices(rep, d: int | None = None, *, orthogonal_tol: float = 1e-8) -> np.ndarray:
    """Validate a representation on tokens and return its matrices as a float64 ``(k, d, d)`` array.

    Args:
        rep: a :class:`paramsym.groups.reps.Representation` (checked as a homomorphism, all group
            elements returned), or any sequence / array of square matrices (e.g. the images of the
            generators; only shape, finiteness and orthogonality can be checked then).
        d: required token dimension.
        orthogonal_tol: largest allowed ``max |ρ(g)^T ρ(g) − I|``.

    Raises:
        ShapeError: not a stack of square matrices, or dimension different from ``d``.
        RepresentationError: not orthogonal, or (for a ``Representation``) not a homomorphism.
    """
    if hasattr(rep, "matrices") and hasattr(rep, "group"):
        rep.check(orthogonal_tol)
        mats = np.asarray(rep.matrices, dtype=np.float64)
    else:
        try:
            if isinstance(rep, torch.Tensor):
                mats = rep.detach().cpu().double().numpy()
            elif isinstance(rep, (list, tuple)):
                mats = np.stack([np.asarray(torch.as_tensor(m).detach().cpu().double()) for m in rep])
            else:
                mats = np.asarray(rep, dtype=np.float64)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ShapeError(
                "representation: expected a Representation or a stack of square matrices; could "
                f"not read it as an array ({exc})."
            ) from exc
    if mats.ndim == 2:
        mats = mats[None]
    if mats.ndim != 3 or mats.shape[1] != mats.shape[2] or mats.shape[0] == 0:
        raise ShapeError(
            f"representation: expected matrices of shape (k, d, d), received {mats.shape}."
        )
    check_finite("representation matrices", mats)
    if d is not None and mats.shape[1] != d:
        raise ShapeError(
            f"representation acts on R^{mats.shape[1]} but the tokens live in R^{d}; give a "
            f"representation of dimension {d}."
        )
    eye = np.eye(mats.shape[1])
    dev = np.abs(np.einsum("kji,kjl->kil", mats, mats) - eye).max(axis=(1, 2))
    worst = int(dev.argmax())
    if dev[worst] > orthogonal_tol:
        raise RepresentationError(
            f"representation matrix {worst} is not orthogonal: max |ρ^T ρ − I| = {dev[worst]:.3g} "
            f"> {orthogonal_tol:g}. The structure theorem needs an orthogonal representation; "
            "orthogonalise it (e.g. average the inner product over the group)."
        )
    return mats


def sample_tokens(
    n_samples: int, n_tokens: int, d: int, sigma: float, generator: torch.Generator
) -> torch.Tensor:
    """``(n_samples, n_tokens, d)`` float64 tokens with i.i.d. ``N(0, sigma²)`` entries."""
    return sigma * torch.randn(n_samples, n_tokens, d, generator=generator, dtype=torch.float64)


def equivariance_errors(
    M,
    R,
    rep,
    *,
    n_tokens: int = 3,
    n_samples: int = 4,
    generator: torch.Generator | None = None,
    offset=None,
) -> np.ndarray:
    """Relative equivariance error of ``x ↦ RMHSA(x; M, R) (+ offset)`` for each matrix of ``rep``.

    Args:
        M, R: RMHSA parameters ``(H, d, d)`` (computed in float64).
        rep: representation on tokens (see :func:`token_matrices`).
        n_tokens: sequence length ``L`` (the structure theorem needs ``L ≥ 3``).
        n_samples: random token sequences per check.
        generator: randomness (default: a fixed seed, so the check is deterministic).
        offset: optional constant added to every output token (``(d,)``).

    Returns:
        ``(k,)`` array; entry ``i`` is the worst relative error for ``ρ_i`` (see module docstring).
    """
    M, R = check_qk_ov(M, R)
    M, R = M.double(), R.double()
    d = M.shape[-1]
    mats = torch.as_tensor(token_matrices(rep, d))
    if int(n_tokens) < 1 or int(n_samples) < 1:
        raise ShapeError(
            f"n_tokens and n_samples must be positive, received {n_tokens} and {n_samples}."
        )
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    norms = torch.linalg.matrix_norm(M)
    scale = float(norms.max()) if M.numel() else 0.0
    sigma = 1.0 / np.sqrt(scale) if scale > 0 else 1.0
    x = sample_tokens(int(n_samples), int(n_tokens), d, sigma, gen)
    c = None if offset is None else torch.as_tensor(offset, dtype=torch.float64).reshape(d)

    def f(t: torch.Tensor) -> torch.Tensor:
        out = rmhsa(t, M, R)
        return out if c is None else out + c

    fx = f(x)
    r_scale = float(torch.linalg.matrix_norm(R).sum()) if R.numel() else 0.0
    den = torch.linalg.vector_norm(x, dim=(-2, -1)) * r_scale
    if c is not None:
        den = den + float(torch.linalg.vector_norm(c)) * x.shape[-2] ** 0.5
        r_scale = max(r_scale, float(torch.linalg.vector_norm(c)))
    errs = np.zeros(len(mats))
    for i, g in enumerate(mats):
        lhs = f(x @ g.T)
        rhs = fx @ g.T
        num = torch.linalg.vector_norm(lhs - rhs, dim=(-2, -1))
        errs[i] = float((num / den).max()) if r_scale > 0 else 0.0
    return errs


def equivariance_error(M, R, rep, **kwargs) -> float:
    """Largest entry of :func:`equivariance_errors` (same arguments)."""
    return float(equivariance_errors(M, R, rep, **kwargs).max())

