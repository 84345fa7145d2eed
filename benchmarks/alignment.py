"""Alignment time against width: MLP ``[64, w, w, 10]`` (two random ReLU models, float64).

For each width, times (best of ``--repeat``) of

* ``permutation`` — Git Re-Basin weight matching (coordinate descent, one linear assignment per
  hidden layer per sweep, until no change) and its application through the catalogue actions;
* ``full`` — permutations, then alternating positive rescaling and re-matching;

with the number of sweeps, and each time as a ratio to the smallest width. The cost of one sweep
is dominated by the ``w × w`` similarity products (``O(w² · fan)``) and the assignment problems
(SciPy's Jonker–Volgenant, ``O(w³)`` worst case).

Run: ``OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/alignment.py [--widths 64,256,1024,4096] [--repeat 1]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import timed  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--widths", default="64,256,1024,4096")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from paramsym.alignment.align import align_parameters
    from paramsym.alignment.arch import mlp_architecture
    from paramsym.models.mlp import mlp

    warm = {k: v.detach() for k, v in mlp([4, 3, 3, 2], "relu", dtype=torch.float64).named_parameters()}
    align_parameters(mlp_architecture(warm, "relu"), warm, warm, ["permutation", "rescaling"])  # imports, caches
    rows = []
    for w in [int(x) for x in args.widths.split(",")]:
        ps = [{k: v.detach() for k, v in mlp([64, w, w, 10], "relu", generator=torch.Generator().manual_seed(s),
                                              dtype=torch.float64).named_parameters()} for s in (0, 1)]
        arch = mlp_architecture(ps[0], "relu")
        t_perm, (_, _, d_perm) = timed(lambda arch=arch, ps=ps: align_parameters(arch, ps[0], ps[1], ["permutation"]),
                                       args.repeat)
        t_full, (_, _, d_full) = timed(
            lambda arch=arch, ps=ps: align_parameters(arch, ps[0], ps[1], ["permutation", "rescaling"]), args.repeat)
        rows.append((w, t_perm, d_perm["sweeps_permutation"], t_full, d_full["rounds"]))
        print(f"width {w}: permutation {t_perm:.3f} s, full {t_full:.3f} s", flush=True)
    base_p, base_f = rows[0][1], rows[0][3]
    print(f"\n{'width':>6} {'perm s':>9} {'sweeps':>6} {'ratio':>8} {'full s':>9} {'rounds':>6} {'ratio':>8}")
    for w, tp, sw, tf, rd in rows:
        print(f"{w:>6} {tp:>9.3f} {sw:>6} {tp / base_p:>8.1f} {tf:>9.3f} {rd:>6} {tf / base_f:>8.1f}")


if __name__ == "__main__":
    main()
