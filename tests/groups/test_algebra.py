"""Lie-algebra analysis against closed forms: sl(2), so(3), commuting diagonals, vector-field
brackets by autodiff, kernels and ranks of induced fields, principal angles vs scipy."""

from __future__ import annotations

import pytest
import torch
from scipy.linalg import subspace_angles

from paramsym.errors import ShapeError, ToleranceError
from paramsym.groups.algebra import (
    action_kernel,
    augment,
    bracket_relation_error,
    commutativity,
    dimension_table,
    field_bracket,
    field_rank,
    generated_algebra,
    principal_angles,
    span_basis,
    structure_constants,
)

D = torch.float64


def E(i, j, n=2):
    m = torch.zeros(n, n, dtype=D)
    m[i, j] = 1.0
    return m


def so3():
    lx = torch.tensor([[0, 0, 0], [0, 0, -1], [0, 1, 0]], dtype=D)
    ly = torch.tensor([[0, 0, 1], [0, 0, 0], [-1, 0, 0]], dtype=D)
    lz = torch.tensor([[0, -1, 0], [1, 0, 0], [0, 0, 0]], dtype=D)
    return torch.stack([lx, ly, lz])


def test_generated_algebra_sl2_from_two_generators():
    alg = generated_algebra(torch.stack([E(0, 1), E(1, 0)]))
    assert alg.shape[0] == 3  # [E12, E21] = diag(1, −1): sl(2)
    traces = torch.diagonal(alg, dim1=1, dim2=2).sum(-1)
    assert traces.abs().max() < 1e-12  # traceless
    assert span_basis(torch.stack([E(0, 1), E(1, 0), E(0, 1) + E(1, 0)]))[0].shape[0] == 2


def test_structure_constants_so3_closed_form():
    basis = so3() / 2 ** 0.5  # Frobenius-orthonormal
    c, resid = structure_constants(basis)
    eps = torch.zeros(3, 3, 3, dtype=D)
    for (a, b, k), s in {(0, 1, 2): 1, (1, 2, 0): 1, (2, 0, 1): 1, (1, 0, 2): -1, (2, 1, 0): -1, (0, 2, 1): -1}.items():
        eps[a, b, k] = s
    assert torch.allclose(c, eps / 2 ** 0.5, atol=1e-12)  # [L_a, L_b] = ε_abc L_c, rescaled
    assert resid < 1e-12
    _, open_resid = structure_constants(torch.stack([E(0, 1), E(1, 0)]))
    assert open_resid > 0.1  # span{E12, E21} is not closed


def test_commutativity_and_dimension_table():
    diag = torch.stack([torch.diag(torch.tensor(v, dtype=D)) for v in ([1, 0, 0], [0, 1, 0], [1, 1, 2])])
    assert commutativity(diag) == 0.0
    assert commutativity(so3()) == pytest.approx(2 ** -0.5, rel=1e-12)  # ‖[Lx, Ly]‖ = ‖Lz‖ = √2; ‖Lx‖‖Ly‖ = 2
    near = torch.stack([E(0, 0), E(1, 1), E(0, 0) + 1e-8 * E(0, 1)])
    table = dict(dimension_table(near))
    assert table[1e-6] == 2 and table[1e-12] == 3  # a near-dependent third element shows at 1e-8


def test_field_bracket_relation_linear_and_affine():
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 4, 4, generator=gen, dtype=D)
    pts = torch.randn(5, 4, generator=gen, dtype=D)
    assert bracket_relation_error(a, b, pts) < 1e-14
    # a wrong sign is caught: [v_A, v_B] = +v_[A,B] fails
    br = field_bracket(lambda t: a @ t, lambda t: b @ t, pts[0])
    assert (br - (a @ b - b @ a) @ pts[0]).norm() > 1e-2
    # affine fields through the augmented matrices acting on [θ; 1]
    ab = augment(torch.randn(2, 3, 3, generator=gen, dtype=D), torch.randn(2, 3, generator=gen, dtype=D))
    pts1 = torch.cat([torch.randn(4, 3, generator=gen, dtype=D), torch.ones(4, 1, dtype=D)], 1)
    assert bracket_relation_error(ab[0], ab[1], pts1) < 1e-14


def test_action_kernel_and_field_rank():
    # on points with θ_3 = 0, the field of E_{0,2} (X θ = θ_3 e_0) vanishes identically
    gen = torch.Generator().manual_seed(1)
    pts = torch.randn(6, 3, generator=gen, dtype=D)
    pts[:, 2] = 0
    mats = torch.stack([E(0, 2, 3), E(0, 0, 3), E(1, 1, 3)])
    ker = action_kernel(mats, pts)
    assert ker.shape[0] == 1 and torch.allclose(ker[0].abs(), torch.tensor([1.0, 0, 0], dtype=D), atol=1e-12)
    assert field_rank(mats, pts[0]) == 2
    assert field_rank(so3(), torch.tensor([0.0, 0.0, 1.0], dtype=D)) == 2  # orbits of SO(3) are spheres


def test_principal_angles_match_scipy():
    gen = torch.Generator().manual_seed(2)
    a = torch.randn(4, 30, generator=gen, dtype=D)
    for b in (a + 1e-9 * torch.randn(4, 30, generator=gen, dtype=D), torch.randn(4, 30, generator=gen, dtype=D)):
        ref = sorted(subspace_angles(a.T.numpy(), b.T.numpy()))
        assert torch.allclose(principal_angles(a, b), torch.tensor(ref, dtype=D), rtol=1e-6, atol=1e-15)


def test_bad_input():
    with pytest.raises(ToleranceError):
        span_basis(so3(), tol=1.5)
    with pytest.raises(ShapeError):
        generated_algebra(torch.randn(2, 3, 4, dtype=D))
    with pytest.raises(ShapeError):
        principal_angles(torch.randn(2, 5, dtype=D), torch.randn(2, 6, dtype=D))
