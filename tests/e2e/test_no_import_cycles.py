"""No import cycle anywhere in ``src/paramsym`` (function-level imports included).

grimp (import-linter's graph library) builds the full import graph; Tarjan's algorithm finds its
strongly connected components. Any component with more than one module is a cycle.
"""

from __future__ import annotations

import sys

import pytest

grimp = pytest.importorskip("grimp")


def _cycles(graph) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for m in sorted(graph.modules):
            if m not in index:
                visit(m)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_the_cycle_finder_finds_a_planted_cycle():
    class Toy:
        modules = {"a", "b", "c"}

        @staticmethod
        def find_modules_directly_imported_by(m):
            return {"a": {"b"}, "b": {"a"}, "c": set()}[m]

    assert _cycles(Toy()) == [["a", "b"]]


def test_no_import_cycles_in_paramsym():
    # ``if TYPE_CHECKING:`` imports never execute, so they are not edges of the runtime graph.
    graph = grimp.build_graph("paramsym", cache_dir=None, exclude_type_checking_imports=True)
    assert _cycles(graph) == []
