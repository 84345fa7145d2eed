"""``paramsym sweep SPEC.yaml``: the papers' recipe search (candidates → continue → replicate).

::

    paramsym sweep SPEC.yaml [--out DIR] [--backend local|ray] [--workers N] [--json] [--quiet] [--plan]
    paramsym sweep [SPEC.yaml] --resume DIR

The output directory is a run of kind ``sweep`` (:mod:`paramsym.sweep.kind`):
``config.json`` (the spec), ``metrics.json`` (= ``table.json``), ``env.json``, ``report.md``,
``table.md``, ``stages.json`` and ``trials/`` (the checkpoints: one discovery run per trial);
``paramsym report DIR`` renders it. ``--resume DIR`` continues it with the spec it was started
with; a SPEC given with ``--resume`` must be that spec (an edited one is refused).

Only the standard library at the top level (see :mod:`paramsym.cli`); the sweep itself is
:func:`paramsym.sweep.run_sweep`.
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
    p.add_argument("spec", metavar="SPEC.yaml", nargs="?", default=None,
                   help="sweep spec (YAML); e.g. examples/sweeps/hybrid-vs-finite.yaml (optional with --resume)")
    p.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="local: a process pool on this machine (default); ray: Ray Tune (pip install 'paramsym[ray]')")
    p.add_argument("--address", default=None, metavar="ADDR",
                   help="with --backend ray: an existing cluster's head node HOST:PORT (or ray://HOST:PORT, auto); "
                   "default: start Ray on this machine with --workers CPUs")
    p.add_argument("--workers", default="1", metavar="N", help="trials run at once (processes / Ray CPUs; default 1)")
    p.add_argument("--resume", default=None, metavar="DIR",
                   help="continue the sweep in DIR with the spec it was started with: finished trials "
                   "are reused, interrupted ones resume from their checkpoints; a finished sweep is reported")
    p.add_argument("--out", default=None, metavar="DIR", help="output directory, new or empty (default "
                   "runs/sweep-<name>-<time>)")
    p.add_argument("--json", action="store_true", help="print table.json instead of table.md")
    p.add_argument("--quiet", action="store_true", help="no progress bar or stage summaries")
    p.add_argument("--plan", action="store_true", help="only check the spec and print the trials and training "
                   "steps of each stage (nothing is run or written)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="set a key of the sweep's configuration over SPEC, e.g. --set spec.candidate_steps=50 "
                   "(repeatable)")
    p.set_defaults(func=cmd_sweep, config=sweep_config)


def sweep_config(args: argparse.Namespace):
    """The :class:`~paramsym.sweep.kind.SweepConfig` of a fresh sweep: ``SPEC`` (read by the one serializer,
    :func:`~paramsym.sweep.spec.load_spec`) with ``--set`` applied (:func:`~paramsym.options.config_from_flags`),
    the result validated as a spec file is (``SweepSpec.validate``)."""
    from ..errors import SweepSpecError
    from ..sweep import load_spec
    from ..sweep.kind import SweepConfig
    from .options import config_from_flags

    if args.spec is None:
        raise SweepSpecError("give the sweep spec SPEC.yaml (e.g. examples/sweeps/tiny.yaml), or --resume DIR to "
                             "continue a sweep with its own spec.")
    cfg = SweepConfig(spec=load_spec(args.spec))
    return config_from_flags(cfg, args, {}) if args.overrides else cfg


def cmd_sweep(args: argparse.Namespace) -> int:
    import os

    from ..errors import ConfigError, SweepSpecError
    from ..sweep import budget, run_sweep
    from .options import command_line, int_option

    workers = int_option(args.workers, "--workers", 1)
    if args.address and args.backend != "ray":
        raise ConfigError(f"--address is for --backend ray (a Ray cluster's head node); received --address "
                          f"{args.address[:80]!r} with --backend {args.backend}. Drop --address, or add --backend ray.")
    resume, out = args.resume is not None, args.out
    if resume:  # --resume DIR, as every command's
        if out is not None and os.path.abspath(out) != os.path.abspath(args.resume):
            raise ConfigError(f"--resume {args.resume!r} continues the sweep in that directory; drop --out {out!r} "
                              "(or pass the same directory).")
        out = args.resume
    if resume and args.plan:
        raise ConfigError("--plan only checks a spec; drop --resume (or --plan).")
    if args.spec is None and not resume:
        raise SweepSpecError("give the sweep spec SPEC.yaml (e.g. examples/sweeps/tiny.yaml), or --resume DIR to "
                             "continue a sweep with its own spec.")
    if resume and args.overrides:
        raise ConfigError("--resume continues a sweep with the spec it was started with; drop --set (or start the "
                          "changed spec with --out NEWDIR).")
    spec = sweep_config(args).spec if args.spec is not None else None
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
    table = run_sweep(spec, out, backend=args.backend, workers=workers, address=args.address,
                      resume=resume, progress=not args.quiet, command=command_line(args))
    if args.json:
        print(json.dumps(table, indent=2))
    else:
        from ..sweep.table import render_table

        print(render_table(table))
    return 0
