"""Linear systems shared by the lifting tests (imported by test modules; not collected): a
matrix of prescribed singular values, and a small tanh MLP as a function of its parameters."""

from __future__ import annotations

import numpy as np
import torch

from paramsym.attribution import function_from_module
from paramsym.models.mlp import mlp


def with_spectrum(rng: np.random.Generator, m: int, p: int, sigma) -> tuple[np.ndarray, np.ndarray]:
    """``(U, J)`` with ``J = U diag(σ) Vᵀ`` (m × p): U (m × k) and V (p × k) orthonormal, the
    Q factors of Gaussian draws of ``rng`` (U first), k = len(σ); the singular values of J are σ."""
    U, _ = np.linalg.qr(rng.standard_normal((m, len(sigma))))
    V, _ = np.linalg.qr(rng.standard_normal((p, len(sigma))))
    return U, (U * np.asarray(sigma)) @ V.T


def tanh_mlp_function(widths: list[int], seed: int):
    """``(fn, params)`` of ``mlp(widths, "tanh")`` initialised from a generator seeded ``seed``."""
    return function_from_module(mlp(widths, "tanh", generator=torch.Generator().manual_seed(seed)))
