"""The one Reynolds average against explicit loops (numpy and torch), idempotence, equivariance."""

import numpy as np
import pytest
import torch

from paramsym.groups.finite import dihedral
from paramsym.groups.reps import regular
from paramsym.groups.reynolds import reynolds_function, reynolds_matrices


def _orth(rng, d):
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return q


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_matrices_match_explicit_weighted_sum(backend):
    rng = np.random.default_rng(0)
    K, do, di = 5, 3, 4
    ro = np.stack([_orth(rng, do) for _ in range(K)])
    ri = np.stack([2.0 * _orth(rng, di) for _ in range(K)])  # not orthogonal: exercises the inverse
    w = rng.random(K)
    w /= w.sum()
    A = rng.standard_normal((2, do, di))
    ref = np.stack([sum(w[k] * ro[k] @ a @ np.linalg.inv(ri[k]) for k in range(K)) for a in A])
    conv = (lambda a: a) if backend == "numpy" else torch.tensor
    got = reynolds_matrices(conv(A), conv(ro), conv(ri), conv(w), in_orthogonal=False)
    assert np.abs(np.asarray(got) - ref).max() < 1e-13
    single = reynolds_matrices(conv(A[0]), conv(ro), conv(ri), conv(w), in_orthogonal=False)
    assert np.abs(np.asarray(single) - ref[0]).max() < 1e-13


def test_commutant_projection_is_idempotent_and_commutes():
    G = dihedral(4)
    mats = regular(G).matrices
    rng = np.random.default_rng(1)
    A = rng.standard_normal((G.order, G.order))
    P = reynolds_matrices(A, mats)
    assert np.abs(reynolds_matrices(P, mats) - P).max() < 1e-13
    for g in range(G.order):
        assert np.abs(mats[g] @ P - P @ mats[g]).max() < 1e-13
    assert np.abs(P - A).max() > 1e-2  # a generic matrix is moved


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_function_average_matches_loop(backend):
    rng = np.random.default_rng(2)
    K, N, dx, dy = 7, 6, 4, 3
    ti = np.stack([_orth(rng, dx) for _ in range(K)])
    ro = np.stack([_orth(rng, dy) for _ in range(K)])
    w = rng.random(K)
    w /= w.sum()
    M = rng.standard_normal((dy, dx))
    x = rng.standard_normal((N, dx))
    ref = sum(w[k] * np.tanh(x @ ti[k].T @ M.T) @ np.linalg.inv(ro[k]).T for k in range(K))
    if backend == "numpy":
        got = reynolds_function(lambda z: np.tanh(z @ M.T), x, ti, np.linalg.inv(ro), w, chunk=3)
    else:
        t = torch.tensor
        got = reynolds_function(lambda z: torch.tanh(z @ t(M).T), t(x), t(ti), t(np.linalg.inv(ro)), t(w), chunk=3)
    assert np.abs(np.asarray(got) - ref).max() < 1e-13
