"""``paramsym compensate``: the compensating action on one FFN unit of a real model (run kind ``compensate``).

::

    paramsym compensate --model minilm|gpt2-tiny|pythia-tiny|llama-tiny|PATH --layer L --unit J
        [--tokens K | --prefix TEXT] [--compensators K] [--motion 0.0015] [--seed N] [--json]
        [--out DIR | --resume DIR] [--learned [--objective hybrid|finite] [--action direct|flow] [--steps N] [--rho R]]

The run is :mod:`paramsym.kinds.compensate` (closed form, Corollary 4.6, or with
``--learned`` the learned action of [Discovery] §5, trained into ``OUT/discovery-OBJECTIVE``).
``--json`` prints ``motion_median`` (entrywise: the median of ``|Δθ_i| / |θ0_i|`` over the block),
``drift_relative``, ``ratio_random``, ``ratio_uncompensated``, ``condition_number``,
``units_changed`` and the rest of the metrics. ``--learned`` follows the paper's protocol
(:func:`paramsym.actions.ffn_unit.evaluate_action`): β set for the unit before training, 32 group
elements at ρ = 0.5 (``--rho``), edits installed in float32, and prints ``motion_median``,
``ratio_random``, ``ratio_uncompensated``, ``composition_error`` / ``composition_error_p95``
(stored-weight two-step composition, median / p95 over elements; the p95 is the paper's statistic,
computed by :func:`paramsym.actions.composition.composition_errors` and its ``p95`` — the function the
reproduction's transformer rows and Table 1's verdict use), ``beta``, ``objective``,
``steps``, ``verdict`` and ``train_cpu_seconds`` (from ``timing.json``). ``--out DIR`` keeps the run
directory (``config.json``, ``metrics.json``, ``env.json``, ``report.md``, ``figures/``; the
learned training's run); without it the run directory is temporary. An interrupted
``--learned`` run continues from its last training checkpoint with ``--resume DIR``.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]

_KEYS = ["motion_median", "drift_relative", "ratio_random", "ratio_uncompensated", "condition_number", "units_changed"]


def register(subparsers) -> None:
    from .options import add_run_options

    p = subparsers.add_parser(
        "compensate", help="closed-form compensating action on one FFN unit of a real model (Corollary 4.6)",
        description="Move one FFN unit's incoming weights; k compensators absorb the change on a k-token prefix in "
        "closed form; install into the full model and measure drift against random and uncompensated controls.")
    p.add_argument("--model", default=None,
                   help="minilm (real all-MiniLM-L6-v2), gpt2-tiny, pythia-tiny, llama-tiny, or a save_pretrained "
                   "directory")
    p.add_argument("--layer", default=None, help="layer index ℓ (required)")
    p.add_argument("--unit", default=None, help="the moving FFN unit j of layer ℓ (required)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--tokens", default=None, help="a random prefix of this many tokens (default 16)")
    src.add_argument("--prefix", default=None, help="the prefix text (tokenized with the model's tokenizer)")
    p.add_argument("--compensators", default=None, help="number of compensators (default: the prefix length N; with "
                   "--learned 2N)")
    p.add_argument("--motion", default=None, help="median relative motion of the moved weights (default 0.0015)")
    p.add_argument("--max-memory", default=None, help="memory budget for the cached features (default 2GiB)")
    p.add_argument("--learned", action="store_true", help="train the learned compensating action instead")
    p.add_argument("--objective", choices=["hybrid", "finite"], default=None, help="learned objective (--learned; "
                   "default hybrid)")
    p.add_argument("--action", choices=["direct", "flow"], default=None, help="learned action (--learned): the "
                   "paper's direct map (default) or flow, a group action by construction")
    p.add_argument("--steps", default=None, help="training steps of --learned (default: the recipe's)")
    p.add_argument("--rho", default=None,
                   help="coefficient radius of the learned action's 32 evaluation elements (--learned; default: "
                        "the paper's 0.5, the recipe's training radius)")
    p.add_argument("--checkpoint-every", default=None, help="checkpoint interval of the --learned training "
                   "(default: the recipe's)")
    add_run_options(p, out="keep the run directory here (new or empty; default: a temporary one)",
                    json="print the result as JSON")
    p.set_defaults(func=_run, config=compensate_config)


def _flags() -> dict:
    from ..groups.memory import parse_memory
    from .options import float_option, int_option, seed_option

    def integer(low):
        return lambda raw, flag: int_option(raw, flag, low)

    return {"model": None, "layer": integer(0), "unit": integer(0), "tokens": integer(1), "prefix": None,
            "compensators": integer(1), "motion": lambda raw, flag: float_option(raw, flag, minimum=0, exclusive=True),
            "seed": seed_option, "max_memory": lambda raw, flag: parse_memory(raw), "learned": None,
            "objective": None, "action": None, "steps": integer(1),
            "rho": lambda raw, flag: float_option(raw, flag, minimum=0, exclusive=True),
            "checkpoint_every": integer(1)}


def compensate_config(args: argparse.Namespace):
    """The configuration of a fresh run: the flags and ``--set`` over ``CompensateConfig()``."""
    from ..errors import ConfigError
    from ..kinds.compensate import MODELS, CompensateConfig
    from .options import config_from_flags

    set_keys = {item.split("=", 1)[0].strip() for item in args.overrides}
    missing = [f"--{n}" for n in ("model", "layer", "unit") if getattr(args, n) is None and n not in set_keys]
    if missing:
        raise ConfigError(f"{', '.join(missing)} required (e.g. --model llama-tiny --layer 1 --unit 3; models: "
                          f"{', '.join(MODELS)} or a save_pretrained directory), or --resume DIR.")
    cfg = config_from_flags(CompensateConfig(), args, _flags())
    if not cfg.learned:
        extra = [f for f in ("--objective", "--action", "--steps", "--rho", "--checkpoint-every")
                 if getattr(args, f[2:].replace("-", "_")) is not None]
        if extra:
            raise ConfigError(f"{', '.join(extra)} only apply to --learned; add --learned or drop them.")
    return cfg


def _run(args: argparse.Namespace) -> int:
    from ..kinds.compensate import KIND
    from .options import run_kind, threads_option

    threads = threads_option(args.threads) if args.threads is not None else 1
    cfg = compensate_config(args) if args.resume is None else None  # read back from the run directory when resuming
    run, cfg, outcome = run_kind(args, kind=KIND, cfg=cfg, config_flags=_flags(), threads=threads)
    if outcome.already_finished:
        print(f"{run.path} is already finished; `paramsym report {run.path}` regenerates its report.", file=sys.stderr)
    d = dict(outcome.metrics)
    if run.has("timing.json"):
        d.update(run.read_json("timing.json"))
    if args.json:
        d.pop("per_unit", None)
        print(json.dumps(d, indent=2, default=float))
        return 0
    keys = _KEYS + ["drift_random", "drift_uncompensated", "drift_other_inputs"]
    if cfg.learned:
        keys = [k for k in keys if k not in ("units_changed", "drift_other_inputs")]
        keys += ["composition_error", "composition_error_p95", "beta", "objective", "action", "steps",
                 "train_cpu_seconds"]
    else:
        keys += ["boundary_preservation"]
    for k in keys:
        v = d.get(k)
        print(f"{k:24s} {v:.4g}" if isinstance(v, float) else f"{k:24s} {v}")
    if args.out or args.resume:
        print(f"wrote {run.path}/report.md", file=sys.stderr)
    return 0
