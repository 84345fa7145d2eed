"""c_{G,d}(V), the Theorem 9 bound and the D4 closed forms against brute force."""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction

import numpy as np
import pytest

from paramsym.attention.components import (
    count_components,
    d4_components_closed_form,
    d4_components_sum,
    format_scientific,
    head_dimension,
    maximal_subrepresentations,
    parse_range,
    theorem9_bound,
)
from paramsym.errors import ShapeError, TooLargeError

D4_DIMS = [1, 1, 1, 1, 2]  # A1, A2, B1, B2, E1


def d4_mults(C: int) -> list[int]:
    return [C, C, C, C, 2 * C]


def naive_count(dims, mults, d) -> int:
    """Definition 8 verbatim: all 0 < n <= m of dimension <= d not strictly below another."""
    cands = [
        n
        for n in itertools.product(*(range(m + 1) for m in mults))
        if 0 < sum(a * b for a, b in zip(n, dims)) <= d
    ]
    def below(a, b):
        return a != b and all(x <= y for x, y in zip(a, b))
    return sum(1 for a in cands if not any(below(a, b) for b in cands))


def test_spec_examples():
    # C4, V = A1 + A2 + E1, d = 2: {A1+A2, E1}
    assert count_components([1, 1, 2], [1, 1, 1], 2) == 2
    assert sorted(maximal_subrepresentations([1, 1, 2], [1, 1, 1], 2)) == [(0, 0, 1), (1, 1, 0)]
    # Sub^2(R[D4]) has 7 elements
    assert count_components(D4_DIMS, [1, 1, 1, 1, 2], 2) == 7
    # C3 on R^2 has no 1-dimensional subrepresentation
    assert count_components([2], [1], 1) == 0
    # trivial group: V = R^k, c = 1 (the bound is vacuous)
    assert count_components([1], [12], 3) == 1
    assert theorem9_bound(1, 4) == Fraction(1, 24)


def test_fast_count_equals_definition_on_random_cases():
    rng = np.random.default_rng(0)
    for _ in range(150):
        k = int(rng.integers(1, 5))
        dims = rng.integers(1, 5, size=k).tolist()
        mults = rng.integers(0, 4, size=k).tolist()
        d = int(rng.integers(0, 12))
        ref = naive_count(dims, mults, d)
        assert count_components(dims, mults, d) == ref, (dims, mults, d)
        assert len(list(maximal_subrepresentations(dims, mults, d))) == ref, (dims, mults, d)


def test_d4_small_copies_all_three_ways():
    expected = [4, 11, 24, 46, 80, 130]  # the paper's values
    for C, c in enumerate(expected, start=1):
        assert naive_count(D4_DIMS, d4_mults(C), C) == c
        assert len(list(maximal_subrepresentations(D4_DIMS, d4_mults(C), C))) == c
        assert count_components(D4_DIMS, d4_mults(C), C) == c
        assert d4_components_sum(C) == c
        assert d4_components_closed_form(C) == c
    for C in range(7, 25):
        listed = list(maximal_subrepresentations(D4_DIMS, d4_mults(C), C))
        assert all(sum(a * b for a, b in zip(n, D4_DIMS)) == C for n in listed)  # maximal iff dim C
        assert len(listed) == count_components(D4_DIMS, d4_mults(C), C) == d4_components_closed_form(C)


def test_d4_c96_and_bound():
    c = count_components(D4_DIMS, d4_mults(96), 96)
    assert c == d4_components_sum(96) == d4_components_closed_form(96) == 2_000_425
    b = theorem9_bound(c, 8)
    assert b == Fraction(2_000_425**16, math.factorial(8))
    assert format_scientific(b) == "1.631e96"
    assert math.isclose(float(b), 1.631e96, rel_tol=1e-3)


def test_d4_thousand_copies_fast_and_exact():
    Cs = np.arange(1, 1001)
    t0 = time.perf_counter()
    fast = [count_components(D4_DIMS, d4_mults(int(C)), int(C)) for C in Cs]
    elapsed = time.perf_counter() - t0
    closed = d4_components_closed_form(Cs)
    assert fast == closed.tolist()
    assert fast == [d4_components_sum(int(C)) for C in Cs]
    assert elapsed < 5.0  # generous sanity bound; benchmarks/attention_counting.py measures it


def test_growth_is_quartic():
    # c = Θ(C^4): leading coefficient 1/48 * 2 (sum of even and odd forms ~ C^4/48)
    C = 10**6
    assert abs(d4_components_closed_form(C) / C**4 - 1 / 48) < 1e-5


def test_format_scientific():
    assert format_scientific(Fraction(1)) == "1.000e0"
    assert format_scientific(5, digits=1) == "5e0"
    assert format_scientific(Fraction(12345, 1)) == "1.235e4"
    assert format_scientific(Fraction(9999, 1), digits=2) == "1.0e4"
    assert format_scientific(Fraction(-3, 1000)) == "-3.000e-3"
    big = Fraction(7**1000, 3)
    assert format_scientific(big).endswith("e844")


def test_bad_input():
    with pytest.raises(ShapeError, match="same length"):
        count_components([1, 2], [1], 3)
    with pytest.raises(ShapeError, match="positive"):
        count_components([0], [1], 3)
    with pytest.raises(ShapeError, match="do not divide"):
        head_dimension(10, 4)
    assert head_dimension(24, 8) == 3
    with pytest.raises(TooLargeError, match="limit"):
        list(maximal_subrepresentations(D4_DIMS, d4_mults(40), 40, limit=1000))
    with pytest.raises(ShapeError):
        parse_range("a..b")
    assert parse_range("1..3,7") == [1, 2, 3, 7]


def test_d4_by_decomposing_the_representation():
    """Enumerate subrepresentations of the decomposed V = R^C ⊗ R[D4] (groups.reps decomposition),
    compare with the closed form."""
    from paramsym.attention.components import component_count, irreducible_content
    from paramsym.groups import reps
    from paramsym.groups.finite import group_by_name

    D4 = group_by_name("D4")
    for C, c in enumerate([4, 11, 24, 46, 80, 130], start=1):
        V = reps.copies(reps.regular(D4), C) if C > 1 else reps.regular(D4)
        content = irreducible_content(V)
        assert sorted((k, m) for _, k, m in content) == [(1, C)] * 4 + [(2, 2 * C)]
        dims = [k for _, k, _ in content]
        mults = [m for _, _, m in content]
        d = head_dimension(V.dim, 8)
        assert len(list(maximal_subrepresentations(dims, mults, d))) == c
        res = component_count(V, 8)
        assert res.c == res.closed_form == c
    res = component_count(reps.regular(D4), 8, copies=96)
    assert (res.dim_v, res.d, res.c, res.closed_form) == (768, 96, 2_000_425, 2_000_425)
    out = res.to_dict()
    assert out["bound_sci"] == "1.631e96" and Fraction(out["bound_exact"]) == theorem9_bound(2_000_425, 8)
    # another group: C4 regular = A1 + A2 + E1 with 2 heads (d = 2) is the spec's example
    assert component_count(reps.regular(group_by_name("C4")), 2).c == 2
    with pytest.raises(ShapeError, match="do not divide"):
        component_count(reps.regular(D4), 3)
