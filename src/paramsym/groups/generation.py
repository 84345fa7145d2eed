"""Building a finite group's multiplication table from generators (no group type here).

:func:`enumerate_closure` closes generators under a product by breadth-first search and derives
the whole table from right multiplications; :func:`reordered` renames elements; :func:`cycle_label`
writes a permutation in 1-based cycle notation. :data:`MAX_ORDER` caps every enumeration
(re-exported as ``paramsym.groups.finite.MAX_ORDER``). The named groups and generator closures
built with these are in :mod:`paramsym.groups.constructions`, the group type in
:mod:`paramsym.groups.finite_group`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np

from ..errors import TooLargeError

__all__ = ["MAX_ORDER", "cycle_label", "enumerate_closure", "reordered", "too_large"]

#: Largest group order that is enumerated (the multiplication table has ``order**2`` entries).
MAX_ORDER = 5040


def too_large(what: str, limit: int = MAX_ORDER) -> TooLargeError:
    """The :class:`TooLargeError` for ``what`` above the enumeration limit."""
    return TooLargeError(
        f"{what} has more than {limit} elements, the enumeration limit "
        f"(paramsym.groups.finite.MAX_ORDER = {MAX_ORDER}); finite groups are stored as full "
        "multiplication tables. Use a smaller group or a subgroup, or, for a continuous group, "
        "the matrix Lie group tools in paramsym.groups.lie."
    )


def enumerate_closure(
    gens: Sequence, mul: Callable, key: Callable[[object], Hashable], identity, what: str
) -> tuple[list, np.ndarray, list[int]]:
    """Close ``gens`` under ``mul``; returns (elements, table, generator indices).

    Breadth-first search gives right multiplication by each generator; then column ``b`` of the
    table follows from its parent's, ``table[:, b] = right[table[:, parent(b)], s]``.
    """
    elems = [identity]
    index = {key(identity): 0}
    right: list[list[int]] = []
    parent, via = [0], [-1]
    i = 0
    while i < len(elems):
        row = []
        for k, s in enumerate(gens):
            p = mul(elems[i], s)
            kp = key(p)
            j = index.get(kp)
            if j is None:
                if len(elems) >= MAX_ORDER:
                    raise too_large(what)
                j = index[kp] = len(elems)
                elems.append(p)
                parent.append(i)
                via.append(k)
            row.append(j)
        right.append(row)
        i += 1
    n = len(elems)
    rt = np.array(right, dtype=np.int64).reshape(n, len(gens))
    table = np.empty((n, n), dtype=np.int64)
    table[:, 0] = np.arange(n)
    for b in range(1, n):  # elements were discovered parents-first
        table[:, b] = rt[table[:, parent[b]], via[b]]
    gen_idx = [index[key(s)] for s in gens]
    return elems, table, gen_idx


def reordered(table: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Table after renaming: new element ``i`` is old element ``order[i]``."""
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    return pos[table[np.ix_(order, order)]]


def cycle_label(p: Sequence[int]) -> str:
    """1-based cycle notation of a permutation of ``{0..n-1}``: ``[1, 2, 0] -> "(1 2 3)"``."""
    seen, parts = set(), []
    for start in range(len(p)):
        if start in seen or p[start] == start:
            continue
        cyc, x = [], start
        while x not in seen:
            seen.add(x)
            cyc.append(str(x + 1))
            x = p[x]
        parts.append("(" + " ".join(cyc) + ")")
    return "".join(parts) or "()"
