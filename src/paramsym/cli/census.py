"""``paramsym census``: every known symmetry of a model, with its dimension, verified on the weights.

::

    paramsym census --preset minilm|bert-base|gpt2|pythia-tiny|llama-tiny|mlp-relu|mlp-linear|mha-bias [--json] [--out DIR]
    paramsym census --model DIR [--json] [--out DIR] [--dtype float64|float32] [--seed N] [--tokens N]
                    [--layout auto|derived|adapter] [--canonical]
    paramsym census --model DIR --export permutation-spec|mergekit|mergekit-0.1.4|mergekit-0.0 --out DIR
                    [--without-weights] [--max-memory SIZE]
    paramsym census --model DIR --stream [--json] [--seed N] [--tokens N] [--max-memory 8GiB] [--spot-check]
    paramsym census --resume DIR

The run kind ``census`` (:mod:`paramsym.kinds.census`). ``--model`` takes a directory
written by ``save_pretrained`` (loaded with ``attn_implementation="eager"``, never downloading; a
text model as its base model, an image classifier such as ``ViTForImageClassification`` with its
head; probed with seeded token ids or ``pixel_values`` of the config's size,
:func:`paramsym.census.walk.default_inputs`).
``--json`` prints ``symmetries`` (a list of ``{module, kind, dimension, verified_error, ...}``),
``total_dimension``, ``attention_dimension``, ``parameters``, ``symmetric_fraction``, how
dimensions are summed (``counting``) and ``seconds``. ``--out DIR`` keeps the run directory
(``config.json``, ``metrics.json`` = the census, ``env.json``, ``timing.json``, ``report.md``);
without it the run directory is temporary. The process exits with status 1 when a listed
symmetry fails its verification.

``--export FORMAT --out DIR`` is the run kind ``census-export``
(:mod:`paramsym.kinds.census_export`): the verified export is written into the run directory
(``DIR/permutation_spec.json`` or ``DIR/mergekit_architecture.json``) beside ``config.json``,
``metrics.json`` (the export's verification record), ``env.json`` and ``report.md``;
``paramsym census --resume DIR`` continues either kind.

``--stream`` verifies the census of a safetensors checkpoint one decoder layer at a time
(:mod:`paramsym.census.streaming`; no run directory) and prints it.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]


def register(subparsers) -> None:
    from .options import add_run_options

    p = subparsers.add_parser(
        "census", help="list and verify every known parameter symmetry of a model (attention, FFN, norms)",
        description="Walk a model (HF architecture adapters or nn.MultiheadAttention modules), list each symmetry "
        "with its module, kind and dimension, and verify each by applying a random group element to the weights.",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", default=None, help="a model directory written by save_pretrained (nothing is downloaded)")
    src.add_argument("--preset", default=None, help="a built-in model (see `paramsym list`)")
    p.add_argument("--dtype", choices=["float64", "float32"], default=None, help="verification dtype (default float64)")
    p.add_argument("--tokens", default=None, help="tokens per verification sequence, >= 2 (2 sequences; default 8; "
                   "image models: unused, images of the config's size)")
    p.add_argument("--layout", choices=["auto", "derived", "adapter"], default=None,
                   help="where an HF model's spaces come from: auto (the architecture adapter where one exists, else "
                   "traced; default), derived (traced from the model), adapter (adapters only, no residual stream)")
    p.add_argument("--canonical", action="store_true", default=None,
                   help="take the census of the model's canonical form: norm scales and biases folded into the linear "
                   "maps reading them, LayerNorm centring folded into the writers and the norms made RMS, the LM head "
                   "untied (pre-norm LMs; refused by name for post-norm and base models). The residual stream's O(D) "
                   "is a symmetry of that form")
    add_run_options(p, out="keep the run directory (census in metrics.json, report.md) here (new or empty; "
                    "default: a temporary one)", json="print the census as JSON")
    # -- issue 18: verified exports (the census-export run kind; --out DIR holds the file) --
    p.add_argument("--export", choices=["permutation-spec", "mergekit", "mergekit-0.1.4", "mergekit-0.0"],
                   help="write a verified description into the run directory --out DIR instead of the census: "
                   "permutation-spec (DIR/permutation_spec.json: the permutation group, every tensor's axes), mergekit "
                   "(DIR/mergekit_architecture.json, an architecture file MergeKit 0.1.5 loads: every tensor once, "
                   "vocabulary axes, tied names; no symmetry fields, 0.1.x has none), mergekit-0.1.4 "
                   "(the same for MergeKit 0.1.4: is_embed instead of vocabulary_axis, which 0.1.4 would drop), "
                   "mergekit-0.0 (MergeKit <= 0.0.6's format with input_space/output_space; 0.1.x rejects it)")
    p.add_argument("--without-weights", action="store_true", default=None,
                   help="with --export permutation-spec: derive the spec from config.json and the checkpoint's headers "
                   "(a 2-layer random copy is traced and checked; no weight is read), for checkpoints too large to load")
    p.add_argument("--stream", action="store_true",
                   help="with --model DIR (safetensors): verify the census one decoder layer at a time (each entry on "
                   "its layer's function; peak memory a few layers, not the whole model in float64); prints the census")
    p.add_argument("--spot-check", action="store_true",
                   help="with --stream: also compare the streamed output with the whole model's forward in float32 "
                   "(skipped, with the reason, when that exceeds --max-memory)")
    p.add_argument("--max-memory", default=None,
                   help="memory budget of --export and --stream, e.g. 8GiB (default: none): refused before loading, "
                   "naming the estimate")
    p.set_defaults(func=_run, config=census_config)


def _flags() -> dict:
    from .options import int_option, seed_option

    return {"preset": None, "model": None, "dtype": None, "seed": seed_option,
            "tokens": lambda raw, flag: int_option(raw, flag, 2), "layout": None, "canonical": None}


def census_config(args: argparse.Namespace):
    """The configuration of a fresh run: the flags and ``--set`` over ``CensusConfig(preset=None)``
    (with ``--export``, :func:`census_export_config`)."""
    from ..errors import ConfigError

    if args.export:
        return census_export_config(args)
    from ..kinds.census import CensusConfig
    from .options import config_from_flags

    if args.preset is None and args.model is None:
        raise ConfigError("one of --preset NAME or --model DIR is required (presets: see `paramsym list`), or "
                          "--resume DIR.")
    export_only = [flag for flag, value in (("--without-weights", args.without_weights), ("--max-memory",
                                                                                        args.max_memory)) if value]
    if export_only:
        raise ConfigError(f"{', '.join(export_only)} apply to --export only (--max-memory also to --stream); add "
                          "--export permutation-spec (and --out DIR), or drop them.")
    return config_from_flags(CensusConfig(preset=None), args, _flags())


def _run(args: argparse.Namespace) -> int:
    from ..kinds.census import KIND, report_markdown
    from .options import resumes_kind, run_kind, threads_option

    threads = threads_option(args.threads) if args.threads is not None else 1
    if getattr(args, "stream", False):
        return _stream(args, threads)
    if args.export or resumes_kind(args, "census-export"):
        return _export(args, threads)
    cfg = census_config(args) if args.resume is None else None  # read back from the run directory when resuming
    run, cfg, outcome = run_kind(args, kind=KIND, cfg=cfg, config_flags=_flags(), threads=threads)
    result = dict(outcome.metrics)
    timing = run.read_json("timing.json") if run.has("timing.json") else {}
    if args.json:
        print(json.dumps({**result, **timing}, indent=1))
    else:
        print(report_markdown(result, timing.get("seconds")), end="")
        if args.out or args.resume:
            print(f"wrote {run.path}/metrics.json and report.md", file=sys.stderr)
    return 0 if result["all_verified"] else 1


def _export_flags() -> dict:
    from ..groups.memory import MemoryBudget
    from .options import Flag, int_option, seed_option

    return {"export": Flag("format"), "preset": None, "model": None, "dtype": None, "seed": seed_option,
            "tokens": lambda raw, flag: int_option(raw, flag, 2), "without_weights": None,
            "max_memory": lambda raw, flag: MemoryBudget(raw, flag)}


def census_export_config(args: argparse.Namespace):
    """The configuration of a fresh ``--export`` run: its flags and ``--set`` over ``CensusExportConfig()``."""
    from ..errors import ConfigError
    from ..kinds.census_export import CensusExportConfig, artifact
    from .options import config_from_flags, run_dir_option

    if args.layout == "adapter":
        raise ConfigError("--export traces the model's spaces (--layout derived); --layout adapter cannot export. Drop "
                          "--layout or pass --layout derived.")
    if args.canonical:
        raise ConfigError("--export describes the model as stored; --canonical does not apply to it. Drop --canonical.")
    if args.out is None:
        raise ConfigError(f"--export writes a run directory: pass --out DIR (the export is written to "
                          f"DIR/{artifact(args.export)}), or --resume DIR.")
    run_dir_option(args.out, "paramsym census --export", artifact(args.export))
    cfg = config_from_flags(CensusExportConfig(), args, _export_flags())
    cfg.validate()
    return cfg


def _export(args: argparse.Namespace, threads: int) -> int:
    """``--export FORMAT --out DIR`` (and ``--resume DIR`` of such a run): the ``census-export`` run kind
    (:mod:`paramsym.kinds.census_export`)."""
    from ..kinds.census_export import KIND, summary_line
    from .options import run_kind

    cfg = census_export_config(args) if args.resume is None else None  # read back when resuming
    run, cfg, outcome = run_kind(args, kind=KIND, cfg=cfg, config_flags=_export_flags(), threads=threads)
    rep = outcome.metrics
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        print(summary_line(rep, str(run.file(rep["file"]))))
    return 0


def _stream(args: argparse.Namespace, threads: int) -> int:
    """``--stream``: :func:`paramsym.census.streaming.streaming_census` (one decoder layer at a time)."""
    import torch

    from ..census.streaming import streaming_census
    from ..errors import ConfigError
    from ..groups.memory import parse_memory
    from ..models.loading import resolve_model_path
    from .options import int_option, seed_option

    if args.model is None or args.export or args.out or args.resume or args.overrides or args.without_weights:
        raise ConfigError("--stream verifies the census of a checkpoint directory layer by layer and prints it: use it "
                          "with --model DIR (and --json, --seed, --tokens, --max-memory, --spot-check); it takes no "
                          "--preset, --export, --without-weights, --out, --resume or --set.")
    if args.dtype == "float32":
        raise ConfigError("--stream verifies in float64 (one layer at a time, so memory allows it); drop --dtype float32.")
    torch.set_num_threads(threads)
    seed = seed_option(args.seed, "--seed") if args.seed is not None else 0
    tokens = int_option(args.tokens, "--tokens", 2) if args.tokens is not None else 8
    budget = parse_memory(args.max_memory) if args.max_memory is not None else None
    result, rep = streaming_census(resolve_model_path(args.model, "--model"), seed=seed, tokens=tokens,
                                   max_memory=budget, spot_check=args.spot_check)
    data = {**result.to_json(), "streaming": rep}
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        bad = data["unverified"]
        print(f"streamed census of {args.model}: {len(result.entries)} entries over {rep['layers']} layers verified layer "
              f"by layer, total dimension {result.total_dimension:,} of {result.parameters:,} parameters; estimate "
              f"{rep['estimate']}" + (f"; UNVERIFIED: {bad}" if bad else "")
              + (f"; spot check {rep['spot_check']}" if "spot_check" in rep else ""))
    sp = rep.get("spot_check", {})
    return 0 if result.all_verified and sp.get("agrees", True) else 1
