"""``paramsym discover``, ``paramsym list``, ``paramsym report`` and ``paramsym experiment``.

``paramsym list [--json]`` prints every command's presets (:func:`paramsym.kinds.catalog.all_presets`,
one :class:`~paramsym.presets.Preset` row each); ``paramsym report DIR`` re-renders the report of a
run directory of any kind (:func:`paramsym.runs.reports.regenerate`).

Only the standard library at the top level (see :mod:`paramsym.cli`); the configuration is
resolved by :func:`paramsym.discovery.resolve.resolve_discover_config` from plain values.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    from .options import add_run_options

    p = sub.add_parser(
        "discover",
        help="learn a symmetry (generators + action network) of a parameter block and judge it",
        description="Learn Lie-algebra generators and a nonlinear action network on a reference target, "
        "then run the finite-action verdict. Writes a run directory with metrics.json and report.md.",
    )
    p.add_argument("--preset", default=None, help="reference target (default: the one marked [default] in "
                   "`paramsym list`)")
    p.add_argument("--objective", choices=["hybrid", "infinitesimal", "finite"], default=None, help="objective variant (default hybrid)")
    p.add_argument("--steps", default=None, help="training steps >= 1 (default: the preset's recipe)")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when available, else cpu)")
    add_run_options(p, threads=False, out="run directory (default runs/discover-<preset>-<time>)",
                    set_help="set any config key, e.g. --set train.lr=3e-4 (repeatable; --seed, --steps and --device "
                    "are sugar for --set seed=, train.steps= and device=)")
    p.set_defaults(func=cmd_discover, config=discover_config)

    ls = sub.add_parser("list", help="list every command's presets with their run kind")
    ls.add_argument("--json", action="store_true", help="print a JSON list of {name, kind, summary, default, "
                    "stages, command}")
    ls.set_defaults(func=cmd_list)

    ex = sub.add_parser("experiment", help="paper comparisons built on discovery runs")
    exs = ex.add_subparsers(dest="experiment", metavar="NAME")
    eo = exs.add_parser("objectives", help="hybrid vs finite (vs infinitesimal) objectives at the same step budget")
    eo.add_argument("--preset", default=None, help="the discovery preset (default sigmoid-scalar)")
    eo.add_argument("--variants", default=None, help="comma-separated objective variants (default hybrid,finite)")
    _experiment_arguments(eo, cmd_experiment_objectives, objectives_config)
    el = exs.add_parser("lifting", help="ReLU (2,8,8,1): one unit (boundary output) vs all weights, full-network error")
    el.add_argument("--unit-beta", default=None, help="field magnitude β of the unit action: a number > 0, or "
                    "'equal-field' (β_unit = β_all · s_θ(all)/s_θ(unit): both fields the same raw norm, so both move "
                    "alike at each radius; the reproduction's rule); default: the recipe's 0.2, as the all-weights action's")
    _experiment_arguments(el, cmd_experiment_lifting, lifting_config)
    et = exs.add_parser("transformer", help="all-MiniLM-L6-v2: one FFN unit + 16 compensators, learned (hybrid vs "
                        "finite), installed in the full model; drift vs random and uncompensated edits")
    et.add_argument("--variants", default=None, help="comma-separated sub-run variants: objectives of the "
                    "direct-map action (hybrid, finite, infinitesimal) and flow (the flow action: a group action by "
                    "construction, hybrid objective); default hybrid,finite")
    et.add_argument("--units", default=None, metavar="L[:U],...", help="the FFN units, e.g. 1,3,5 (in each layer the "
                    "unit of largest feature RMS on the prefix) or 1:777,3 (unit 777 of layer 1); default 3")
    et.add_argument("--compensators", default=None, help="compensators k per unit (>= the prefix length; default: the "
                    "prefix length)")
    et.add_argument("--tokens", default=None, help="prefix length N (default 16)")
    _experiment_arguments(et, cmd_experiment_transformer, transformer_config)

    rp = sub.add_parser("report", help="regenerate report.md (and figures) of any run directory")
    rp.add_argument("run_dir")
    rp.add_argument("--json", action="store_true", help="print the run's metrics.json")
    rp.set_defaults(func=cmd_report)


def _experiment_arguments(parser: argparse.ArgumentParser, func, config) -> None:
    """Arguments shared by the ``paramsym experiment`` commands."""
    from .options import add_run_options

    parser.add_argument("--steps", default=None, help="training steps >= 1 (default: the presets' recipes)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--quick", action="store_true", help="small fast version (20 steps, tiny verdict; smoke runs)")
    budget.add_argument("--paper", action="store_true", help="the paper's run (the configuration's paper() value: its "
                        "seeds, units, variants; what `paramsym reproduce` runs)")
    add_run_options(parser, seed=False, seeds=True, threads=False, json="print the comparison metrics as JSON",
                    out="the run directory (new or empty; default runs/<experiment>-<preset>-<time>); --resume DIR "
                    "continues it (finished sub-runs reused, interrupted ones resumed from their checkpoints)",
                    set_help="set a key of the experiment's configuration (e.g. --set seeds=[1,2]; each flag is sugar "
                    "for --set of its key) or of every training run's discovery configuration (e.g. --set "
                    "train.lr=3e-4: added to its overrides); repeatable")
    parser.set_defaults(func=func, config=config)


def _set_threads(cfg, problem) -> None:
    """The command line (never the library) chooses torch's CPU thread count for a run (from the
    already built ``problem``: it is built once per command)."""
    if cfg.device == "cpu":
        import torch

        from ..discovery.threads import choose_threads

        torch.set_num_threads(choose_threads(cfg, problem.target.p))


def _check_device(device: str, flag: str = "--device") -> None:
    """A CUDA device must exist on this machine (a named error instead of torch's assertion)."""
    if not device.startswith("cuda"):
        return
    import torch

    from ..errors import ConfigError

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= count:
        have = "no CUDA device is available" if count == 0 else f"this machine has {count} CUDA device(s), 0..{count - 1}"
        raise ConfigError(f"{flag} {device}: {have}; use --device cpu.")


def _discover_flags() -> dict:
    """The flags of ``paramsym discover`` that write config keys (``--preset`` and ``--objective`` choose the recipe)."""
    from .options import Flag, device_option, int_option, seed_option

    return {"seed": Flag("seed", seed_option), "steps": Flag("train.steps", lambda raw, flag: int_option(raw, flag, 1)),
            "device": Flag("device", device_option)}


def discover_config(args: argparse.Namespace):
    """The configuration of a fresh run: the recipe of ``--preset`` / ``--objective`` (a named value,
    :meth:`~paramsym.discovery.config.DiscoverConfig.for_preset`), then the flags and ``--set``."""
    from ..discovery.resolve import resolve_discover_config
    from .options import config_from_flags, device_option

    device = None if args.device is None else device_option(args.device)
    return config_from_flags(resolve_discover_config(args.preset, args.objective, device=device), args,
                             _discover_flags())


def cmd_discover(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from .options import MAX_SEED, command_line, device_option, int_option

    if args.steps is not None:  # the flags' values are checked before anything else
        int_option(args.steps, "--steps", 1)
    if args.seed is not None:
        int_option(args.seed, "--seed", 0, MAX_SEED)
    device = None if args.device is None else device_option(args.device)
    from ..discovery.config import DiscoverOverrides
    from ..discovery.files import load_config
    from ..discovery.problems import PRESETS, resolve_problem
    from ..discovery.run import resume_run, start_run
    from ..runs.rundir import RunDir
    if args.resume:
        if args.preset or args.objective or args.seed is not None or args.steps is not None or args.overrides:
            raise ConfigError("--resume continues a run with its saved configuration; do not pass --preset, "
                              "--objective, --seed, --steps or --set with it.")
        run = RunDir.open_existing(args.resume)
        cfg = load_config(run)
        if device:
            cfg = DiscoverOverrides({"device": device}).apply(cfg)
        _check_device(cfg.device, "--device" if device else "the run's device")
        # a finished run is reported without building its problem; otherwise the problem is built
        # once, here, and used both for the thread count and for training
        # (a custom-target run is refused by resume_run with its own message)
        problem = None if run.has("metrics.json") or cfg.problem.preset not in PRESETS else resolve_problem(cfg)
        if problem is not None:
            _set_threads(cfg, problem)
        res = resume_run(args.resume, device=device, progress=not args.quiet, problem=problem,
                         command=command_line(args))
        if res.already_finished:
            print(f"{res.run.path} is already finished; `paramsym report {res.run.path}` regenerates its report.",
                  file=sys.stderr)
            return 0
    else:
        cfg = discover_config(args)
        int_option(cfg.seed, "seed (--set seed=...)", 0, MAX_SEED)
        _check_device(cfg.device, "--device" if device else "device (--set device=...)")
        problem = resolve_problem(cfg)  # built once: the thread count and the run use the same problem
        _set_threads(cfg, problem)
        res = start_run(cfg, args.out, progress=not args.quiet, problem=problem, command=command_line(args))
    if args.json:
        print(json.dumps(res.metrics, indent=2))
    else:
        print(summary(res.metrics, res.run))
    return 0


def summary(metrics: dict, run) -> str:
    """The lines ``paramsym discover`` prints: run directory, verdict, declared-cell errors, span."""
    from ..verdict import METRICS

    d = metrics["verdict"].get("declared", {})
    rho, factors = d.get("rho"), d.get("factors")
    cell = f"rho={rho:g}, {factors} factor{'s' if factors != 1 else ''}" if rho is not None else "the declared cell"
    judged = f"rho={rho:g} (1 and 2 factors)" if rho is not None else "the declared rho"
    lines = [f"run directory: {run.path}",
             f"preset {metrics['preset']} ({metrics['objective']}), seed {metrics['seed']}: "
             f"{'FITS' if metrics['verdict']['fits'] else 'does not fit'} the tolerances at {judged}"]
    shown = [(k, m) for k, m in METRICS.items() if k in d and isinstance(d[k], (int, float))]
    if shown:
        lines.append(f"{cell}: " + "  ".join(f"{m.label} {d[k]:.3g}" for k, m in shown))
    if "reference_span" in metrics:
        lines.append(f"field vs known symmetry span: median cosine {metrics['reference_span']['median']:.4f}, "
                     f"min {metrics['reference_span']['min']:.4f}")
    lines.append(f"report: {run.file('report.md')}")
    return "\n".join(lines)


def cmd_list(args: argparse.Namespace) -> int:
    from ..kinds.catalog import all_presets

    rows = all_presets()
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
        return 0
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(r.kind, []).append(r)
    for kind, members in groups.items():
        usage = members[0].command.rsplit(" ", 1)[0] + " NAME"
        print(f"{kind} presets ({usage}):")
        for r in members:
            stages = f"  [stages: {'|'.join(r.stages)}]" if r.stages else ""
            print(f"  {r.name:<20} {r.summary}{'  [default]' if r.default else ''}{stages}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ..runs.reports import regenerate
    from ..runs.rundir import RunDir

    run = RunDir.open_existing(args.run_dir)
    run.starts()  # a corrupt env.json is named (RunFileError), not skipped
    from ..runs.rundir import load_tensors

    for tensors in sorted(run.path.glob("*.safetensors")):  # e.g. a truncated action.safetensors
        load_tensors(tensors)
    path = regenerate(run)
    if args.json:
        print(json.dumps(run.read_json("metrics.json"), indent=2))
    else:
        print(f"wrote {path}")
    return 0


def _experiment_config(cls, args: argparse.Namespace, flags: dict, presets, objectives=(None,)):
    """``cls()``, ``cls.quick()`` (``--quick``) or ``cls.paper()`` (``--paper``) with the flags and ``--set``
    applied (:func:`config_from_flags`).

    ``--set`` of a key of ``cls`` sets it (``--seeds``, ``--steps`` and the command's ``flags`` are sugar for
    its keys); any other ``--set`` is a key of the discovery configuration of every sub-run, parsed once
    into the typed :class:`~paramsym.discovery.config.DiscoverOverrides` of field ``overrides`` (merged
    over the quick budget's). The discovery configuration of every sub-run (``presets(cfg)`` ×
    ``objectives``) is resolved here, so a bad ``--set`` is refused before the output directory is created.
    """
    import dataclasses

    from ..config import flat_keys
    from ..discovery.resolve import resolve_discover_config
    from .options import config_from_flags, int_option, seeds_option

    base = cls.quick() if args.quick else cls.paper() if getattr(args, "paper", False) else cls()
    own = set(flat_keys(base))
    mine = [item for item in args.overrides if item.split("=", 1)[0].strip() in own]
    sub = [item for item in args.overrides if item not in mine]
    flags = {"seeds": lambda raw, flag: seeds_option(raw, flag), "steps": lambda raw, flag: int_option(raw, flag, 1),
             **flags}
    cfg = config_from_flags(base, argparse.Namespace(**{**vars(args), "overrides": mine}), flags)
    if sub:
        cfg = dataclasses.replace(cfg, overrides=cfg.overrides | sub)
        cfg.validate()
    for preset in presets(cfg):
        for objective in objectives(cfg) if callable(objectives) else objectives:
            resolve_discover_config(preset, objective, cfg.seeds[0], cfg.steps, "cpu", cfg.overrides)
    return cfg


def _variants(raw: str, flag: str) -> list[str]:
    return [v.strip() for v in str(raw).split(",") if v.strip()]


def objectives_config(args: argparse.Namespace):
    """The :class:`~paramsym.experiments.discovery.table1.run.ObjectivesConfig` of ``paramsym experiment objectives``."""
    from ..experiments.discovery.table1.run import ObjectivesConfig

    return _experiment_config(ObjectivesConfig, args, {"preset": None, "variants": _variants},
                              lambda c: [c.preset], lambda c: c.variants)


def lifting_config(args: argparse.Namespace):
    """The :class:`~paramsym.experiments.discovery.lifting.run.LiftingConfig` of ``paramsym experiment lifting``."""
    from ..experiments.discovery.lifting.run import LiftingConfig

    return _experiment_config(LiftingConfig, args, {"unit_beta": None}, lambda c: ["relu2881-unit", "relu2881-all"])


def transformer_config(args: argparse.Namespace):
    """The :class:`~paramsym.experiments.discovery.transformer.run.TransformerDiscoveryConfig` of ``paramsym
    experiment transformer`` (every sub-run's configuration resolved)."""
    from ..experiments.discovery.transformer.run import TransformerDiscoveryConfig, subrun_configs
    from .options import int_option

    def count(raw, flag):
        return int_option(raw, flag, 1)

    cfg = _experiment_config(TransformerDiscoveryConfig, args, {"variants": _variants, "units": _units_option,
                                                                "compensators": count, "tokens": count},
                             lambda c: [], ())
    subrun_configs(cfg)  # every sub-run's configuration resolves before the output directory exists
    return cfg


#: the flags of ``paramsym experiment ...`` that set the configuration (refused beside --resume)
_EXPERIMENT_FLAGS = ("preset", "variants", "steps", "seeds", "quick", "paper", "unit_beta", "units", "compensators",
                     "tokens")


def _run_experiment(args: argparse.Namespace, kind: str, module: str, build, prefix: str, name) -> int:
    """Run ``paramsym experiment ...`` by the one rule of a run (:func:`paramsym.cli.options.open_run`):
    a fresh run in ``--out`` (default ``runs/<prefix>-<name(cfg)>-<time>``) with the configuration ``build()``
    (resolved before the directory is created), or ``--resume DIR`` with the run's saved one;
    through :func:`paramsym.runs.execute.execute` (``module.run``)."""
    import importlib

    from ..errors import ConfigError
    from ..runs.execute import load_run_config
    from ..runs.rundir import default_run_dir
    from .options import command_line, open_run

    if args.resume is not None:
        if args.overrides:
            raise ConfigError("--resume continues a run with its saved configuration; do not pass --set with it (or "
                              "start a fresh run with --out NEWDIR).")
        run_dir, resuming = open_run(args, kind=kind, config_flags=dict.fromkeys(_EXPERIMENT_FLAGS))
        cfg = load_run_config(run_dir)
    else:
        cfg = build()
        run_dir, resuming = open_run(args, kind=kind, default=str(default_run_dir(prefix, name(cfg))))
    mod = importlib.import_module(f"paramsym.experiments.discovery.{module}.run")
    metrics = mod.run(cfg, run_dir, progress=not args.quiet and not args.json, resume=resuming,
                      command=command_line(args))
    return _print_experiment(args, run_dir, metrics)


def cmd_experiment_objectives(args: argparse.Namespace) -> int:
    return _run_experiment(args, "discovery-objectives", "table1", lambda: objectives_config(args), "objectives",
                           lambda cfg: cfg.preset)


def cmd_experiment_lifting(args: argparse.Namespace) -> int:
    return _run_experiment(args, "discovery-lifting", "lifting", lambda: lifting_config(args), "lifting",
                           lambda cfg: "relu2881")


def cmd_experiment_transformer(args: argparse.Namespace) -> int:
    from ..experiments.discovery.transformer.run import PRESET

    return _run_experiment(args, "transformer-discovery", "transformer", lambda: transformer_config(args),
                           "transformer", lambda cfg: PRESET)


def _units_option(text: str, flag: str = "--units") -> list[list[int | None]]:
    """``"1,3:358"`` → ``[[1, None], [3, 358]]`` (ASCII digits only), else a one-line :class:`ConfigError`."""
    import re

    from ..errors import ConfigError

    units: list[list[int | None]] = []
    for part in str(text).split(","):
        m = re.fullmatch(r"([0-9]{1,9})(?::([0-9]{1,9}))?", part)
        if m is None:
            raise ConfigError(f"{flag}: expected comma-separated LAYER or LAYER:UNIT integers (ASCII digits, e.g. 1,3,5 "
                              f"or 1:777,3); received {text!r} (bad item {part!r}).")
        units.append([int(m.group(1)), None if m.group(2) is None else int(m.group(2))])
    return units


def _print_experiment(args: argparse.Namespace, out, metrics: dict) -> int:
    print(json.dumps(metrics, indent=2) if args.json else out.file("report.md").read_text())
    return 0
