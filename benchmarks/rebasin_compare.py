"""paramsym's alignment against the ``rebasin`` package (0.0.47) on the digits MLP preset, side by side.

For each width, the two cached ``digits-mlp`` models (seeds 0 and 1; trained on first use) are
aligned by

* ``rebasin.PermutationCoordinateDescent(model_a, model_b, x).rebasin()`` (permutations only;
  its matching cost differs from the paper's — compare barriers, not costs),
* ``paramsym`` permutations only (Git Re-Basin weight matching),
* ``paramsym`` permutations + positive rescaling,

and every aligned B is evaluated the same way (float64, 25-point path, train and test loss
barriers, relative output change of the aligned B). Needs the ``compare`` extra
(``pip install 'paramsym[compare]'``).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/rebasin_compare.py [--widths 32,16] [--cache-dir DIR]``
"""

from __future__ import annotations

import argparse
import os
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--widths", default="32,16")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--points", type=int, default=25)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from rebasin import PermutationCoordinateDescent

    from paramsym.alignment.align import align
    from paramsym.alignment.path import path_curve, relative_output_error
    from paramsym.experiments.align_presets import load_preset
    from paramsym.models.mlp import mlp

    rows = []
    for width in [int(w) for w in args.widths.split(",")]:
        arch, a, b, data, _ = load_preset("digits-mlp", cache_dir=args.cache_dir or os.environ.get("PARAMSYM_CACHE"), width=width)
        ours = align(arch, a, b, data, points=args.points, generator=torch.Generator().manual_seed(0))
        widths = arch.info["widths"]
        model_a = mlp(widths, "relu", dtype=torch.float32)
        model_b = mlp(widths, "relu", dtype=torch.float32)
        model_a.load_state_dict(a)
        model_b.load_state_dict(b)
        t0 = time.perf_counter()
        pcd = PermutationCoordinateDescent(model_a, model_b, data.x_train[:64])
        pcd.rebasin()
        t_rebasin = time.perf_counter() - t0
        theirs = {k: v.detach().double() for k, v in model_b.named_parameters()}
        A = {k: v.double() for k, v in a.items()}
        d64 = type(data)(data.x_train.double(), data.y_train, data.x_test.double(), data.y_test)
        curve = path_curve(arch.forward, A, theirs, d64, args.points).barriers()
        x_all = torch.cat([d64.x_train, d64.x_test])
        ferr = relative_output_error(arch.forward, ours.stages["before"], theirs, x_all)
        s = ours.summary()
        rows.append((width, "before", s["barrier_before_train"], s["barrier_before"], 0.0, 0.0))
        rows.append((width, "rebasin 0.0.47 PCD", curve["train_loss"], curve["test_loss"], ferr, t_rebasin))
        rows.append((width, "paramsym permutation", s["barrier_permutation_train"], s["barrier_permutation"],
                     s["function_error_permutation"], s["seconds"]["permutation"]))
        rows.append((width, "paramsym perm+rescaling", s["barrier_full_train"], s["barrier_full"],
                     s["function_error"], s["seconds"]["full"]))
    print(f"{'width':>5}  {'method':<26} {'train barrier':>13} {'test barrier':>12} {'function err':>12} {'time s':>8}")
    for w, name, tr, te, fe, t in rows:
        print(f"{w:>5}  {name:<26} {tr:>13.4f} {te:>12.4f} {fe:>12.1e} {t:>8.3f}")


if __name__ == "__main__":
    main()
