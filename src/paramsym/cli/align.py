"""``paramsym align``: align model B to model A modulo exact symmetries, and merge them.

::

    paramsym align A B [--symmetries permutation,rescaling,attention] [--data auto|digits|modadd:P]
        [--activation relu] [--points 25] [--seed 0] [--json] [--out DIR]
    paramsym align --preset digits-mlp|modadd-transformer [--width W] [--cache-dir DIR] [...]

A and B are ``.safetensors`` files of an MLP chain (weights ``X.weight`` (out × in), biases
``X.bias``) or Hugging Face ``save_pretrained`` directories of the same architecture. B is
aligned to A by Git Re-Basin weight matching (permutations of hidden units / FFN units / heads),
then by the continuous symmetries that apply (positive rescaling behind ReLU-like activations,
per-head GL(d_k)/GL(d_v) in attention); the loss along ``(1−α)θ_A + αθ_B`` is measured before,
after permutations and after all symmetries (:mod:`paramsym.alignment`). ``--json`` prints
``barrier_before``, ``barrier_permutation``, ``barrier_full`` (test-loss barriers; ``*_train``
on the training split), ``function_error`` (aligned B vs B, relative output difference) and the
rest of the summary. ``--out`` writes ``result.json``, ``report.md``, ``path_loss.png`` and
``merged.safetensors`` (the midpoint of A and the aligned B).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["register"]

_PRESETS = ("digits-mlp", "modadd-transformer")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "align", help="align two models modulo their symmetries (permutations, rescaling, attention GL) and merge them",
        description="Align model B to model A (Git Re-Basin weight matching plus continuous symmetries), report the "
        "loss barrier along the linear path before and after, and write the merged midpoint model.")
    p.add_argument("models", nargs="*", metavar="MODEL", help="A and B: safetensors files or save_pretrained directories")
    p.add_argument("--preset", choices=_PRESETS, help="two models trained here from seeds 0 and 1 (cached)")
    p.add_argument("--symmetries", default=None,
                   help="comma-separated subset of permutation,rescaling,attention (default: all that apply)")
    p.add_argument("--data", default="auto", help="evaluation data: auto, digits, modadd:P (files only)")
    p.add_argument("--activation", default="relu", help="activation of an MLP given as safetensors (default relu)")
    p.add_argument("--width", type=int, default=None, help="preset hidden width (digits-mlp) / n_embd (modadd)")
    p.add_argument("--cache-dir", default=None, help="where presets cache their trained models "
                   "(default $PARAMSYM_CACHE or ~/.cache/paramsym)")
    p.add_argument("--points", type=int, default=25, help="points on the path, both ends included (default 25)")
    p.add_argument("--seed", type=int, default=0, help="seed of the coordinate-descent order")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--out", help="write result.json, report.md, path_loss.png, merged.safetensors to this new directory")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--max-memory", default="2GiB", help="memory budget of the path curves, e.g. 8GiB (default 2GiB); "
                   "a larger estimate stops with TooLargeError before any work")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ..errors import ConfigError

    if bool(args.preset) == bool(args.models):
        raise ConfigError("give either two models A B or --preset NAME (not both, not neither).")
    if args.models and len(args.models) != 2:
        raise ConfigError(f"give exactly two models A B; received {len(args.models)}: {args.models}.")
    if args.points < 2:
        raise ConfigError(f"--points must be ≥ 2 (α = 0 and 1); received {args.points}.")
    if args.threads < 1:
        raise ConfigError(f"--threads must be ≥ 1; received {args.threads}.")
    from ..errors import check_seed
    from ..groups.memory import parse_memory

    check_seed(args.seed, "--seed")
    budget = parse_memory(args.max_memory)
    if args.width is not None and args.width < 2:
        raise ConfigError(f"--width must be an integer >= 2 (the hidden width / n_embd of the preset); received "
                          f"{args.width}.")
    import torch

    torch.set_num_threads(args.threads)
    from ..alignment.align import align, check_points

    check_points(args.points, budget)
    from ..alignment.io import data_for, load_pair, write_outputs
    from ..runs import RunDir

    if args.out:
        RunDir.fresh(args.out)  # refuse a non-empty --out before any work
    syms = None if args.symmetries is None else [s for s in args.symmetries.split(",") if s.strip()]
    gen = torch.Generator().manual_seed(args.seed)
    if args.preset:
        from ..experiments.align_presets import load_preset

        arch, a, b, data, info = load_preset(args.preset, cache_dir=args.cache_dir or os.environ.get("PARAMSYM_CACHE"),
                                                width=args.width)
        title = f"Alignment: preset {args.preset}"
    else:
        arch, a, b, info = load_pair(args.models[0], args.models[1], args.activation)
        data, name = data_for(arch, args.data, info)
        if arch.kind == "hf":
            arch.info["n_classes"] = data.num_classes
        info = dict(info) | {"A": args.models[0], "B": args.models[1], "data": name}
        title = "Alignment"
    result = align(arch, a, b, data, symmetries=syms, points=args.points, generator=gen,
                   max_memory=budget)
    summary = result.summary() | {"points": args.points, "model": info}
    if args.out:
        write_outputs(args.out, result, a, summary, title)
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        from ..alignment.io import render_report

        print(render_report(summary, title), end="")
        if args.out:
            print(f"wrote {args.out}/result.json, report.md, path_loss.png, merged.safetensors", file=sys.stderr)
    return 0

