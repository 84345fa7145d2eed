"""Real representations: irreducibles and their types, decompositions, equivariant maps.

References are independent of the decomposition code: SVD null spaces of the commutation
constraints, character inner products, closed-form tensor/permutation decompositions, and
direct computation of Q^T rho(g) Q.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from paramsym.errors import RepresentationError, TooLargeError
from paramsym.groups import irreps as irreps_mod
from paramsym.groups.decompose import decompose, equivariant_basis
from paramsym.groups.finite import alternating, cyclic, dihedral, group_by_name, symmetric
from paramsym.groups.gsets import coset_space
from paramsym.groups.irreps import real_irreps
from paramsym.groups.reps import (
    Representation,
    copies,
    direct_sum,
    from_generators,
    induced,
    permutation,
    regular,
    restrict,
    tensor,
    trivial,
)

GROUPS = ["C1", "C2", "C4", "C5", "C6", "D3", "D4", "D5", "S3", "S4", "A4", "A5", "Q8", "V4",
          "C2xC3", "D4xC2"]


def conj_by(q: np.ndarray, mats: np.ndarray) -> np.ndarray:
    """``q^T mats[g] q`` for every g."""
    return np.matmul(q.T, mats @ q)


def random_orthogonal(d: int, seed: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def names_and_types(g):
    return [(r.name, r.dim, r.type) for r in real_irreps(g)]


# ------------------------------------------------------------------------------ irreps
def test_c4_e1_is_complex_type():
    assert names_and_types(cyclic(4)) == [("A1", 1, "real"), ("A2", 1, "real"), ("E1", 2, "complex")]
    e1 = real_irreps(cyclic(4))[2]
    assert e1.fs_indicator == 0 and e1.endomorphism_dim == 2
    # End_G(E1) = C: the rotation by 90 degrees commutes with every rho(g), J^2 = -1
    j = e1.endomorphisms[1] * np.sqrt(2)
    assert np.allclose(j @ j, -np.eye(2), atol=1e-12)


def test_q8_four_dim_is_quaternionic():
    irr = real_irreps(group_by_name("Q8"))
    four = [r for r in irr if r.dim == 4]
    assert len(four) == 1 and four[0].type == "quaternionic" and four[0].fs_indicator == -1
    assert four[0].endomorphism_dim == 4
    assert [r.type for r in irr if r.dim == 1] == ["real"] * 4


def test_d4_names_and_closed_forms():
    g = dihedral(4)
    assert names_and_types(g) == [("A1", 1, "real"), ("A2", 1, "real"), ("B1", 1, "real"),
                                  ("B2", 1, "real"), ("E1", 2, "real")]
    irr = {r.name: r for r in real_irreps(g)}
    r, s = 1, 4
    assert irr["A2"].rep(r)[0, 0] == 1 and irr["A2"].rep(s)[0, 0] == -1
    assert irr["B1"].rep(r)[0, 0] == -1 and irr["B1"].rep(s)[0, 0] == 1
    assert irr["B2"].rep(r)[0, 0] == -1 and irr["B2"].rep(s)[0, 0] == -1
    assert np.allclose(irr["E1"].rep(r), [[0, -1], [1, 0]], atol=1e-15)


@pytest.mark.parametrize("name", GROUPS)
def test_irreps_are_irreducible_orthogonal_and_complete(name):
    g = group_by_name(name)
    irr = real_irreps(g)
    assert irr[0].name == "A1" and np.allclose(irr[0].character, 1)
    for k, r in enumerate(irr):
        assert r.index == k
        r.rep.check(tol=1e-11)  # orthogonal homomorphism
        # End_G(W) by an independent SVD null space: dimension 1, 2, 4 matching the type
        end = equivariant_basis(r.rep, r.rep, method="nullspace")
        assert end.shape[0] == {"real": 1, "complex": 2, "quaternionic": 4}[r.type]
        assert r.fs_indicator == {"real": 1, "complex": 0, "quaternionic": -1}[r.type]
        for other in irr[k + 1 :]:  # pairwise non-isomorphic
            assert equivariant_basis(r.rep, other.rep, method="nullspace").shape[0] == 0
    # R[G] = ⊕ (d_i / e_i) W_i, so sum_i d_i^2 / e_i = |G|
    assert sum(r.dim**2 // r.endomorphism_dim for r in irr) == g.order


def test_cyclic_and_dihedral_types_for_many_n():
    for n in range(1, 10):
        types = [r.type for r in real_irreps(cyclic(n))]
        assert types.count("real") == (2 if n % 2 == 0 else 1)
        assert types.count("complex") == (n - 1) // 2
        assert all(r.type == "real" for r in real_irreps(dihedral(n)))


# ------------------------------------------------------------------------ decomposition
def check_decomposition(rep, dec, tol):
    q = dec.basis
    assert np.abs(q.T @ q - np.eye(rep.dim)).max() < tol
    blocks = conj_by(q, rep.matrices)
    assert np.abs(blocks - dec.block_matrices()).max() < tol
    assert dec.equivariance_error < tol and dec.orthogonality_error < tol


def test_d4_regular_decomposition_accurate():
    rep = regular(dihedral(4))
    dec = decompose(rep)
    assert dec.summary() == "A1 ⊕ A2 ⊕ B1 ⊕ B2 ⊕ 2E1"
    assert dec.multiplicities == [1, 1, 1, 1, 2]
    check_decomposition(rep, dec, 1e-12)
    # also accurate after an arbitrary orthogonal change of basis of the input
    o = random_orthogonal(8, 1)
    rep2 = Representation(rep.group, conj_by(o.T, rep.matrices))
    check_decomposition(rep2, decompose(rep2), 1e-12)


@pytest.mark.parametrize("name", GROUPS)
def test_regular_decomposition_all_groups(name):
    g = group_by_name(name)
    rep = regular(g)
    dec = decompose(rep)
    assert dec.multiplicities == [r.dim // r.endomorphism_dim for r in dec.irreps]
    check_decomposition(rep, dec, 1e-10)


def test_copies_of_d4_regular_fast_and_accurate():
    base = regular(dihedral(4))
    decs, times = [], []
    for c in range(1, 17):
        rep = copies(base, c)
        t0 = time.perf_counter()
        decs.append(decompose(rep))
        times.append(time.perf_counter() - t0)
    # the bound, per C (measured numbers: benchmarks/reps_decompose.py)
    assert max(times) < 1.0, f"slowest decomposition took {max(times):.2f} s (limit: under 1 s)"
    for c, dec in enumerate(decs, start=1):
        assert dec.multiplicities == [c, c, c, c, 2 * c]
        assert dec.orthogonality_error < 1e-12 and dec.equivariance_error < 1e-12
    check_decomposition(copies(base, 16), decs[-1], 1e-12)


def test_tensor_products_known_rules():
    g = dihedral(4)
    e1 = real_irreps(g)[4].rep
    assert decompose(tensor(e1, e1)).summary() == "A1 ⊕ A2 ⊕ B1 ⊕ B2"
    s3 = symmetric(3)
    e = real_irreps(s3)[2].rep
    assert decompose(tensor(e, e)).summary() == "A1 ⊕ A2 ⊕ E1"
    # C4: E1 ⊗ E1 = (complex chi ⊕ conj chi)^2 = 2 A2 ⊕ 2 A1 (chi^2 is the sign character)
    c4e = real_irreps(cyclic(4))[2].rep
    assert decompose(tensor(c4e, c4e)).summary() == "2A1 ⊕ 2A2"


def test_permutation_reps():
    s3 = symmetric(3)
    p = permutation(s3, s3.permutations)
    assert decompose(p).summary() == "A1 ⊕ E1"
    s4 = symmetric(4)
    dec = decompose(permutation(s4, s4.permutations))
    assert dec.multiplicities[0] == 1 and sum(dec.multiplicities) == 2
    # character of a permutation rep = number of fixed points
    assert np.array_equal(p.character(), (s3.permutations == np.arange(3)).sum(axis=1))


def test_induced_characters_and_frobenius_reciprocity():
    g = symmetric(4)
    k = next(h for h in g.subgroups() if len(h) == 4 and not g.is_normal(h))  # a non-normal order-4 subgroup
    sub = g.subgroup(k)
    # Ind of the trivial rep = permutation rep on G/K (same character: fixed cosets)
    ind = induced(g, k, trivial(sub))
    perm = permutation(g, coset_space(g, k).action)
    assert np.allclose(ind.character(), perm.character())
    # Frobenius reciprocity for every irrep tau of K and sigma of G:
    # <Ind tau, sigma>_G = <tau, Res sigma>_K (character inner products)
    for tau in real_irreps(sub):
        ind = induced(g, k, tau.rep)
        assert ind.dim == 6 * tau.dim
        for sigma in real_irreps(g):
            lhs = ind.character() @ sigma.character / g.order
            res = restrict(sigma.rep, k)
            rhs = tau.character @ res.character() / sub.order
            assert abs(lhs - rhs) < 1e-9
    # Ind from the trivial subgroup is the regular representation (up to isomorphism)
    one = g.subgroup([0])
    assert decompose(induced(g, [0], trivial(one))).multiplicities == decompose(regular(g)).multiplicities


def test_direct_sum_order_and_generic_basis():
    g = alternating(4)
    irr = real_irreps(g)
    rep = direct_sum(irr[2].rep, irr[0].rep, irr[2].rep, irr[1].rep)
    o = random_orthogonal(rep.dim, 3)
    rep = Representation(g, conj_by(o.T, rep.matrices))
    dec = decompose(rep)
    assert dec.summary() == "A1 ⊕ E1 ⊕ 2T1"
    check_decomposition(rep, dec, 1e-11)


# ------------------------------------------------------------------------ equivariant maps
@pytest.mark.parametrize("name", ["D4", "C4", "Q8", "A4", "S3"])
def test_equivariant_basis_matches_nullspace(name):
    g = group_by_name(name)
    rng = np.random.default_rng(0)
    irr = real_irreps(g)
    rin = direct_sum(*[irr[i].rep for i in rng.integers(0, len(irr), 4)], regular(g))
    rout = direct_sum(*[irr[i].rep for i in rng.integers(0, len(irr), 5)])
    a = equivariant_basis(rin, rout)
    b = equivariant_basis(rin, rout, method="nullspace")
    assert a.shape == b.shape
    din, dout = decompose(rin), decompose(rout)
    k = sum(mi * mo * r.endomorphism_dim for r, mi, mo in
            zip(din.irreps, din.multiplicities, dout.multiplicities))
    assert a.shape[0] == k
    fa, fb = a.reshape(k, -1), b.reshape(k, -1)
    assert np.allclose(fa @ fa.T, np.eye(k), atol=1e-10)  # orthonormal
    assert np.allclose(fa.T @ fa, fb.T @ fb, atol=1e-8)  # same span (same projector)
    for x in a:
        assert np.abs(x @ rin.matrices - rout.matrices @ x).max() < 1e-10


# ------------------------------------------------------------------------------ bad input
def test_not_a_homomorphism_names_the_pair():
    g = dihedral(4)
    mats = real_irreps(g)[4].rep.matrices.copy()
    mats[[1, 3]] = mats[[3, 1]]  # swap rho(r) and rho(r^3)
    with pytest.raises(RepresentationError, match=r"not a homomorphism.*a = .*b = "):
        Representation(g, mats)
    with pytest.raises(RepresentationError, match="relations|homomorphism"):
        from_generators(cyclic(4), [np.array([[0.5, -np.sqrt(3) / 2], [np.sqrt(3) / 2, 0.5]])])


def test_not_orthogonal():
    g = cyclic(2)
    with pytest.raises(RepresentationError, match="not orthogonal"):
        Representation(g, np.array([np.eye(2), np.array([[1.0, 1.0], [0.0, -1.0]])]))


def test_wrong_size():
    g = dihedral(4)
    with pytest.raises(RepresentationError, match=r"shape \(8, d, d\)"):
        Representation(g, np.zeros((7, 2, 2)))
    with pytest.raises(RepresentationError, match="shape"):
        Representation(g, np.zeros((8, 2, 3)))
    with pytest.raises(RepresentationError, match="generators"):
        from_generators(g, [np.eye(2)])
    with pytest.raises(RepresentationError, match="same group"):
        direct_sum(regular(g), regular(group_by_name("Q8")))  # same order, another table
    # group equality is FiniteGroup.same_as: an equal table is the same group
    assert direct_sum(regular(g), regular(dihedral(4))).dim == 16
    with pytest.raises(RepresentationError, match="integer"):
        copies(regular(g), 0)
    with pytest.raises(RepresentationError, match="FiniteGroup"):
        Representation("D4", np.zeros((8, 2, 2)))


def test_non_finite_and_identity():
    g = cyclic(2)
    with pytest.raises(RepresentationError, match="NaN"):
        Representation(g, np.array([[[1.0]], [[np.nan]]]))
    with pytest.raises(RepresentationError, match="identity"):
        Representation(g, np.array([[[-1.0]], [[1.0]]]))


def test_too_large_for_irreps(monkeypatch):
    monkeypatch.setattr(irreps_mod, "MAX_IRREP_ORDER", 10)
    with pytest.raises(TooLargeError, match="MAX_IRREP_ORDER"):
        real_irreps(alternating(4))  # order 12, no closed form
    assert len(real_irreps(dihedral(6))) == 6  # closed forms are not limited
