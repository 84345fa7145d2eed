"""``paramsym sweep SPEC.yaml``: the papers' recipe search (candidates → continue → replicate).

Only the standard library at the top level (see :mod:`paramsym.cli`); the sweep itself is
:func:`paramsym.experiments.sweep.run_sweep`.
"""

from __future__ import annotations

import argparse
import json

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="recipe search from a YAML spec: candidates, the best continued, replication on fresh seeds",
        description="Run the papers' validation protocol for discovery recipes: every grid point of the spec on "
        "the validation seeds for candidate_steps, the best continue_top continued to continue_steps, the "
        "selected recipe of each objective variant replicated on fresh seeds, and the paper's table (medians over "
        "seeds of within-seed 95th percentiles; fits) written to OUT/table.md and OUT/table.json. "
        "See docs/sweep.md for the spec format.",
    )
    p.add_argument("spec", metavar="SPEC.yaml", help="sweep spec (YAML); e.g. examples/sweeps/hybrid-vs-finite.yaml")
    p.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="local: a process pool on this machine (default); ray: Ray Tune (pip install 'paramsym[ray]')")
    p.add_argument("--address", default=None, metavar="ADDR",
                   help="with --backend ray: an existing cluster's head node HOST:PORT (or ray://HOST:PORT, auto); "
                   "default: start Ray on this machine with --workers CPUs")
    p.add_argument("--workers", default="1", metavar="N", help="trials run at once (processes / Ray CPUs; default 1)")
    p.add_argument("--resume", action="store_true", help="continue the sweep in --out: finished trials are reused, "
                   "interrupted ones resume from their checkpoints")
    p.add_argument("--out", default=None, metavar="DIR", help="output directory (default runs/sweep-<name>-<time>)")
    p.add_argument("--json", action="store_true", help="print table.json instead of table.md")
    p.add_argument("--quiet", action="store_true", help="no progress bar or stage summaries")
    p.add_argument("--plan", action="store_true", help="only check the spec and print the trials and training "
                   "steps of each stage (nothing is run or written)")
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..experiments.sweep import budget, load_spec, run_sweep
    from .options import int_option

    workers = int_option(args.workers, "--workers", 1)
    if args.address and args.backend != "ray":
        from ..errors import ConfigError

        raise ConfigError(f"--address is for --backend ray (a Ray cluster's head node); received --address "
                          f"{args.address[:80]!r} with --backend {args.backend}. Drop --address, or add --backend ray.")
    spec = load_spec(args.spec)
    if args.plan:
        plan = budget(spec)
        if args.json:
            print(json.dumps(plan, indent=2))
        else:
            print(f"sweep {spec.name!r} on {spec.preset!r}: grid points " +
                  ", ".join(f"{v} {n}" for v, n in plan["points"].items()))
            for name, st in plan["stages"].items():
                print(f"  {name:10s} {st['trials']:5d} trials {st['steps']:>12,} steps")
            print(f"  {'total':10s} {plan['trials']:5d} trials {plan['steps']:>12,} steps")
        return 0
    table = run_sweep(spec, args.out, backend=args.backend, workers=workers, address=args.address,
                      resume=args.resume, progress=not args.quiet)
    if args.json:
        print(json.dumps(table, indent=2))
    else:
        from ..experiments.sweep.table import render_table

        print(render_table(table))
    return 0
