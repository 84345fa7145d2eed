"""The finite group type: :class:`FiniteGroup`, a group given by its multiplication table, with
its grammar (:meth:`FiniteGroup.parse`), its structure (element orders, conjugacy classes,
subgroups, words in the generators, homomorphisms) and :func:`find_isomorphism`.

A :class:`FiniteGroup` of order ``n`` has elements ``0 .. n-1`` with the identity at ``0`` and a
multiplication table ``table[a, b] = a*b``. Below this module, without a group type:
:mod:`.constructions` (the keyword arguments of every named group and of the closure of
generators), :mod:`.generation` (tables from generators, :data:`~.generation.MAX_ORDER`),
:mod:`.subgroups` (conjugacy classes and the subgroup lattice, which :class:`FiniteGroup` caches)
and :mod:`.names` (the accepted names). The public constructors are in :mod:`paramsym.groups.finite`,
which re-exports everything here.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from functools import cached_property

import numpy as np

from ..errors import GroupError
from .constructions import file_parts, matrix_parts, named_group, permutation_parts
from .generation import MAX_ORDER, too_large
from .names import matrix_generator
from .subgroups import conjugacy_classes, subgroup_lattice

__all__ = ["FiniteGroup", "find_isomorphism"]


class FiniteGroup:
    """A finite group given by its multiplication table.

    Invariants (checked on construction): ``table`` is an ``(order, order)`` Latin square,
    ``0`` is the identity, ``table[a, inverse[a]] == 0`` and the product is associative.
    ``generators`` generate the group.

    Attributes:
        name: short name (``"D4"``, ``"C2xC3"``, ``"<3 perms>"``).
        order: number of elements.
        table: ``(order, order)`` int array, ``table[a, b]`` is the index of ``a*b``.
        inverse: ``(order,)`` int array.
        generators: element indices generating the group.
        labels: human-readable element names, or ``None``.
        family: ``("cyclic", n)``, ``("dihedral", n)``, ... for groups built in closed form
            (used for conventional irrep names), else ``None``.
        permutations: ``(order, m)`` images of the defining permutation action, if any.
        matrices: ``(order, d, d)`` defining matrices, if the group came from matrices.
    """

    def __init__(
        self,
        table: np.ndarray,
        *,
        name: str = "G",
        generators: Sequence[int] | None = None,
        labels: Sequence[str] | None = None,
        family: tuple | None = None,
        permutations: np.ndarray | None = None,
        matrices: np.ndarray | None = None,
        validate: bool = True,
    ) -> None:
        table = np.asarray(table)
        if table.ndim != 2 or table.shape[0] != table.shape[1] or table.shape[0] == 0:
            raise GroupError(
                f"multiplication table must be a non-empty square (n, n) array; got shape {table.shape}."
            )
        n = table.shape[0]
        if n > MAX_ORDER:
            raise too_large(f"the group {name!r}")
        self.table = table.astype(np.int64 if n > 32767 else np.int32)
        self.order = n
        self.name = name
        self.family = family
        self.labels = list(labels) if labels is not None else None
        self.permutations = permutations
        self.matrices = matrices
        if generators is not None and any(not 0 <= int(s) < n for s in generators):
            raise GroupError(f"generators {list(generators)} must be element indices in 0..{n - 1}.")
        self._cache: dict = {}
        if validate:
            self._validate_table(generators)
        self.inverse = np.argmin(self.table, axis=1).astype(self.table.dtype)  # row a has 0 at a^-1
        self.generators = (
            [int(g) for g in generators] if generators is not None else self._greedy_generators()
        )
        if validate and generators is not None and len(self.closure(self.generators)) != n:
            raise GroupError(f"generators {self.generators} do not generate the group {name!r}.")

    # ----------------------------------------------------------------- validation, basics
    def _validate_table(self, generators: Sequence[int] | None) -> None:
        t, n = self.table, self.order
        if t.min() < 0 or t.max() >= n:
            raise GroupError(f"table entries must lie in 0..{n - 1}.")
        ar = np.arange(n)
        if not (np.array_equal(t[0], ar) and np.array_equal(t[:, 0], ar)):
            raise GroupError("element 0 must be the identity: table[0, b] == b and table[a, 0] == a.")
        srt = np.sort(t, axis=1)
        if not (np.all(srt == ar) and np.all(np.sort(t, axis=0) == ar[:, None])):
            raise GroupError("table is not a Latin square, so it is not a group table.")
        # associativity: (a*b)*c == a*(b*c); checking c in a generating set suffices (induction
        # on word length); without generators every c is checked (order**3 work).
        for c in (range(n) if generators is None else generators):
            if not np.array_equal(t[t, c], t[:, t[:, c]]):
                raise GroupError(f"table is not associative (fails for third factor {c}).")

    def _greedy_generators(self) -> list[int]:
        gens: list[int] = []
        current = {0}
        for g in np.argsort(-self.element_orders, kind="stable"):
            if int(g) not in current:
                gens.append(int(g))
                current = self.closure(gens)
            if len(current) == self.order:
                break
        return gens

    def __repr__(self) -> str:
        return f"FiniteGroup({self.name!r}, order={self.order})"

    def __len__(self) -> int:
        return self.order

    @classmethod
    def parse(cls, spec: str | FiniteGroup, *, argument: str = "--group") -> FiniteGroup:
        """The one group grammar of every command and of Python callers.

        ``spec`` is one of

        * a name (:func:`~paramsym.groups.finite.group_by_name`): ``C6``/``Z6``, ``D4`` (order 8), ``S3``, ``A4``, ``Q8``,
          ``V4`` and direct products joined by ``x`` (``C2xC3``, ``D4xC2``);
        * ``perm:JSON`` — generators as 0-based permutations, ``perm:[[1,2,0],[1,0,2]]``;
        * ``mat:JSON`` — generators as real matrices, ``mat:[[[0,-1],[1,0]]]``;
        * a ``.json`` file (read here) holding ``{"permutations": [...]}`` or ``{"matrices": [...]}``
          of generators;
        * a :class:`FiniteGroup` (returned as it is).

        Args:
            spec: the group specification.
            argument: how the user named it (``"--group"``, ``"GROUP"``), used in errors.

        Raises:
            GroupError: an unknown name (the closest valid names are suggested), malformed
                generators or a file without generators.
            InputFileError: a ``.json`` file that is missing or not JSON.
            TooLargeError: a group above :data:`~paramsym.groups.generation.MAX_ORDER`.
        """
        if isinstance(spec, FiniteGroup):
            return spec
        if not isinstance(spec, str):
            raise GroupError(f"{argument}: expected a group name, perm:JSON, mat:JSON or a .json file; received "
                             f"{spec!r} ({type(spec).__name__}).")
        text = spec.strip()
        for prefix in ("perm:", "mat:"):
            if text.lower().startswith(prefix):
                try:
                    gens = json.loads(text[len(prefix):])
                except json.JSONDecodeError:
                    raise GroupError(
                        f"{argument} {spec!r}: after {prefix!r} give a JSON list of generators, e.g. "
                        "perm:[[1,2,0],[1,0,2]] (0-based images) or mat:[[[0,-1],[1,0]]]."
                    ) from None
                if not isinstance(gens, list) or not gens:
                    raise GroupError(f"{argument} {spec!r}: after {prefix!r} give a non-empty JSON list of generators.")
                try:
                    if prefix == "perm:":
                        return FiniteGroup(**permutation_parts(gens))
                    return FiniteGroup(**matrix_parts([matrix_generator(m, argument, spec) for m in gens]))
                except GroupError as exc:
                    text_ = str(exc)
                    raise GroupError(text_ if text_.startswith(argument) else f"{argument} {spec!r}: {text_}") from None
        if text.lower().endswith(".json"):
            return FiniteGroup(**file_parts(text, argument))
        try:
            return named_group(text, FiniteGroup)
        except GroupError as exc:
            raise GroupError(f"{argument}: {exc}") from None

    def mul(self, a: int, b: int) -> int:
        """Index of ``a*b``."""
        return int(self.table[a, b])

    def inv(self, a: int) -> int:
        """Index of ``a^{-1}``."""
        return int(self.inverse[a])

    def label(self, a: int) -> str:
        """Name of element ``a`` (its label, else ``"g<a>"``)."""
        return self.labels[a] if self.labels is not None else f"g{a}"

    def power(self, a: int, k: int) -> int:
        """Index of ``a^k`` (``k`` may be negative)."""
        x, base = 0, a if k >= 0 else int(self.inverse[a])
        for _ in range(abs(k)):
            x = int(self.table[x, base])
        return x

    @cached_property
    def element_orders(self) -> np.ndarray:
        """``(order,)`` array of element orders."""
        n = self.order
        orders = np.zeros(n, dtype=np.int64)
        ar = np.arange(n)
        p = ar.copy()
        for k in range(1, n + 1):
            hit = (p == 0) & (orders == 0)
            orders[hit] = k
            if orders.all():
                break
            p = self.table[p, ar]
        return orders

    def element_order(self, a: int) -> int:
        """Smallest ``k >= 1`` with ``a^k = e``."""
        return int(self.element_orders[a])

    def is_abelian(self) -> bool:
        return bool(np.array_equal(self.table, self.table.T))

    def closure(self, elements: Sequence[int]) -> frozenset[int]:
        """The subgroup generated by ``elements`` (right-multiplying by them from ``e``)."""
        gens = np.unique(np.asarray(list(elements), dtype=np.int64))
        members = np.zeros(self.order, dtype=bool)
        members[0] = True
        frontier = np.array([0])
        while frontier.size and gens.size:
            prods = self.table[np.ix_(frontier, gens)].ravel()
            new = np.unique(prods[~members[prods]])
            members[new] = True
            frontier = new
        return frozenset(np.flatnonzero(members).tolist())

    # ------------------------------------------------------------------- conjugacy classes
    def conjugates(self, a: int) -> np.ndarray:
        """``g^{-1} a g`` for every ``g`` (an ``(order,)`` array, with repeats)."""
        ar = np.arange(self.order)
        return self.table[self.table[self.inverse, a], ar]

    def conjugacy_classes(self) -> list[list[int]]:
        """Conjugacy classes, each sorted, ordered by smallest element (``[0]`` first)."""
        if "classes" not in self._cache:
            self._cache["classes"], self._cache["class_of"] = conjugacy_classes(self)
        return self._cache["classes"]

    @property
    def class_of(self) -> np.ndarray:
        """``(order,)`` array: index of each element's conjugacy class."""
        self.conjugacy_classes()
        return self._cache["class_of"]

    def class_sizes(self) -> np.ndarray:
        return np.array([len(c) for c in self.conjugacy_classes()])

    def class_representatives(self) -> list[int]:
        """The smallest element of each conjugacy class."""
        return [c[0] for c in self.conjugacy_classes()]

    def power_map(self, k: int) -> np.ndarray:
        """Class of ``x^k`` for ``x`` in each class: ``(num_classes,)`` int array."""
        return np.array([self.class_of[self.power(r, k)] for r in self.class_representatives()])

    # ------------------------------------------------------------------------- subgroups
    def subgroups(self) -> list[frozenset[int]]:
        """All subgroups, sorted by (order, elements); ``{0}`` first and the group last."""
        return self._subgroup_data()[0]

    def subgroup_classes(self) -> list[list[frozenset[int]]]:
        """Subgroups up to conjugacy: each class is a sorted list of conjugate subgroups.

        Classes are ordered by (order, elements) of their first member; the trivial subgroup's
        class comes first and the whole group's last.
        """
        return self._subgroup_data()[1]

    def _subgroup_data(self) -> tuple[list[frozenset[int]], list[list[frozenset[int]]]]:
        if "subgroups" not in self._cache:
            self._cache["subgroups"] = subgroup_lattice(self)
        return self._cache["subgroups"]

    def conjugate_subgroup(self, h: frozenset[int], g: int) -> frozenset[int]:
        """``g^{-1} H g``."""
        arr = np.fromiter(h, dtype=np.int64)
        return frozenset(self.table[self.table[self.inverse[g], arr], g].tolist())

    def is_normal(self, h: frozenset[int]) -> bool:
        return all(self.conjugate_subgroup(h, g) == h for g in self.generators)

    def normalizer(self, h: frozenset[int]) -> frozenset[int]:
        return frozenset(g for g in range(self.order) if self.conjugate_subgroup(h, g) == h)

    def subgroup(self, elements: Sequence[int] | frozenset[int], name: str | None = None) -> FiniteGroup:
        """The subgroup ``elements`` as a group of its own.

        Its element ``i`` is ``parent_indices[i] = sorted(elements)[i]`` of this group (so the
        identity stays at ``0``); the result has an attribute ``parent_indices``.
        """
        idx = np.array(sorted(set(int(e) for e in elements)), dtype=np.int64)
        if idx.size == 0 or idx[0] != 0 or idx[-1] >= self.order:
            raise GroupError(f"subgroup of {self.name} must contain 0 and lie in 0..{self.order - 1}.")
        pos = np.full(self.order, -1)
        pos[idx] = np.arange(idx.size)
        sub = pos[self.table[np.ix_(idx, idx)]]
        if (sub < 0).any():
            raise GroupError(f"elements {idx.tolist()} are not closed under multiplication in {self.name}.")
        labels = [self.labels[i] for i in idx] if self.labels is not None else None
        perms = self.permutations[idx] if self.permutations is not None else None
        mats = self.matrices[idx] if self.matrices is not None else None
        grp = FiniteGroup(sub, name=name or f"{self.name}[{idx.size}]", labels=labels,
                          permutations=perms, matrices=mats, validate=False)
        grp.parent_indices = idx
        return grp

    # ---------------------------------------------------------------- equality, words
    def same_as(self, other: object) -> bool:
        """Whether ``other`` is the same group with the same element numbering.

        The one notion of group equality in paramsym: ``other`` is this object, or a
        :class:`FiniteGroup` of the same order with an identical multiplication table
        (``table[a, b]`` equal for all ``a, b``), so element indices mean the same thing in both.
        Isomorphic groups numbered differently are *not* the same; use :func:`find_isomorphism`.
        """
        return self is other or (
            isinstance(other, FiniteGroup)
            and other.order == self.order
            and bool(np.array_equal(other.table, self.table))
        )

    def _words(self) -> tuple[np.ndarray, np.ndarray]:
        """BFS spanning tree: ``b = parent[b] * generators[via[b]]`` for ``b != 0``."""
        if "words" not in self._cache:
            parent = np.full(self.order, -1)
            via = np.full(self.order, -1)
            parent[0] = 0
            queue = [0]
            for a in queue:
                for k, s in enumerate(self.generators):
                    b = int(self.table[a, s])
                    if parent[b] < 0:
                        parent[b], via[b] = a, k
                        queue.append(b)
            self._cache["words"] = (np.array(queue), parent, via)
        return self._cache["words"][1:]

    def bfs_order(self) -> np.ndarray:
        """Elements in breadth-first order from ``e`` along :meth:`_words` (parents first)."""
        self._words()
        return self._cache["words"][0]

    def extend_to_homomorphism(self, images: Sequence, mul: Callable, identity) -> list | None:
        """Images of all elements from ``images`` of the generators, or ``None`` if no homomorphism.

        ``mul`` multiplies two images. Consistency ``f(a s) = f(a) f(s)`` is checked for every
        element ``a`` and generator ``s`` with ``==``-comparable images (use for exact images).
        """
        parent, via = self._words()
        out: list = [None] * self.order
        out[0] = identity
        for b in self.bfs_order()[1:]:
            out[b] = mul(out[parent[b]], images[via[b]])
        for a in range(self.order):
            for k, s in enumerate(self.generators):
                if not _eq(out[self.table[a, s]], mul(out[a], images[k])):
                    return None
        return out


def _eq(x, y) -> bool:
    return bool(np.array_equal(x, y)) if isinstance(x, np.ndarray) else x == y


def find_isomorphism(g: FiniteGroup, h: FiniteGroup) -> np.ndarray | None:
    """An isomorphism ``G -> H`` as an ``(order,)`` index array, or ``None`` if none exists.

    Backtracking over images of G's generators (candidates: elements of the same order).
    """
    if g.order != h.order or sorted(g.element_orders) != sorted(h.element_orders):
        return None
    cands = [np.flatnonzero(h.element_orders == g.element_orders[s]) for s in g.generators]
    for choice in itertools.product(*cands):
        imgs = g.extend_to_homomorphism([int(c) for c in choice], h.mul, 0)
        if imgs is not None and len(set(imgs)) == g.order:
            return np.array(imgs)
    return None
