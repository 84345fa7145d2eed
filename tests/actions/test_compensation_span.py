"""The FFN unit's compensation span (:func:`compensation_span_basis`), its incoming range, and the β rule in it.

References are independent of the code under test: the prefix pre-activation ``h w + b`` recomputed
from the cached FFN inputs (the incoming range is the column space of ``[h, 1]ᵀ``), the boundary output
recomputed at finite moves, the closed-form compensation of Cor. 4.6 written with a pseudo-inverse,
dense float64 SVDs, and the entrywise median motion recomputed with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_hf import tiny_bert, tiny_ids

from paramsym.actions.ffn_unit import (
    compensation_span_basis,
    incoming_range,
    incoming_size,
    motion_beta,
    symmetric_tangent,
)
from paramsym.errors import ConfigError, ShapeError

TOKENS = 6


@pytest.fixture(scope="module")
def target():
    pytest.importorskip("transformers")
    from paramsym.discovery.transformer import ffn_unit_problem

    pr = ffn_unit_problem(tiny_bert(), tiny_ids(TOKENS), layer=1, unit=5, compensators=8, name="tiny")
    return pr.target.to(torch.float64)


def _projector(M: torch.Tensor) -> torch.Tensor:
    U, S, _ = torch.linalg.svd(M, full_matrices=False)
    U = U[:, S > S[0] * 1e-10]
    return U @ U.T


def _incoming_of(T, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The block's incoming part of the moving unit's row ``w`` and bias ``b`` (all else 0)."""
    params = {k: torch.zeros_like(v) for k, v in T.params.items()}
    params["up.weight"][0] = w
    params["up.bias"][0] = b
    return T.block.gather(params)[: incoming_size(T)]


def test_incoming_range_is_the_prefix_span_and_its_complement_is_an_exact_symmetry(target) -> None:
    T = target
    R = incoming_range(T)
    n_in = incoming_size(T)
    assert R.shape == (n_in, TOKENS)
    torch.testing.assert_close(R.T @ R, torch.eye(TOKENS, dtype=torch.float64), rtol=0, atol=1e-12)
    # reference: the moving unit's pre-activation on the prefix is h w + b, so J_in's row space is the
    # column space of [h, 1]ᵀ (the activation's derivative only rescales its columns)
    ref = torch.stack([_incoming_of(T, T.h[n], torch.tensor(1.0, dtype=torch.float64)) for n in range(TOKENS)], 1)
    assert (R @ R.T - _projector(ref)).abs().max() <= 1e-9
    gen = torch.Generator().manual_seed(0)
    th0 = T.theta0
    z = torch.randn(n_in, generator=gen, dtype=torch.float64)
    null = z - R @ (R.T @ z)
    step = torch.zeros_like(th0)
    step[:n_in] = 0.5 * th0[:n_in].norm() * null / null.norm()  # a 50 % finite move, no compensation
    assert (T(th0 + step) - T(th0)).norm() <= 1e-12 * T(th0).norm()  # unchanged at every order
    step[:n_in] = 0.5 * th0[:n_in].norm() * R[:, -1]
    assert (T(th0 + step) - T(th0)).norm() > 1e-4 * T(th0).norm()  # a range move changes the output


def test_compensation_span_holds_exactly_the_compensations_and_leaves_out_the_trivial_families(target) -> None:
    T = target
    E = compensation_span_basis(T)
    n_in, p = incoming_size(T), T.p
    k = T.features().shape[1] - 1
    A = T.features()[:, 1:]  # N × k
    assert E.shape == (p, 2 * TOKENS) and k > TOKENS
    torch.testing.assert_close(E.T @ E, torch.eye(E.shape[1], dtype=torch.float64), rtol=0, atol=1e-12)
    proj = E @ E.T
    R = incoming_range(T)
    gen = torch.Generator().manual_seed(1)
    th0 = T.theta0
    # first order: the symmetric tangent of every range move lies in range(E)
    for _ in range(3):
        u = symmetric_tangent(T, R @ torch.randn(R.shape[1], generator=gen, dtype=torch.float64))
        assert (u - proj @ u).norm() <= 1e-10 * u.norm()
    # every order: Cor. 4.6 written out, W_B' = W_B + w_j (a_j − a_j') A_B⁺, for a finite range move
    delta = torch.zeros(p, dtype=torch.float64)
    delta[:n_in] = 0.3 * th0[:n_in].norm() * (R @ torch.randn(R.shape[1], generator=gen, dtype=torch.float64)) / 3
    c0, c1 = T.compact(th0), T.compact(th0 + delta)
    A0, A1 = T.features_of(c0), T.features_of(c1)
    dW = c0["down.weight"][:, :1] @ (A0[:, :1] - A1[:, :1]).T @ torch.linalg.pinv(A0[:, 1:]).T
    full = {**c0, "up.weight": c1["up.weight"], "up.bias": c1["up.bias"]}
    full["down.weight"] = c0["down.weight"].clone()
    full["down.weight"][:, 1:] += dW
    theta = T.block.gather(full)
    step = theta - th0
    assert (T(theta) - T(th0)).norm() <= 1e-9 * (T(th0 + delta) - T(th0)).norm()
    assert (step - proj @ step).norm() <= 1e-10 * step.norm()
    # the trivial families are orthogonal to the span: incoming moves that keep the prefix
    # pre-activations, and compensator increments w_j cᵀ with A_B c = 0
    z = torch.zeros(p, dtype=torch.float64)
    zi = torch.randn(n_in, generator=gen, dtype=torch.float64)
    z[:n_in] = zi - R @ (R.T @ zi)
    assert (E.T @ z).norm() <= 1e-12 * z.norm()
    c = torch.linalg.svd(A)[2][-1]  # a null vector of A_B (k > N)
    assert (A @ c).norm() <= 1e-10
    params = {name: torch.zeros_like(v) for name, v in T.params.items()}
    params["down.weight"][:, 1:] = c0["down.weight"][:, :1] @ c[None]
    z = T.block.gather(params)
    assert (E.T @ z).norm() <= 1e-12 * z.norm()
    # so the only symmetric directions in range(E) are the compensations: null(J E) has dimension N
    J = torch.func.jacfwd(lambda t: T(t).reshape(-1))(th0)
    S = torch.linalg.svdvals(J @ E)
    assert int((S > S[0] * 1e-9).sum()) == E.shape[1] - TOKENS


def test_the_min_rule_reaches_the_motion_in_every_singular_direction_of_the_span(target) -> None:
    T = target
    R = incoming_range(T)
    motion, rho, margin = 1e-3, 0.5, 2.0
    b_med, med = motion_beta(T, motion=motion, rho=rho, margin=margin, incoming=R, rule="median")
    b_min, low = motion_beta(T, motion=motion, rho=rho, margin=margin, incoming=R, rule="min")
    assert low["entry_ratio_min"] <= med["entry_ratio_median"] and b_min >= b_med
    th0 = T.theta0
    x0 = th0.numpy()
    for i in range(R.shape[1]):  # a tangent of norm β s_θ at the median |t| = 0.6 ρ: motion ≥ margin · motion
        u = symmetric_tangent(T, R[:, i])
        moved = (u * (0.6 * rho * b_min * float(th0.norm()) / float(u.norm()))).numpy()
        nz = x0 != 0
        assert np.median(np.abs(moved[nz]) / np.abs(x0[nz])) >= margin * motion * (1 - 1e-9)
    with pytest.raises(ConfigError, match="rule"):
        motion_beta(T, motion=motion, rho=rho, rule="mean")
    with pytest.raises(ShapeError, match="incoming"):
        motion_beta(T, motion=motion, rho=rho, incoming=torch.zeros(3, 2, dtype=torch.float64))
