"""``paramsym affine``: the exact affine symmetry algebra of a named block (run kind ``affine``).

::

    paramsym affine --preset NAME [--json] [--tol T] [--rule gap|threshold] [--samples N]
                    [--seed S] [--threads N] [--max-memory 2GiB] [--quiet] [--out DIR | --resume DIR]
    paramsym affine --list

``--json`` prints the run's metrics (:mod:`paramsym.kinds.affine`: the solver's
:meth:`~paramsym.exact.affine.AffineAlgebra.summary`, the preset's ``expected`` dimension and the
algebra analysis ``commutativity``, ``closure_residual``) plus the wall-clock ``seconds``: at
least ``dimension``, ``gap``, ``singular_values``. ``--out DIR`` keeps the run directory
(``config.json``, ``metrics.json``, ``env.json``, ``timing.json``, ``report.md``); without it the
run directory is temporary. Presets: :data:`paramsym.exact.presets.AFFINE_PRESETS`.
"""

from __future__ import annotations

import argparse
import json

__all__ = ["register"]


def register(subparsers) -> None:
    from .options import add_run_options

    p = subparsers.add_parser(
        "affine", help="exact affine symmetry algebra of a block (null space of the invariance system)",
        description="Solve ⟨∇F_k(θ_j), Aθ_j + b⟩ = 0 for all affine fields v(θ) = Aθ + b of a named "
        "block, choose the dimension from the singular-value gap, verify at held-out points.")
    p.add_argument("--preset", default=None, help="preset name (see --list)")
    p.add_argument("--tol", default=None, help="rank tolerance: σ ≤ tol·σ_max is null (default 1e-6)")
    p.add_argument("--rule", choices=["gap", "threshold"], default=None, help="dimension rule (default gap)")
    p.add_argument("--samples", default=None, help="sample points (default: the preset's, else automatic)")
    p.add_argument("--max-memory", default=None,
                   help="memory budget of the solver and the algebra checks, e.g. 8GiB (default 2GiB); "
                   "a larger estimate stops with TooLargeError before allocating")
    add_run_options(p, out="keep the run directory here (new or empty; default: a temporary one)",
                    json="print the result as JSON")
    p.add_argument("--list", action="store_true", help="list presets and exit")
    p.set_defaults(func=cmd_affine, config=affine_config)


#: the configuration flags (field → validator); refused with --resume
def _flags() -> dict:
    from ..groups.memory import parse_memory
    from .options import float_option, int_option, seed_option

    return {"preset": None, "tol": lambda raw, flag: float_option(raw, flag), "rule": None,
            "samples": lambda raw, flag: int_option(raw, flag, 1), "seed": seed_option,
            "max_memory": lambda raw, flag: parse_memory(raw)}


def affine_config(args: argparse.Namespace):
    """The configuration of a fresh run: the preset's value (``--preset``), then the flags and ``--set``."""
    import dataclasses

    from ..errors import ConfigError
    from ..exact.presets import AFFINE_PRESETS
    from ..kinds.affine import AffineConfig
    from .options import config_from_flags

    if not args.preset:
        raise ConfigError(f"--preset is required; valid presets: {sorted(AFFINE_PRESETS)} (or --list).")
    base = dataclasses.replace(AffineConfig(), preset=AFFINE_PRESETS.get_preset(args.preset).name,
                               **AFFINE_PRESETS[args.preset].fields)
    return config_from_flags(base, args, _flags())


def cmd_affine(args: argparse.Namespace) -> int:
    from ..exact.presets import AFFINE_PRESETS
    from .options import run_kind, threads_option

    if args.list:
        if args.json:
            print(json.dumps([p.to_json() for p in AFFINE_PRESETS.values()], indent=2))
            return 0
        for n, pr in AFFINE_PRESETS.items():
            print(f"{n:20s} expected {pr.info['expected']:3d}  {pr.summary}")
        return 0
    threads = threads_option(args.threads) if args.threads is not None else 1
    from ..kinds.affine import KIND

    cfg = affine_config(args) if args.resume is None else None  # read back from the run directory when resuming
    run, cfg, outcome = run_kind(args, kind=KIND, cfg=cfg, config_flags=_flags(), threads=threads)
    out = dict(outcome.metrics)
    if run.has("timing.json"):
        out.update(run.read_json("timing.json"))
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    rel = out["relative_singular_values"]
    d = out["dimension"]
    seconds = f" ({out['seconds']:.1f} s)" if "seconds" in out else ""
    print(f"{cfg.preset}: {out['target']}, {out['unknowns']} unknowns, {out['samples']} sample points, "
          f"{out['method']}{seconds}")
    print(f"status {out['status']}: dimension {d} (expected {out['expected']}), gap σ_(d+1)/σ_(d) = {out['gap']:.3g}, "
          f"rule {cfg.rule}, tol {cfg.tol:g}")
    lo = max(0, len(rel) - d - 3)
    print("smallest relative singular values σ/σ_max: " + " ".join(f"{x:.2e}" for x in rel[lo:]))
    print("dimension vs tol: " + "  ".join(f"{r['tol']:.0e}:{r['dimension']}" for r in out["tolerance_table"]))
    if d:
        closure = "skipped" if out.get("closure_residual") is None else f"{out['closure_residual']:.2e}"
        print(f"held-out relative invariance residual: max {out['max_residual']:.2e}; "
              f"commutativity {out['commutativity']:.2e}; closure residual {closure}")
    if args.out or args.resume:
        print(f"run directory: {run.path}")
    return 0
