"""Flow monitor, cutoff sweep, quadrature check and orbit closure against closed forms."""

import math

import numpy as np
import torch

from paramsym.attribution import (
    SymmetryProblem,
    dense_jacobian,
    function_from_module,
    polar_grid,
    run_flow,
    so2,
)
from paramsym.attribution.diagnostics import (
    FlowMonitor,
    cutoff_sweep,
    orbit_closure,
    quadrature_check,
    sparse_attribution,
)
from paramsym.models.mlp import mlp


def _problem(gauge="column"):
    model = mlp([2, 10, 10, 1], "tanh", generator=torch.Generator().manual_seed(7))
    fn, params = function_from_module(model)
    return SymmetryProblem(fn, params, polar_grid(4, 16, 1.5), so2(), rtol=1e-3, gauge=gauge)


def test_monitor_on_fixed_flow_is_a_straight_line_and_staleness_starts_at_the_residual():
    pr = _problem()
    z0 = pr.lifts(which=("c",)).c
    mon = FlowMonitor(pr, "+c", 0.06, task=lambda f: (float(f(pr.probes).square().mean()), 0.5), every=1, steps=3)
    mon.set_first_direction(z0.direction)
    run_flow(pr, "+c", "fixed", t_end=0.06, dt=0.02, progress=False, callback=mon)
    s = mon.series
    # θ_t = θ_0 + t z_0: path length = distance = t‖z_0‖
    np.testing.assert_allclose(s["path_length"], [k * 0.02 * float(z0.direction.norm()) for k in range(4)], rtol=1e-10)
    np.testing.assert_allclose(s["distance"], s["path_length"], rtol=1e-10)
    assert s["staleness"][0] is None
    # at the first step the frozen direction is almost the current one: staleness ≈ the lift residual
    assert abs(s["staleness"][1] - z0.residual) < 0.05
    # endpoint distance of +c decreases towards f_0 ∘ R_T and starts at ‖f_0 − f_0∘R_T‖/‖f_0‖
    assert s["endpoint_distance"][0] > s["endpoint_distance"][-1]
    assert mon.end()["accuracy_end"] == 0.5 and s["task_loss"][0] > 0


def test_cutoff_sweep_monotone_and_matches_svd_projection():
    pr = _problem()
    J = dense_jacobian(pr.fn, pr.params, pr.probes)
    eta = pr.eta().reshape(-1)
    rows = cutoff_sweep(J, eta, (1e-1, 1e-2, 1e-3, 1e-4), gauge="none")
    ranks = [r["rank"] for r in rows]
    cap = [r["captured_energy"] for r in rows]
    assert ranks == sorted(ranks) and cap == sorted(cap)
    U, s, _ = np.linalg.svd(J.numpy(), full_matrices=False)
    for r in rows:
        k = int((s >= r["rtol"] * s[0]).sum())
        P = U[:, :k] @ (U[:, :k].T @ eta.numpy())
        assert r["rank"] == k
        assert abs(r["captured_energy"] - (P @ P) / (eta.numpy() @ eta.numpy())) < 1e-9
        # gauge none: the residual is the projection residual
        assert abs(r["residual"] - r["projection_residual"]) < 1e-7
    assert abs(rows[2]["cos_to_reference"] - 1.0) < 1e-12


def test_quadrature_and_orbit_closure_on_an_invariant_and_a_band_limited_function():
    probes = polar_grid(3, 12, 2.0)

    def inv(x):
        return (x.square().sum(-1, keepdim=True)) ** 1.5

    q = quadrature_check(inv, probes, 64)
    assert q["refined_change"] < 1e-13 and q["coarsened_change"] < 1e-13

    def band(x):  # cos 3φ · r³ is averaged exactly by C_n for n > 3
        r = x.norm(dim=-1, keepdim=True)
        phi = torch.atan2(x[:, 1:2], x[:, 0:1])
        return r**3 * torch.cos(3 * phi) + 1.0

    q = quadrature_check(band, probes, 8)
    assert q["refined_change"] < 1e-13
    assert quadrature_check(band, probes, 6)["coarsened_change"] > 0.1  # C_3 aliases cos 3φ
    assert orbit_closure(band, probes) < 1e-12
    assert orbit_closure(lambda x: x[:, :1] * 2.0 + math.pi, probes) < 1e-12


def test_sparse_attribution_closed_form_with_orthonormal_columns():
    """J with orthonormal columns: lasso / elastic net are soft-thresholds of Jᵀt (closed form)."""
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((40, 12)))
    J, t = torch.from_numpy(Q), torch.from_numpy(rng.standard_normal(40))
    g = Q.T @ t.numpy()
    for alpha in (1.0, 0.5):
        r = sparse_attribution(J, t, lam_rel=0.3, alpha=alpha, iters=200)
        lam = 0.3 * np.abs(g).max()
        ref = np.sign(g) * np.maximum(np.abs(g) - lam * alpha, 0) / (1 + lam * (1 - alpha))
        np.testing.assert_allclose(r["direction"].numpy(), ref, atol=1e-12)
        assert r["support"] == int((ref != 0).sum()) < 12
    assert sparse_attribution(J, t, lam_rel=1.0, iters=20)["support"] == 0


def test_monitor_profile_heatmap_rows_are_the_angular_profiles():
    from paramsym.attribution import angular_profile

    pr = _problem()
    mon = FlowMonitor(pr, "-b", 0.02, every=1, steps=1, profile_radius=1.0)
    trace = run_flow(pr, "-b", "fixed", t_end=0.02, dt=0.02, progress=False, callback=mon)
    assert len(mon.profiles) == 2 and mon.profiles[0].shape == (360,)
    _, d1 = angular_profile(pr.function_of_x(trace.snapshots[0.02]), 1.0)
    np.testing.assert_allclose(mon.profiles[1].numpy(), d1[:, 0], atol=1e-14)
