"""Finite G-sets: orbits, stabilisers, coset spaces ``G/K`` and enumeration up to isomorphism.

A G-set of size ``n`` is a left action ``g . p = action[g, p]`` of a :class:`FiniteGroup` on
``{0, .., n-1}``: ``action[e] = id`` and ``action[g*h, p] = action[g, action[h, p]]``. Every G-set
is a disjoint union of transitive ones, and a transitive one is isomorphic to a coset space
``G/K`` with ``K`` a point stabiliser, determined up to conjugacy; so G-sets up to isomorphism
are multisets of conjugacy classes of subgroups (the *orbit types*).

Counting: the number of left actions of G on ``{0, .., n-1}`` (``|Hom(G, S_n)|``) follows from
the subgroups alone (:func:`count_actions`), and the automorphisms of a coset space ``G/K`` are
the right translations by the normaliser ``N(K)`` (:func:`coset_automorphisms`).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from ..errors import GroupError, TooLargeError
from .finite import FiniteGroup

#: ``all_actions`` enumerates relabelings of every G-set type; it refuses ``n!`` above this.
MAX_RELABELINGS = 40320


class GSet:
    """A finite left G-set ``{0, .., n-1}`` with ``g . p = action[g, p]``.

    Args:
        group: the acting group.
        action: ``(group.order, n)`` int array; row ``g`` is the permutation by which ``g`` acts.
        validate: check that ``action`` is a homomorphism ``G -> S_n`` (cheap: every element
            times every generator).
    """

    def __init__(self, group: FiniteGroup, action: np.ndarray, *, validate: bool = True) -> None:
        action = np.asarray(action)
        self.group = group
        if action.ndim != 2 or action.shape[0] != group.order:
            raise GroupError(
                f"a G-set action for {group.name} must be an ({group.order}, n) array of point "
                f"images, one row per group element; got shape {action.shape}."
            )
        self.action = action.astype(np.int64)
        self.size = action.shape[1]
        if validate:
            self._validate()

    def _validate(self) -> None:
        n, g = self.size, self.group
        a = self.action
        if n and (a.min() < 0 or a.max() >= n):
            raise GroupError(f"G-set action entries must lie in 0..{n - 1}.")
        if not np.array_equal(np.sort(a, axis=1), np.broadcast_to(np.arange(n), a.shape)):
            bad = int(np.flatnonzero((np.sort(a, axis=1) != np.arange(n)).any(axis=1))[0])
            raise GroupError(f"row {bad} ({g.label(bad)}) of the action is not a permutation.")
        if not np.array_equal(a[0], np.arange(n)):
            raise GroupError("the identity (element 0) must act trivially: action[0] == arange(n).")
        for s in g.generators:
            lhs = a[g.table[:, s]]  # (g s) . p
            rhs = np.take_along_axis(a, a[s][None, :].repeat(g.order, 0), axis=1)  # g . (s . p)
            if not np.array_equal(lhs, rhs):
                x = int(np.flatnonzero((lhs != rhs).any(axis=1))[0])
                raise GroupError(
                    f"action is not a left action (not a homomorphism G -> Sym): "
                    f"(g*s).p != g.(s.p) for g = {g.label(x)}, s = {g.label(s)}."
                )

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"GSet({self.group.name}, size={self.size}, orbits={[len(o) for o in self.orbits()]})"

    def orbits(self) -> list[list[int]]:
        """Orbits as sorted point lists, ordered by smallest point."""
        seen = np.full(self.size, -1)
        out: list[list[int]] = []
        for p in range(self.size):
            if seen[p] < 0:
                orb = np.unique(self.action[:, p])
                seen[orb] = len(out)
                out.append(orb.tolist())
        return out

    def stabilizer(self, p: int) -> frozenset[int]:
        """``{g : g . p = p}``."""
        if not 0 <= p < self.size:
            raise GroupError(f"point {p} is not in this G-set of size {self.size}.")
        return frozenset(np.flatnonzero(self.action[:, p] == p).tolist())

    def is_transitive(self) -> bool:
        return self.size > 0 and len(self.orbits()) == 1

    def fixed_points(self, g: int) -> list[int]:
        return np.flatnonzero(self.action[g] == np.arange(self.size)).tolist()

    def orbit_types(self) -> list[int]:
        """For each orbit, the index in ``group.subgroup_classes()`` of its stabilisers' class."""
        where = _subgroup_class_index(self.group)
        return [where[self.stabilizer(o[0])] for o in self.orbits()]

    def is_isomorphic(self, other: GSet) -> bool:
        """Same group and the same multiset of orbit types."""
        return (
            self.group.same_as(other.group)
            and Counter(self.orbit_types()) == Counter(other.orbit_types())
        )

def _subgroup_class_index(g: FiniteGroup) -> dict[frozenset[int], int]:
    if "subgroup_class_index" not in g._cache:
        g._cache["subgroup_class_index"] = {
            h: i for i, cls in enumerate(g.subgroup_classes()) for h in cls
        }
    return g._cache["subgroup_class_index"]


def coset_space(group: FiniteGroup, subgroup: Iterable[int]) -> GSet:
    """``G/K``: left cosets ``gK``, numbered by their smallest element (``K`` itself is point 0).

    ``g . (xK) = (gx)K``; the stabiliser of point 0 is ``K``.
    """
    k = np.array(sorted(set(int(x) for x in subgroup)), dtype=np.int64)
    if k.size == 0 or k[0] != 0 or k[-1] >= group.order or group.closure(k.tolist()) != frozenset(k.tolist()):
        raise GroupError(
            f"coset_space needs a subgroup of {group.name} (a set of element indices containing 0 "
            f"and closed under multiplication); got {k.tolist()}."
        )
    coset_min = group.table[:, k].min(axis=1)  # the coset gK, named by its smallest element
    reps = np.unique(coset_min)
    label = np.full(group.order, -1)
    label[reps] = np.arange(reps.size)
    action = label[coset_min[group.table[:, reps]]]
    return GSet(group, action, validate=False)


def disjoint_union(*gsets: GSet) -> GSet:
    """``X_1 ⊔ X_2 ⊔ ...``: points of ``X_i`` follow those of ``X_{i-1}``."""
    if not gsets:
        raise GroupError("disjoint_union needs at least one G-set.")
    g = gsets[0].group
    if not all(g.same_as(x.group) for x in gsets):
        raise GroupError(
            "disjoint_union: all G-sets must be over the same group (same multiplication table); "
            f"got {[x.group.name for x in gsets]}."
        )
    parts, offset = [], 0
    for x in gsets:
        parts.append(x.action + offset)
        offset += x.size
    return GSet(g, np.concatenate(parts, axis=1) if parts else np.zeros((g.order, 0), int), validate=False)


def transitive_gsets(group: FiniteGroup) -> list[GSet]:
    """One transitive G-set ``G/K`` per conjugacy class of subgroups ``K`` (in the order of
    ``group.subgroup_classes()``, so the regular G-set ``G/{e}`` first and the point last)."""
    return [coset_space(group, cls[0]) for cls in group.subgroup_classes()]


def gset_types_of_size(group: FiniteGroup, n: int) -> list[tuple[int, ...]]:
    """G-sets of size ``n`` up to isomorphism, as non-decreasing tuples of subgroup-class
    indices (one per orbit, orbit size ``|G|/|K|``)."""
    if n < 0:
        raise GroupError(f"G-set size must be >= 0; got {n}.")
    sizes = [group.order // len(cls[0]) for cls in group.subgroup_classes()]
    out: list[tuple[int, ...]] = []

    def rec(start: int, left: int, acc: list[int]) -> None:
        if left == 0:
            out.append(tuple(acc))
            return
        for t in range(start, len(sizes)):
            if sizes[t] <= left:
                rec(t, left - sizes[t], acc + [t])

    rec(0, n, [])
    return out


def gsets_of_size(group: FiniteGroup, n: int) -> list[GSet]:
    """Representatives of the G-sets of size ``n`` up to isomorphism (disjoint unions of
    coset spaces, ordered like :func:`gset_types_of_size`)."""
    trans = transitive_gsets(group)
    out = []
    for types in gset_types_of_size(group, n):
        out.append(disjoint_union(*[trans[t] for t in types]) if types else
                   GSet(group, np.zeros((group.order, 0), int), validate=False))
    return out


def find_gset_isomorphism(x: GSet, y: GSet) -> np.ndarray | None:
    """A bijection ``f`` with ``f(g . p) = g . f(p)``, as an array ``f[p]``, or ``None``."""
    if not x.group.same_as(y.group) or x.size != y.size:
        return None
    f = np.full(x.size, -1)
    used: set[int] = set()
    for orb in x.orbits():
        p = orb[0]
        stab = x.stabilizer(p)
        target = None
        for q in range(y.size):
            if q not in used and y.stabilizer(q) == stab:
                target = q
                break
        if target is None:
            return None
        f[x.action[:, p]] = y.action[:, target]
        used.update(y.action[:, target].tolist())
    return f


def all_actions(group: FiniteGroup, n: int) -> list[np.ndarray]:
    """Every homomorphism ``G -> S_n``, as ``(order, n)`` arrays of images.

    Each G-set type of size ``n`` is relabelled by all ``n!`` bijections and duplicates (same
    images of the generators) are removed; the count of each type is ``n! / |Aut_G(X)|``.
    Refuses ``n! > MAX_RELABELINGS``.
    """
    if n < 0:
        raise GroupError(f"n must be >= 0; got {n}.")
    if math.factorial(n) > MAX_RELABELINGS:
        raise TooLargeError(
            f"homomorphisms to S_{n}: enumerating relabelings needs {n}! = {math.factorial(n)} > "
            f"{MAX_RELABELINGS} steps per G-set type (paramsym.groups.gsets.MAX_RELABELINGS); "
            "use gsets_of_size(G, n) to get the actions up to isomorphism instead."
        )
    if n == 0:
        return [np.zeros((group.order, 0), dtype=np.int64)]
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    pinv = np.argsort(perms, axis=1)
    gens = np.array(group.generators, dtype=np.int64)
    out: list[np.ndarray] = []
    for x in gsets_of_size(group, n):
        a = x.action
        # relabel by sigma: a'[g, p] = sigma[a[g, sigma^-1[p]]]
        key = _relabel(a[gens], perms, pinv)
        _, first = np.unique(key.reshape(len(perms), -1), axis=0, return_index=True)
        for i in np.sort(first):
            out.append(_relabel(a, perms[i : i + 1], pinv[i : i + 1])[0])
    return out


def _relabel(a: np.ndarray, perms: np.ndarray, pinv: np.ndarray) -> np.ndarray:
    """``out[s, g, p] = perms[s, a[g, pinv[s, p]]]`` for actions ``a`` of shape ``(m, n)``."""
    inner = a[:, pinv].transpose(1, 0, 2)  # (S, m, n): a[g, pinv[s, p]]
    return np.take_along_axis(np.broadcast_to(perms[:, None, :], inner.shape), inner, axis=2)


def orbit_sizes(x: GSet) -> list[int]:
    return [len(o) for o in x.orbits()]


def gset_from_stabilizers(group: FiniteGroup, stabilizers: Sequence[Iterable[int]]) -> GSet:
    """``G/K_1 ⊔ G/K_2 ⊔ ...`` for the given subgroups."""
    return disjoint_union(*[coset_space(group, k) for k in stabilizers])


def count_actions(group: FiniteGroup, n: int) -> list[int]:
    """``[|Hom(G, S_0)|, .., |Hom(G, S_n)|]``: the number of left actions on ``m`` labelled points.

    Orbit-decomposition recurrence of the exponential formula
    ``Σ_m |Hom(G, S_m)| t^m/m! = exp(Σ_{K ≤ G} t^{[G:K]}/[G:K])``: the orbit of point ``m`` has
    size ``i = [G:K]`` for some subgroup ``K`` (its stabiliser), the other ``i − 1`` points are
    chosen in ``binom(m−1, i−1)`` ways and a transitive action on ``i`` labelled points with a
    given point stabiliser ``K`` in ``(i−1)!`` ways:
    ``h_m = Σ_i binom(m−1, i−1) (i−1)! s_i h_{m−i}`` with ``s_i`` subgroups of index ``i``.
    Exact Python integers; agrees with ``len(all_actions(group, m))``.
    """
    if n < 0:
        raise GroupError(f"n must be >= 0; got {n}.")
    s = [0] * (n + 1)
    for k in group.subgroups():
        i = group.order // len(k)
        if i <= n:
            s[i] += 1
    h = [1] + [0] * n
    for m in range(1, n + 1):
        h[m] = sum(
            math.comb(m - 1, i - 1) * math.factorial(i - 1) * s[i] * h[m - i] for i in range(1, m + 1)
        )
    return h


def coset_automorphisms(group: FiniteGroup, subgroup: Iterable[int]) -> tuple[GSet, np.ndarray]:
    """``G/K`` and its automorphisms as permutations of its points, one per ``n ∈ N(K)``.

    ``Aut_G(G/K) ≅ N(K)/K``: ``n`` acts by ``gK ↦ g n^{-1} K`` (well defined and commuting with
    the left action because ``n`` normalises ``K``). Row ``j`` of the returned ``(|N(K)|, [G:K])``
    array is that permutation for the ``j``-th element of ``sorted(N(K))``; each automorphism
    appears ``|K|`` times.
    """
    x = coset_space(group, subgroup)
    k = frozenset(int(e) for e in subgroup)
    norm = np.array(sorted(group.normalizer(k)), dtype=np.int64)
    coset_of = x.action[:, 0]  # g . K = gK: the point of each element's coset
    reps = np.array([int(np.flatnonzero(coset_of == p)[0]) for p in range(x.size)])
    perms = coset_of[group.table[reps[None, :], group.inverse[norm][:, None]]]
    return x, perms
