"""``paramsym attribute``: run an attribution preset and write a run directory.

::

    paramsym attribute --preset annulus-wedge [--stage init|trained] [--flow resolved|fixed]
                       [--json] [--out DIR] [--set key=value ...] [--quick] [--seed N] [--threads N]
                       [--weights FILE.safetensors] [--probes FILE.safetensors]
    paramsym attribute --list

``--json`` prints the summary (see :mod:`paramsym.experiments.attribution.records`): for each flow
the start, end and predicted ‖δ‖ (``delta_start``, ``delta_end``, ``delta_predicted``) and the
residuals, and for each lift its residual, rank and liftability verdict. Without ``--json`` the
verdicts and a flow table are printed. The run directory holds ``config.json`` (``"kind":
"attribution"``, the preset and its configuration, the provenance), ``metrics.json``,
``env.json``, ``figures/`` and ``report.md``, written through the run verb
(:func:`paramsym.runs.execute.execute`); ``--out`` must be new or empty, and ``--resume DIR``
continues an interrupted run with its saved configuration (finished flows and a trained model
reused).

The presets are those of :data:`paramsym.experiments.attribution.presets.ATTRIBUTION_PRESETS`; this
module turns the flags into a preset's typed configuration by the one mapping of every command
(:func:`paramsym.options.config_from_flags`: ``--stage``, ``--seed``, ``--flow``, ``--weights`` and
``--probes`` write the config keys ``stage``, ``seed``, ``flows``, ``weights`` and ``probes``, the same
as ``--set`` of them) and sets torch's thread count (``--threads``).
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]


def register(subparsers) -> None:
    from ..experiments.attribution.presets import ATTRIBUTION_PRESETS
    from .options import add_run_options

    lines = [f"  {name:16s} {p.help}" for name, p in ATTRIBUTION_PRESETS.items()]
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
    p.add_argument("--quick", action="store_true", help="small fast version (tests, smoke runs)")
    add_run_options(p, out="run directory, new or empty (default runs/attribute-<preset>-<time>)",
                    json="print the summary as JSON on stdout",
                    set_help="set a config key of the preset (repeatable), e.g. --set dt=0.01 (--stage, --seed, --flow, "
                    "--weights and --probes are sugar for --set stage=, seed=, flows=, weights= and probes=)")
    p.add_argument("--weights", default=None, metavar="FILE",
                   help="attribute your own trained network: a safetensors state dict of the preset's "
                   "architecture (paramsym 'fc1.weight', or an nn.Sequential's '0.weight' / 'net.0.weight')")
    p.add_argument("--probes", default=None, metavar="FILE",
                   help="safetensors file with 'probes' [N, d] (and optionally task data 'x', 'y')")
    p.add_argument("--list", action="store_true", help="list presets and exit")
    p.set_defaults(func=cmd_attribute, config=attribute_config)


def _flags() -> dict:
    """The flags of ``paramsym attribute`` that write config keys of the preset's configuration, each sugar for
    ``--set`` of its key (``--preset`` and ``--quick`` choose the named value they are written into)."""
    from .options import MAX_SEED, Flag, int_option, path_option

    return {"seed": lambda raw, flag: int_option(raw, flag, 0, MAX_SEED),
            "flow": Flag("flows", lambda raw, flag: tuple(dict.fromkeys(raw))),
            "stage": None,
            "weights": path_option,
            "probes": path_option}


def attribute_config(args: argparse.Namespace):
    """The configuration of a fresh run: the preset's named value (``--quick``: at the quick budget), then
    the flags (``--stage``, ``--seed``, ``--flow``, ``--weights``, ``--probes``: each writes its config key)
    and ``--set`` (:func:`~paramsym.options.config_from_flags`, the one mapping of flags onto keys)."""
    from ..errors import ConfigError
    from ..experiments.attribution.presets import (
        ATTRIBUTION_PRESETS,
        attribution_preset_value,
        check_preset_keys,
    )
    from ..options import flag_values
    from .options import config_from_flags

    if not args.preset:
        raise ConfigError(f"--preset is required; valid presets: {sorted(ATTRIBUTION_PRESETS)} (or --list).")
    flags = _flags()
    check_preset_keys(args.preset, [*flag_values(args, flags), *(item.split("=", 1)[0].strip() for item in
                                                                 args.overrides or ())])
    return config_from_flags(attribution_preset_value(args.preset, quick=args.quick), args, flags)


def cmd_attribute(args: argparse.Namespace) -> int:
    from ..experiments.attribution.presets import ATTRIBUTION_PRESETS, run_attribution

    if args.list:
        if args.json:
            print(json.dumps({n: {"help": p.help, "stages": list(p.stages)} for n, p in ATTRIBUTION_PRESETS.items()},
                             indent=2))
        else:
            for n, p in ATTRIBUTION_PRESETS.items():
                st = f" [stages: {', '.join(p.stages)}]" if p.stages else ""
                print(f"{n:16s} {p.help}{st}")
        return 0
    from .options import int_option

    threads = int_option(args.threads, "--threads", 1, 4096) if args.threads is not None else 1
    from ..experiments.attribution.presets import AttributionConfig
    from ..runs.execute import load_run_config
    from ..runs.rundir import default_run_dir
    from .options import command_line, open_run

    if args.resume is not None:
        out, resuming = open_run(args, kind="attribution", config_flags=dict.fromkeys(
            ("preset", "stage", "flow", "quick", "seed", "weights", "probes")))
        cfg = load_run_config(out)
    else:
        cfg = AttributionConfig(args.preset, attribute_config(args))
        stage = getattr(cfg.config, "stage", None)
        name = args.preset + (f"-{stage}" if stage else "")
        out, resuming = open_run(args, kind="attribution", default=str(default_run_dir("attribute", name)))
    import torch

    torch.set_num_threads(threads)
    summary = run_attribution(cfg.preset, cfg, out, progress=not args.quiet and not args.json, resume=resuming,
                              command=command_line(args))
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
