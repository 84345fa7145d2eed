"""Residuals computed from the complement, not as differences of squares (issue 16, item 6).

Each test builds a case whose true small quantity is ~1e-12 relative (known in closed form or from
a float64 reference that never subtracts squares). The former formulas — ``sqrt(‖t‖² − ‖Pt‖²)``,
``sqrt(1 − captured)``, ``E‖c‖² − ‖E c‖²``, ``Σ_all − Σ_diag``, ``1 − e^{−τ}`` — have an absolute
floor of about ``√ε`` (or ``ε``) relative to the large terms, so they return 0 or ~1e-8 here and
these assertions would fail with them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from paramsym.attribution import lift
from paramsym.attribution.diagnostics import cutoff_sweep
from paramsym.attribution.gauges import projection_residual_hint, tail_norms

D = torch.float64


def _basis(m: int, k: int, seed: int) -> np.ndarray:
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((m, k)))[0]


def test_tail_norms_equal_the_norm_of_t_minus_its_projection_down_to_1e_minus_14():
    Q = _basis(30, 13, 0)
    U = Q[:, :12]
    a = np.random.default_rng(1).standard_normal(12)
    a[7:] = [3e-13, -2e-13, 1e-14, 5e-13, 0.0]
    extra = Q[:, 12] * 4e-13  # orthogonal to span U
    t = U @ a + extra
    coords = torch.from_numpy(U.T @ t)
    outside = float(np.linalg.norm(t - U @ (U.T @ t)))
    tail = tail_norms(coords, outside).numpy()
    for k in range(13):
        ref = math.sqrt(float(np.sum(a[k:] ** 2)) + 4e-13**2)  # exact tail of the construction
        assert tail[k] == pytest.approx(ref, rel=1e-3, abs=1e-15), k
    # the difference of squares cannot see it (its floor is ~ eps·‖t‖² under the root)
    old = max(float(t @ t) - float(np.sum((U[:, :7].T @ t) ** 2)), 0.0) ** 0.5
    assert tail[7] < 1e-12 and (old == 0.0 or old > 1e-9)  # old: 0 or ≥ sqrt(ulp(‖t‖²)) ≈ 1e-8


def test_hint_residual_of_a_target_with_a_1e_minus_12_relative_tail():
    sigma = torch.tensor([3.0, 1.0, 0.5, 0.2, 5e-2, 1e-2, 6e-3, 1e-4, 1e-7], dtype=D)
    Q = _basis(30, 10, 5)
    U = Q[:, :9]
    a = np.random.default_rng(6).standard_normal(9)
    a[8] = 1e-12 * np.linalg.norm(a[:8])  # the part on the unresolved 1e-7 direction
    t = U @ a
    tn = float(np.linalg.norm(t))
    coords = torch.from_numpy(U.T @ t)
    outside = float(np.linalg.norm(t - U @ (U.T @ t)))
    hint = projection_residual_hint(sigma, coords, tn, 1e-3, 1e-12, 1e-10, outside=outside)
    assert hint["rtol"] == 1e-5 and hint["rank"] == 8
    assert hint["residual"] == pytest.approx(abs(a[8]) / tn, rel=1e-3, abs=0)  # ≈ 1e-12, not 0 and not 1.5e-8
    # a part of t outside span U counts: thin U (30 × 9) and 1e-12 of t orthogonal to it
    perp = Q[:, 9]
    t2 = U[:, :8] @ a[:8] + 1e-12 * tn * perp
    c2 = torch.from_numpy(U.T @ t2)
    out2 = float(np.linalg.norm(t2 - U @ (U.T @ t2)))
    hint2 = projection_residual_hint(sigma, c2, float(np.linalg.norm(t2)), 1e-3, 1e-12, 1e-10, outside=out2)
    assert hint2["residual"] == pytest.approx(1e-12 * tn / float(np.linalg.norm(t2)), rel=1e-3, abs=0)


def test_lift_hint_on_the_verdict_case_at_the_svds_own_accuracy():
    """The machine-dependent case of test_paper_gauge (t in the span of 8 directions), and the same
    with a 1e-10 relative part on the unresolved 9th direction, through :func:`lift` (SVD route).

    The SVD's ``u_8`` (σ_8 = 1e-4) is itself accurate to ~ε·σ_1/σ_8 ≈ 7e-12: that, not √ε, is the
    tolerance. (The Gram route's small eigenvectors are accurate only to ~ε·σ_1²/σ_k², a genuine
    limit of that factorisation, not of the residual formula.)"""
    rng = np.random.default_rng(5)
    sigma = np.array([3.0, 1.0, 0.5, 0.2, 5e-2, 1e-2, 6e-3, 1e-4, 1e-7])
    U, _ = np.linalg.qr(rng.standard_normal((30, 9)))
    V, _ = np.linalg.qr(rng.standard_normal((40, 9)))
    J = torch.from_numpy((U * sigma) @ V.T)
    a = rng.standard_normal(8)
    tol = 10 * np.finfo(float).eps * sigma[0] / sigma[7]
    for part in (0.0, 1e-10):
        t = torch.from_numpy(U[:, :8] @ a + part * np.linalg.norm(a) * U[:, 8])
        hint = lift(J, t, rtol=1e-3, gauge="none", solver="svd").info["rtol_hint"]
        ref = part / math.sqrt(1 + part**2)  # ‖(I − P_8) t‖/‖t‖ of the construction
        assert hint["rank"] == 8 and abs(hint["residual"] - ref) <= tol, part  # old: 0 or ≥ ~1e-8


def test_cutoff_sweep_projection_residual_of_a_1e_minus_12_tail():
    sigma = np.array([2.0, 1.0, 0.3, 1e-3])
    U = _basis(20, 4, 7)
    V = _basis(15, 4, 8)
    J = torch.from_numpy((U * sigma) @ V.T)
    a = np.array([1.0, -0.5, 0.25, 1e-12])
    t = torch.from_numpy(U @ a)
    rows = cutoff_sweep(J, t, (1e-1, 1e-4), gauge="none", reference_rtol=1e-1)
    assert [r["rank"] for r in rows] == [3, 4]
    ref = 1e-12 / float(np.linalg.norm(a))  # float64 reference: ‖(I − P_3) t‖/‖t‖ of the construction
    assert rows[0]["projection_residual"] == pytest.approx(ref, rel=1e-3, abs=0)  # sqrt(1 − captured) gives 0 or ~1e-8
    assert rows[1]["projection_residual"] < 1e-14


def test_chunked_output_scale_keeps_a_variation_1e_minus_9_of_the_offset():
    """An output whose mean sits 1e9·s_F away from its value at θ0: the chunked merge of centered
    sums gives s_F to rounding; E‖F − F(θ0)‖² − ‖E(F − F(θ0))‖² (noise ~ √ε·1e3 ≈ 1.5e-5 against
    s_F ≈ 1e-6) loses every digit."""
    from paramsym.discovery.problem import DiscoveryProblem
    from paramsym.targets import FunctionTarget
    from paramsym.verdict import output_scale

    th0 = torch.zeros(3, dtype=D)

    def fn(th):  # 1e3 everywhere except at θ0 (probability 0 under μ), plus a 1e-6 variation
        return (1e3 * (th[1] != 0).to(th.dtype) + 1e-6 * th[0]).reshape(1)

    pb = DiscoveryProblem(name="offset", description="", target=FunctionTarget(fn, th0), perturb_std=1.0)
    per_point, fixed = pb.scale_memory()
    n, chunk = 60, 7
    got = pb.scales(0.3, torch.Generator().manual_seed(3), n=n, memory_bytes=fixed + chunk * per_point + 1)
    gen = torch.Generator().manual_seed(3)
    pts = torch.cat([pb.sample(min(chunk, n - i), gen, D) for i in range(0, n, chunk)])
    ref = 1e-6 * float(pts[:, 0].std(unbiased=False))  # the output's variation, exactly
    assert output_scale(torch.func.vmap(fn)(pts)) == pytest.approx(ref, rel=1e-4, abs=0)
    assert got.s_F == pytest.approx(ref, rel=1e-4, abs=0)


def test_diversity_penalty_of_nearly_orthogonal_fields():
    from paramsym.discovery.objectives import diversity_penalty

    e = torch.eye(4, dtype=D)
    fields = torch.stack([e[0] + 1e-7 * e[1], e[1], 3.0 * e[2]])[None]  # (n=1, r=3, p=4)
    f = fields[0]
    ref = 0.0  # Σ_{i≠j} cos²_ij in float64, pair by pair (no subtraction)
    for i in range(3):
        for j in range(3):
            if i != j:
                ref += float(f[i] @ f[j]) ** 2 / (float(f[i] @ f[i]) * float(f[j] @ f[j]))
    assert ref == pytest.approx(2 * 1e-14 / (1 + 1e-14), rel=1e-12, abs=0)
    assert float(diversity_penalty(fields)) == pytest.approx(ref, rel=1e-10, abs=0)  # Σ_all − Σ_diag: error ~3e-16 ≫ 2e-14·1e-10


def test_predicted_change_along_minus_b_at_a_tiny_time():
    from paramsym.config import apply_overrides
    from paramsym.experiments.attribution.hamiltonian.run import (
        HamiltonianConfig,
        build_problem,
        predicted_change,
    )
    from paramsym.models.hamiltonian import SeparableHamiltonian

    m = SeparableHamiltonian(width=8, depth=2, generator=torch.Generator().manual_seed(3))
    cfg = apply_overrides(HamiltonianConfig(), ["probe.n_radii=3", "probe.n_angles=8", "probe.n_quadrature=16"])
    prob = build_problem(m, cfg, [0.6, -1.1])
    dn = float(prob.lifts(prob.theta0).delta.norm())
    assert dn > 0
    for tau in (1e-12, 1e-9, 0.3):
        ref = -math.fsum([(-tau) ** k / math.factorial(k) for k in range(1, 30)])  # 1 − e^{−τ} by its series
        assert predicted_change(prob, "-b", tau) == pytest.approx(ref * dn, rel=1e-13, abs=0), tau
