"""``paramsym affine --preset NAME --json``: peak resident memory and wall time, this checkout
against a baseline checkout (side by side, one subprocess each, alternating) or, for presets
whose baseline would not fit the machine, against the numbers measured before the fix.

    PYTHONPATH=src python benchmarks/affine_memory.py [--baseline-src /work/main/src]
        [--presets relu2881,attention-d8h2,attention-d8h2-bias] [--baseline-max-gib 4]

Each run is ``python -m paramsym affine --preset NAME --json --threads 1`` in a fresh process;
its peak RSS comes from ``os.wait4`` (the child's own ``ru_maxrss``). Before the fix the CLI's
commutativity check broadcast all ``d²`` commutators (``≈ 4 · 8 d² s²`` bytes for ``d``
generators of size ``s = p + 1``): the baseline is only run when that estimate is below
``--baseline-max-gib``; otherwise the documented measurement is printed (marked ``doc``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: measured before the fix on the development machine (2026-12-01, loaded): seconds, GiB
DOCUMENTED = {"relu2881": (91.0, 2.1), "attention-d8h2": (59.0, 8.8), "attention-d8h2-bias": (132.0, 17.2)}
#: (d, p) of each preset's result, for the baseline's broadcast estimate
SHAPES = {"linear2x2": (4, 8), "linear3x2": (8, 12), "relu242": (4, 16), "relu2881": (16, 88),
          "leakyrelu-bias": (5, 32), "tanh-mlp": (0, 26), "attention-d8h2": (64, 256),
          "attention-d8h2-bias": (80, 288)}


def run(src: str, preset: str) -> tuple[float, float, dict]:
    """Wall seconds, peak RSS (GiB) and the JSON output of one CLI run with ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": src, "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "paramsym", "affine", "--preset", preset, "--json",
                             "--threads", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    sec = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{preset} with {src} failed (exit {os.waitstatus_to_exitcode(status)})")
    return sec, usage.ru_maxrss / 2**20, json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-src", default=None, help="src folder of the checkout before the fix")
    ap.add_argument("--presets", default="relu2881,attention-d8h2,attention-d8h2-bias")
    ap.add_argument("--baseline-max-gib", type=float, default=4.0,
                    help="run the baseline only when its broadcast estimate is below this")
    args = ap.parse_args()
    here = str(Path(__file__).resolve().parents[1] / "src")
    print(f"{'preset':20s} {'dim':>4s} {'gap':>9s} {'base s':>8s} {'base GiB':>9s} {'new s':>7s} "
          f"{'new GiB':>8s} {'time ×':>7s} {'memory ×':>9s}")
    for preset in args.presets.split(","):
        d, p = SHAPES[preset]
        broadcast_gib = 4 * 8 * d * d * (p + 1) ** 2 / 2**30
        if args.baseline_src and broadcast_gib <= args.baseline_max_gib:
            b_sec, b_gib, b_out = run(args.baseline_src, preset)
            tag = ""
        elif preset in DOCUMENTED:
            (b_sec, b_gib), b_out, tag = DOCUMENTED[preset], None, " doc"
        else:
            continue
        sec, gib, out = run(here, preset)
        if b_out is not None and (b_out["dimension"] != out["dimension"]):
            print(f"  {preset}: dimension changed {b_out['dimension']} → {out['dimension']}")
        print(f"{preset:20s} {out['dimension']:4d} {out['gap']:9.2e} {b_sec:8.1f} {b_gib:9.2f} {sec:7.1f} "
              f"{gib:8.2f} {b_sec / sec:7.1f} {b_gib / gib:9.1f}{tag}", flush=True)


if __name__ == "__main__":
    main()
