"""Census cost against its floor: one plain forward pass per verified entry.

The census verifies every entry with one forward pass on the transformed weights (plus one for
the reference output), so its floor is ``(entries + 1) × forward``. This prints, per preset and
verification dtype: wall time of the census, of one plain forward on the same batch, the number
of entries, and the ratio ``census / ((entries + 1) × forward)`` (the overhead of finding the
layouts and applying the group elements; aim ≤ 3). Run with one thread:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/census.py [--presets minilm,llama-tiny,...]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _timing import timed  # noqa: E402

from paramsym.census import census, default_inputs  # noqa: E402
from paramsym.census.presets import build_preset  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--presets", default="minilm,llama-tiny,pythia-tiny")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(f"{'preset':12s} {'dtype':8s} {'entries':>7s} {'census s':>9s} {'forward ms':>10s} {'ratio':>6s}")
    for name in args.presets.split(","):
        model = build_preset(name)
        for dtype in (torch.float32, torch.float64):
            m = model.to(dtype)
            inputs = default_inputs(m, torch.Generator().manual_seed(0))
            with torch.no_grad():
                t_fwd, _ = timed(lambda m=m, inputs=inputs: m(**inputs), args.repeat + 1)
            t_cen, res = timed(lambda m=m, inputs=inputs, dtype=dtype: census(m, inputs, dtype=dtype, copy_model=False),
                               args.repeat)
            n = len(res.entries)
            print(f"{name:12s} {str(dtype)[6:]:8s} {n:7d} {t_cen:9.2f} {1e3 * t_fwd:10.1f} "
                  f"{t_cen / ((n + 1) * t_fwd):6.2f}", flush=True)


if __name__ == "__main__":
    main()
