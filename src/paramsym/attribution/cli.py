"""``paramsym attribute``: run an attribution preset and write a run directory.

::

    paramsym attribute --preset annulus-wedge [--stage init|trained] [--flow resolved|fixed]
                       [--json] [--out DIR] [--set key=value ...] [--quick] [--seed N]
    paramsym attribute --list

``--json`` prints the summary (see :mod:`paramsym.attribution.presets`): for each flow the start,
end and predicted ‖δ‖ (``delta_start``, ``delta_end``, ``delta_predicted``) and the residuals,
and for each lift its residual, rank and liftability verdict. Without ``--json`` the verdicts
and a flow table are printed. The run directory holds ``config.json`` (``"kind":
"attribution"``), ``metrics.json``, ``env.json``, ``figures/`` and ``report.md``; an
interrupted annulus run resumes its finished flows when rerun with the same ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]


def register(subparsers) -> None:
    from .presets import PRESETS

    lines = [f"  {name:16s} {p.help}" for name, p in PRESETS.items()]
    p = subparsers.add_parser(
        "attribute",
        help="parameter-level attribution of a learned symmetry (lifting, Reynolds, flows)",
        description="Lift the symmetry direction η and the equivariance direction −δ of a trained "
        "network through its Jacobian, report residuals (liftable or not) and follow resolved / "
        "fixed parameter-space flows.",
        epilog="presets:\n" + "\n".join(lines),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--preset", default=None, help="preset name (see below or --list)")
    p.add_argument("--stage", default=None, help="preset stage, e.g. init|trained for the annulus presets "
                   "(default: the preset's first stage)")
    p.add_argument("--flow", choices=["resolved", "fixed"], action="append", default=None,
                   help="flow mode(s) to run (repeatable; default both)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument("--out", default=None, help="run directory (default runs/attribute-<preset>-<time>)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key of the preset (repeatable), e.g. --set dt=0.01")
    p.add_argument("--quick", action="store_true", help="small fast version (tests, smoke runs)")
    p.add_argument("--seed", type=int, default=None, help="seed (default: the preset's)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: small-matrix loops are fastest single-threaded)")
    p.add_argument("--list", action="store_true", help="list presets and exit")
    p.set_defaults(func=cmd_attribute)


def cmd_attribute(args: argparse.Namespace) -> int:
    import torch

    from ..errors import ConfigError
    from ..runs import RunDir, default_run_dir
    from .presets import PRESETS, PresetRequest, get_preset, load_runner
    from .report import render

    if args.list:
        if args.json:
            print(json.dumps({n: {"help": p.help, "stages": list(p.stages)} for n, p in PRESETS.items()}, indent=2))
        else:
            for n, p in PRESETS.items():
                st = f" [stages: {', '.join(p.stages)}]" if p.stages else ""
                print(f"{n:16s} {p.help}{st}")
        return 0
    if not args.preset:
        raise ConfigError(f"--preset is required; valid presets: {sorted(PRESETS)} (or --list).")
    preset = get_preset(args.preset)
    stage = args.stage
    if preset.stages:
        stage = stage or preset.stages[0]
        if stage not in preset.stages:
            raise ConfigError(f"--stage {stage!r} is not a stage of preset {preset.name}; valid: {list(preset.stages)}.")
    elif stage is not None:
        raise ConfigError(f"preset {preset.name} has no stages; drop --stage {stage!r}.")
    if args.threads < 1:
        raise ConfigError(f"--threads must be ≥ 1, received {args.threads}.")
    torch.set_num_threads(args.threads)
    flows = tuple(dict.fromkeys(args.flow)) if args.flow else ("resolved", "fixed")
    request = PresetRequest(
        preset=preset.name, options=dict(preset.options), flows=flows, stage=stage,
        overrides=tuple(args.overrides), quick=args.quick, progress=not args.quiet and not args.json,
        seed=args.seed,
    )
    name = preset.name + (f"-{stage}" if stage else "")
    out = RunDir(args.out or default_run_dir("attribute", name))
    runner = load_runner(preset.name)
    summary = runner(request, out)
    out.write_text("report.md", render(out))
    if args.json:
        print(json.dumps(summary, indent=2, default=_json_default))
        return 0
    print(f"run directory: {out.path}")
    for lr in summary.get("lifts", []):
        print(lr["verdict"])
    if summary.get("verdict") and not summary.get("lifts"):
        print(summary["verdict"])
    rows = summary.get("flows", [])
    if rows:
        print(f"{'flow':9s} {'dir':3s} {'‖δ‖ start':>12s} {'end':>12s} {'predicted':>12s} {'residual start/end':>22s}")
        for r in rows:
            res = f"{_f(r.get('residual_start'))}/{_f(r.get('residual_end'))}"
            print(f"{r['flow']:9s} {r['direction']:3s} {r['delta_start']:12.5g} {r['delta_end']:12.5g} "
                  f"{_f(r.get('delta_predicted'), 12)} {res:>22s}")
    print(f"report: {out.file('report.md')}")
    sys.stdout.flush()
    return 0


def _f(v, width: int = 0) -> str:
    s = "—" if v is None else f"{v:.4g}"
    return s.rjust(width) if width else s


def _json_default(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)
