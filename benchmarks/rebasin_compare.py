"""paramsym's alignment against the ``rebasin`` package (0.0.47) on the digits MLP preset, side by side.

The comparison itself is :func:`paramsym.reproduce.peers.rebasin.compare` (what
``paramsym reproduce align-rebasin`` runs and docs/alignment.md shows); this script prints it.
Needs the ``compare`` extra (``pip install 'paramsym[compare]'``).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/rebasin_compare.py [--widths 32,16] [--cache-dir DIR] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--widths", default="32,16")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--points", type=int, default=25)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from paramsym.reproduce.peers.rebasin import compare

    res = compare([int(w) for w in args.widths.split(",")], cache_dir=args.cache_dir or os.environ.get("PARAMSYM_CACHE"),
                  points=args.points)
    if args.json:
        print(json.dumps(res, indent=1))
        return
    print(f"{'width':>5}  {'method':<26} {'train barrier':>13} {'test barrier':>12} {'function err':>12} {'time s':>8}")
    for w, methods in res.items():
        for name, r in methods.items():
            print(f"{w:>5}  {name:<26} {r['train_barrier']:>13.4f} {r['test_barrier']:>12.4f} "
                  f"{r['function_error']:>12.1e} {r['seconds']:>8.3f}")


if __name__ == "__main__":
    main()
