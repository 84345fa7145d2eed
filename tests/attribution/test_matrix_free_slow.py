"""Matrix-free lifting on a model with ≥ 10⁷ parameters, within 4 GB (slow; run with -m slow -s).

A wide MLP 2→3200→3200→1 (10,252,801 parameters) on 64 polar probe points: the dense float64
Jacobian alone would take 5.2 GB. The child process lifts η with LSMR (λ = 1e-3·σ₁) over
JVP/VJP and checks the direction against the exact Tikhonov solution
``c = Jᵀ (J Jᵀ + λ² I)⁻¹ η`` assembled matrix-free from 64 VJP/JVP pairs (an independent route).
Peak memory is the child's ``ru_maxrss``.
"""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

CHILD = r"""
import json, resource, time, torch
torch.set_num_threads(1)
from paramsym.attribution import JacobianOperator, function_from_module, lift_matrix_free, orbit_tangent, polar_grid, so2
from paramsym.attribution.matrix_free import largest_singular_value
from paramsym.models.mlp import mlp
model = mlp([2, 3200, 3200, 1], "tanh", generator=torch.Generator().manual_seed(0))
fn, params = function_from_module(model)
del model
x = polar_grid(4, 16, 2.0)
eta = orbit_tangent(fn, params, x, so2()).reshape(-1)
op = JacobianOperator(fn, params, x)
t0 = time.time()
s1 = largest_singular_value(op)
lam = 1e-3 * s1
r = lift_matrix_free(op, eta, method="lsmr", damp=lam, atol=1e-12, btol=1e-12, maxiter=2000)
t1 = time.time()
K = op.gram(chunk_size=8)
ref = op.rmatvec(torch.linalg.solve(K + lam**2 * torch.eye(K.shape[0], dtype=K.dtype), eta))
rel = float((r.direction - ref).norm() / ref.norm())
print("RESULT " + json.dumps({"p": op.shape[1], "m": op.shape[0], "residual": r.residual,
      "iterations": r.info["iterations"], "rel_vs_gram_tikhonov": rel, "lsmr_seconds": t1 - t0,
      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def test_lsmr_on_ten_million_parameters_within_4gb():
    res = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=7200)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, res.stderr[-3000:]
    out = json.loads(lines[0][7:])
    print(out)
    assert out["p"] >= 10_000_000
    assert out["peak_mb"] < 4096
    assert out["rel_vs_gram_tikhonov"] <= 1e-6
    assert out["residual"] < 1.0
