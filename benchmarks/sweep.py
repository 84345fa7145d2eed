"""Sweep throughput: the local backend with 1 worker against 2 workers on the same tiny sweep.

Runs a small spec (the tiny example with a 4-point grid, 2 continued, 4 replication seeds,
``--steps`` / twice that many steps: 10 trials) to completion with ``--workers 1`` and with ``--workers 2``, each in a fresh
output directory and a fresh process pool (worker start-up, i.e. importing torch, is included),
alternating for ``--rounds`` rounds, and prints the median wall times and the speed-up
``t(1 worker) / t(2 workers)`` (2.0 is the ideal on two idle cores; the tables of both runs are
checked to be identical). Run:

    PYTHONPATH=src .venv/bin/python benchmarks/sweep.py [--rounds 3] [--steps 150]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from paramsym.sweep import load_spec, run_sweep

SPEC = Path(__file__).resolve().parents[1] / "examples" / "sweeps" / "tiny.yaml"


def spec(steps: int):
    s = load_spec(str(SPEC))
    return dataclasses.replace(s, search={"train.lr": [5e-4, 1e-3, 2e-3, 4e-3]}, continue_top=2,
                               candidate_steps=steps, continue_steps=2 * steps, replication_seeds=[1, 2, 3, 4])


def one(workers: int, steps: int) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        table = run_sweep(spec(steps), Path(tmp) / "out", backend="local", workers=workers, progress=False)
        return time.perf_counter() - t0, table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=150, help="candidate steps (continued and replicated: twice)")
    args = ap.parse_args()
    times: dict[int, list[float]] = {1: [], 2: []}
    tables = {}
    for _ in range(args.rounds):
        for w in (1, 2):
            t, tables[w] = one(w, args.steps)
            times[w].append(t)
    assert tables[1] == tables[2], "1 and 2 workers gave different tables"
    t1, t2 = statistics.median(times[1]), statistics.median(times[2])
    n, m = args.steps, 2 * args.steps
    print(f"tiny sweep, 10 trials (4 candidates x {n} steps, 2 continued to {m}, 4 replications x {m}), local backend")
    print(f"{'workers':>7s} {'median s':>9s}  rounds")
    for w in (1, 2):
        print(f"{w:7d} {statistics.median(times[w]):9.2f}  " + ", ".join(f"{x:.2f}" for x in times[w]))
    print(f"speed-up 1 -> 2 workers: {t1 / t2:.2f}x (ideal 2.00x on two idle cores); tables identical")


if __name__ == "__main__":
    main()
