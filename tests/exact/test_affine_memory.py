"""Memory budget of the affine solver and the bounded commutativity check.

References: the broadcast :func:`paramsym.groups.algebra.commutativity` (every pair at once),
dense ``X_a @ X_b`` products, the explicit rows ``Kᵀ K`` of the invariance system, and the
solver's own unbudgeted result.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from paramsym.errors import ShapeError, TooLargeError
from paramsym.exact import AffineSolverConfig, affine_memory, jacobians, solve_affine
from paramsym.exact.presets import build_preset
from paramsym.groups import brackets
from paramsym.groups.algebra import principal_angles
from paramsym.groups.brackets import commutativity, commutativity_bytes

SRC = str(Path(__file__).resolve().parents[2] / "src")


def broadcast_commutativity(x: torch.Tensor) -> float:
    """Independent reference: every pair's commutator, explicitly."""
    worst = 0.0
    for a in range(x.shape[0]):
        for b in range(x.shape[0]):
            c = x[a] @ x[b] - x[b] @ x[a]
            worst = max(worst, float(c.norm() / (x[a].norm() * x[b].norm())))
    return worst


def _sparse_family(d: int, s: int, density: float, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(s, s, generator=gen) < density
    return torch.randn(d, s, s, generator=gen, dtype=torch.float64) * mask


def test_commutativity_dense_matches_broadcast_at_every_budget():
    x = torch.randn(5, 6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ref = broadcast_commutativity(x)
    assert ref > 0.1
    for budget in (commutativity_bytes(5, 6), 2 * commutativity_bytes(5, 6), None):
        assert commutativity(x, max_memory=budget) == pytest.approx(ref, rel=1e-12)


def test_commutativity_pattern_path_is_used_and_exact(monkeypatch):
    x = _sparse_family(6, 40, 0.04, 1)
    a, b = x[2], x[4]
    flat, e1, e2, inverse, out = brackets._triples(x)
    prod = torch.zeros(out.numel(), dtype=torch.float64).index_add_(
        0, inverse, a.reshape(-1)[flat][e1] * b.reshape(-1)[flat][e2])
    scattered = torch.zeros(40 * 40, dtype=torch.float64)
    scattered[out] = prod
    dense = a @ b
    assert float(dense.abs().max()) > 0 and out.numel() < 40 * 40
    assert torch.allclose(scattered.reshape(40, 40), dense, rtol=1e-13, atol=1e-14)
    calls = []
    monkeypatch.setattr(brackets, "_triples", lambda m: calls.append(1) or flat_triples(m))
    ref = broadcast_commutativity(x)
    assert commutativity(x) == pytest.approx(ref, rel=1e-12)
    assert commutativity(x, max_memory=commutativity_bytes(6, 40)) == pytest.approx(ref, rel=1e-12)
    assert calls  # the sparse-pattern product ran


flat_triples = brackets._triples


def test_commutativity_commuting_family_and_errors():
    gen = torch.Generator().manual_seed(2)
    diag = torch.diag_embed(torch.randn(4, 30, generator=gen, dtype=torch.float64))
    assert commutativity(diag) == 0.0
    assert commutativity(diag[:1]) == 0.0
    with pytest.raises(TooLargeError, match="commutativity of 4 matrices 30×30"):
        commutativity(torch.randn(4, 30, 30, dtype=torch.float64), max_memory=commutativity_bytes(4, 30) - 1)
    with pytest.raises(ShapeError):
        commutativity(torch.zeros(3, 2, 4))


def test_budgeted_gram_rows_path_matches_explicit_rows():
    target, ansatz = build_preset("attention-d8h2")
    t64 = target.to(torch.float64)
    th = t64.theta0 + 0.3 * torch.randn(3, t64.p, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    jac = jacobians(t64, th)
    rows = ansatz.rows(jac, th)
    one_point = ansatz.gram(jac, th, max_bytes=1)  # one point per block
    assert torch.allclose(one_point, rows.T @ rows, rtol=1e-12, atol=1e-10)
    acc = torch.eye(ansatz.n_unknowns, dtype=torch.float64)
    ansatz.gram(jac, th, out=acc)
    assert torch.allclose(acc - torch.eye(ansatz.n_unknowns, dtype=torch.float64), one_point, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("name,samples", [("relu242", 34), ("attention-d8h2", 6)])
def test_solver_refuses_below_its_minimum_and_fits_at_it(name, samples):
    target, ansatz = build_preset(name)
    est = affine_memory(ansatz, target.q, samples)
    with pytest.raises(TooLargeError) as err:
        solve_affine(target, ansatz, AffineSolverConfig(samples=samples, max_memory=est["minimum"] - 1))
    assert f"({est['minimum']} bytes)" in str(err.value) and "affine solve" in str(err.value)
    free = solve_affine(target, ansatz, AffineSolverConfig(samples=samples), generator=torch.Generator().manual_seed(1))
    tight = solve_affine(target, ansatz, AffineSolverConfig(samples=samples, max_memory=est["minimum"]),
                         generator=torch.Generator().manual_seed(1))
    assert tight.status == free.status == "successful"
    assert tight.dimension == free.dimension > 0
    assert tight.info["memory_planned"] <= est["minimum"] < free.info["memory_planned"]
    assert tight.info["jacobian_chunk"] < free.info["jacobian_chunk"]
    assert float(principal_angles(tight.coefficients, free.coefficients).max()) < 1e-8
    assert tight.gap > 1e8 and free.gap > 1e8


_RSS_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    torch.set_num_threads(1)
    from paramsym.exact import AffineSolverConfig, jacobians, solve_affine
    from paramsym.exact.presets import build_preset
    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    target, ansatz = build_preset("attention-d8h2-bias")
    jacobians(target.to(torch.float64), target.theta0.double()[None])  # torch.func's one-off caches
    open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM)
    before = status("VmRSS")
    res = solve_affine(target, ansatz, AffineSolverConfig(samples=96, max_memory=int(sys.argv[1])),
                       generator=torch.Generator().manual_seed(1))
    print(json.dumps({"rise": status("VmHWM") - before, "dimension": res.dimension}))
""")


@pytest.mark.slow
def test_solver_peak_rss_stays_within_budget():
    """Peak resident memory of a budgeted solve (subprocess, after torch.func's first-call caches)."""
    budget = 64 * 2**20
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(budget)], capture_output=True, text=True,
                         env={"PYTHONPATH": SRC, "PATH": ""}, timeout=300, check=True)
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    assert rec["dimension"] == 80
    print(rec)
    assert rec["rise"] <= budget + 32 * 2**20  # allocator slack
