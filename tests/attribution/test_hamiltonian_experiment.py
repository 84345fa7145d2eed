"""Tests of the Hamiltonian attribution experiment: the tall lift against the core's DenseLift, the
ground-truth force's exact equivariance and exact liftability, profile phase shifts against known
shifts, cached/resumable training, and a small end-to-end run of the preset.

The full reproduction (default configuration) is the ``slow`` test at the end.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from paramsym.attribution import DenseLift, SymmetryProblem, orbit_tangent, reynolds
from paramsym.attribution.flows import phase_shift, predicted_profile
from paramsym.config import apply_overrides
from paramsym.errors import ConfigError, RunDirError
from paramsym.experiments.attribution.hamiltonian.run import (
    HamiltonianConfig,
    force_group,
    report_sections,
    stacked_probes,
)
from paramsym.experiments.attribution.hamiltonian.train import train_or_load
from paramsym.experiments.attribution.presets import resolve_attribution_config, run_attribution
from paramsym.models.hamiltonian import mexican_hat_force
from paramsym.runs.rundir import RunDir

D = torch.float64


# ---------------------------------------------------------------- tall lift == core DenseLift


def _tall_matrix(seed: int, M: int, p: int, decades: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    U, _ = torch.linalg.qr(torch.randn(M, p, generator=g, dtype=D))
    V, _ = torch.linalg.qr(torch.randn(p, p, generator=g, dtype=D))
    s = torch.logspace(0, -decades, p, dtype=D)  # σ straddle τ = 1e-3
    J = (U * s) @ V.T * torch.logspace(-1, 1, p, dtype=D)  # unequal column scales: gauge matters
    J[:, 3] = 0.0  # a dead column
    return J


@pytest.mark.parametrize("gauge", ["column", "none"])
@pytest.mark.parametrize("shape", [(300, 70, 7.0), (700, 360, 12.0)])  # LAPACK and Lanczos paths
def test_tall_lift_matches_core_dense_lift(gauge, shape):
    J = _tall_matrix(0, *shape)
    t = torch.randn(J.shape[0], generator=torch.Generator().manual_seed(1), dtype=D)
    ref = DenseLift(J, gauge=gauge, solver="gram").solve(t)
    ours = DenseLift(J, gauge=gauge, solver="tall").solve(t)
    assert ours.info["solver"] == "tall" and ref.info["solver"] == "gram"
    assert ours.rank == ref.rank and 0 < ours.rank < J.shape[1]
    assert bool(ours.dead[3]) and float(ours.direction[3]) == 0.0
    rel = float((ours.direction - ref.direction).norm() / ref.direction.norm())
    assert rel < 1e-8, rel
    assert abs(ours.residual - ref.residual) < 1e-10
    torch.testing.assert_close(ours.sigma[: ref.rank], ref.sigma[: ref.rank], rtol=1e-9, atol=0)


def test_tall_lift_on_a_learned_force_matches_dense_lift():
    from paramsym.models.hamiltonian import SeparableHamiltonian, force_function

    m = SeparableHamiltonian(width=6, depth=2, generator=torch.Generator().manual_seed(2))
    cfg = apply_overrides(HamiltonianConfig(), ["probe.n_radii=3", "probe.n_angles=8"])
    x = stacked_probes(cfg, [-1.1, 0.6])  # 48 points, 96 rows ≥ 73 parameters
    fn = force_function(m.potential)
    params = {k: v.detach() for k, v in m.potential.named_parameters()}
    grp = force_group(32)
    tall = SymmetryProblem(fn, params, x, grp, cache_size=4).lifts()
    core = SymmetryProblem(fn, params, x, grp)
    ref = DenseLift(core.jacobian(), solver="gram")  # an independent route through JᵀJ's eigenpairs
    assert tall.eta.numel() >= tall.layout.numel
    assert tall.c.info["solver"] == "tall"
    for a, b in ((tall.c, ref.solve(core.eta().reshape(-1))), (tall.b, ref.solve(-core.delta().reshape(-1)))):
        assert a.rank == b.rank
        assert float((a.direction - b.direction).norm() / b.direction.norm()) < 1e-8
        assert abs(a.residual - b.residual) < 1e-9


def test_polar_grid_evaluator_equals_direct_reynolds_and_falls_back_off_grid():
    from paramsym.attribution import equivariance_defect, reynolds_x, transform_x
    from paramsym.models.hamiltonian import SeparableHamiltonian

    m = SeparableHamiltonian(width=8, depth=2, generator=torch.Generator().manual_seed(3))
    cfg = apply_overrides(HamiltonianConfig(), ["probe.n_radii=4", "probe.n_angles=12", "probe.n_quadrature=24"])
    from paramsym.experiments.attribution.hamiltonian.run import build_problem

    prob = build_problem(m, cfg, [0.6, -1.1, 0.0])  # α deliberately unsorted
    direct = equivariance_defect(prob.fn, prob.params, prob.probes, prob.group)
    via_grid = prob.delta()
    assert float((via_grid - direct).norm() / prob.values().norm()) < 1e-13
    g = prob.function_of_x()
    hits = g.hits
    reynolds_x(g, prob.probes, prob.group)
    assert g.hits > hits  # the grid path was taken
    # a prediction rotated by an arbitrary angle: one more cached offset, same values
    gd = lambda x: prob.fn(prob.params, x)  # noqa: E731
    a = reynolds_x(transform_x(g, prob.group, 0.0123), prob.probes, prob.group)
    b = reynolds_x(transform_x(gd, prob.group, 0.0123), prob.probes, prob.group)
    assert float((a - b).norm() / b.norm()) < 1e-13
    # off-grid points are evaluated directly (bit-for-bit)
    x = torch.randn(500, 3, generator=torch.Generator().manual_seed(4), dtype=D)
    assert torch.equal(g(x), gd(x))


# ---------------------------------------------------------------- ground truth


def _frame_force(params, x):
    """``F(q; α) = R_φ G(R_{−φ} q; α)``, ``G = −(a α + b‖q‖²) q + ε (q₁², q₁ q₂)``.

    At ε = 0, a = b = 1 this is the Mexican-hat force for every φ. The parameter φ realises the
    group action exactly: with the seed's generator Ω = [[0, 1], [−1, 0]] (exp(tΩ) = R_{−t}),
    Π(exp tΩ) F_φ = F_{φ−t}, so η = −∂F/∂φ.
    """
    phi, a, b, eps = params["phi"], params["a"], params["b"], params["eps"]
    c, s = torch.cos(phi), torch.sin(phi)
    R = torch.stack([torch.stack([c, -s]), torch.stack([s, c])])
    q = x[:, :2] @ R  # R_{−φ} q, row-vector form
    r2 = (q * q).sum(-1, keepdim=True)
    g = -(a * x[:, 2:3] + b * r2) * q + eps * torch.stack([q[:, 0] ** 2, q[:, 0] * q[:, 1]], -1)
    return g @ R.T


def _truth_params(eps: float):
    return {k: torch.tensor(v, dtype=D) for k, v in {"phi": 0.0, "a": 1.0, "b": 1.0, "eps": eps}.items()}


def test_ground_truth_force_is_exactly_equivariant_on_the_stacked_grid():
    cfg = HamiltonianConfig()
    x = stacked_probes(cfg, [-1.1, -0.2, 0.0, 0.8])  # 15 × 32 polar grid per α
    grp = force_group(64)
    params = _truth_params(0.0)
    F = _frame_force(params, x)
    torch.testing.assert_close(F, mexican_hat_force(x[:, :2], x[:, 2]), rtol=0, atol=1e-15)
    # Reynolds projection leaves the exactly equivariant field unchanged; δ ≈ 0 and η ≈ 0
    delta = F - reynolds(_frame_force, params, x, grp)
    eta = orbit_tangent(_frame_force, params, x, grp)
    assert float(delta.norm() / F.norm()) < 1e-13
    assert float(eta.norm() / F.norm()) < 1e-13


def test_rotation_of_a_non_equivariant_truth_is_exactly_liftable_through_phi():
    x = stacked_probes(HamiltonianConfig(), [-1.1, 0.6])
    grp = force_group(64)
    prob = SymmetryProblem(_frame_force, _truth_params(0.3), x, grp, cache_size=4)
    att = prob.lifts()
    assert float(att.eta.norm()) > 1e-2  # the anisotropic term makes η non-zero
    assert float(att.delta.norm()) > 1e-2
    assert att.c.residual < 1e-8  # η is the φ column of J: liftable
    # the closed-form lift: η = −∂F/∂φ, the φ column of J with a minus sign
    J = prob.jacobian()
    torch.testing.assert_close(att.eta.reshape(-1), -J[:, 0], rtol=0, atol=1e-12)


# ---------------------------------------------------------------- profiles


def test_phase_shift_recovers_known_shifts():
    phi = 2 * np.pi * np.arange(360) / 360

    def prof(s):
        return np.stack([np.cos(2 * (phi + s)) + 0.3 * np.sin(5 * (phi + s)), np.sin(3 * (phi + s))], 1)

    for s in (0.0137, -0.4, 1.2):
        got, misfit = phase_shift(prof(0.0), prof(s))
        assert abs(got - s) < 1e-8 and misfit < 1e-7
    # the +c prediction is the same interpolated shift, the −b prediction a uniform decay
    np.testing.assert_allclose(predicted_profile(prof(0.0), "+c", 0.3), prof(0.3), atol=1e-12)
    np.testing.assert_allclose(predicted_profile(prof(0.0), "-b", 0.3), math.exp(-0.3) * prof(0.0))
    # a profile that is not a shift has a large misfit
    _, misfit = phase_shift(prof(0.0)[:, 0], 0.5 * prof(0.0)[:, 0] ** 2)
    assert misfit > 0.1


# ---------------------------------------------------------------- training cache and resume


def _tiny(epochs: int, seed: int = 0) -> HamiltonianConfig:
    return apply_overrides(HamiltonianConfig(seed=seed), [
        "system.train_alphas=[-0.8]", "system.n_initial=2", "system.num_steps=5",
        "model.width=8", "model.depth=2", f"train.epochs={epochs}", "train.checkpoint_every=2",
    ])


def test_training_is_cached_resumable_bit_for_bit_and_refuses_other_configs(tmp_path):
    straight, info = train_or_load(_tiny(6), RunDir(tmp_path / "a"), progress=False)
    assert not info["cached"] and info["resumed_from_epoch"] == 0
    # interrupted after 3 epochs, then continued to 6 in the same directory
    train_or_load(_tiny(3), RunDir(tmp_path / "b"), progress=False)
    resumed, info_b = train_or_load(_tiny(6), RunDir(tmp_path / "b"), progress=False)
    assert info_b["resumed_from_epoch"] == 3
    for (k, w1), (_, w2) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(w1, w2), k
    again, info_c = train_or_load(_tiny(6), RunDir(tmp_path / "a"), progress=False)
    assert info_c["cached"]
    assert all(torch.equal(a, b) for a, b in zip(straight.state_dict().values(), again.state_dict().values()))
    # analysis-only settings do not invalidate the cached model
    other = apply_overrides(_tiny(6), ["system.analysis_alphas=[0.3]", "train.checkpoint_every=5"])
    assert train_or_load(other, RunDir(tmp_path / "a"), progress=False)[1]["cached"]
    hist = json.loads((tmp_path / "a" / "history.json").read_text())["loss"]
    assert len(hist) == 6
    with pytest.raises(RunDirError, match="different configuration"):
        train_or_load(_tiny(6, seed=1), RunDir(tmp_path / "a"), progress=False)
    with pytest.raises(RunDirError, match="more than the requested"):
        train_or_load(_tiny(4), RunDir(tmp_path / "a"), progress=False)


def test_config_errors_are_named():
    with pytest.raises(ConfigError, match="walk needs"):
        apply_overrides(HamiltonianConfig(), ["walk.step=0"])
    with pytest.raises(ConfigError, match="unknown config key"):
        resolve_attribution_config("hamiltonian", overrides=["walk.stride=3"])
    with pytest.raises(ConfigError, match="profile_radius"):
        apply_overrides(HamiltonianConfig(), ["probe.profile_radius=2.0"])


# ---------------------------------------------------------------- end to end (quick)


def test_quick_preset_end_to_end_through_the_command(tmp_path, capsys):
    from paramsym.cli import main

    rc = main(["attribute", "--preset", "hamiltonian", "--quick", "--json", "--out", str(tmp_path / "run")])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    out = RunDir(tmp_path / "run")
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["kind"] == "attribution" and cfg["preset"] == "hamiltonian"
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["summary"] == summary
    # wall-clock times live in timing.json, never in metrics.json (a rerun's metrics are comparable)
    assert "timing_s" not in metrics and "seconds" not in metrics["train"]
    timing = json.loads((tmp_path / "run" / "timing.json").read_text())
    assert set(timing["timing_s"]) == {"train", "lift", "walks", "sweep", "total"} and timing["train_seconds"] >= 0
    assert timing["timing_s"]["total"] >= max(v for k, v in timing["timing_s"].items() if k != "total")
    assert "Timing (s): train " in (tmp_path / "run" / "report.md").read_text()
    for name in ("model.safetensors", "walks.safetensors", "env.json", "history.json", "report.md"):
        assert (tmp_path / "run" / name).exists(), name
    figs = {p.name for p in (tmp_path / "run" / "figures").glob("*.png")}
    assert {"ham_profiles.png", "ham_walk.png", "ham_sweep.png", "ham_alpha.png", "ham_potential.png"} <= figs
    assert "## Hamiltonian network" in (tmp_path / "run" / "report.md").read_text()

    flows = {(f["flow"], f["direction"]): f for f in summary["flows"]}
    assert set(flows) == {(m, d) for m in ("resolved", "fixed") for d in ("+c", "-b")}
    for f in flows.values():
        for key in ("delta_start", "delta_end", "delta_predicted", "residual_start", "residual_end"):
            assert f[key] is not None and math.isfinite(f[key]), key
    # +c: the potential's profile shifts by the predicted τ; ‖δ‖ is kept
    rc = flows[("resolved", "+c")]
    assert rc["phase_shift_predicted_end"] > 0
    assert abs(rc["phase_shift_end"] / rc["phase_shift_predicted_end"] - 1) < 0.05
    assert abs(rc["delta_end"] / rc["delta_start"] - 1) < 1e-3
    # −b: ‖δ‖ decreases as predicted
    rb = flows[("resolved", "-b")]
    assert rb["delta_end"] < rb["delta_start"]
    assert abs(rb["delta_end"] - rb["delta_predicted"]) < 0.05 * (rb["delta_start"] - rb["delta_predicted"])
    (tmp_path / "run" / "figures" / "ham_walk.png").unlink()
    text = report_sections(out)  # regenerated from the run directory's files
    assert (tmp_path / "run" / "figures" / "ham_walk.png").exists()
    assert "## Hamiltonian network" in text and "ham_profiles.png" in text
    assert metrics["alpha_sweep"][0]["rotation_error_truth"] < 1e-12  # the truth is equivariant


# ---------------------------------------------------------------- full reproduction


@pytest.mark.slow
def test_full_hamiltonian_reproduction(tmp_path):
    out = RunDir(tmp_path / "full")
    summary = run_attribution("hamiltonian", HamiltonianConfig(), out, progress=False)
    metrics = json.loads((tmp_path / "full" / "metrics.json").read_text())
    flows = {(f["flow"], f["direction"]): f for f in summary["flows"]}
    rc, rb = flows[("resolved", "+c")], flows[("resolved", "-b")]
    fc, fb = flows[("fixed", "+c")], flows[("fixed", "-b")]
    # resolved +c rotates the learned potential by the predicted angle
    assert abs(rc["phase_shift_end"] / rc["phase_shift_predicted_end"] - 1) < 0.05
    assert abs(rc["backward_phase_shift"] / rc["backward_tau"] - 1) < 0.05
    # resolved −b reduces ‖δ‖ and the 73° rotation error
    assert rb["delta_end"] < rb["delta_start"] and rb["rotation_error_end"] < rb["rotation_error_start"]
    # fixed walks depart further from the function-space prediction than resolved ones; the
    # resolved walk leaves unrealised only about its lifting residual of the predicted motion
    assert fc["deviation_end"] > rc["deviation_end"]
    assert fb["deviation_end"] > rb["deviation_end"]
    assert fc["tracking_relative_end"] > 1.5 * rc["tracking_relative_end"]
    assert rc["tracking_relative_end"] < 1.5 * rc["residual_start"]
    assert summary["lifts"][0]["liftable"] is False  # 13 % of η lies outside Im J
    assert metrics["problem"]["rows"] == 2 * 480 * len(metrics["problem"]["alphas"])
