"""Affine solver: time and peak memory against block size (full ansatz on bias-free ReLU MLPs,
and the structured attention ansatz), with the ratio to the smallest run as the baseline.

    PYTHONPATH=src python benchmarks/affine_solver.py [--threads 1] [--quick]

Peak memory is the process's peak resident set (``ru_maxrss``) after each run, so it is
monotone: read the increase across runs. Target: ``relu2881`` (88 parameters, 7,832 unknowns)
in ≤ 60 s on the development machine.
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

from paramsym.exact import AffineSolverConfig, solve_affine
from paramsym.exact.presets import AFFINE_PRESETS, build_preset


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="skip relu2881")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    names = ["linear2x2", "relu242", "tanh-mlp", "leakyrelu-bias", "attention-d8h2", "attention-d8h2-bias"]
    if not args.quick:
        names.append("relu2881")
    print(f"{'preset':22s} {'p':>4s} {'unknowns':>9s} {'samples':>7s} {'method':>8s} {'dim':>4s} "
          f"{'gap':>9s} {'seconds':>8s} {'× base':>7s} {'peak MiB':>9s}")
    target, ansatz = build_preset("linear2x2")  # warm-up: first vmap/jacrev call pays the tracing
    solve_affine(target, ansatz)
    base = None
    for name in names:
        target, ansatz = build_preset(name)
        t0 = time.perf_counter()
        res = solve_affine(target, ansatz, AffineSolverConfig(samples=AFFINE_PRESETS[name].samples),
                           generator=torch.Generator().manual_seed(1))
        sec = time.perf_counter() - t0
        base = base or sec
        print(f"{name:22s} {target.p:4d} {res.n_unknowns:9d} {res.n_samples:7d} {res.method:>8s} "
              f"{res.dimension:4d} {res.gap:9.2e} {sec:8.2f} {sec / base:7.1f} {rss_mib():9.0f}", flush=True)


if __name__ == "__main__":
    main()
