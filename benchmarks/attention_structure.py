"""Benchmark: building, recovering and numerically checking equivariant RMHSA layers.

For G = D4 acting on V = R^C ⊗ R[D4] (d = 8C) and every partial clustering of 3 heads (49 of
them), times per layer:

- build (random parameters satisfying Theorem 2),
- recover (clustering by equal QK matrix, conjugation, OV sums) — the exact test,
- the numerical equivariance check over all 8 group elements with L = 3 tokens (baseline),

and prints recover/check ratios side by side (the machine is noisy; compare ratios).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/attention_structure.py``
"""

from __future__ import annotations

import time

import torch

from paramsym.attention.clusterings import enumerate_partial_clusterings
from paramsym.attention.equivariance import equivariance_error
from paramsym.attention.structure import build_equivariant_rmhsa, recover_clustering
from paramsym.groups import reps
from paramsym.groups.finite import group_by_name


def main() -> None:
    torch.set_num_threads(1)
    G = group_by_name("D4")
    clusterings = list(enumerate_partial_clusterings(G, 3))
    print(f"D4, 3 heads: {len(clusterings)} clusterings")
    for C in (1, 4, 16):
        rep = reps.copies(reps.regular(G), C) if C > 1 else reps.regular(G)
        gen = torch.Generator().manual_seed(0)
        t_build = t_rec = t_chk = 0.0
        worst = 0.0
        for cl in clusterings:
            t0 = time.perf_counter()
            M, R = build_equivariant_rmhsa(cl, rep, generator=gen)
            t1 = time.perf_counter()
            rec = recover_clustering(M, R, rep)
            t2 = time.perf_counter()
            err = equivariance_error(M, R, rep, n_tokens=3, n_samples=4, generator=gen)
            t3 = time.perf_counter()
            assert rec.equivariant and rec.clustering == cl
            worst = max(worst, err)
            t_build += t1 - t0
            t_rec += t2 - t1
            t_chk += t3 - t2
        n = len(clusterings)
        print(
            f"C = {C:2d} (d = {8 * C:3d}): build {1e3 * t_build / n:6.2f} ms, recover {1e3 * t_rec / n:6.2f} ms, "
            f"numerical check {1e3 * t_chk / n:6.2f} ms per layer; recover/check = {t_rec / t_chk:.2f}; "
            f"worst equivariance error {worst:.1e}"
        )


if __name__ == "__main__":
    main()
