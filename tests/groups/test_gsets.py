"""G-sets: coset spaces, orbits, stabilisers, enumeration up to isomorphism."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from paramsym.errors import GroupError, TooLargeError
from paramsym.groups.finite import cyclic, dihedral, group_by_name, symmetric
from paramsym.groups.gsets import (
    GSet,
    all_actions,
    coset_space,
    disjoint_union,
    find_gset_isomorphism,
    gset_types_of_size,
    gsets_of_size,
    transitive_gsets,
)


@pytest.mark.parametrize("name", ["D4", "S3", "Q8", "A4", "C6"])
def test_coset_spaces(name):
    g = group_by_name(name)
    for k in g.subgroups():
        x = coset_space(g, k)
        assert x.size == g.order // len(k)  # Lagrange
        assert x.is_transitive()
        assert x.stabilizer(0) == k
        # stabilisers along the orbit are conjugates: Stab(g.p) = g Stab(p) g^-1
        for a in range(g.order):
            p = int(x.action[a, 0])
            assert x.stabilizer(p) == g.conjugate_subgroup(k, g.inv(a))
        # left action, checked on every pair
        for a, b in itertools.product(range(g.order), repeat=2):
            assert np.array_equal(x.action[g.mul(a, b)], x.action[a][x.action[b]])


def test_orbits_and_burnside():
    g = dihedral(4)
    # D4 on the 4 vertices of the square (r: p -> p + 1, s: p -> -p), plus a 2-point orbit
    act = np.zeros((8, 4), dtype=int)
    for k in range(4):
        for p in range(4):
            act[k, p] = (p + k) % 4  # r^k
            act[4 + k, p] = (k - p) % 4  # r^k s with s: p -> -p
    x = GSet(g, act)
    y = disjoint_union(x, coset_space(g, next(h for h in g.subgroups() if len(h) == 4)))
    assert y.orbits() == [[0, 1, 2, 3], [4, 5]]
    # Burnside: number of orbits = average number of fixed points
    fixed = sum(len(y.fixed_points(a)) for a in range(g.order))
    assert fixed / g.order == len(y.orbits())
    # orbit-stabiliser
    for p in range(y.size):
        orbit = next(o for o in y.orbits() if p in o)
        assert len(orbit) * len(y.stabilizer(p)) == g.order


def test_transitive_gsets_one_per_subgroup_class():
    g = symmetric(4)
    trans = transitive_gsets(g)
    assert len(trans) == 11
    assert trans[0].size == 24 and trans[-1].size == 1
    for i, x in enumerate(trans):
        for j, y in enumerate(trans):
            assert (find_gset_isomorphism(x, y) is not None) == (i == j)
            assert x.is_isomorphic(y) == (i == j)


def test_gset_isomorphism_is_equivariant_bijection():
    g = group_by_name("S3")
    k = g.subgroups()[1]
    k2 = g.conjugate_subgroup(k, 2) if g.conjugate_subgroup(k, 2) != k else g.conjugate_subgroup(k, 3)
    x, y = coset_space(g, k), coset_space(g, k2)
    f = find_gset_isomorphism(x, y)
    assert f is not None and sorted(f) == list(range(3))
    for a in range(g.order):
        assert np.array_equal(f[x.action[a]], y.action[a][f])


def test_gsets_of_size_counts():
    # C6: subgroups of index 1, 2, 3, 6; G-sets of size n <-> ways to write n as a sum of
    # those indices (multisets)
    g = cyclic(6)
    for n in range(0, 8):
        brute = sum(1 for a in range(n + 1) for b in range(n // 2 + 1) for c in range(n // 3 + 1)
                    for d in range(n // 6 + 1) if a + 2 * b + 3 * c + 6 * d == n)
        assert len(gset_types_of_size(g, n)) == brute
        xs = gsets_of_size(g, n)
        assert all(x.size == n for x in xs)
        for x, y in itertools.combinations(xs, 2):
            assert not x.is_isomorphic(y)


def test_number_of_actions_matches_automorphism_count():
    # sum over iso types of n! / |Aut_G(X)| = number of homomorphisms G -> S_n
    g = dihedral(3)
    n = 4
    homs = all_actions(g, n)
    assert len({h.tobytes() for h in homs}) == len(homs)
    total = 0
    for x in gsets_of_size(g, n):
        aut = 0
        for p in itertools.permutations(range(n)):
            p = np.array(p)
            if all(np.array_equal(p[x.action[a]], x.action[a][p]) for a in g.generators):
                aut += 1
        total += math.factorial(n) // aut
    assert len(homs) == total


def test_bad_gsets():
    g = cyclic(4)
    with pytest.raises(GroupError, match="shape"):
        GSet(g, np.zeros((3, 2), dtype=int))
    with pytest.raises(GroupError, match="not a permutation"):
        GSet(g, np.array([[0, 1], [0, 0], [0, 1], [0, 1]]))
    with pytest.raises(GroupError, match="left action"):
        GSet(g, np.array([[0, 1, 2], [1, 0, 2], [0, 2, 1], [0, 1, 2]]))
    with pytest.raises(GroupError, match="subgroup"):
        coset_space(g, [0, 1])
    with pytest.raises(TooLargeError, match="MAX_RELABELINGS"):
        all_actions(g, 9)


def test_actions_on_zero_and_one_points():
    g = cyclic(3)
    assert [h.shape for h in all_actions(g, 0)] == [(3, 0)]
    assert len(all_actions(g, 1)) == 1 and np.array_equal(all_actions(g, 1)[0], np.zeros((3, 1)))
