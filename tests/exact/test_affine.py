"""The affine solver recovers the known algebras with no dimension given, exactly (float64)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import analytic_basis
from torch import nn

from paramsym.errors import (
    ConfigError,
    EmptyBlockError,
    ParameterNameError,
    ShapeError,
    ToleranceError,
    TooFewSamplesError,
)
from paramsym.exact import AffineSolverConfig, Ansatz, CrossMap, RowMaps, Translations, solve_affine
from paramsym.exact.presets import build_preset, expected_dimension, preset_samples
from paramsym.groups.algebra import commutativity, generated_algebra, principal_angles
from paramsym.targets import FunctionTarget, Target

FAST = ["linear2x2", "linear3x2", "relu242", "leakyrelu-bias", "tanh-mlp", "attention-d8h2",
        "attention-d8h2-bias"]


def solve_preset(name, **kw):
    target, ansatz = build_preset(name)
    res = solve_affine(target, ansatz, AffineSolverConfig(samples=preset_samples(name), **kw),
                       generator=torch.Generator().manual_seed(1))
    return target, res


def recovered_vs_analytic(name, target, res):
    a, b = res.generators()
    rec = torch.cat([a, b[:, :, None]], 2)  # (d, p, p+1)
    ana = analytic_basis(name, target)
    return rec, ana


@pytest.mark.parametrize("name", FAST)
def test_preset_dimension_angle_residual(name):
    target, res = solve_preset(name)
    expected = expected_dimension(name)
    assert res.status == "successful"
    assert res.dimension == expected
    assert res.gap > 1e8  # every preset has a clean gap (measured ≥ 1e10)
    if expected:
        rec, ana = recovered_vs_analytic(name, target, res)
        assert ana.shape[0] == expected
        assert float(principal_angles(rec, ana).max()) <= 1e-6
        assert float(res.residuals.max()) <= 1e-10


def _relative_output_change(target, theta, new):
    f0 = target(theta)
    return float((target(new) - f0).norm() / f0.norm())


@pytest.mark.parametrize("name", ["linear2x2", "relu242", "attention-d8h2"])
def test_finite_flow_invariance_and_motion(name):
    target, res = solve_preset(name)
    t64 = target.to(torch.float64)
    theta = t64.theta0 + 0.1 * torch.randn(t64.p, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    for i in range(min(res.dimension, 6)):
        new = res.flow(i, 0.3, theta)
        moved = float((new - theta).norm() / theta.norm())
        assert moved > 1e-3  # the action moves the parameters
        assert _relative_output_change(t64, theta, new) <= 1e-10


def test_relu_rescalings_commute_and_linear_ones_do_not():
    _, relu = solve_preset("relu242")
    assert commutativity(relu.augmented()) < 1e-10
    _, lin = solve_preset("linear2x2")
    assert commutativity(lin.augmented()) > 0.1
    assert generated_algebra(lin.augmented()).shape[0] == 4  # gl(2) is closed


def test_dimension_flat_over_tolerance_decades():
    _, res = solve_preset("relu242")
    dims = dict(res.decision.table)
    assert all(dims[10.0 ** -e] == 4 for e in range(3, 15))
    summary = res.summary()
    assert {"dimension", "gap", "singular_values"} <= set(summary)


def test_subspace_path_agrees_with_dense():
    target, ansatz = build_preset("relu242")
    dense = solve_affine(target, ansatz, generator=torch.Generator().manual_seed(3))
    sub = solve_affine(target, ansatz, AffineSolverConfig(dense_limit=100), generator=torch.Generator().manual_seed(3))
    assert sub.method == "subspace" and dense.method == "dense"
    assert sub.dimension == dense.dimension == 4
    assert float(principal_angles(dense.coefficients, sub.coefficients).max()) < 1e-8


def test_user_block_partial_selection():
    """The solver on a user's module and a block of parts of tensors: one hidden unit."""
    gen = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU(), nn.Linear(4, 2, bias=False)).double()
    with torch.no_grad():
        for prm in model.parameters():
            prm.copy_(torch.randn(prm.shape, generator=gen, dtype=torch.float64))
    x = torch.randn(32, 3, generator=gen, dtype=torch.float64)
    target = Target(model, ["0.weight[1]", "2.weight[:, 1]"], x)
    res = solve_affine(target, generator=gen)
    assert target.p == 5 and res.dimension == 1
    a, b = res.generators()
    diag = torch.diagonal(a[0]) / a[0].abs().max()
    assert torch.allclose(diag.abs(), torch.ones(5, dtype=torch.float64), atol=1e-10)
    assert float(diag[:3].sum() * diag[3:].sum()) < 0  # input side scaled up, output side down


def test_gram_kronecker_route_matches_explicit_rows():
    target, ansatz = build_preset("relu242")
    t64 = target.to(torch.float64)
    from paramsym.exact.affine import jacobians

    th = t64.theta0 + torch.randn(3, t64.p, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    jac = jacobians(t64, th)
    rows = ansatz.rows(jac, th)
    assert torch.allclose(ansatz.gram(jac, th), rows.T @ rows, rtol=1e-12, atol=1e-12)
    # rows are [vec(∇F_k θᵀ), ∇F_k] (the spec's layout, row-major [A | b])
    g, t = jac[0, 5], torch.cat([th[0], th.new_ones(1)])
    assert torch.allclose(rows[5], torch.outer(g, t).reshape(-1))


def test_structured_terms_assemble_exactly():
    target, _ = build_preset("attention-d8h2-bias")
    block = target.block
    ansatz = Ansatz(target.p, [RowMaps(block, {"in_proj_weight": 0, "in_proj_bias": 0}, [range(0, 8), range(8, 24)]),
                               Translations(block, ["out_proj.bias"]),
                               CrossMap(block, ["out_proj.weight"], ["in_proj_bias"])])
    gen = torch.Generator().manual_seed(0)
    c = torch.randn(3, ansatz.n_unknowns, generator=gen, dtype=torch.float64)
    th = torch.randn(4, target.p, generator=gen, dtype=torch.float64)
    a, b = ansatz.assemble(c)
    direct = ansatz.fields(c, th)
    assert torch.allclose(direct, torch.einsum("kab,mb->mka", a, th) + b, atol=1e-12)


def test_named_errors():
    x = torch.randn(8, 2, dtype=torch.float64)
    with pytest.raises(ParameterNameError):
        Target(nn.ReLU(), None, x)  # a module with no parameters
    empty = FunctionTarget(lambda th: th.sum().reshape(1), torch.zeros(0, dtype=torch.float64))
    with pytest.raises(EmptyBlockError, match="no parameters"):
        solve_affine(empty)
    target, ansatz = build_preset("relu242")
    for bad in (0.0, 1.0, -1e-3, 2.0, float("nan")):
        with pytest.raises(ToleranceError, match="between 0 and 1"):
            solve_affine(target, ansatz, AffineSolverConfig(tol=bad))
    with pytest.raises(TooFewSamplesError, match=r"at least \d+ sample points are needed"):
        solve_affine(target, ansatz, AffineSolverConfig(samples=3))
    with pytest.raises(ShapeError):
        solve_affine(target, Ansatz.full(3))
    for bad in ({"rule": "magic"}, {"oversample": 0.0}, {"k": 0}, {"held_out": 2.5}, {"chunk": True},
                {"check_tol": math.inf}, {"max_rounds": -1}, {"radius": "1"}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            solve_affine(target, ansatz, AffineSolverConfig(**bad))
    with pytest.raises(ConfigError, match="AffineSolverConfig"):
        solve_affine(target, ansatz, {"samples": 40})
    # a finite radius whose sample points overflow H's products (found by tests/test_api_fuzz.py)
    lin, lin_ansatz = build_preset("linear2x2", 0)
    with pytest.raises(ConfigError, match="overflowed float64.*lower radius"):
        solve_affine(lin, lin_ansatz, AffineSolverConfig(samples=20, radius=1e300))


@pytest.mark.slow
def test_relu2881_full_ansatz():
    target, res = solve_preset("relu2881")
    assert res.n_unknowns == 7832 and res.dimension == 16 and res.status == "successful"
    rec, ana = recovered_vs_analytic("relu2881", target, res)
    assert float(principal_angles(rec, ana).max()) <= 1e-6
    assert float(res.residuals.max()) <= 1e-10
    assert commutativity(res.augmented()) < 1e-8
