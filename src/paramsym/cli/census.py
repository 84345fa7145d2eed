"""``paramsym census``: every known symmetry of a model, with its dimension, verified on the weights.

::

    paramsym census --preset minilm|bert-base|gpt2|pythia-tiny|llama-tiny|mlp-relu|mlp-linear|mha-bias [--json] [--out DIR]
    paramsym census --model DIR [--json] [--out DIR] [--dtype float64|float32] [--seed N] [--tokens N]

``--model`` takes a directory written by ``save_pretrained`` (loaded with
``attn_implementation="eager"``, never downloading). ``--json`` prints ``symmetries`` (a list of
``{module, kind, dimension, verified_error, ...}``), ``total_dimension``, ``attention_dimension``,
``parameters``, ``symmetric_fraction`` and how dimensions are summed (``counting``). ``--out``
writes ``census.json`` and ``report.md`` through a run directory. The process exits with status
1 when a listed symmetry fails its verification.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["register"]

_PRESETS = ["minilm", "bert-base", "gpt2", "pythia-tiny", "llama-tiny", "mlp-relu", "mlp-linear", "mha-bias"]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "census", help="list and verify every known parameter symmetry of a model (attention, FFN, norms)",
        description="Walk a model (HF architecture adapters or nn.MultiheadAttention modules), list each symmetry "
        "with its module, kind and dimension, and verify each by applying a random group element to the weights.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="a model directory written by save_pretrained (nothing is downloaded)")
    src.add_argument("--preset", choices=_PRESETS, help="a built-in model")
    p.add_argument("--json", action="store_true", help="print the census as JSON")
    p.add_argument("--out", help="write census.json and report.md to this (new or empty) directory")
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64", help="verification dtype")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokens", type=int, default=8, help="tokens per verification sequence (2 sequences)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: on a shared machine more threads spin-wait and run slower)")
    p.set_defaults(func=_run)


def report_markdown(result: dict) -> str:
    lines = [f"# Symmetry census: {result['model']}", "",
             f"model_type `{result['model_type']}`, verified in {result['dtype']} (tolerance {result['tolerance']:.0e}), "
             f"{result['seconds']:.2f} s.", "",
             f"- parameters: {result['parameters']:,}",
             f"- total continuous symmetry dimension: {result['total_dimension']:,} "
             f"(attention {result['attention_dimension']:,})",
             f"- symmetric fraction: {result['symmetric_fraction']:.4%}",
             f"- counting: {result['counting']}", "",
             "| module | kind | dimension | discrete order | verified error | motion | verified |",
             "|---|---|---:|---|---:|---:|---|"]
    for e in result["symmetries"]:
        lines.append(f"| {e['module']} | {e['kind']} | {e['dimension']:,} | {e['discrete_order'] or ''} | "
                     f"{e['verified_error']:.2e} | {e['motion']:.3f} | {'yes' if e['verified'] else '**NO**'} |")
    if result["unrecognised_modules"]:
        lines += ["", "Modules with parameters that no listed symmetry moves: "
                  + ", ".join(f"{u['module']} ({u['type']})" for u in result["unrecognised_modules"])]
    return "\n".join(lines) + "\n"


def _run(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from ..errors import ConfigError

    if args.tokens < 2:
        raise ConfigError(f"--tokens must be ≥ 2 (rotary symmetries need distinct positions); received {args.tokens}.")
    import torch

    if args.threads < 1:
        raise ConfigError(f"--threads must be ≥ 1; received {args.threads}.")
    torch.set_num_threads(args.threads)
    from ..census import census, default_inputs
    from ..census.presets import PRESETS, build_preset, preset_inputs
    from ..errors import InputFileError
    from ..models.loading import load_model
    from ..runs import RunDir

    run = RunDir.fresh(args.out) if args.out else None
    if args.preset:
        model = build_preset(args.preset, args.seed)
    else:
        try:
            model = load_model(args.model, quiet=args.json, argument="--model")
        except InputFileError as exc:
            raise type(exc)(f"{exc} Or use --preset NAME ({', '.join(sorted(PRESETS))}).") from None
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    inputs, gen = None, torch.Generator().manual_seed(args.seed)
    if args.preset:
        inputs = preset_inputs(args.preset, model, gen, tokens=args.tokens)
    elif hasattr(model, "config"):
        inputs = default_inputs(model, gen, tokens=args.tokens)
    result = census(model, inputs, dtype=dtype, seed=args.seed, name=args.preset or args.model, copy_model=False,
                    progress=not args.json).to_json()
    if run is not None:
        run.write_json("config.json", {"kind": "census", "preset": args.preset, "model": args.model, "dtype": args.dtype,
                                       "seed": args.seed, "tokens": args.tokens})
        run.write_json("census.json", result)
        run.write_text("report.md", report_markdown(result))
        run.write_env(args.seed)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(report_markdown(result), end="")
        if run is not None:
            print(f"wrote {run.path}/census.json and report.md", file=sys.stderr)
    return 0 if result["all_verified"] else 1
