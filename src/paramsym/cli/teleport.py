"""``paramsym teleport``: training with and without symmetry teleports, over seeds (run kind ``teleport``).

::

    paramsym teleport --preset booth|rosenbrock|regression-mlp|digits-mlp [--every K] [--seeds 0,1,...]
        [--optimizer sgd|adam|adagrad|gd] [--steps N] [--json] [--quiet] [--threads N] [--out DIR]
    paramsym teleport --resume DIR [--json]
    paramsym teleport --action RUN_DIR [--json] [--out DIR]

Each seed trains the same initialisation twice, without and with teleports (gradient ascent of an
orbit objective in the Lie algebra of an exact action, the loss checked to stay on its level set;
:mod:`paramsym.teleport`), and reports ``step_ratio`` (median over seeds of steps to the target
loss without teleports / with), ``max_loss_change`` (largest relative loss change of a teleport)
and ``grad_norm_factor``. ``--seeds`` lists the seed values, as in every command (default: the
preset's ``0 .. n−1``). ``--out DIR`` keeps the run directory (:mod:`paramsym.kinds.teleport`:
``config.json``, ``metrics.json``, ``env.json``, ``report.md``, ``result.json`` with every loss
curve, ``loss_<optimizer>.png`` and one checkpoint per finished (optimizer, seed)); ``--resume DIR``
continues an interrupted run there. The presets are described in
:mod:`paramsym.kinds.teleport_presets`.

``--action RUN_DIR`` teleports the target of a ``paramsym discover`` run with the run's learned
action (level-set tolerance 1e-6 relative loss change, every step checked;
:mod:`paramsym.kinds.teleport_learned`; run kind ``teleport-learned``) and reports the loss
change and whether it is within the tolerance.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]

_PRESETS = ("booth", "rosenbrock", "regression-mlp", "digits-mlp")


def register(subparsers) -> None:
    from ..kinds.teleport_presets import PRESETS
    from .options import add_run_options

    p = subparsers.add_parser(
        "teleport", help="train with and without symmetry teleports (level-set moves to larger gradients), over seeds",
        description="Compare training with and without symmetry teleportation on a preset; report the step ratio to a "
        "target loss, the largest loss change of a teleport and the gradient-norm factor.")
    p.add_argument("--preset", choices=PRESETS, help="problem and schedule")
    p.add_argument("--action", metavar="RUN_DIR", help="instead of a preset: teleport the target of this `paramsym "
                   "discover` run with its learned action (tolerance 1e-6 relative loss change)")
    p.add_argument("--every", default=None, help="teleport every K steps (default: the preset's schedule)")
    p.add_argument("--optimizer", action="append", default=None, choices=["gd", "adagrad", "sgd", "adam"],
                   help="optimizer to run (repeatable; default: the preset's: gd,adagrad or sgd,adam)")
    p.add_argument("--steps", default=None, help="training steps (default: the preset's)")
    add_run_options(p, seed=False, seeds=True, out="keep the run directory here (new or empty; default: a temporary "
                    "one): result.json, report.md, loss curves, checkpoints", json="print the summary as JSON")
    p.set_defaults(func=_run, config=teleport_config)


#: the configuration flags of a preset run (field → validator); refused with --resume
def _flags() -> dict:
    from .options import Flag, int_option, seeds_option

    return {"preset": None, "every": lambda raw, flag: int_option(raw, flag, 1),
            "seeds": lambda raw, flag: tuple(seeds_option(raw, flag)), "optimizer": Flag("optimizers"),
            "steps": lambda raw, flag: int_option(raw, flag, 1), "action": None}


def _kind_of(args: argparse.Namespace) -> str:
    """The run kind: that of the ``--resume`` directory when it holds a teleport run, else by ``--action``."""
    import os

    from ..kinds.teleport import KIND, LEARNED_KIND

    if args.resume is not None and os.path.isfile(os.path.join(args.resume, "config.json")):
        from ..runs.rundir import RunDir

        have = RunDir(args.resume).kind()
        if have in (KIND, LEARNED_KIND):
            return have
    return LEARNED_KIND if args.action is not None else KIND


def teleport_config(args: argparse.Namespace):
    """The configuration of a fresh run: ``--preset NAME`` (a :class:`TeleportConfig`) or ``--action RUN_DIR``
    (a :class:`LearnedTeleportConfig`), with the flags and ``--set`` of that configuration's keys."""
    from ..errors import ConfigError
    from ..kinds.teleport import LearnedTeleportConfig, TeleportConfig
    from .options import config_from_flags

    if (args.preset is None) == (args.action is None):
        raise ConfigError("give exactly one of --preset NAME (train with and without teleports) and --action "
                          f"RUN_DIR (teleport with a learned action); received --preset {args.preset!r}, --action "
                          f"{args.action!r}.")
    if args.action is not None:
        given = [f"--{n}" for n in ("every", "seeds", "optimizer", "steps") if getattr(args, n) is not None]
        if given:
            raise ConfigError(f"--action RUN_DIR takes no {', '.join(given)} (they configure the presets' "
                              "training runs).")
        return config_from_flags(LearnedTeleportConfig(action=str(args.action)), args, {"action": None})
    return config_from_flags(TeleportConfig(preset=args.preset), args, _flags())


def _run(args: argparse.Namespace) -> int:
    from ..kinds.teleport import KIND
    from .options import run_kind, threads_option

    threads = threads_option(args.threads) if args.threads is not None else 1
    kind = _kind_of(args)
    cfg = teleport_config(args) if args.resume is None else None  # read back from the run directory when resuming
    run, cfg, outcome = run_kind(args, kind=kind, cfg=cfg, config_flags=_flags(), threads=threads, seed=None)
    if kind != KIND:
        return _print_learned(args, dict(outcome.metrics) | run.read_json("timing.json"))
    from ..kinds.teleport_report import summary

    s = summary(run.read_json("result.json"))
    if args.json:
        print(json.dumps(s, indent=2, default=float))
    else:
        print(f"preset {s['preset']}: step_ratio {s['step_ratio']:.3g}, max_loss_change {s['max_loss_change']:.3g}, "
              f"grad_norm_factor {s['grad_norm_factor']:.3g}")
        for o, d in s["optimizers"].items():
            acc = f", val acc {d['val_acc_baseline']:.4f} -> {d['val_acc_teleport']:.4f}" if "val_acc_baseline" in d else ""
            print(f"  {o}: step_ratio {d['step_ratio']:.3g} (reached {d['reached']}/{d['seeds']}), teleport time "
                  f"{d['teleport_time_fraction']:.3f} of the run, overhead {d['wall_time_overhead']:.3f}{acc}")
        if args.out or args.resume:
            print(f"run directory: {run.path}", file=sys.stderr)
    return 0


def _print_learned(args: argparse.Namespace, res: dict) -> int:
    if args.json:
        print(json.dumps(res, indent=2, default=float))
    else:
        refused = "" if res["refused_change"] is None else f", a step with change {res['refused_change']:.3g} refused"
        print(f"learned action of {res['run_dir']} on {res['tensors']}: status {res['status']}, {res['steps']} steps, "
              f"rel. loss change {res['rel_loss_change']:.3g} (tol {res['tol']:.0e}: "
              f"{'within' if res['within_tol'] else 'EXCEEDED'}){refused}, grad-norm factor {res['grad_norm_factor']:.3g}")
    return 0
