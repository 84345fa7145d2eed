"""Monomial actions: a fast path for positive rescalings and their products.

An action is *monomial* when, for a diagonal algebra (``g = diag(e^x)``), every coordinate is
multiplied by a monomial in the diagonal entries:

    a(diag(e^x), θ) = θ ⊙ exp(C x)    (C ∈ Z^{p × s}; e.g. +1 on a unit's incoming weights and −1
                                        on its outgoing ones for a rescaling)

:func:`monomial_exponents` finds ``C`` by probing ``a(diag(e^{e_j}), 1)`` for each generator
direction ``j`` and verifies the formula on a random element and a random point (relative 1e-12);
otherwise it returns ``None``. ``C`` is cached on the action (per dtype and size). The teleport
uses it for its line search and the lookahead objective; the element it returns is re-applied with
the action itself, and that point's loss is the one checked.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.func import vmap

__all__ = ["monomial_exponents"]


def monomial_exponents(action, theta: Tensor, diag_gens: Tensor) -> Tensor | None:
    """``C`` with ``a(diag(e^x), θ) = θ ⊙ exp(C x)`` for ``x = δ · diag(T)`` (module docstring), or ``None``.

    Args:
        action: the action.
        theta: a point ``(p,)`` (its dtype and size key the cache).
        diag_gens: the diagonals of the (diagonal) generators, ``(r, s)``.
    """
    key = (theta.dtype, theta.numel(), tuple(diag_gens.shape))
    cache = action.__dict__.setdefault("_monomial_cache", {})
    if key in cache:
        return cache[key]
    s = diag_gens.shape[1]
    ones = torch.ones_like(theta)
    with torch.no_grad():
        probes = torch.diag_embed(torch.exp(torch.eye(s, dtype=theta.dtype)))  # diag(e^{e_j}), j = 1..s
        try:
            C = torch.log(vmap(action.act, in_dims=(0, None))(probes, ones).abs()).T
        except Exception:  # an action that does not vmap: one probe at a time
            C = torch.stack([torch.log(action.act(q, ones).abs()) for q in probes], dim=1)
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(s, generator=gen, dtype=theta.dtype) * 0.3
        pt = torch.randn(theta.shape, generator=gen, dtype=theta.dtype)
        want = action.act(torch.diag(torch.exp(x)), pt)
        got = pt * torch.exp(C @ x)
        ok = bool(torch.isfinite(C).all()) and bool(
            torch.allclose(got, want, rtol=1e-12, atol=1e-12 * float(want.abs().max())))
    cache[key] = C if ok else None
    return cache[key]
