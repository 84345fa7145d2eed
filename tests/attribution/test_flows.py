"""Flows along c* and b* against their exact function-space predictions (small model)."""

import math

import numpy as np
import pytest
import torch

from paramsym.attribution import (
    SymmetryProblem,
    angular_profile,
    function_from_module,
    polar_grid,
    predicted_function,
    rms,
    run_flow,
    so2,
)
from paramsym.models.mlp import mlp


@pytest.fixture(scope="module")
def problem():
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(3)
    model = mlp([2, 16, 16, 1], "tanh", generator=gen)
    fn, params = function_from_module(model)
    return SymmetryProblem(fn, params, polar_grid(8, 24, 2.0), so2())


def test_resolved_minus_b_decays_defect_like_exp(problem):
    tr = run_flow(problem, "-b", "resolved", t_end=0.5, dt=0.01, progress=False)
    rec = tr.record()
    assert rec.delta_predicted == pytest.approx(math.exp(-0.5) * rec.delta_start, rel=1e-9)
    # resolved: within 1% of the prediction (Euler with dt = 0.01 contributes ~0.25%)
    assert abs(rec.delta_end - rec.delta_predicted) / rec.delta_predicted < 0.01
    assert rec.residual_start < 0.01 and rec.residual_end < 0.01
    assert len(tr.residuals) == 50 and not any(math.isnan(r) for r in tr.residuals)


def test_fixed_departs_more_than_resolved(problem):
    out = {}
    for mode in ("resolved", "fixed"):
        for d in ("+c", "-b"):
            out[mode, d] = run_flow(problem, d, mode, t_end=0.5, dt=0.02, progress=False).record()
    for d in ("+c", "-b"):
        res, fix = out["resolved", d], out["fixed", d]
        err_res = abs(res.delta_end - res.delta_predicted)
        err_fix = abs(fix.delta_end - fix.delta_predicted)
        assert err_fix > 3 * err_res, (d, err_res, err_fix)
        assert fix.extra["deviation_end"] > 3 * res.extra["deviation_end"]
        # the fixed flow solves once: one residual, then NaN placeholders
        assert fix.residual_start == fix.residual_end


def test_fixed_flow_deviation_is_second_order(problem):
    """θ_0 + t c* matches the prediction to first order: deviation ∝ t² for small t."""
    devs = [run_flow(problem, "+c", "fixed", t_end=T, dt=T / 2, snapshot_at=(), progress=False).deviation[-1]
            for T in (0.02, 0.04)]
    assert 3.5 < devs[1] / devs[0] < 4.5


def test_plus_c_rotates_the_profile(problem):
    tr = run_flow(problem, "+c", "resolved", t_end=0.3, dt=0.01, snapshot_at=(0.0, 0.3), progress=False)
    th0, th1 = tr.snapshots[0.0], tr.snapshots[0.3]
    phi, d0 = angular_profile(problem.function_of_x(th0), 1.5)
    _, d1 = angular_profile(problem.function_of_x(th1), 1.5)
    # predicted d_t(φ) = d_0(φ + t): evaluate the original function at rotated angles
    _, dp = angular_profile(predicted_function(problem, th0, "+c", tr.snapshot_taus[0.3]), 1.5)
    shifted = np.interp((phi + 0.3) % (2 * np.pi), np.append(phi, 2 * np.pi), np.append(d0[:, 0], d0[0, 0]))
    assert np.max(np.abs(dp[:, 0] - shifted)) < 1e-3 * np.max(np.abs(d0))  # interpolation error only
    assert rms(d1 - dp) < 0.05 * rms(d0)
    assert rms(d1) / rms(d0) == pytest.approx(1.0, abs=0.05)


def test_unit_steps_and_backward_sign(problem):
    """Hamiltonian-walk style: unit directions, step 0.02, forward then backward."""
    thetas = []
    fwd = run_flow(problem, "+c", "resolved", steps=3, dt=0.02, normalize=True, progress=False,
                   callback=lambda k, th, tr: thetas.append(th.clone()))
    steps = [float((b - a).norm()) for a, b in zip(thetas, thetas[1:])]
    assert steps == pytest.approx([0.02] * 3, rel=1e-12)
    th = fwd.snapshots[max(fwd.snapshots)]
    # function-space time is Σ dt/‖z_k‖
    assert fwd.taus[-1] == pytest.approx(sum(0.02 / n for n in fwd.direction_norms), rel=1e-12)
    back = run_flow(problem, "+c", "resolved", steps=3, dt=0.02, normalize=True, sign=-1, theta0=th, progress=False)
    assert back.taus[-1] < 0
    th_back = back.snapshots[max(back.snapshots)]
    assert float((th_back - problem.theta0).norm()) < 0.01


def test_angular_profile_closed_form():
    phi, d = angular_profile(lambda z: z[:, :1] + 3.0, 2.0, n_angles=90)
    np.testing.assert_allclose(d[:, 0], 2.0 * np.cos(phi), atol=1e-13)
    # extra coordinates are filled (e.g. α) and the plane is respected
    phi, d = angular_profile(lambda z: z[:, 2:3] * z[:, 1:2], 0.5, input_dim=3, fill=[0.0, 0.0, 4.0])
    np.testing.assert_allclose(d[:, 0], 4.0 * 0.5 * np.sin(phi), atol=1e-13)
