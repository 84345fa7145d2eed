"""The structure theorem both ways: built layers are equivariant (numerically, L = 3, 4, 5),
perturbed ones are not, and recovery returns the clustering they were built from."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from paramsym.attention.clusterings import PartialClustering, enumerate_partial_clusterings
from paramsym.attention.equivariance import equivariance_error, equivariance_errors, token_matrices
from paramsym.attention.structure import (
    build_equivariant_rmhsa,
    commutant_average,
    recover_clustering,
    two_token_exception,
)
from paramsym.errors import GroupError, RepresentationError, ShapeError
from paramsym.groups import reps
from paramsym.groups.finite import group_by_name

TOL = 1e-10  # equivariance of built layers, float64
FAIL = 1e-7  # a 1e-3 perturbation must give at least this much error


def _check_clustering(cl: PartialClustering, rep, seed: int, *, recover: bool = True) -> None:
    gen = torch.Generator().manual_seed(seed)
    M, R = build_equivariant_rmhsa(cl, rep, generator=gen)
    for L in (3, 4, 5):
        err = equivariance_error(M, R, rep, n_tokens=L, n_samples=3, generator=gen)
        assert err <= TOL, (cl, L, err)
    if not recover:
        return
    rec = recover_clustering(M, R, rep)
    assert rec.equivariant, (cl, rec.message)
    assert rec.clustering == cl, (cl, rec.clustering)
    # perturbing any constrained parameter breaks equivariance, and recovery notices
    for h in range(cl.n_heads):
        p = cl.chi[h]
        free_m = p in cl.x0 and len(cl.clusters[p]) == 1  # a lone X_0 head has a free QK matrix
        for which in ("M", "R"):
            if which == "M" and free_m:
                continue
            M2, R2 = M.clone(), R.clone()
            target = M2 if which == "M" else R2
            target[h] += 1e-3 * torch.randn(target.shape[1:], generator=gen, dtype=torch.float64)
            err = equivariance_error(M2, R2, rep, n_tokens=3, n_samples=3, generator=gen)
            assert err > FAIL, (cl, which, h, err)
            assert not recover_clustering(M2, R2, rep).equivariant, (cl, which, h)


@pytest.mark.parametrize("name", ["C2", "C3", "S3", "D4"])
def test_all_clusterings_up_to_three_heads(name):
    G = group_by_name(name)
    rep = reps.regular(G)
    count = 0
    for n in (1, 2, 3):
        for i, cl in enumerate(enumerate_partial_clusterings(G, n)):
            _check_clustering(cl, rep, seed=100 * n + i)
            count += 1
    assert count == {"C2": 40, "C3": 32, "S3": 46, "D4": 60}[name]


@pytest.mark.parametrize("name,heads", [("C6", 3), ("Q8", 3), ("C4", 4)])
def test_more_groups(name, heads):
    G = group_by_name(name)
    rep = reps.regular(G)
    for i, cl in enumerate(enumerate_partial_clusterings(G, heads)):
        if i % 3 == 0:  # a deterministic third of them keeps the default run short
            _check_clustering(cl, rep, seed=i)


@pytest.mark.slow
@pytest.mark.parametrize("name,heads", [("D4", 4), ("S3", 4), ("Q8", 4), ("C6", 4)])
def test_all_clusterings_four_heads(name, heads):
    G = group_by_name(name)
    rep = reps.regular(G)
    for i, cl in enumerate(enumerate_partial_clusterings(G, heads)):
        _check_clustering(cl, rep, seed=i)


def test_other_representations_are_equivariant():
    # permutation representations and copies of the regular one (recovery may merge clusters
    # when ρ is not faithful enough, so only equivariance is asserted for the permutation ones)
    S3 = group_by_name("S3")
    perm = reps.permutation(S3, S3.permutations)
    for i, cl in enumerate(enumerate_partial_clusterings(S3, 3)):
        _check_clustering(cl, perm, seed=i, recover=False)
    D4 = group_by_name("D4")
    two = reps.copies(reps.regular(D4), 2)
    for i, cl in enumerate(enumerate_partial_clusterings(D4, 2)):
        _check_clustering(cl, two, seed=i)


def test_spec_examples_z2():
    G = group_by_name("C2")
    rep = reps.regular(G)
    t = rep.matrices[1]
    swap = PartialClustering(G, [0, 1], action=np.array([[0, 1], [1, 0]]))
    M, R = (a.numpy() for a in build_equivariant_rmhsa(swap, rep))
    np.testing.assert_allclose(t @ M[0] @ t.T, M[1], atol=1e-14)
    np.testing.assert_allclose(t @ R[0] @ t.T, R[1], atol=1e-14)
    assert np.abs(M[0] - M[1]).max() > 1e-3
    fixed = PartialClustering(G, [0, 1])  # trivial action on two clusters: M_h, R_h ∈ End_G(V)
    M, R = (a.numpy() for a in build_equivariant_rmhsa(fixed, rep))
    for h in range(2):
        np.testing.assert_allclose(t @ M[h], M[h] @ t, atol=1e-14)
        np.testing.assert_allclose(t @ R[h], R[h] @ t, atol=1e-14)
    assert np.abs(M[0] - M[1]).max() > 1e-3
    one = PartialClustering(G, [0])  # one head: M, R ∈ End_G(V)
    M, R = (a.numpy() for a in build_equivariant_rmhsa(one, rep))
    np.testing.assert_allclose(t @ M[0], M[0] @ t, atol=1e-14)
    np.testing.assert_allclose(t @ R[0], R[0] @ t, atol=1e-14)
    # X = G regular: M_g = g M_e g^-1 with M_e free
    regular_x = PartialClustering(G, [0, 1], action=np.array([[0, 1], [1, 0]]))
    assert regular_x.stabilizer(0) == frozenset({0})


def test_commutant_average_is_projection():
    D4 = group_by_name("D4")
    rep = reps.regular(D4)
    mats = torch.as_tensor(rep.matrices)
    A = torch.randn(8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    P = commutant_average(A, mats)
    for g in mats:
        torch.testing.assert_close(g @ P, P @ g)
    torch.testing.assert_close(commutant_average(P, mats), P)  # idempotent
    # orthogonal: A - P is Frobenius-orthogonal to the commutant (e.g. to P itself)
    assert abs(float(((A - P) * P).sum())) < 1e-12


def test_two_token_exception():
    T = np.diag([1.0, 1.0, -1.0, -1.0])
    M, R = two_token_exception(T, generator=torch.Generator().manual_seed(3))
    rep2 = [np.eye(4), T]
    e2 = equivariance_error(M, R, rep2, n_tokens=2, n_samples=8)
    e3 = equivariance_error(M, R, rep2, n_tokens=3, n_samples=8)
    assert e2 <= 1e-12 and e3 > 1e-3, (e2, e3)
    C2 = group_by_name("C2")
    rep = reps.Representation(C2, np.stack(rep2))
    rec = recover_clustering(M, R, rep)
    assert not rec.equivariant and rec.condition == "qk_orbit"
    assert "condition 2" in rec.message
    with pytest.raises(RepresentationError, match="anticommutes"):
        two_token_exception(np.eye(3))


def test_failing_conditions_are_named():
    G = group_by_name("C2")
    rep = reps.regular(G)
    swap = PartialClustering(G, [0, 1], action=np.array([[0, 1], [1, 0]]))
    M, R = build_equivariant_rmhsa(swap, rep)
    # condition 3: QK matrices right, OV map of head 1 wrong
    R_bad = R.clone()
    R_bad[1] = R_bad[1] + torch.eye(2, dtype=torch.float64)[[1, 0]] * 0.5 + 0.3
    rec = recover_clustering(M, R_bad, rep)
    assert rec.condition == "ov_equivariance" and "condition 3" in rec.message
    assert rec.details["element"] == G.label(1)
    # condition 2: QK matrix of head 1 wrong
    M_bad = M.clone()
    M_bad[1] += 0.1
    rec = recover_clustering(M_bad, R, rep)
    assert rec.condition == "qk_orbit"
    # ambiguous clusters: M, M + e, M + 2e with a tolerance between e and 2e
    base = torch.eye(2, dtype=torch.float64)
    M3 = torch.stack([base, base + 1e-6, base + 2e-6])
    R3 = torch.zeros(3, 2, 2, dtype=torch.float64)
    # pairwise distances 2e-6 and 4e-6 (Frobenius); an absolute tolerance of 2.5e-6 chains all three
    rec = recover_clustering(M3, R3, rep, rtol=2.5e-6 / float(torch.linalg.matrix_norm(M3).max()))
    assert rec.condition == "qk_clusters_ambiguous"
    # X_0: OV maps summing to zero, any QK matrix
    rec = recover_clustering(torch.stack([base * 3, base * 3]), torch.stack([base, -base]), rep)
    assert rec.equivariant and rec.x0 == [0] and rec.clustering.x0 == frozenset({0})


def test_bad_representations():
    D4 = group_by_name("D4")
    cl = next(iter(enumerate_partial_clusterings(D4, 1)))
    M = torch.zeros(1, 8, 8, dtype=torch.float64)
    # not a homomorphism
    mats = reps.regular(D4).matrices.copy()
    mats[[1, 2]] = mats[[2, 1]]
    with pytest.raises(RepresentationError, match="homomorphism"):
        reps.Representation(D4, mats)
    bad = reps.Representation(D4, mats, check=False)
    with pytest.raises(RepresentationError, match="homomorphism"):
        recover_clustering(M, M, bad)
    with pytest.raises(RepresentationError, match="homomorphism"):
        build_equivariant_rmhsa(cl, bad)
    # not orthogonal
    # not orthogonal: a homomorphism conjugated by a non-orthogonal change of basis
    S = np.eye(8) + 0.5 * np.triu(np.ones((8, 8)), 1)
    skew = np.linalg.solve(S.T, (S @ reps.regular(D4).matrices).transpose(0, 2, 1)).transpose(0, 2, 1)
    skewed = reps.Representation(D4, skew, check=False)
    np.testing.assert_allclose(skew[3] @ skew[5], skew[D4.table[3, 5]], atol=1e-12)
    with pytest.raises(RepresentationError, match="orthogonal"):
        recover_clustering(M, M, skewed)
    with pytest.raises(RepresentationError, match="orthogonal"):
        equivariance_error(M, M, [2 * np.eye(8)])
    # wrong size
    with pytest.raises(ShapeError, match="R\\^4"):
        recover_clustering(M, M, reps.regular(group_by_name("C4")))
    with pytest.raises(ShapeError, match="R\\^4"):
        token_matrices([np.eye(4)], 8)
    # wrong group
    with pytest.raises(GroupError, match="same group"):
        build_equivariant_rmhsa(cl, reps.regular(group_by_name("C8")))
    with pytest.raises(ShapeError):
        equivariance_errors(M, M[:, :4], [np.eye(8)])


def test_equivariance_check_detects_non_equivariant_random_layer():
    D4 = group_by_name("D4")
    rep = reps.regular(D4)
    g = torch.Generator().manual_seed(0)
    M = torch.randn(2, 8, 8, generator=g, dtype=torch.float64)
    R = torch.randn(2, 8, 8, generator=g, dtype=torch.float64)
    errs = equivariance_errors(M, R, rep)
    assert errs[0] == 0.0  # the identity
    assert errs[1:].min() > 1e-3
    assert not recover_clustering(M, R, rep).equivariant
