"""Benchmark: counting components c_{D4,C}(R^C ⊗ R[D4]) and partial G-clusterings.

Prints measured times side by side with a baseline run in the same process (the machine is
noisy, so compare ratios, not absolute numbers):

1. c for C = 1..N by listing maximal subrepresentations (baseline) vs by slack counting;
2. c for C = 1..1000 by slack counting (the issue asks for < 1 s in total) vs the closed form;
3. partial G-clusterings: enumeration (baseline) vs the counting formula.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/attention_counting.py``
"""

from __future__ import annotations

import numpy as np
from _timing import timed

from paramsym.attention.clusterings import count_partial_clusterings, enumerate_partial_clusterings
from paramsym.attention.components import (
    count_components,
    d4_components_closed_form,
    maximal_subrepresentations,
)
from paramsym.groups.finite import group_by_name

DIMS = [1, 1, 1, 1, 2]


def mults(C: int) -> list[int]:
    return [C, C, C, C, 2 * C]


def main() -> None:
    N = 30
    t_list, a = timed(lambda: [sum(1 for _ in maximal_subrepresentations(DIMS, mults(C), C)) for C in range(1, N + 1)], 1)
    t_fast, b = timed(lambda: [count_components(DIMS, mults(C), C) for C in range(1, N + 1)])
    assert a == b
    print(f"[1] C = 1..{N}: listing {t_list:.3f} s, slack counting {t_fast:.4f} s, ratio {t_list / t_fast:.0f}x")

    Cs = np.arange(1, 1001)
    t_all, c = timed(lambda: [count_components(DIMS, mults(int(C)), int(C)) for C in Cs])
    t_closed, d = timed(lambda: d4_components_closed_form(Cs))
    assert c == d.tolist()
    print(
        f"[2] C = 1..1000: slack counting {t_all:.3f} s in total (issue target < 1 s: "
        f"{'met' if t_all < 1 else 'NOT met'}), closed form {t_closed * 1e3:.3f} ms, ratio {t_all / t_closed:.0f}x"
    )

    for name, n in [("C6", 4), ("D4", 4), ("S3", 5)]:
        G = group_by_name(name)
        t_enum, e = timed(lambda G=G, n=n: sum(1 for _ in enumerate_partial_clusterings(G, n)), 1)
        t_count, f = timed(lambda G=G, n=n: count_partial_clusterings(G, n))
        assert e == f
        print(f"[3] {name}, {n} heads: {f} clusterings; enumeration {t_enum:.3f} s, formula {t_count * 1e3:.2f} ms, ratio {t_enum / t_count:.0f}x")


if __name__ == "__main__":
    main()
