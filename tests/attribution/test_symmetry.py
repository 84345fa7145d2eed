"""Groups on functions: orbit tangents, Reynolds projection, defect, probe-set checks."""

import math
import warnings

import numpy as np
import pytest
import torch

from paramsym.attribution import (
    ProbeSetWarning,
    cyclic,
    dihedral,
    equivariance_error_x,
    finite_group,
    lie_group,
    o2,
    orbit_tangent_x,
    polar_grid,
    probe_leak,
    reynolds_x,
    rotation,
    so2,
    transform_x,
)
from paramsym.attribution.function_groups import REFLECTION, function_group
from paramsym.errors import GroupError, NonFiniteError, RepresentationError, ShapeError


def mexican_hat_force(x):
    """F(q; α) = −(α + ‖q‖²) q, input x = (q1, q2, α): exactly SO(2)-equivariant in q."""
    q, a = x[:, :2], x[:, 2:3]
    return -(a + (q * q).sum(1, keepdim=True)) * q


def stacked_alpha_grid():
    q = polar_grid(15, 32, 1.0)
    alphas = torch.tensor([-1.1, -0.6, 0.2, 0.8], dtype=torch.float64)
    return torch.cat([torch.cat([q, a.expand(q.shape[0], 1)], 1) for a in alphas])


def test_reynolds_leaves_equivariant_field_unchanged():
    x = stacked_alpha_grid()
    g = so2(input_dim=3, input_plane=(0, 1), output_dim=2, output_plane=(0, 1))
    f = mexican_hat_force(x)
    pf = reynolds_x(mexican_hat_force, x, g)
    rel = float((pf - f).norm() / f.norm())
    assert rel <= 1e-12
    # and the orbit tangent of an equivariant field vanishes
    eta = orbit_tangent_x(mexican_hat_force, x, g)
    assert float(eta.norm() / f.norm()) <= 1e-12
    assert equivariance_error_x(mexican_hat_force, x, g) <= 1e-12


def test_reynolds_closed_forms_and_projection_property():
    x = polar_grid(6, 12, 2.0)
    g = so2()
    # mean of cos over a full circle is 0; of cos² is 1/2
    lin = reynolds_x(lambda z: z[:, :1], x, g)
    assert float(lin.abs().max()) < 1e-13
    sq = reynolds_x(lambda z: z[:, :1] ** 2, x, g)
    torch.testing.assert_close(sq[:, 0], 0.5 * (x**2).sum(1), rtol=0, atol=1e-13)
    # P_E is idempotent: P_E(P_E f) = P_E f for a generic function
    def f(z):
        return torch.sin(3 * z[:, :1]) * torch.exp(z[:, 1:2]) + z[:, :1] * z[:, 1:2] ** 2

    pf = reynolds_x(f, x, g)
    ppf = reynolds_x(lambda z: reynolds_x(f, z, g), x, g)
    torch.testing.assert_close(ppf, pf, rtol=0, atol=1e-12)


def test_finite_groups_exact_average_and_dihedral_invariant():
    x = polar_grid(4, 8, 1.5)
    d4 = dihedral(4)
    assert d4.order == 8 and d4.finite

    def f(z):
        return (z[:, :1] ** 4 + z[:, 1:2] ** 4)  # D_4-invariant, not SO(2)-invariant

    torch.testing.assert_close(reynolds_x(f, x, d4), f(x), rtol=0, atol=1e-13)
    delta_so2 = f(x) - reynolds_x(f, x, so2())
    assert float(delta_so2.norm()) > 0.1
    # C_3 average of x1: the three rotated copies sum to zero
    x3 = polar_grid(3, 6, 1.0)
    torch.testing.assert_close(reynolds_x(lambda z: z[:, :1], x3, cyclic(3)), torch.zeros(18, 1, dtype=torch.float64), rtol=0, atol=1e-14)


def test_orbit_tangent_matches_finite_difference_of_group_action():
    """η = d/dt Π(exp tξ) f at t = 0, checked by a central difference of the exact action."""
    x = torch.cat([polar_grid(5, 7, 1.2), torch.linspace(-1, 1, 35, dtype=torch.float64)[:, None]], 1)
    g = so2(input_dim=3, input_plane=(0, 1), output_dim=2, output_plane=(0, 1))

    def f(z):  # not equivariant
        return torch.stack([torch.sin(z[:, 0]) * z[:, 2] + z[:, 1] ** 3, torch.cos(z[:, 1] + z[:, 0] * z[:, 2])], 1)

    eta = orbit_tangent_x(f, x, g)
    h = 1e-5
    fd = (transform_x(f, g, h)(x) - transform_x(f, g, -h)(x)) / (2 * h)
    assert float((eta - fd).norm() / eta.norm()) < 1e-8


def test_so2_convention_rotates_invariant_functions_by_plus_t():
    """With Ω = [[0, 1], [−1, 0]] the +c prediction is f ∘ R_t ([Attribution])."""
    x = polar_grid(3, 5, 1.0)

    def f(z):
        return z[:, :1] + 0.3 * z[:, 1:2] ** 2

    t = 0.37
    pred = transform_x(f, so2(), t)(x)
    torch.testing.assert_close(pred, f(x @ rotation(t).T), rtol=0, atol=1e-14)
    # η of a linear function f(x) = x1: −∇f·(Ωx) = −x2
    eta = orbit_tangent_x(lambda z: z[:, :1], x, so2())
    torch.testing.assert_close(eta[:, 0], -x[:, 1], rtol=0, atol=1e-14)


def test_o2_and_lie_group():
    x = polar_grid(3, 8, 1.0)
    g = o2()
    assert g.order == 128 and g.dim == 1
    # an SO(2)-invariant but reflection-odd function has P_E f = 0 under O(2)
    def odd(z):
        r2 = (z**2).sum(1, keepdim=True)
        return torch.sin(4 * torch.atan2(z[:, 1:2], z[:, 0:1])) * r2

    assert float(reynolds_x(odd, x, g).abs().max()) < 1e-12
    # a general Lie group: SO(2) given by its generator only — η works, Reynolds needs quadrature
    omega = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    lg = lie_group(omega, torch.zeros(1, 1, dtype=torch.float64))
    e1 = orbit_tangent_x(odd, x, lg)
    e2 = orbit_tangent_x(odd, x, so2())
    torch.testing.assert_close(e1, e2, rtol=0, atol=1e-14)
    with pytest.raises(GroupError, match="quadrature"):
        reynolds_x(odd, x, lg)


def test_probe_set_not_invariant_warns_with_leak():
    grid = torch.linspace(-1, 1, 6, dtype=torch.float64)
    sq = torch.stack(torch.meshgrid(grid, grid, indexing="xy"), -1).reshape(-1, 2)
    assert probe_leak(sq, cyclic(4)) < 1e-12  # the centred square grid is C_4-invariant
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reynolds_x(lambda z: z[:, :1], sq, cyclic(4))
    leak = probe_leak(sq, cyclic(8))
    assert leak > 0.05
    with pytest.warns(ProbeSetWarning, match=f"leak {leak:.3g}"):
        reynolds_x(lambda z: z[:, :1], sq, cyclic(8))
    # a polar grid with 32 angles is invariant under C_8 and D_8
    assert probe_leak(polar_grid(3, 32), dihedral(8)) < 1e-12


def test_bad_input_named_errors():
    g = so2()
    x3 = torch.zeros(4, 3, dtype=torch.float64)
    with pytest.raises(ShapeError, match="dimension 2"):
        reynolds_x(lambda z: z[:, :1], x3, g)
    with pytest.raises(ShapeError, match="empty"):
        orbit_tangent_x(lambda z: z[:, :1], torch.zeros(0, 2, dtype=torch.float64), g)
    x = polar_grid(2, 4)
    with pytest.raises(NonFiniteError):
        reynolds_x(lambda z: z[:, :1] / 0.0, x, g)
    with pytest.raises(ShapeError, match="output"):
        reynolds_x(lambda z: z, x, g)  # 2 outputs, trivial ρ of dimension 1
    with pytest.raises(GroupError, match="finite"):
        orbit_tangent_x(lambda z: z[:, :1], x, cyclic(4))
    with pytest.raises(GroupError, match="input_plane"):
        so2(input_dim=2, input_plane=(0, 2))
    # closure check of a user-given finite group
    r = rotation(2 * math.pi / 3)
    with pytest.raises(GroupError, match="closed"):
        finite_group(torch.stack([torch.eye(2, dtype=torch.float64), r]), torch.ones(2, 1, 1))
    ok = finite_group(torch.stack([torch.eye(2, dtype=torch.float64), r, r @ r]), torch.ones(3, 1, 1))
    assert ok.order == 3


# ---------------------------------------------------------------- finite groups through paramsym.groups


def _old_cyclic_taus(n):
    """The element list the former stand-alone constructor built: R(2πk/n), k = 0..n-1."""
    return torch.stack([rotation(2 * math.pi * k / n) for k in range(n)])


def test_cyclic_and_dihedral_through_groups_equal_the_old_element_sets():
    from paramsym.groups import finite as fin

    c4 = cyclic(4)
    assert c4.name == "C_4" and c4.order == 4 and c4.finite and c4.meta == {"kind": "cyclic", "n": 4}
    assert torch.equal(c4.taus, _old_cyclic_taus(4))  # bit for bit
    assert torch.equal(c4.rhos, torch.ones(4, 1, 1, dtype=torch.float64))
    assert torch.equal(c4.weights, torch.full((4,), 0.25, dtype=torch.float64))
    assert c4.structure.order == 4 and c4.structure.family == ("cyclic", 4)
    ref = torch.linalg.matrix_power
    d3 = dihedral(3, input_dim=3, output_dim=2, output_plane=(0, 1))
    old = _old_cyclic_taus(3)
    old_in = torch.cat([old, old @ REFLECTION])
    assert torch.equal(d3.taus[:, :2, :2], old_in) and torch.equal(d3.rhos, old_in)
    assert torch.equal(d3.taus[:, 2, 2], torch.ones(6, dtype=torch.float64))
    # the same group from generator images (paramsym.groups.reps.from_generators)
    from paramsym.groups.reps import from_generators

    G = fin.cyclic(4)
    rep = from_generators(G, [rotation(math.pi / 2).numpy()])
    triv = from_generators(G, [np.eye(1)])
    fg = function_group(G, rep, triv, name="C_4")
    torch.testing.assert_close(fg.taus, c4.taus, rtol=0, atol=1e-15)
    assert all(torch.allclose(ref(fg.taus[1], k), fg.taus[k]) for k in range(4))


def test_function_group_checks_come_from_groups():
    from paramsym.groups import finite as fin
    from paramsym.groups.reps import Representation, trivial

    G, H = fin.cyclic(4), fin.cyclic(3)
    with pytest.raises(GroupError, match="not of"):
        function_group(G, trivial(H, 2), trivial(G))
    bad = Representation(G, np.stack([rotation(math.pi / 2 * k).numpy() for k in (0, 1, 3, 2)]), check=False)
    with pytest.raises(RepresentationError, match="homomorphism"):
        function_group(G, bad, trivial(G))
    # finite_group: closure through from_matrices, the given order kept, repeats refused
    r = rotation(2 * math.pi / 3)
    elems = torch.stack([r, torch.eye(2, dtype=torch.float64), r @ r])
    g3 = finite_group(elems, torch.ones(3, 1, 1))
    assert torch.equal(g3.taus, elems) and g3.structure.order == 3
    assert [g3.structure.matrices[j][:2, :2] for j in g3.meta["elements"]][0] == pytest.approx(r.numpy())
    with pytest.raises(GroupError, match="repeats"):
        finite_group(torch.cat([elems, elems[:1]]), torch.ones(4, 1, 1))
    with pytest.raises(GroupError, match="singular"):
        finite_group(torch.zeros(1, 2, 2), torch.ones(1, 1, 1))
