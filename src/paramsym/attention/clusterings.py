"""Partial G-clusterings of a set of heads, up to isomorphism ([Attention] Theorem 2, Def. of partial G-clusterings).

A **partial G-clustering** of heads ``H = {0, .., n-1}`` is a surjection ``χ : H → Y = X_0 ⊔ X``
where ``X`` is a G-set (``X_0`` carries no action). A morphism ``f : Y → Y'`` satisfies
``f∘χ = χ'``, ``f(X_0) ⊂ X_0'``, ``f(X) ⊂ X'`` and is equivariant on ``X``; since ``χ`` is onto,
``f`` is determined by ``χ`` and ``χ'``, so there is at most one morphism and an isomorphism class
is exactly the triple

- the set partition of ``H`` into the fibres ``χ^{-1}(p)`` (*clusters*),
- which clusters form ``X_0``,
- the permutation action of G on the remaining clusters (a homomorphism ``G → Sym(X)``).

:class:`PartialClustering` stores that triple in a canonical form (clusters numbered by their
smallest head), so ``a == b`` iff the clusterings are isomorphic. With heads labelled, the number
of classes is ``Σ_k S(n, k) Σ_m binom(k, m) |Hom(G, S_m)|`` (Stirling numbers of the second kind;
``m = |X|``), which is 33 for ``C_6`` and three heads (the paper's Figure 1). ``|Hom(G, S_m)|``
follows from the subgroups of G by the exponential formula
``Σ_m |Hom(G, S_m)| t^m/m! = exp(Σ_{K ≤ G} t^{[G:K]}/[G:K])``.

Counting **up to relabelling of heads** (``up_to="relabelling"``) identifies clusterings that
differ by a permutation of ``H``: a class is a multiset of ``X_0`` cluster sizes together with an
isomorphism class of G-sets ``X`` weighted by cluster sizes.

The G-set machinery (orbits, stabilisers, validation of actions, ``|Hom(G, S_m)|``, enumeration
of actions, automorphisms of ``G/K``) is :mod:`paramsym.groups.gsets`; a clustering holds ``Y`` as
a :class:`~paramsym.groups.gsets.GSet` in which the clusters of ``X_0`` are fixed points.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from ..errors import ShapeError, TooLargeError
from ..groups.gsets import GSet, all_actions, coset_automorphisms, count_actions
from ..groups.memory import check_memory

__all__ = [
    "PartialClustering",
    "enumerate_partial_clusterings",
    "count_partial_clusterings",
    "counting_bytes",
    "count_homomorphisms_to_symmetric",
    "set_partitions",
]


class PartialClustering:
    """A partial G-clustering of ``n_heads`` heads in canonical form (see module docstring).

    Args:
        group: the finite group (a :class:`paramsym.groups.finite.FiniteGroup`).
        chi: ``chi[h]`` = cluster (point of ``Y``) of head ``h``; any labels ``0..k-1``, all used.
        x0: clusters in ``X_0``.
        action: ``(order, k)`` int array, ``action[g, p] = g·p`` for ``p ∈ X``; entries for
            ``p ∈ X_0`` are ignored (stored as ``p``).
        validate: check surjectivity, that ``X`` is preserved and that ``action`` is a
            homomorphism ``G → Sym(X)``.

    Invariants: ``chi`` is a restricted growth string (cluster ``p`` is numbered by first
    appearance), and equality means isomorphism.
    """

    def __init__(
        self,
        group,
        chi: Sequence[int],
        x0: Sequence[int] | frozenset[int] = (),
        action: np.ndarray | None = None,
        *,
        validate: bool = True,
    ) -> None:
        chi = [int(c) for c in chi]
        if not chi:
            raise ShapeError("a partial clustering needs at least one head; received chi=[].")
        k = max(chi) + 1
        if validate and (min(chi) < 0 or sorted(set(chi)) != list(range(k))):
            raise ShapeError(
                f"chi={chi} must map heads onto clusters 0..{k - 1} (surjective, every label used)."
            )
        x0 = frozenset(int(p) for p in x0)
        if validate and not x0 <= set(range(k)):
            raise ShapeError(f"X_0 clusters {sorted(x0)} are not among the clusters 0..{k - 1}.")
        order = group.order
        if action is None:
            action = np.tile(np.arange(k), (order, 1))
        action = np.asarray(action, dtype=np.int64).copy()
        if action.shape != (order, k):
            raise ShapeError(
                f"action must have shape (|G|, clusters) = ({order}, {k}); received {action.shape}."
            )
        for p in x0:
            action[:, p] = p
        if validate:  # X_0 points are fixed, so a valid G-set action on Y preserves X
            GSet(group, action, validate=True)
        # canonical relabelling: clusters by first appearance in chi
        new = {}
        for c in chi:
            if c not in new:
                new[c] = len(new)
        perm = np.array([new[p] for p in range(k)], dtype=np.int64)
        inv = np.argsort(perm)
        self.group = group
        self.chi: tuple[int, ...] = tuple(int(perm[c]) for c in chi)
        self.x0: frozenset[int] = frozenset(int(perm[p]) for p in x0)
        self.action: np.ndarray = perm[action[:, inv]]
        self.action.setflags(write=False)
        #: ``Y = X_0 ⊔ X`` as a G-set (``X_0`` clusters are fixed points).
        self.gset = GSet(group, self.action, validate=False)

    # ---------------------------------------------------------------- basic structure
    @property
    def n_heads(self) -> int:
        return len(self.chi)

    @property
    def n_clusters(self) -> int:
        return self.action.shape[1]

    @property
    def clusters(self) -> list[list[int]]:
        """Heads of each cluster ``χ^{-1}(p)``, clusters in canonical order."""
        out: list[list[int]] = [[] for _ in range(self.n_clusters)]
        for h, p in enumerate(self.chi):
            out[p].append(h)
        return out

    @property
    def x(self) -> list[int]:
        """Clusters in the G-set ``X``."""
        return [p for p in range(self.n_clusters) if p not in self.x0]

    def orbits(self) -> list[list[int]]:
        """G-orbits of ``X`` (each sorted), ordered by smallest cluster."""
        return [orb for orb in self.gset.orbits() if orb[0] not in self.x0]

    def stabilizer(self, p: int) -> frozenset[int]:
        """``{g : g·p = p}`` for ``p ∈ X`` (all of G for ``p ∈ X_0``)."""
        return self.gset.stabilizer(p)

    def key(self) -> tuple:
        """Hashable canonical form: equal keys iff isomorphic (same group)."""
        xs = self.x
        return (self.chi, tuple(sorted(self.x0)), self.action[:, xs].tobytes())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PartialClustering):
            return NotImplemented
        return self.group.same_as(other.group) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def is_isomorphic(self, other: PartialClustering) -> bool:
        """``True`` iff an isomorphism ``f`` with ``f∘χ = χ'`` exists (same as ``==``)."""
        return self == other

    def relabel_heads(self, sigma: Sequence[int]) -> PartialClustering:
        """The clustering ``χ∘σ^{-1}``: head ``sigma[h]`` takes the place of head ``h``."""
        sigma = [int(s) for s in sigma]
        if sorted(sigma) != list(range(self.n_heads)):
            raise ShapeError(f"sigma={sigma} is not a permutation of the {self.n_heads} heads.")
        chi = [0] * self.n_heads
        for h, s in enumerate(sigma):
            chi[s] = self.chi[h]
        return PartialClustering(self.group, chi, self.x0, self.action, validate=False)

    # ---------------------------------------------------------------- presentation
    def _set_label(self, elems: frozenset[int]) -> str:
        if len(elems) == self.group.order:
            return "G"
        return "{" + ", ".join(self.group.label(g) for g in sorted(elems)) + "}"

    def describe(self) -> str:
        """One line per cluster: its heads, whether in ``X_0``, its orbit and stabiliser."""
        lines = []
        orbit_of = {p: i for i, orb in enumerate(self.orbits()) for p in orb}
        for p, heads in enumerate(self.clusters):
            hs = "{" + ", ".join(f"h{h}" for h in heads) + "}"
            if p in self.x0:
                lines.append(f"cluster {p} = {hs}: X_0 (summed OV map zero, QK free)")
            else:
                lines.append(
                    f"cluster {p} = {hs}: X, orbit {orbit_of[p]} "
                    f"(size {len(self.orbits()[orbit_of[p]])}), stabiliser "
                    f"{self._set_label(self.stabilizer(p))}"
                )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able description: clusters, X_0, orbits, stabilisers, generator permutations."""
        return {
            "group": self.group.name,
            "heads": self.n_heads,
            "clusters": self.clusters,
            "x0": sorted(self.x0),
            "orbits": self.orbits(),
            "stabilizers": {
                str(p): [self.group.label(g) for g in sorted(self.stabilizer(p))] for p in self.x
            },
            "generator_action": {
                self.group.label(s): [int(q) for q in self.action[s]] for s in self.group.generators
            },
        }

    def __repr__(self) -> str:
        return (
            f"PartialClustering(group={self.group.name}, clusters={self.clusters}, "
            f"x0={sorted(self.x0)}, orbits={self.orbits()})"
        )


def set_partitions(n: int) -> Iterator[tuple[int, ...]]:
    """Set partitions of ``{0..n-1}`` as restricted growth strings (``chi[0] = 0``,
    ``chi[h] ≤ 1 + max(chi[:h])``), in lexicographic order."""
    if n <= 0:
        return
    chi = [0] * n

    def rec(h: int, k: int) -> Iterator[tuple[int, ...]]:
        if h == n:
            yield tuple(chi)
            return
        for c in range(k + 1):
            chi[h] = c
            yield from rec(h + 1, max(k, c + 1))

    yield from rec(1, 1)


def _stirling2(n: int) -> list[int]:
    """``[S(n, 0), .., S(n, n)]``."""
    row = [1]
    for i in range(1, n + 1):
        new = [0] * (i + 1)
        for k in range(1, i + 1):
            new[k] = k * (row[k] if k < len(row) else 0) + row[k - 1]
        row = new
    return row


def count_homomorphisms_to_symmetric(group, n: int) -> list[int]:
    """``[|Hom(G, S_0)|, .., |Hom(G, S_n)|]``; see :func:`paramsym.groups.gsets.count_actions`."""
    return count_actions(group, n)


def _check_heads(n_heads: int) -> int:
    if isinstance(n_heads, bool) or not isinstance(n_heads, (int, np.integer)) or int(n_heads) < 1:
        raise ShapeError(f"number of heads must be a positive integer, received {n_heads!r}.")
    return int(n_heads)


def counting_bytes(n_heads: int) -> int:
    """Estimated bytes of the exact counts for ``n_heads`` heads: three tables of ``n + 1`` Python
    integers (Stirling numbers ``S(n, k)``, ``|Hom(G, S_m)|``, partition sums) of up to
    ``n log2 n`` bits each."""
    n = int(n_heads)
    return 3 * (n + 1) * (n * max(n, 2).bit_length() // 8 + 28)


def count_partial_clusterings(
    group, n_heads: int, *, up_to: Literal["isomorphism", "relabelling"] = "isomorphism",
    max_memory: int | None = None, max_seconds: float = 300.0,
) -> int:
    """Number of partial G-clusterings of ``n_heads`` heads.

    Args:
        group: the finite group.
        n_heads: ``|H|``.
        up_to: ``"isomorphism"`` (heads labelled; the paper's count, 33 for ``C_6`` and 3 heads)
            or ``"relabelling"`` (additionally identify clusterings that differ by a permutation
            of the heads).
        max_memory: budget in bytes (default 2 GiB, :mod:`paramsym.groups.memory`) of the exact
            integer tables (:func:`counting_bytes`); a larger estimate raises
            :class:`~paramsym.errors.TooLargeError` before any work.
        max_seconds: refuse (:class:`~paramsym.errors.TooLargeError`) when the estimated CPU time
            exceeds this: the homomorphism counts cost about ``|G| n^4`` big-integer steps, measured
            at ``2e-11 |G| n^4`` seconds (C2, 800 heads: 16 s).
    """
    from ..groups.finite_group import FiniteGroup

    group = FiniteGroup.parse(group, argument="group")  # a name ("C6") or a FiniteGroup; a bad name is a GroupError
    n = _check_heads(n_heads)
    check_memory(counting_bytes(n), f"the exact counts of partial clusterings of {n} heads", max_memory,
                 "Use fewer --heads.")
    seconds = 2e-11 * group.order * float(n) ** 4
    if seconds > max_seconds:
        raise TooLargeError(f"counting the partial {group.name}-clusterings of {n} heads would take about "
                            f"{seconds:.3g} CPU seconds (estimate 2e-11·|G|·n^4), more than the limit of {max_seconds:g} s. "
                            "Use fewer --heads (or pass max_seconds from Python).")
    if up_to == "isomorphism":
        h = count_homomorphisms_to_symmetric(group, n)
        S = _stirling2(n)
        return sum(S[k] * sum(math.comb(k, m) * h[m] for m in range(k + 1)) for k in range(1, n + 1))
    if up_to == "relabelling":
        return _count_up_to_relabelling(group, n)
    raise ShapeError(f"up_to must be 'isomorphism' or 'relabelling', received {up_to!r}.")


def _partition_counts(n: int) -> list[int]:
    p = [1] + [0] * n
    for part in range(1, n + 1):
        for s in range(part, n + 1):
            p[s] += p[s - part]
    return p


def _weighted_transitive_counts(group, n: int) -> list[int]:
    """``T[s]``: isomorphism classes of transitive G-sets with weights ``w ≥ 1`` summing to ``s``.

    A transitive G-set is ``G/K`` (K up to conjugacy); its automorphisms are ``N(K)/K`` acting on
    cosets by ``gK ↦ g n^{-1} K``. Burnside over ``N(K)``: a weighting fixed by ``n`` is constant on
    the cycles of ``n``, so ``fix_n(s) = [t^s] Π_cycles t^{ℓ}/(1 − t^{ℓ})``.
    """
    T = [Fraction(0)] * (n + 1)
    for cls in group.subgroup_classes():
        K = cls[0]
        if group.order // len(K) > n:
            continue
        _, autos = coset_automorphisms(group, K)  # one permutation of G/K per element of N(K)
        total = [0] * (n + 1)
        for perm in autos:
            lengths = _cycle_lengths(perm.tolist())
            poly = [1] + [0] * n
            for ell in lengths:
                new = [0] * (n + 1)
                for s, c in enumerate(poly):
                    if c:
                        for t in range(s + ell, n + 1, ell):
                            new[t] += c
                poly = new
            total = [a + b for a, b in zip(total, poly)]
        for s in range(n + 1):
            T[s] += Fraction(total[s], len(autos))
    out = []
    for s, v in enumerate(T):
        if v.denominator != 1:  # pragma: no cover - Burnside's lemma guarantees integrality
            raise ArithmeticError(f"Burnside count T[{s}] = {v} is not an integer.")
        out.append(int(v))
    return out


def _cycle_lengths(perm: Sequence[int]) -> list[int]:
    seen = [False] * len(perm)
    out = []
    for i in range(len(perm)):
        if not seen[i]:
            ell, j = 0, i
            while not seen[j]:
                seen[j] = True
                j = perm[j]
                ell += 1
            out.append(ell)
    return out


def _count_up_to_relabelling(group, n: int) -> int:
    T = _weighted_transitive_counts(group, n)
    # Euler transform: multisets of weighted transitive G-sets
    c = [0] * (n + 1)
    for k in range(1, n + 1):
        c[k] = sum(dd * T[dd] for dd in range(1, k + 1) if k % dd == 0)
    W = [1] + [0] * n
    for m in range(1, n + 1):
        W[m] = sum(c[k] * W[m - k] for k in range(1, m + 1)) // m
    p = _partition_counts(n)
    return sum(p[n0] * W[n - n0] for n0 in range(n + 1))


def enumerate_partial_clusterings(
    group, n_heads: int, *, limit: int = 200_000
) -> Iterator[PartialClustering]:
    """Every partial G-clustering of ``n_heads`` labelled heads, one per isomorphism class.

    Order: by set partition (restricted growth strings), then ``X_0`` subset, then the action
    (:func:`paramsym.groups.gsets.all_actions`). The total is checked against
    :func:`count_partial_clusterings` first; above ``limit`` it raises
    :class:`~paramsym.errors.TooLargeError` without enumerating.
    """
    n = _check_heads(n_heads)
    total = count_partial_clusterings(group, n)
    if total > limit:
        raise TooLargeError(
            f"{total} partial {group.name}-clusterings of {n} heads exceed limit={limit}; count "
            "them with count_partial_clusterings (or `paramsym attention clusterings --count-only`) "
            "or raise the limit."
        )
    homs: dict[int, list[np.ndarray]] = {0: [np.zeros((group.order, 0), dtype=np.int64)]}
    for chi in set_partitions(n):
        k = max(chi) + 1
        for j in range(k, -1, -1):  # j = |X_0|; X-heavy clusterings first
            for x0 in itertools.combinations(range(k), j):
                xs = [p for p in range(k) if p not in x0]
                m = len(xs)
                if m not in homs:
                    homs[m] = [np.asarray(a, dtype=np.int64) for a in all_actions(group, m)]
                xs_arr = np.array(xs, dtype=np.int64)
                for phi in homs[m]:
                    action = np.tile(np.arange(k), (group.order, 1))
                    if m:
                        action[:, xs_arr] = xs_arr[phi]
                    yield PartialClustering(group, chi, x0, action, validate=False)
