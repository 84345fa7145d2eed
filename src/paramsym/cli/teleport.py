"""``paramsym teleport``: training with and without symmetry teleports, over seeds.

::

    paramsym teleport --preset booth|rosenbrock|regression-mlp|digits-mlp [--every K] [--seeds N]
        [--optimizer sgd|adam|adagrad|gd] [--steps N] [--json] [--out DIR] [--threads N]
    paramsym teleport --action RUN_DIR [--json] [--out DIR]

Each seed trains the same initialisation twice, without and with teleports (gradient ascent of an
orbit objective in the Lie algebra of an exact action, the loss checked to stay on its level set;
:mod:`paramsym.teleport`), and reports ``step_ratio`` (median over seeds of steps to the target
loss without teleports / with), ``max_loss_change`` (largest relative loss change of a teleport)
and ``grad_norm_factor``; ``--out`` writes ``result.json``, ``report.md`` and loss curves (all
seeds). The presets are described in :mod:`paramsym.experiments.teleport_presets`.

``--action RUN_DIR`` teleports the target of a ``paramsym discover`` run with the run's learned
action (level-set tolerance 1e-6 relative loss change, every step checked;
:mod:`paramsym.experiments.teleport_learned`) and reports the loss change and whether it is
within the tolerance.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]

_PRESETS = ("booth", "rosenbrock", "regression-mlp", "digits-mlp")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "teleport", help="train with and without symmetry teleports (level-set moves to larger gradients), over seeds",
        description="Compare training with and without symmetry teleportation on a preset; report the step ratio to a "
        "target loss, the largest loss change of a teleport and the gradient-norm factor.")
    p.add_argument("--preset", choices=_PRESETS, help="problem and schedule")
    p.add_argument("--action", metavar="RUN_DIR", help="instead of a preset: teleport the target of this `paramsym "
                   "discover` run with its learned action (tolerance 1e-6 relative loss change)")
    p.add_argument("--every", type=int, default=None, help="teleport every K steps (default: the preset's schedule)")
    p.add_argument("--seeds", type=int, default=None, help="number of seeds (default: the preset's)")
    p.add_argument("--optimizer", action="append", default=None, choices=["gd", "adagrad", "sgd", "adam"],
                   help="optimizer to run (repeatable; default: the preset's: gd,adagrad or sgd,adam)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: the preset's)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--out", help="write result.json, report.md and loss curves to this (new or empty) directory")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ..errors import ConfigError

    if args.threads < 1:
        raise ConfigError(f"--threads must be ≥ 1; received {args.threads}.")
    if (args.preset is None) == (args.action is None):
        raise ConfigError("give exactly one of --preset NAME (train with and without teleports) and --action RUN_DIR "
                          f"(teleport with a learned action); received --preset {args.preset!r}, --action {args.action!r}.")
    if args.action is not None:
        return _run_learned(args)
    from ..experiments.teleport_presets import TeleportConfig

    cfg = TeleportConfig(preset=args.preset, every=args.every, seeds=args.seeds, optimizers=args.optimizer,
                         steps=args.steps).validate()
    if args.out:
        from ..runs import RunDir

        RunDir.fresh(args.out)  # refuse a nonempty directory before the work
    import torch

    torch.set_num_threads(args.threads)
    from ..experiments.teleport_presets import run
    from ..experiments.teleport_report import summary, write_outputs

    result = run(cfg, progress=not args.json)
    if args.out:
        write_outputs(result, args.out)
    s = summary(result)
    if args.json:
        print(json.dumps(s, indent=2, default=float))
    else:
        print(f"preset {s['preset']}: step_ratio {s['step_ratio']:.3g}, max_loss_change {s['max_loss_change']:.3g}, "
              f"grad_norm_factor {s['grad_norm_factor']:.3g}")
        for o, d in s["optimizers"].items():
            acc = f", val acc {d['val_acc_baseline']:.4f} -> {d['val_acc_teleport']:.4f}" if "val_acc_baseline" in d else ""
            print(f"  {o}: step_ratio {d['step_ratio']:.3g} (reached {d['reached']}/{d['seeds']}), teleport time "
                  f"{d['teleport_time_fraction']:.3f} of the run, overhead {d['wall_time_overhead']:.3f}{acc}")
        if args.out:
            print(f"wrote {args.out}/report.md", file=sys.stderr)
    return 0


def _run_learned(args: argparse.Namespace) -> int:
    from ..errors import ConfigError

    given = [f"--{n}" for n in ("every", "seeds", "optimizer", "steps") if getattr(args, n) is not None]
    if given:
        raise ConfigError(f"--action RUN_DIR takes no {', '.join(given)} (they configure the presets' training runs).")
    if args.out:
        from ..runs import RunDir

        RunDir.fresh(args.out)
    import torch

    torch.set_num_threads(args.threads)
    from ..experiments.teleport_learned import learned_teleport

    res = learned_teleport(args.action)
    if args.out:
        from ..runs import RunDir

        RunDir.fresh(args.out).write_json("result.json", res)
    if args.json:
        print(json.dumps(res, indent=2, default=float))
    else:
        refused = "" if res["refused_change"] is None else f", a step with change {res['refused_change']:.3g} refused"
        print(f"learned action of {res['run_dir']} on {res['tensors']}: status {res['status']}, {res['steps']} steps, "
              f"rel. loss change {res['rel_loss_change']:.3g} (tol {res['tol']:.0e}: "
              f"{'within' if res['within_tol'] else 'EXCEEDED'}){refused}, grad-norm factor {res['grad_norm_factor']:.3g}")
    return 0
