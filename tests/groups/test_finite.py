"""Finite groups against brute-force definitions and closed forms."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from paramsym.errors import GroupError, TooLargeError
from paramsym.groups.finite import (
    MAX_ORDER,
    FiniteGroup,
    alternating,
    cyclic,
    dihedral,
    direct_product,
    find_isomorphism,
    from_matrices,
    from_permutations,
    group_by_name,
    quaternion,
    symmetric,
)
from paramsym.groups.gsets import all_actions, count_actions

NAMES = ["C1", "C2", "C6", "Z5", "D1", "D3", "D4", "D5", "S3", "S4", "A4", "A5", "Q8", "V4",
         "C2xC3", "D4xC2", "C2xC2xC2"]


def brute_is_group(g: FiniteGroup) -> None:
    t = g.table
    n = g.order
    assert t.shape == (n, n)
    assert np.array_equal(t[0], np.arange(n)) and np.array_equal(t[:, 0], np.arange(n))
    # associativity over all triples
    lhs = t[t[:, :, None], np.arange(n)[None, None, :]]  # (a*b)*c
    rhs = t[np.arange(n)[:, None, None], t[None, :, :]]  # a*(b*c)
    assert np.array_equal(lhs, rhs)
    assert np.all(t[np.arange(n), g.inverse] == 0)


@pytest.mark.parametrize("name", NAMES)
def test_named_groups_are_groups(name):
    g = group_by_name(name)
    brute_is_group(g)
    assert len(g.closure(g.generators)) == g.order
    assert g.labels is not None and len(set(g.labels)) == g.order


@pytest.mark.parametrize(
    "name,order,classes",
    [("C6", 6, 6), ("D3", 6, 3), ("D4", 8, 5), ("D5", 10, 4), ("D6", 12, 6), ("S3", 6, 3),
     ("S4", 24, 5), ("A4", 12, 4), ("A5", 60, 5), ("Q8", 8, 5), ("D4xC2", 16, 10), ("S5", 120, 7)],
)
def test_orders_and_class_numbers(name, order, classes):
    g = group_by_name(name)
    assert g.order == order
    assert len(g.conjugacy_classes()) == classes


def test_dihedral_class_number_formula():
    # D_n has (n + 3) / 2 classes for odd n and n / 2 + 3 for even n
    for n in range(3, 13):
        expected = (n + 3) // 2 if n % 2 else n // 2 + 3
        assert len(dihedral(n).conjugacy_classes()) == expected


@pytest.mark.parametrize("name", ["D4", "S3", "Q8", "A4", "C2xC3"])
def test_conjugacy_classes_by_definition(name):
    g = group_by_name(name)
    n = g.order
    brute = {frozenset(g.mul(g.mul(g.inv(x), a), x) for x in range(n)) for a in range(n)}
    ours = {frozenset(c) for c in g.conjugacy_classes()}
    assert ours == brute
    assert g.conjugacy_classes()[0] == [0]
    assert sum(len(c) for c in g.conjugacy_classes()) == n
    for c, cl in enumerate(g.conjugacy_classes()):
        assert all(g.class_of[x] == c for x in cl)


@pytest.mark.parametrize("name", ["C6", "D4", "S3", "Q8", "V4", "C2xC3"])
def test_subgroups_against_all_subsets(name):
    g = group_by_name(name)
    n = g.order
    brute = set()
    for mask in range(1 << (n - 1)):  # subsets containing 0
        s = [0] + [i for i in range(1, n) if mask >> (i - 1) & 1]
        ss = set(s)
        if all(g.mul(a, b) in ss for a in s for b in s):
            brute.add(frozenset(s))
    assert set(g.subgroups()) == brute
    assert len(g.subgroups()) == len(brute)
    classes = g.subgroup_classes()
    members = [h for cls in classes for h in cls]
    assert len(members) == len(brute) and set(members) == brute
    for cls in classes:  # each class is exactly one conjugacy orbit
        h = cls[0]
        assert {g.conjugate_subgroup(h, x) for x in range(n)} == set(cls)
    assert classes[0] == [frozenset({0})] and classes[-1] == [frozenset(range(n))]


def test_known_subgroup_counts():
    # S4: 30 subgroups in 11 classes; A5: 59 in 9; D4: 10 in 8; Q8: 6 in 6 (all normal)
    for name, total, ncls in [("S4", 30, 11), ("A5", 59, 9), ("D4", 10, 8), ("Q8", 6, 6)]:
        g = group_by_name(name)
        assert len(g.subgroups()) == total
        assert len(g.subgroup_classes()) == ncls


def test_element_orders():
    g = dihedral(6)
    assert [g.element_order(k) for k in range(6)] == [1, 6, 3, 2, 3, 6]
    assert all(g.element_order(6 + k) == 2 for k in range(6))
    q = quaternion()
    assert [q.element_order(i) for i in range(8)] == [1, 2, 4, 4, 4, 4, 4, 4]
    for x in range(q.order):
        assert q.power(x, q.element_order(x)) == 0


def test_dihedral_relations_and_labels():
    g = dihedral(4)
    r, s = 1, 4
    assert g.labels == ["e", "r", "r^2", "r^3", "s", "r s", "r^2 s", "r^3 s"]
    assert g.mul(g.mul(s, r), s) == g.inv(r)  # s r s = r^-1
    assert g.mul(2, s) == 6  # r^2 * s = "r^2 s"


def test_quaternion_relations():
    q = quaternion()
    i, j, k, m1 = 2, 4, 6, 1
    assert q.mul(i, i) == q.mul(j, j) == q.mul(k, k) == m1
    assert q.mul(q.mul(i, j), k) == m1
    assert q.mul(i, j) == k and q.mul(j, i) == 7  # ij = k, ji = -k


def test_symmetric_lexicographic_and_cycles():
    g = symmetric(3)
    assert [tuple(p) for p in g.permutations] == list(itertools.permutations(range(3)))
    assert g.labels[0] == "()" and "(1 2 3)" in g.labels
    # composition convention (g*h)(p) = g(h(p))
    for a in range(6):
        for b in range(6):
            assert np.array_equal(g.permutations[g.mul(a, b)], g.permutations[a][g.permutations[b]])
    assert alternating(4).order == 12 and alternating(5).order == 60
    assert all(np.linalg.det(np.eye(4)[p]) > 0 for p in alternating(4).permutations)


def test_by_generators_isomorphic_to_named():
    s4 = from_permutations([[1, 0, 2, 3], [1, 2, 3, 0]])
    assert s4.order == 24 and find_isomorphism(s4, symmetric(4)) is not None
    c, s = np.cos(np.pi / 2), np.sin(np.pi / 2)
    d4 = from_matrices([np.array([[c, -s], [s, c]]), np.diag([1.0, -1.0])])
    assert d4.order == 8
    assert find_isomorphism(d4, dihedral(4)) is not None
    assert find_isomorphism(d4, quaternion()) is None
    # Q8 as real 4x4 matrices (left multiplication by i and j on quaternions)
    li = np.array([[0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 0, -1], [0, 0, 1, 0]], float)
    lj = np.array([[0, 0, -1, 0], [0, 0, 0, 1], [1, 0, 0, 0], [0, -1, 0, 0]], float)
    q = from_matrices([li, lj])
    assert q.order == 8 and find_isomorphism(q, quaternion()) is not None
    # the matrices multiply like the table
    for a in range(8):
        for b in range(8):
            assert np.allclose(q.matrices[a] @ q.matrices[b], q.matrices[q.mul(a, b)])


def test_find_isomorphism_is_homomorphism():
    g, h = group_by_name("C2xC3"), cyclic(6)
    f = find_isomorphism(g, h)
    assert f is not None and sorted(f) == list(range(6))
    for a in range(6):
        for b in range(6):
            assert f[g.mul(a, b)] == h.mul(f[a], f[b])
    assert find_isomorphism(group_by_name("S3"), cyclic(6)) is None
    assert find_isomorphism(group_by_name("D4"), group_by_name("Q8")) is None


def test_direct_product_structure():
    g = direct_product(dihedral(4), cyclic(2))
    assert g.order == 16 and g.name == "D4xC2"
    for a in range(16):
        for b in range(16):
            assert g.mul(a, b) == dihedral(4).mul(a // 2, b // 2) * 2 + (a + b) % 2


def test_subgroup_as_group():
    g = symmetric(4)
    h = next(s for s in g.subgroups() if len(s) == 12)  # A4
    sub = g.subgroup(h)
    brute_is_group(sub)
    assert find_isomorphism(sub, alternating(4)) is not None
    assert list(sub.parent_indices) == sorted(h)


def test_all_actions_are_the_homomorphisms_to_symmetric_brute_force():
    for name, n in [("C6", 4), ("S3", 3), ("V4", 3), ("Q8", 2)]:
        g = group_by_name(name)
        homs = all_actions(g, n)
        # brute force: all assignments of the generators, kept if a homomorphism
        sn = [np.array(p) for p in itertools.permutations(range(n))]
        brute = set()
        for imgs in itertools.product(sn, repeat=len(g.generators)):
            full = g.extend_to_homomorphism(list(imgs), lambda x, y: x[y], np.arange(n))
            if full is not None:
                brute.add(np.array(full).tobytes())
        assert len(homs) == len(brute)
        assert {h.tobytes() for h in homs} == brute
        for h in homs:  # each is a homomorphism on every pair
            for a in range(g.order):
                for b in range(g.order):
                    assert np.array_equal(h[g.mul(a, b)], h[a][h[b]])
        # counting from subgroups (exponential formula) agrees with the enumeration
        assert count_actions(g, n)[n] == len(brute)


def test_same_as_is_equality_of_tables():
    d4 = dihedral(4)
    assert d4.same_as(d4) and d4.same_as(dihedral(4)) and d4.same_as(group_by_name("D4"))
    assert not d4.same_as(quaternion())  # same order, different table
    assert not d4.same_as(cyclic(8)) and not d4.same_as("D4")
    # isomorphic but numbered differently: not the same group (find_isomorphism relates them)
    d4p = from_permutations([[1, 2, 3, 0], [3, 2, 1, 0]])
    assert find_isomorphism(d4p, d4) is not None and not d4p.same_as(d4)


# --------------------------------------------------------------------------- bad input
def test_unknown_name_lists_accepted_forms():
    with pytest.raises(GroupError, match="Accepted: C<n>"):
        group_by_name("X9")
    with pytest.raises(GroupError, match="Accepted"):
        group_by_name("Q12")
    with pytest.raises(GroupError):
        group_by_name("")


def test_inconsistent_generators():
    with pytest.raises(GroupError, match="same set"):
        from_permutations([[1, 0], [1, 2, 0]])
    with pytest.raises(GroupError, match="not a permutation"):
        from_permutations([[0, 0, 1]])
    with pytest.raises(GroupError, match="same size"):
        from_matrices([np.eye(2), np.eye(3)])
    with pytest.raises(GroupError, match="singular"):
        from_matrices([np.zeros((2, 2))])


def test_too_large_names_the_limit():
    with pytest.raises(TooLargeError, match=str(MAX_ORDER)):
        symmetric(8)
    with pytest.raises(TooLargeError, match="MAX_ORDER"):
        cyclic(MAX_ORDER + 1)
    # an infinite matrix group (rotation by one radian) never closes
    c, s = np.cos(1.0), np.sin(1.0)
    with pytest.raises(TooLargeError, match="enumeration limit"):
        from_matrices([np.array([[c, -s], [s, c]])])
    with pytest.raises(TooLargeError):
        direct_product(symmetric(6), cyclic(8))


def test_bad_table():
    with pytest.raises(GroupError, match="Latin"):
        FiniteGroup(np.array([[0, 1, 2], [1, 1, 0], [2, 0, 1]]))
    with pytest.raises(GroupError, match="identity"):
        FiniteGroup(np.array([[1, 0], [0, 1]]))
    # a Latin square with identity that is not associative (a loop of order 5)
    loop = np.array([[0, 1, 2, 3, 4], [1, 0, 3, 4, 2], [2, 4, 0, 1, 3], [3, 2, 4, 0, 1], [4, 3, 1, 2, 0]])
    with pytest.raises(GroupError, match="associative"):
        FiniteGroup(loop)


def test_generators_out_of_range():
    with pytest.raises(GroupError, match="element indices"):
        FiniteGroup(cyclic(3).table, generators=[7])
