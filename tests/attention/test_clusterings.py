"""Partial G-clusterings: counts against a brute force written from the definition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from paramsym.attention.clusterings import (
    PartialClustering,
    count_homomorphisms_to_symmetric,
    count_partial_clusterings,
    enumerate_partial_clusterings,
    set_partitions,
)
from paramsym.errors import GroupError, ShapeError, TooLargeError
from paramsym.groups.finite import group_by_name


def _all_actions_brute(table: np.ndarray, gens: list[int], m: int) -> list[np.ndarray]:
    """All homomorphisms G -> S_m: try every image of the generators, extend along words,
    keep those consistent with the whole multiplication table."""
    order = table.shape[0]
    out = []
    perms = list(itertools.permutations(range(m)))
    for imgs in itertools.product(perms, repeat=len(gens)):
        act = [None] * order
        act[0] = tuple(range(m))
        frontier = [0]
        while frontier:
            nxt = []
            for a in frontier:
                for s, img in zip(gens, imgs):
                    b = table[s, a]  # s*a acts as s after a
                    if act[b] is None:
                        act[b] = tuple(img[act[a][p]] for p in range(m))
                        nxt.append(b)
            frontier = nxt
        ok = all(
            act[table[a, b]] == tuple(act[a][act[b][p]] for p in range(m))
            for a in range(order)
            for b in range(order)
        )
        if ok:
            out.append(np.array(act, dtype=np.int64).reshape(order, m))
    return out


def brute_force_classes(G, n: int) -> set:
    """Isomorphism classes straight from the definition: every surjection chi onto any labelled
    point set, every X_0 and every action, identified by relabelling the points (the unique f)."""
    table = np.asarray(G.table)
    classes = set()
    actions = {m: _all_actions_brute(table, G.generators, m) for m in range(n + 1)}
    for chi in itertools.product(range(n), repeat=n):
        pts = sorted(set(chi))
        for j in range(len(pts) + 1):
            for x0 in itertools.combinations(pts, j):
                xs = [p for p in pts if p not in x0]
                for act in actions[len(xs)]:
                    # canonical relabelling: points by first appearance in chi
                    relabel = {}
                    for p in chi:
                        relabel.setdefault(p, len(relabel))
                    cchi = tuple(relabel[p] for p in chi)
                    cx0 = tuple(sorted(relabel[p] for p in x0))
                    # action as a dict on relabelled X points, for every group element
                    cact = tuple(
                        tuple(sorted((relabel[xs[i]], relabel[xs[act[g, i]]]) for i in range(len(xs))))
                        for g in range(G.order)
                    )
                    classes.add((cchi, cx0, cact))
    return classes


def _relabel_class(key, sigma):
    chi, x0, act = key
    n = len(chi)
    new_chi = [0] * n
    for h, s in enumerate(sigma):
        new_chi[s] = chi[h]
    relabel = {}
    for p in new_chi:
        relabel.setdefault(p, len(relabel))
    return (
        tuple(relabel[p] for p in new_chi),
        tuple(sorted(relabel[p] for p in x0)),
        tuple(tuple(sorted((relabel[a], relabel[b]) for a, b in row)) for row in act),
    )


def test_paper_figure_1_count():
    C6 = group_by_name("C6")
    assert count_partial_clusterings(C6, 3) == 33
    assert len(list(enumerate_partial_clusterings(C6, 3))) == 33
    assert len(brute_force_classes(C6, 3)) == 33


@pytest.mark.parametrize(
    "name,max_heads",
    [("C1", 4), ("C2", 5), ("C3", 4), ("C4", 4), ("C6", 4), ("S3", 4), ("D4", 4), ("Q8", 4), ("A4", 3)],
)
def test_counts_match_brute_force(name, max_heads):
    G = group_by_name(name)
    for n in range(1, max_heads + 1):
        brute = brute_force_classes(G, n)
        listed = list(enumerate_partial_clusterings(G, n))
        assert count_partial_clusterings(G, n) == len(brute) == len(listed), (name, n)
        assert len(set(listed)) == len(listed)  # no two listed clusterings are isomorphic
        # the listed ones are exactly the brute-force classes
        as_keys = {
            (
                c.chi,
                tuple(sorted(c.x0)),
                tuple(tuple(sorted((p, int(c.action[g, p])) for p in c.x)) for g in range(G.order)),
            )
            for c in listed
        }
        assert as_keys == brute
        # up to relabelling of heads: orbits of S_n on the brute-force classes
        orbits = {
            min(_relabel_class(k, s) for s in itertools.permutations(range(n))) for k in brute
        }
        assert count_partial_clusterings(G, n, up_to="relabelling") == len(orbits), (name, n)


def test_homomorphism_counts_by_formula_and_by_brute_force():
    for name in ["C2", "C3", "C6", "S3", "D4", "Q8", "A4"]:
        G = group_by_name(name)
        h = count_homomorphisms_to_symmetric(G, 4)
        brute = [len(_all_actions_brute(np.asarray(G.table), G.generators, m)) for m in range(5)]
        assert h == brute, name


def test_known_sequences():
    # trivial group: clusterings = sum_k S(n,k) 2^k (each cluster in X or X_0)
    C1 = group_by_name("C1")
    assert [count_partial_clusterings(C1, n) for n in range(1, 6)] == [2, 6, 22, 94, 454]
    # involutions in S_m: |Hom(C2, S_m)| = 1, 1, 2, 4, 10, 26, 76
    assert count_homomorphisms_to_symmetric(group_by_name("C2"), 6) == [1, 1, 2, 4, 10, 26, 76]


def test_isomorphism_and_relabelling():
    G = group_by_name("C2")
    swap = np.array([[0, 1], [1, 0]])
    a = PartialClustering(G, [0, 1, 1], action=swap)  # clusters {h0}, {h1,h2} swapped
    b = PartialClustering(G, [1, 0, 0], action=swap)  # the same with the points relabelled
    assert a == b and hash(a) == hash(b)
    assert a.clusters == [[0], [1, 2]] and a.orbits() == [[0, 1]]
    assert a.stabilizer(0) == frozenset({0})
    c = a.relabel_heads([2, 1, 0])
    assert c.clusters == [[0, 1], [2]] and c != a
    d = PartialClustering(G, [0, 1, 1], x0=[1])
    assert d != PartialClustering(G, [0, 1, 1]) and d.x == [0]
    assert "X_0" in d.describe() and d.to_dict()["x0"] == [1]


def test_bad_input():
    G = group_by_name("C2")
    with pytest.raises(ShapeError, match="surjective"):
        PartialClustering(G, [0, 2])
    with pytest.raises(GroupError, match="permutation"):
        PartialClustering(G, [0, 1], action=np.array([[0, 1], [0, 0]]))
    C3 = group_by_name("C3")
    with pytest.raises(GroupError, match="homomorphism|identity"):
        # a transposition cannot be the image of an element of order 3
        PartialClustering(C3, [0, 1], action=np.array([[0, 1], [1, 0], [1, 0]]))
    with pytest.raises(ShapeError, match="positive"):
        count_partial_clusterings(G, 0)
    with pytest.raises(TooLargeError, match="limit"):
        next(enumerate_partial_clusterings(group_by_name("D4"), 8, limit=1000))
    assert list(set_partitions(3)) == [(0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (0, 1, 2)]
