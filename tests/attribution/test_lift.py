"""Truncated, gauged lifting: independent numpy references, matrix-free agreement, sanity case."""

import numpy as np
import pytest
import torch
from lift_systems import tanh_mlp_function, with_spectrum

from paramsym.attribution import (
    DenseLift,
    JacobianOperator,
    StackedOperator,
    SymmetryProblem,
    dense_jacobian,
    function_from_module,
    lift,
    lift_matrix_free,
    orbit_tangent,
    polar_grid,
    so2,
    stack_rows,
)
from paramsym.errors import ShapeError
from paramsym.experiments.attribution.sanity.run import lifting_sanity
from paramsym.models.mlp import mlp


def _matrix_with_spectrum(m, p, sigma, seed=0):
    return torch.from_numpy(with_spectrum(np.random.default_rng(seed), m, p, sigma)[1])


SIGMA = np.array([3.0, 1.0, 0.2, 1e-2, 4e-3, 5e-4, 1e-5, 1e-7])  # τσ₁ = 3e-3 cuts after 4e-3


@pytest.mark.parametrize("solver", ["gram", "svd"])
def test_no_gauge_equals_numpy_truncated_pinv(solver):
    J = _matrix_with_spectrum(30, 50, SIGMA)
    t = torch.from_numpy(np.random.default_rng(1).standard_normal(30))
    r = lift(J, t, rtol=1e-3, gauge="none", solver=solver)
    ref = np.linalg.pinv(J.numpy(), rcond=1e-3) @ t.numpy()
    assert r.rank == 5
    np.testing.assert_allclose(r.direction.numpy(), ref, rtol=0, atol=1e-9 * np.abs(ref).max())
    # residual = ‖(I − P_k) t‖ / ‖t‖ in closed form from the SVD
    U = np.linalg.svd(J.numpy(), full_matrices=False)[0][:, :5]
    resid = np.linalg.norm(t.numpy() - U @ (U.T @ t.numpy())) / np.linalg.norm(t.numpy())
    assert abs(r.residual - resid) < 1e-10


@pytest.mark.parametrize("solver", ["gram", "svd"])
def test_column_gauge_is_truncated_pinv_of_normalised_matrix(solver):
    scales = torch.from_numpy(np.random.default_rng(2).uniform(0.05, 5.0, 50))
    J = _matrix_with_spectrum(30, 50, SIGMA) * scales
    t = torch.from_numpy(np.random.default_rng(3).standard_normal(30))
    r_none = lift(J, t, gauge="none", solver=solver)
    r_col = lift(J, t, gauge="column", solver=solver)
    # the resolved rank is J's own, whatever the gauge
    Jn, D = J.numpy(), J.norm(dim=0).numpy()
    s = np.linalg.svd(Jn, compute_uv=False)
    k = int((s >= 1e-3 * s[0]).sum())
    assert r_col.rank == r_none.rank == k
    # independent reference: c = D⁻¹ (J D⁻¹)⁺_k t from numpy's SVD of J D⁻¹ at rank k
    UD, sD, VDt = np.linalg.svd(Jn / D, full_matrices=False)
    ref = (VDt[:k].T @ ((UD[:, :k].T @ t.numpy()) / sD[:k])) / D
    np.testing.assert_allclose(r_col.direction.numpy(), ref, rtol=0, atol=1e-8 * np.abs(ref).max())
    # J c is the projection of t onto the k leading left singular vectors of J D⁻¹
    proj = UD[:, :k] @ (UD[:, :k].T @ t.numpy())
    np.testing.assert_allclose(r_col.reached.numpy(), proj, rtol=0, atol=1e-9)
    shift = np.linalg.norm(proj - r_none.reached.numpy()) / np.linalg.norm(t.numpy())
    assert abs(r_col.info["gauge_image_shift"] - shift) < 1e-9
    # equal column norms: the gauge is a global scale and changes nothing
    Jeq = J / J.norm(dim=0)
    torch.testing.assert_close(lift(Jeq, t, gauge="column", solver=solver).direction,
                               lift(Jeq, t, gauge="none", solver=solver).direction, rtol=1e-7, atol=1e-9)


def test_dead_columns_get_zero_coefficients():
    J = _matrix_with_spectrum(20, 12, [2.0, 1.0, 0.5, 0.3])
    J[:, 3] = 0.0
    J[:, 7] = J[:, 7] * 1e-12 / float(J[:, 7].norm())
    t = J @ torch.ones(12, dtype=torch.float64)
    for gauge in ("none", "column"):
        r = lift(J, t, gauge=gauge)
        assert r.dead.tolist() == [i in (3, 7) for i in range(12)]
        assert float(r.direction[3]) == 0.0 and float(r.direction[7]) == 0.0
        assert r.residual < 1e-10


def test_target_size_mismatch_is_named():
    J = torch.eye(4, dtype=torch.float64)
    with pytest.raises(ShapeError, match="rows"):
        lift(J, torch.ones(5, dtype=torch.float64))
    with pytest.raises(ShapeError):
        stack_rows([(J, torch.ones(4)), (torch.ones(2, 3), torch.ones(2))])


@pytest.fixture(scope="module")
def small_problem():
    fn, params = tanh_mlp_function([2, 12, 12, 1], seed=4)
    x = polar_grid(6, 16, 2.0)
    return fn, params, x


@pytest.mark.parametrize("gauge", ["none", "column"])
def test_matrix_free_gram_agrees_with_dense(small_problem, gauge):
    fn, params, x = small_problem
    J = dense_jacobian(fn, params, x)
    eta = orbit_tangent(fn, params, x, so2()).reshape(-1)
    dense = lift(J, eta, gauge=gauge)
    mf = lift_matrix_free(JacobianOperator(fn, params, x), eta, method="gram", gauge=gauge)
    rel = float((mf.direction - dense.direction).norm() / dense.direction.norm())
    assert mf.rank == dense.rank
    # measured 1.5e-12 (none) / 5.3e-13 (column) and 3e-15 on the residual: bounds ≈ 100× that
    assert rel <= 1e-10, rel
    assert abs(mf.residual - dense.residual) <= 1e-12


def test_lsmr_agrees_with_dense_pinv_when_nothing_is_truncated():
    """Tall J of full column rank (a 2→4→1 net on 96 probes): every σ ≥ τσ₁, so the truncated
    pinv is the exact least-squares solution, which LSMR with damp=0 must reach."""
    fn, params = tanh_mlp_function([2, 4, 1], seed=5)
    x = polar_grid(6, 16, 2.0)
    J = dense_jacobian(fn, params, x)
    s = torch.linalg.svdvals(J)
    assert float(s[-1] / s[0]) > 1e-6  # precondition of this test
    eta = orbit_tangent(fn, params, x, so2()).reshape(-1)
    dense = lift(J, eta, gauge="none", rtol=1e-6)
    assert dense.rank == J.shape[1]
    mf = lift_matrix_free(JacobianOperator(fn, params, x), eta, method="lsmr", damp=0.0, atol=1e-14, btol=1e-14)
    rel = float((mf.direction - dense.direction).norm() / dense.direction.norm())
    assert rel <= 5e-7, rel  # measured 4.2e-9 (LSMR stops at its atol/btol): ≈ 100× that


@pytest.mark.parametrize("gauge", ["none", "column"])
def test_lsmr_with_damping_is_tikhonov(small_problem, gauge):
    fn, params, x = small_problem
    J = dense_jacobian(fn, params, x)
    t = orbit_tangent(fn, params, x, so2()).reshape(-1)
    lam = 1e-2 * float(torch.linalg.matrix_norm(J, 2))
    mf = lift_matrix_free(JacobianOperator(fn, params, x), t, method="lsmr", damp=lam, gauge=gauge,
                          atol=1e-14, btol=1e-14)
    Jn, tn = J.numpy(), t.numpy()
    D = np.linalg.norm(Jn, axis=0) if gauge == "column" else np.ones(Jn.shape[1])
    A = Jn / D
    z = np.linalg.solve(A.T @ A + lam**2 * np.eye(A.shape[1]), A.T @ tn)
    ref = z / D
    rel = np.linalg.norm(mf.direction.numpy() - ref) / np.linalg.norm(ref)
    assert rel <= 1e-10, rel  # measured 1.4e-12 (none) / 1.8e-13 (column): ≈ 100× that


def test_stacked_conditions_equal_stacked_rows():
    """Stacking the probe sets of several α values = stacking their (J, η) systems."""
    gen = torch.Generator().manual_seed(6)
    model = mlp([3, 10, 2], "tanh", generator=gen)
    fn, params = function_from_module(model)
    q = polar_grid(4, 8, 1.0)
    xs = [torch.cat([q, torch.full((q.shape[0], 1), a, dtype=torch.float64)], 1) for a in (-0.8, 0.2, 1.1)]
    g = so2(input_dim=3, output_dim=2, output_plane=(0, 1))
    prob = SymmetryProblem(fn, params, torch.cat(xs), g)
    att = prob.lifts()
    systems = [(dense_jacobian(fn, params, x), orbit_tangent(fn, params, x, g).reshape(-1)) for x in xs]
    J, t = stack_rows(systems)
    ref = lift(J, t)
    torch.testing.assert_close(att.c.direction, ref.direction, rtol=1e-9, atol=1e-12)
    # the stacked matrix-free operator reproduces the stacked system
    op = StackedOperator([JacobianOperator(fn, params, x) for x in xs])
    v = torch.randn(J.shape[1], generator=gen, dtype=torch.float64)
    u = torch.randn(J.shape[0], generator=gen, dtype=torch.float64)
    torch.testing.assert_close(op.matvec(v), J @ v, rtol=0, atol=1e-12)
    torch.testing.assert_close(op.rmatvec(u), J.T @ u, rtol=0, atol=1e-12)
    torch.testing.assert_close(op.gram(chunk_size=7), J @ J.T, rtol=0, atol=1e-11)


def test_sanity_first_layer_trainable_vs_frozen():
    free = lifting_sanity(freeze_first=False)
    frozen = lifting_sanity(freeze_first=True)
    # η = J vec(−W₁ξ) in closed form
    assert free.closed_form_error is not None and free.closed_form_error <= 1e-12
    assert free.attribution.c.residual <= 1e-8
    assert free.liftable and "liftable" in free.verdict() and "NOT" not in free.verdict()
    assert frozen.attribution.c.residual > 0.1
    assert not frozen.liftable and "NOT liftable" in frozen.verdict()


def test_direction_moves_function_along_eta(small_problem):
    """First-order check independent of J: f(θ + h c) − f(θ − h c) ≈ 2h·J c (finite differences)."""
    fn, params, x = small_problem
    prob = SymmetryProblem(fn, params, x, so2())
    att = prob.lifts()
    th = prob.theta0
    h = 1e-5
    plus = prob.values(th + h * att.c.direction)
    minus = prob.values(th - h * att.c.direction)
    fd = ((plus - minus) / (2 * h)).reshape(-1)
    assert float((fd - att.c.reached).norm() / att.c.reached.norm()) < 1e-6
    # and J c is the resolved part of η: residual = ‖J c − η‖/‖η‖
    assert abs(float((att.c.reached - att.eta.reshape(-1)).norm() / att.eta.norm()) - att.c.residual) < 1e-12


def test_dense_lift_reuses_factorisation():
    J = _matrix_with_spectrum(10, 20, [1.0, 0.5, 0.1])
    solver = DenseLift(J, gauge="none")
    t1, t2 = J[:, 0].clone(), J[:, 1].clone()
    assert solver.solve(t1).residual < 1e-12 and solver.solve(t2).residual < 1e-12


def test_generator_lifts_and_tables():
    """Several generators (so(3) acting on R³): one factorisation, one lift per generator."""
    from paramsym.attribution import lie_group
    from paramsym.attribution.tables import markdown, parameter_table, tensor_table

    gen = torch.Generator().manual_seed(7)
    model = mlp([3, 8, 1], "tanh", generator=gen)
    fn, params = function_from_module(model)
    x = torch.randn(40, 3, generator=gen, dtype=torch.float64)
    E = torch.zeros(3, 3, 3, dtype=torch.float64)
    for k, (i, j) in enumerate([(1, 2), (2, 0), (0, 1)]):
        E[k, i, j], E[k, j, i] = -1.0, 1.0
    g = lie_group(E, torch.zeros(3, 1, 1, dtype=torch.float64), name="SO(3)")
    prob = SymmetryProblem(fn, params, x, g)
    lifts = prob.generator_lifts()
    J = dense_jacobian(fn, params, x)
    for k, r in enumerate(lifts):
        ref = lift(J, orbit_tangent(fn, params, x, g, k).reshape(-1))
        torch.testing.assert_close(r.direction, ref.direction, rtol=1e-10, atol=1e-12)
    # the first layer is trainable, so every rotation generator is liftable up to truncation
    assert max(r.residual for r in lifts) < 1e-2
    att = SymmetryProblem(fn, params, x, g, xi=torch.tensor([1.0, 0.0, 0.0])).lifts(which=("c",))
    rows = tensor_table(att)
    assert sum(r["c_share"] for r in rows) == pytest.approx(1.0)
    assert sum(r["Sc_share"] for r in rows) == pytest.approx(1.0)
    top = parameter_table(att, top=5)
    assert len(top) == 5 and top[0]["abs_c"] == pytest.approx(float(att.c.direction.abs().max()))
    assert markdown(rows).count("\n") == len(rows) + 2


# ---------------------------------------------------------------- the tall (J_Lᵀ J_L) solver


@pytest.mark.parametrize("m,p", [(80, 30), (400, 60)])  # LAPACK subset and Lanczos paths
def test_tall_solver_equals_numpy_references_and_the_wide_route(m, p):
    """solver='tall' (p × p Gram) is the same truncated, gauged pinv as the M × M route and as
    numpy's SVD references; 'auto' chooses it when M ≥ p."""
    sigma = np.concatenate([SIGMA, np.zeros(p - len(SIGMA))])[:p]
    scales = torch.from_numpy(np.random.default_rng(8).uniform(0.05, 5.0, p))
    J = _matrix_with_spectrum(m, p, sigma[sigma > 0], seed=4) * scales
    J[:, 3] = 0.0  # a dead column
    t = torch.from_numpy(np.random.default_rng(9).standard_normal(m))
    assert DenseLift(J).solver == "tall" and DenseLift(J.T.contiguous()).solver == "gram"
    Jn, tn = J.numpy(), t.numpy()
    live = np.linalg.norm(Jn, axis=0) > 0
    k = 5  # σ ≥ τσ₁ = 3e-3 keeps 3, 1, 0.2, 1e-2, 4e-3
    # gauge none: numpy's truncated pinv of the live columns
    r = lift(J, t, gauge="none", solver="tall")
    ref = np.zeros(p)
    ref[live] = np.linalg.pinv(Jn[:, live], rcond=1e-3) @ tn
    assert r.rank == k and bool(r.dead[3]) and float(r.direction[3]) == 0.0
    np.testing.assert_allclose(r.direction.numpy(), ref, rtol=0, atol=1e-8 * np.abs(ref).max())
    # gauge column: D⁻¹ (J D⁻¹)⁺_k t from numpy's SVD
    r = lift(J, t, gauge="column", solver="tall")
    D = np.linalg.norm(Jn[:, live], axis=0)
    UD, sD, VDt = np.linalg.svd(Jn[:, live] / D, full_matrices=False)
    ref = np.zeros(p)
    ref[live] = (VDt[:k].T @ ((UD[:, :k].T @ tn) / sD[:k])) / D
    np.testing.assert_allclose(r.direction.numpy(), ref, rtol=0, atol=1e-7 * np.abs(ref).max())
    for gauge in ("none", "column"):
        tall = lift(J, t, gauge=gauge, solver="tall")
        wide = lift(J, t, gauge=gauge, solver="gram")
        assert tall.rank == wide.rank and tall.info["solver"] == "tall" and tall.method == "dense"
        assert float((tall.direction - wide.direction).norm() / wide.direction.norm()) < 1e-8
        assert abs(tall.residual - wide.residual) < 1e-10
        torch.testing.assert_close(tall.sigma[:k], wide.sigma[:k], rtol=1e-9, atol=0)


def test_tall_solver_refuses_float32_and_bad_names():
    J = _matrix_with_spectrum(20, 5, [1.0, 0.5]).float()
    assert DenseLift(J).solver == "gram"  # auto keeps float32 on the M × M route
    with pytest.raises(ValueError, match="float64"):
        DenseLift(J, solver="tall")
    with pytest.raises(ValueError, match="solver must be one of"):
        DenseLift(J.double(), solver="qr")
