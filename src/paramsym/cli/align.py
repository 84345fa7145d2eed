"""``paramsym align``: align model B to model A modulo exact symmetries, and merge them.

::

    paramsym align A B [--symmetries permutation,rescaling,attention] [--data auto|digits|digits-images|stdlib|modadd:P]
        [--activation relu] [--points 25] [--seed 0] [--threads N] [--json] [--quiet] [--out DIR]
    paramsym align A B --merge ALPHA --out DIR    # merged θ_A + ALPHA·(θ_B aligned − θ_A), HF: DIR/merged/
    paramsym align A B --stages before,permutation,full,canonical,orthogonal,refined [--refine-steps N]
        [--refine-lr LR] [--refine-condition KAPPA]   # HF pre-norm transformers: the canonical-form stages
    paramsym align A B --stream --out DIR [--merge ALPHA] [--max-memory 8GiB]   # saved checkpoints of any
        # size, read one tensor at a time: aligned_b/ (and merged/) written shard by shard (issue 34)
    paramsym align --preset digits-mlp|modadd-transformer|vit-digits|lm-stdlib [--width W] [--cache-dir DIR] [...]
    paramsym align --resume DIR [--json]

A and B are ``.safetensors`` files of an MLP chain (weights ``X.weight`` (out × in), biases
``X.bias``) or Hugging Face ``save_pretrained`` directories of the same architecture. B is
aligned to A by Git Re-Basin weight matching (permutations of hidden units / FFN units / heads),
then by the continuous symmetries that apply (positive rescaling behind ReLU-like activations,
per-head GL(d_k)/GL(d_v) in attention, the rotary commutant on query/key under rotary
embeddings); the loss along ``(1−α)θ_A + αθ_B`` is measured before,
after permutations and after all symmetries (:mod:`paramsym.alignment`). ``--json`` prints
``barrier_before``, ``barrier_permutation``, ``barrier_full`` (test-loss barriers; ``*_train``
on the training split), ``function_error`` (aligned B vs B, relative output difference) and the
rest of the summary. ``--out DIR`` keeps the run directory (run kind ``align``,
:mod:`paramsym.kinds.align`): ``config.json``, ``metrics.json``, ``env.json``,
``report.md``, ``result.json``, ``path_loss.png`` and ``merged.safetensors`` (the midpoint of A
and the aligned B, of the last stage whose merge reloads: a canonical-form stage of an RMS-norm
model, else the last in A's coordinates, the others named in ``merge.not_merged``); ``--resume DIR`` continues an interrupted run (a preset's models trained
before the interruption are reused from the cache).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

__all__ = ["register"]


def register(subparsers) -> None:
    from ..kinds.align import ALIGN_PRESETS
    from .options import add_run_options

    p = subparsers.add_parser(
        "align", help="align two models modulo their symmetries (permutations, rescaling, attention GL) and merge them",
        description="Align model B to model A (Git Re-Basin weight matching plus continuous symmetries), report the "
        "loss barrier along the linear path before and after, and write the merged midpoint model.")
    p.add_argument("models", nargs="*", metavar="MODEL", help="A and B: safetensors files or save_pretrained directories")
    p.add_argument("--preset", choices=list(ALIGN_PRESETS), help="two models trained here from seeds 0 and 1 (cached)")
    p.add_argument("--symmetries", default=None,
                   help="comma-separated subset of permutation,rescaling,attention (default: all that apply); "
                        "with --census-groups: of permutation,rotation,attention (default permutation,attention; "
                        "rotation: RMSNorm LMs, writes norm-folded models); attention: per-head GL(d_v) on "
                        "value/output and GL(d_k) on query/key, the rotary commutant under rotary embeddings")
    p.add_argument("--data", default=None, help="evaluation data: auto, digits, digits-images, stdlib, modadd:P (files "
                   "only; default auto)")
    p.add_argument("--activation", default=None, help="activation of an MLP given as safetensors (default relu)")
    p.add_argument("--width", default=None, help="preset hidden width (digits-mlp) / n_embd (modadd)")
    p.add_argument("--cache-dir", default=None, help="where presets cache their trained models "
                   "(default $PARAMSYM_CACHE or ~/.cache/paramsym)")
    p.add_argument("--points", default=None, help="points on the path, both ends included (default 25)")
    add_run_options(p, out="keep the run directory here (new or empty; default: a temporary one): result.json, "
                    "report.md, path_loss.png, merged.safetensors", json="print the summary as JSON")
    p.add_argument("--merge", default=None, metavar="ALPHA",
                   help="write the merged model θ_A + ALPHA·(θ_B aligned − θ_A), ALPHA in [0, 1] (default 0.5): "
                        "merged.safetensors, and for HF models the save_pretrained directory merged/ in the run directory")
    p.add_argument("--stages", default=None,
                   help="comma-separated stages to report, from before,permutation,full,canonical,orthogonal,refined "
                        "(default before,permutation,full, which always run); canonical, orthogonal (stream rotation "
                        "Q ∈ O(D) by Procrustes) and refined (learned refinement) run on the canonical form of an HF "
                        "pre-norm transformer the census traces (GPT-2/NeoX/Llama families, ViT)")
    p.add_argument("--refine-steps", default=None, help="Adam steps of the refined stage (default 200; refine.steps)")
    p.add_argument("--refine-lr", default=None, help="learning rate of the refined stage (default 0.01; refine.lr)")
    p.add_argument("--refine-condition", default=None,
                   help="κ, the bound on each refined head map's condition number (default 100; refine.max_condition)")
    p.add_argument("--max-memory", default=None, help="memory budget of the path curves, e.g. 8GiB (default 2GiB); "
                   "with --stream: of the whole streamed alignment (default: no budget); a larger estimate stops with "
                   "TooLargeError before any work")
    # -- issue 18: any traced HF architecture through the census's permutation group (census helper) --
    p.add_argument("--census-groups", action="store_true",
                   help="A and B are HF checkpoints of any architecture the census traces: weight-match over its whole "
                        "permutation group (residual stream, FFN units, heads) and write aligned_b/ and merged/ "
                        "(from_pretrained-loadable) plus alignment.json to --out DIR")
    # -- issue 34: checkpoints larger than memory, read one tensor at a time --
    p.add_argument("--stream", action="store_true",
                   help="A and B are saved safetensors checkpoints (sharded or not) of the same architecture: "
                        "weight-match B to A over the census's permutation group reading one tensor at a time, and "
                        "write aligned_b/ (with --merge ALPHA also merged/ = (1-ALPHA)·A + ALPHA·aligned B) shard by "
                        "shard into --out DIR; --max-memory is checked from the headers before any tensor is read")
    p.set_defaults(func=_run, config=align_config)


#: the configuration flags (field → validator); refused with --resume
def _flags() -> dict:
    from ..groups.memory import parse_memory
    from .options import Flag, float_option, int_option, seed_option

    return {"models": lambda raw, flag: tuple(raw), "preset": None, "symmetries": lambda raw, flag: tuple(
                s.strip() for s in raw.split(",") if s.strip()),
            "data": None, "activation": None, "width": lambda raw, flag: int_option(raw, flag, 2),
            "cache_dir": None, "points": lambda raw, flag: int_option(raw, flag, 2), "seed": seed_option,
            "max_memory": lambda raw, flag: parse_memory(raw), "merge": _alpha,
            "stages": lambda raw, flag: tuple(s.strip() for s in raw.split(",") if s.strip()),
            "refine_steps": Flag("refine.steps", lambda raw, flag: int_option(raw, flag, 0)),
            "refine_lr": Flag("refine.lr", lambda raw, flag: float_option(raw, flag, minimum=0.0, exclusive=True)),
            "refine_condition": Flag("refine.max_condition",
                                     lambda raw, flag: float_option(raw, flag, minimum=1.0, exclusive=True))}


def _alpha(raw: str, flag: str) -> float:
    """``--merge ALPHA``: a number in [0, 1] (named ConfigError otherwise)."""
    import math

    from ..errors import ConfigError

    try:
        x = float(raw)
    except ValueError:
        x = math.nan
    if not math.isfinite(x) or not 0.0 <= x <= 1.0:
        raise ConfigError(f"{flag} must be a number α in [0, 1] (0 = A, 1 = the aligned B, 0.5 = the midpoint); received "
                          f"{raw!r}.")
    return x


def align_config(args: argparse.Namespace):
    """The configuration of a fresh run: the flags and ``--set`` over ``AlignConfig()``; a preset's
    cache directory resolved (``--cache-dir``, else ``$PARAMSYM_CACHE``, else ``~/.cache/paramsym``)."""
    from ..errors import ConfigError
    from ..kinds.align import AlignConfig
    from .options import cache_dir_option, config_from_flags

    if getattr(args, "stream", False):
        return stream_config(args)
    args.models = list(args.models or ()) or None
    cfg = config_from_flags(AlignConfig(), args, _flags())
    if bool(cfg.preset) == bool(cfg.models):
        raise ConfigError("give either two models A B or --preset NAME (not both, not neither).")
    if cfg.preset:
        from ..kinds.align_presets import cache_root

        cfg = dataclasses.replace(cfg, cache_dir=str(cache_root(cache_dir_option(cfg.cache_dir)).parent.resolve()))
        cfg.validate()
    return cfg


def _run(args: argparse.Namespace) -> int:
    from ..kinds.align import KIND
    from .options import resumes_kind, run_kind, threads_option

    threads = threads_option(args.threads) if args.threads is not None else 1
    if args.census_groups and args.stream:
        from ..errors import ConfigError

        raise ConfigError("--census-groups (both models in memory, the census's whole group) and --stream (one tensor "
                          "at a time, permutations only) are two ways to align checkpoints; give one of them.")
    if args.census_groups or resumes_kind(args, "align-census"):
        return _census_groups(args, threads)
    if args.stream or resumes_kind(args, "align-stream"):
        return _stream(args, threads)
    args.models = list(args.models) or None  # none given: not a configuration flag (for --resume)
    cfg = align_config(args) if args.resume is None else None  # read back from the run directory when resuming
    run, cfg, outcome = run_kind(args, kind=KIND, cfg=cfg, config_flags=_flags(), threads=threads)
    summary = dict(outcome.metrics) | run.read_json("timing.json")
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        print(run.file("report.md").read_text(), end="")
        if args.out or args.resume:
            print(f"run directory: {run.path} (result.json, report.md, path_loss.png, merged.safetensors"
                  + (", merged/" if run.file("merged").is_dir() else "") + ")",
                  file=sys.stderr)
    return 0


#: the groups ``--census-groups`` aligns over (``--symmetries``; default: permutation,attention —
#: the rotation rewrites the model (norm scales folded, embeddings untied), so it is asked for)
def _census_groups(args: argparse.Namespace, threads: int) -> int:
    """``--census-groups``: the ``align-census`` run kind (:mod:`paramsym.kinds.align_census`): align two
    HF checkpoints over the census's whole group (permutations, the residual rotation of folded RMSNorm
    models, per-head GL / rotary commutant) into the run directory (aligned_b/, merged/, alignment.json)."""
    from ..errors import ConfigError
    from ..kinds.align_census import KIND, AlignCensusConfig, summary_line
    from .options import given_flags, run_kind, seed_option

    flags = {"models": None, "symmetries": None, "seed": seed_option, "preset": None}
    args.models = list(args.models or ()) or None  # none given: not a configuration flag (for --resume)
    cfg = None  # read back from the run directory when resuming
    if args.resume is None:
        models = list(args.models or ())
        if args.preset or not args.out or len(models) != 2:
            raise ConfigError("--census-groups needs two checkpoints A B and --out DIR (a new directory); it takes no "
                              "--preset.")
        ignored = given_flags(args, {"data": None, "activation": None, "width": None, "points": None,
                                     "cache_dir": None})
        if ignored:
            raise ConfigError(f"--census-groups aligns two checkpoints over the census's group and measures distances "
                              f"only; {', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not apply to it. Drop "
                              f"{'it' if len(ignored) == 1 else 'them'}, or align without --census-groups.")
        seed = seed_option(args.seed, "--seed") if args.seed is not None else 0
        symmetries = None if args.symmetries is None else tuple(s.strip() for s in args.symmetries.split(","))
        cfg = AlignCensusConfig(models=tuple(models), symmetries=symmetries, seed=seed)
    run, cfg, outcome = run_kind(args, kind=KIND, cfg=cfg, config_flags=flags, threads=threads)
    info = outcome.metrics
    print(json.dumps(info, indent=1) if args.json else summary_line(info))
    return 0


#: the configuration flags of ``--stream`` (field → validator); the other align flags do not apply
def _stream_flags() -> dict:
    from ..groups.memory import parse_memory
    from .options import seed_option

    return {"models": lambda raw, flag: tuple(raw), "merge": _alpha, "seed": seed_option,
            "max_memory": lambda raw, flag: parse_memory(raw)}


def stream_config(args: argparse.Namespace):
    """The configuration of a fresh ``--stream`` run (flags and ``--set`` over ``AlignStreamConfig()``).

    Raises:
        ConfigError: not two checkpoints, or a flag that does not apply to ``--stream``.
    """
    from ..errors import ConfigError
    from ..kinds.align_stream import AlignStreamConfig
    from .options import config_from_flags, given_flags

    ignored = given_flags(args, {"preset": None, "data": None, "activation": None, "width": None, "points": None,
                                 "cache_dir": None, "symmetries": None, "stages": None, "refine_steps": None,
                                 "refine_lr": None, "refine_condition": None, "census_groups": None})
    ignored = [f for f in ignored if f != "--set"]
    if ignored:
        raise ConfigError(f"--stream aligns two saved checkpoints by permutations only and measures distances; "
                          f"{', '.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not apply to it. Drop "
                          f"{'it' if len(ignored) == 1 else 'them'}, or align without --stream.")
    args.models = list(args.models or ()) or None
    cfg = config_from_flags(AlignStreamConfig(), args, _stream_flags())
    cfg.validate()
    return cfg


def _stream(args: argparse.Namespace, threads: int) -> int:
    """``--stream``: the ``align-stream`` run kind (:mod:`paramsym.kinds.align_stream`): B aligned to A
    with both read one tensor at a time; aligned_b/ (and merged/) written shard by shard into --out DIR."""
    from ..errors import ConfigError
    from ..kinds.align_stream import KIND, summary_line
    from .options import run_kind

    cfg = None  # read back from the run directory when resuming
    if args.resume is None:
        if not args.out:
            raise ConfigError("--stream writes the aligned checkpoint into a run directory: pass --out DIR (a new "
                              "directory).")
        cfg = stream_config(args)
    else:
        args.models = list(args.models or ()) or None  # none given: not a configuration flag
    run, cfg, outcome = run_kind(args, kind=KIND, cfg=cfg, config_flags=_stream_flags(), threads=threads)
    info = outcome.metrics
    print(json.dumps(info, indent=1) if args.json else summary_line(info))
    return 0
