"""A discovery run end to end: problem → scales → training (checkpointed) → verdict → files.

Files written into the run directory (see :mod:`paramsym.runs`): ``config.json`` (resolved,
with ``kind = "discovery"``), ``block.json`` (the trained block: names, shapes, selected
entries, μ's std), ``env.json`` (one entry per start), ``checkpoint/`` (every
``train.checkpoint_every`` steps and every ``train.checkpoint_seconds`` seconds, atomic),
``action.safetensors`` (final weights), ``history.json`` (loss curves), ``curves.json``
(generated curves), ``metrics.json`` (verdict and analyses; written last), ``timing.json``,
``figures/*.png`` and ``report.md``.

Everything is validated (configuration, device, problem, scales, a checkpoint to resume) before
the first file is written, so a bad input never leaves an unusable directory behind.
``metrics.json`` depends only on the configuration (not on wall-clock time or on whether the run
was interrupted and resumed), so a resumed run reproduces an uninterrupted one exactly. All
randomness comes from explicit generators; the global torch seed and thread count are never
touched (a command line may set threads with :func:`choose_threads`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from .. import verdict as V
from ..actions.learned import LearnedAction
from ..config import from_dict, to_dict
from ..errors import BlockMismatchError, ConfigError, RunDirError, RunFileError
from ..groups.lie import MatrixLieGroup
from ..runs import RunDir, default_run_dir, load_tensors, save_tensors
from ..targets import Target
from .analysis import span_alignment
from .config import DiscoverConfig, with_overrides
from .objectives import Scales
from .problems import PRESETS, DiscoveryProblem, build_problem
from .train import Trainer, check_memory

KIND = "discovery"


def resolve_problem(cfg: DiscoverConfig) -> DiscoveryProblem:
    """Build the configured problem (with the optional μ-std override).

    Preset models are seeded by ``problem.target_seed``; the global random state that torch
    modules draw their discarded default initialisation from is forked, so left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        problem = build_problem(cfg.problem.preset, cfg.problem.target_seed)
    if cfg.problem.perturb_std is not None:
        if not cfg.problem.perturb_std > 0:
            raise ConfigError(f"problem.perturb_std must be > 0; received {cfg.problem.perturb_std}.")
        problem = dataclasses.replace(problem, perturb_std=float(cfg.problem.perturb_std))
    return problem


def scale_generator(cfg: DiscoverConfig) -> torch.Generator:
    """Scales are fixed per target, independent of the training seed."""
    return torch.Generator().manual_seed(10_000 + cfg.problem.target_seed)


def save_config(run: RunDir, cfg: DiscoverConfig) -> None:
    data = {"kind": KIND, **to_dict(cfg)}
    run.write_json("config.json", data)


def load_config(run: RunDir) -> DiscoverConfig:
    """The configuration saved in ``run`` (named errors for a missing, corrupt or foreign file)."""
    data = run.read_json("config.json")
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise RunDirError(f"{str(run.path)!r} is not a discovery run directory (config.json kind is not {KIND!r}); "
                          "pass a directory written by `paramsym discover`.")
    data = dict(data)
    data.pop("kind")
    try:
        return from_dict(DiscoverConfig, data)
    except ConfigError as exc:
        raise ConfigError(f"{str(run.file('config.json'))!r}: {exc} Restore the file or start a new run.") from None


# -- the trained block -----------------------------------------------------------------------
def describe_block(problem: DiscoveryProblem) -> dict[str, Any]:
    """What ``block.json`` records: the target's name, ``p``, ``q``, μ's std and its block
    (parameter names, shapes and selected flat indices; ``None`` for a function target)."""
    target = problem.target
    block = getattr(target, "block", None)
    entries = None if block is None else [
        {"name": e.name, "shape": list(e.shape), "indices": e.index.tolist()} for e in block.entries]
    return {"name": problem.name, "p": int(target.p), "q": int(target.q), "perturb_std": float(problem.perturb_std),
            "entries": entries}


def read_block(run: RunDir) -> dict[str, Any]:
    """The run's ``block.json``, checked for the form :func:`describe_block` writes.

    Raises:
        RunFileError: missing keys or values of the wrong type (a corrupt file).
    """
    data = run.read_json("block.json")

    def ints(x: Any) -> bool:
        return isinstance(x, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in x)

    entries = data.get("entries") if isinstance(data, dict) else None
    ok = isinstance(data, dict) and isinstance(data.get("p"), int) and (entries is None or (
        isinstance(entries, list) and all(
            isinstance(e, dict) and isinstance(e.get("name"), str) and ints(e.get("shape")) and ints(e.get("indices"))
            for e in entries)))
    if not ok:
        raise RunFileError(f"{str(run.file('block.json'))!r} is not a block record (expected 'p' and 'entries' with "
                           "'name', 'shape' and 'indices'); restore it from the run's files or delete it.")
    return data


def check_block(recorded: Mapping[str, Any], target: Target, where: str = "the run") -> None:
    """Raise :class:`BlockMismatchError` unless ``target``'s block is the ``recorded`` one."""
    block = getattr(target, "block", None)
    mine = None if block is None else [(e.name, list(e.shape), e.index.tolist()) for e in block.entries]
    theirs = recorded.get("entries")
    theirs = None if theirs is None else [(e["name"], list(e["shape"]), list(e["indices"])) for e in theirs]
    if mine == theirs and int(recorded.get("p", -1)) == int(target.p):
        return
    if mine is None or theirs is None:
        diff = f"p = {target.p} vs recorded p = {recorded.get('p')}"
    else:
        diffs = []
        names_a, names_b = [m[0] for m in mine], [t[0] for t in theirs]
        if names_a != names_b:
            diffs.append(f"names {names_a} vs recorded {names_b}")
        for (n, sa, ia), (_, sb, ib) in zip(mine, theirs):
            if sa != sb:
                diffs.append(f"{n}: shape {tuple(sa)} vs recorded {tuple(sb)}")
            elif ia != ib:
                diffs.append(f"{n}: {len(ia)} selected entries vs recorded {len(ib)} (different indices)")
        diff = "; ".join(diffs) or f"p = {target.p} vs recorded p = {recorded.get('p')}"
    raise BlockMismatchError(f"the target's parameter block differs from the block {where} was trained on: {diff}. "
                             "Pass the same model and block selection as in training.")


# -- evaluation ------------------------------------------------------------------------------
def evaluate_action(problem: DiscoveryProblem, trainer_or_action: Any, cfg: DiscoverConfig, scales, progress: bool = False) -> dict[str, Any]:
    """Verdict grid, generated curves and (if known) the reference-span alignment."""
    action = getattr(trainer_or_action, "action", trainer_or_action)
    target64 = problem.target.to(torch.float64)

    def points(n: int, gen: torch.Generator) -> torch.Tensor:
        return problem.sample(n, gen, torch.float64)

    vc = cfg.verdict
    verdict = V.evaluate(
        action, target64, points, s_F=scales.s_F, s_theta=scales.s_theta, rhos=vc.rhos, factors=vc.factors,
        samples=vc.samples, seed=vc.eval_seed, unit_outputs=problem.unit_outputs, progress=progress,
    )
    curves = V.generated_curves(
        action, target64, points, s_F=scales.s_F, points=vc.curve_points, times=vc.curve_times,
        tmax=vc.curve_tmax, seed=vc.eval_seed + 1, unit_outputs=problem.unit_outputs,
    )
    out: dict[str, Any] = {"verdict": verdict.to_dict(), "curves": curves}
    if problem.reference_span is not None:
        held_out = points(256, torch.Generator().manual_seed(vc.eval_seed + 2))
        out["reference_span"] = {"name": problem.reference_name, **span_alignment(action, problem.reference_span, held_out)}
    return out


def choose_threads(cfg: DiscoverConfig, p: int | None = None) -> int:
    """Torch CPU threads for a run: ``cfg.threads``, or 1 for small problems when 0 (auto).

    The library never sets the thread count; a command line calls
    ``torch.set_num_threads(choose_threads(cfg))`` on CPU. ``p`` (the block size) is taken from
    the configured preset when not given.
    """
    if cfg.threads > 0:
        return cfg.threads
    if p is None:
        p = resolve_problem(cfg).target.p
    work = (p + cfg.group.size**2) * cfg.action.width + cfg.action.depth * cfg.action.width**2
    return 1 if work < 4_000_000 else torch.get_num_threads()


# -- running ---------------------------------------------------------------------------------
def _prepare(cfg: DiscoverConfig, problem: DiscoveryProblem | None) -> tuple[DiscoverConfig, DiscoveryProblem, Scales, Trainer]:
    """Everything that can fail on bad input, before any file is written."""
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was requested but CUDA is not available here; use --device cpu.")
    problem = problem if problem is not None else resolve_problem(cfg)
    if problem.name != cfg.problem.preset:
        cfg = dataclasses.replace(cfg, problem=dataclasses.replace(cfg.problem, preset=problem.name))
    check_memory(problem, cfg)
    scales = problem.scales(cfg.objective.beta, scale_generator(cfg), memory_bytes=cfg.train.memory_gb * 2**30 / 4)
    return cfg, problem, scales, Trainer(problem, cfg, scales, device=cfg.device)


def _execute(cfg: DiscoverConfig, run: RunDir, *, resume: bool, progress: bool,
             problem: DiscoveryProblem | None) -> tuple[dict[str, Any], LearnedAction]:
    cfg, problem, scales, trainer = _prepare(cfg, problem)
    ck = run.load_checkpoint() if resume else None
    if ck is not None:
        trainer.load(*ck)
    if resume and run.has("block.json"):
        check_block(read_block(run), problem.target)
    run.starts()  # read env.json first: a damaged one refuses the resume before any file is (re)written
    if not (resume and run.has("config.json")):
        save_config(run, cfg)
    if not run.has("block.json"):
        run.write_json("block.json", describe_block(problem))
    run.write_env(cfg.seed, cfg.device, preset=problem.name,
                  resumed_from_step=(trainer.state.step if ck is not None else 0) if resume else None)

    def checkpoint(tr: Trainer) -> None:
        run.save_checkpoint(tr.state_tensors(), tr.state_json())

    t0 = time.time()
    trainer.run(progress=progress, on_checkpoint=checkpoint)
    train_seconds = time.time() - t0
    save_tensors(run.file("action.safetensors"), trainer.action.state_dict(), metadata={"preset": problem.name})
    run.write_json("history.json", trainer.state.history)

    t1 = time.time()
    results = evaluate_action(problem, trainer, cfg, scales, progress=progress)
    eval_seconds = time.time() - t1
    run.write_json("curves.json", results.pop("curves"))
    final = trainer.state.history[-1] if trainer.state.history else {}
    metrics = {
        "kind": KIND,
        "preset": problem.name,
        "description": problem.description,
        "objective": cfg.objective.variant,
        "seed": cfg.seed,
        "steps": cfg.train.steps,
        "p": problem.target.p,
        "q": problem.target.q,
        "scales": dataclasses.asdict(scales),
        "problem_info": problem.info,
        "generators": trainer.action.group.generators().detach().cpu().tolist(),
        "final_losses": {k: final[k] for k in ("inv", "trans", "comp", "pres", "scale", "div", "total") if k in final},
        **results,
    }
    run.write_json("timing.json", {"train_seconds": train_seconds, "eval_seconds": eval_seconds})
    run.write_json("metrics.json", metrics)
    from .report import write_report

    write_report(run)
    return metrics, trainer.action.eval()


def run_discovery(
    cfg: DiscoverConfig, run: RunDir, *, resume: bool = False, progress: bool = True,
    problem: DiscoveryProblem | None = None,
) -> dict[str, Any]:
    """Train and judge a learned action; write everything into ``run``; return the metrics.

    Args:
        cfg: the resolved configuration.
        run: the run directory (created by the first write, after every input was validated).
        resume: continue from the run directory's last checkpoint; a run without a checkpoint
            (killed before its first one) restarts from step 0 with its saved configuration.
        progress: show progress bars.
        problem: a custom problem (your own target); default: the preset ``cfg.problem.preset``.

    Raises:
        ConfigError: invalid configuration or device; RunFileError: unwritable directory or a
        corrupt checkpoint; BlockMismatchError: ``problem`` is not the block the run trained.
    """
    return _execute(cfg, run, resume=resume, progress=progress, problem=problem)[0]


@dataclass
class DiscoveryResult:
    """What :func:`discover`, :func:`start_run` and :func:`resume_run` return."""

    action: LearnedAction
    metrics: dict[str, Any]
    run: RunDir
    #: True when :func:`resume_run` found the run already finished (nothing was trained)
    already_finished: bool = False


def start_run(cfg: DiscoverConfig, out: str | os.PathLike | None = None, *, progress: bool = True,
              problem: DiscoveryProblem | None = None) -> DiscoveryResult:
    """A new discovery run in ``out`` (missing or empty; default ``runs/discover-<name>-<time>``).

    Raises:
        RunFileError: ``out`` is a file or not writable; RunDirError: ``out`` is not empty;
        ConfigError and the errors of :func:`run_discovery`.
    """
    name = problem.name if problem is not None else cfg.problem.preset
    run = RunDir.fresh(out if out is not None else default_run_dir("discover", name))
    metrics, action = _execute(cfg, run, resume=False, progress=progress, problem=problem)
    return DiscoveryResult(action=action, metrics=metrics, run=run)


def resume_run(path: str | os.PathLike, *, device: str | None = None, progress: bool = True,
               target: Target | None = None, problem: DiscoveryProblem | None = None,
               **problem_kwargs: Any) -> DiscoveryResult:
    """Continue the run in ``path`` from its last checkpoint (from step 0 if it has none).

    Args:
        path: a run directory written by ``paramsym discover`` or :func:`discover`.
        device: run on another device than the saved configuration's.
        progress: show progress bars.
        target: for a custom-target run, the same target (checked against ``block.json``; name
            and μ's σ are taken from the run).
        problem: alternatively, the full :class:`DiscoveryProblem` of a custom-target run.
        **problem_kwargs: further :class:`DiscoveryProblem` fields with ``target`` (e.g.
            ``reference_span``), as given to :func:`discover`.

    Returns:
        The result; ``already_finished`` is True (and nothing is trained) when the run has its
        ``metrics.json``.
    """
    run = RunDir.open_existing(path)
    cfg = load_config(run)
    if device:
        cfg = with_overrides(cfg, {"device": device})
    if target is not None and problem is None:
        if not run.has("block.json"):
            raise RunDirError(f"{str(run.path)!r} has no block.json to rebuild its problem from; pass problem=...")
        block = read_block(run)
        check_block(block, target, where=str(run.path))
        std = block.get("perturb_std")
        if not isinstance(std, (int, float)) or not std > 0:
            raise RunFileError(f"{str(run.file('block.json'))!r} has no positive 'perturb_std'; restore it.")
        problem = DiscoveryProblem(name=cfg.problem.preset, target=target, perturb_std=float(std),
                                   description=problem_kwargs.pop("description", f"custom target {cfg.problem.preset}"),
                                   **problem_kwargs)
    if problem is None and cfg.problem.preset not in PRESETS:
        raise RunDirError(
            f"{str(run.path)!r} trained the custom target {cfg.problem.preset!r}; resume it from Python with "
            "resume_run(path, target=<the same Target>).")
    if run.has("metrics.json"):
        return DiscoveryResult(action=load_learned_action(run), metrics=run.read_json("metrics.json"), run=run,
                               already_finished=True)
    metrics, action = _execute(cfg, run, resume=True, progress=progress, problem=problem)
    return DiscoveryResult(action=action, metrics=metrics, run=run)


def discover(
    target: Target | str,
    perturb_std: float | None = None,
    *,
    cfg: DiscoverConfig | None = None,
    overrides: Mapping[str, Any] | Iterable[str] | None = None,
    recipe: str | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    **problem_kwargs: Any,
) -> DiscoveryResult:
    """Learn a symmetry of your own target, or of a preset (Python entry point of ``paramsym discover``).

    Configuration, lowest to highest precedence:

    * a preset name (``discover("sigmoid-scalar")``) uses that preset's tuned recipe, exactly as
      ``paramsym discover --preset sigmoid-scalar`` (:meth:`DiscoverConfig.for_preset`);
    * a custom target uses the :class:`DiscoverConfig` defaults (β = 0.3, ρ = 0.5, up to 3
      factors: the recipe of the untuned presets), or the tuned recipe of ``recipe=<preset>``;
    * ``cfg=`` replaces that starting point with your own :class:`DiscoverConfig`
      (e.g. ``DiscoverConfig.quick()``);
    * ``overrides=`` is applied last, as ``--set`` is:
      ``discover(F, 0.1, overrides={"train.lr": 3e-4, "train.steps": 2000})``.

    Args:
        target: ``F_X(θ)`` of your model and block (:class:`~paramsym.targets.Target`), or the
            name of a preset (``paramsym list``).
        perturb_std: standard deviation σ of the parameter distribution ``μ = θ0 + σ N(0, I)``
            (required for a custom target; for a preset it overrides the preset's σ).
        cfg: the starting configuration (see above); for a custom target ``cfg.problem`` is ignored.
        overrides: dotted ``key: value`` overrides (a mapping, or ``"key=value"`` strings).
        recipe: for a custom target, start from this preset's tuned recipe.
        out: run directory, missing or empty (default ``runs/discover-<target name>-<time>``).
        progress: show progress bars.
        **problem_kwargs: further :class:`DiscoveryProblem` fields (``name``, ``description``,
            ``reference_span``, ``unit_outputs``, ``reject``).

    Returns:
        The trained action (in eval mode), the metrics and the run directory; the action is
        reloaded later with ``load_action(run_dir, target=...)``.

    Raises:
        ConfigError: a bad configuration, override or argument (before any file is written).

    Example:
        >>> res = discover(Target(model, ["fc1.weight", "fc2.weight"], X), 0.1)  # doctest: +SKIP
        >>> res.metrics["verdict"]["declared"]["output_err_p95"]  # doctest: +SKIP
    """
    if isinstance(target, str):
        if problem_kwargs or recipe is not None:
            raise ConfigError("discover(preset_name, ...) takes no problem fields or recipe; they belong to a custom Target.")
        base = cfg or DiscoverConfig.for_preset(target)
        if cfg is not None:
            base = with_overrides(base, {"problem.preset": target})
        if perturb_std is not None:
            base = with_overrides(base, {"problem.perturb_std": float(perturb_std)})
        return start_run(with_overrides(base, overrides), out, progress=progress)
    if not isinstance(target, Target):
        raise ConfigError(f"discover() expects a paramsym Target or a preset name; received {type(target).__name__}.")
    if perturb_std is None or not float(perturb_std) > 0:
        raise ConfigError(f"perturb_std must be a positive number (σ of μ = θ0 + σ N(0, I)); received {perturb_std!r}.")
    base = cfg or (DiscoverConfig.for_preset(recipe) if recipe else DiscoverConfig())
    base = with_overrides(base, overrides)
    name = problem_kwargs.pop("name", target.name)
    problem = DiscoveryProblem(name=name, description=problem_kwargs.pop("description", f"custom target {name}"),
                               target=target, perturb_std=float(perturb_std), **problem_kwargs)
    return start_run(base, out, progress=progress, problem=problem)


# -- reloading -------------------------------------------------------------------------------
def _as_run(run_dir: RunDir | str | os.PathLike) -> RunDir:
    return run_dir if isinstance(run_dir, RunDir) else RunDir.open_existing(run_dir)


def load_learned_action(run_dir: RunDir | str | os.PathLike, target: Target | None = None) -> LearnedAction:
    """The trained action of a finished run, in eval mode (public as ``paramsym.discovery.load_action``).

    Args:
        run_dir: the run directory.
        target: the target the run was trained on; its block (names, shapes, selected entries) is
            checked against the run's ``block.json``. Optional (recommended for custom targets).

    Raises:
        RunDirError: not a finished discovery run; RunFileError: a corrupt file;
        BlockMismatchError: ``target``'s block differs (the message lists the differences).
    """
    run = _as_run(run_dir)
    cfg = load_config(run)
    if target is not None:
        if run.has("block.json"):
            check_block(read_block(run), target, where=str(run.path))
    if not run.has("action.safetensors"):
        raise RunDirError(f"{str(run.path)!r} has no action.safetensors: the run did not finish; "
                          f"continue it with `paramsym discover --resume {run.path}`.")
    tensors = load_tensors(run.file("action.safetensors"))
    center = tensors.get("theta_center")
    if center is None:
        raise RunFileError(f"{str(run.file('action.safetensors'))!r} holds no learned action (no 'theta_center').")
    p = int(center.numel())
    if target is not None and target.p != p:
        raise BlockMismatchError(f"the target has p = {target.p} block entries; the run's action acts on p = {p}.")
    with torch.random.fork_rng(devices=[]):  # the placeholder initialisation is overwritten below
        group = MatrixLieGroup(cfg.group.size, cfg.group.generators)
        action = LearnedAction(group, p, theta_center=torch.zeros(p), theta_scale=1.0, out_scale=1.0,
                               width=cfg.action.width, depth=cfg.action.depth)
    try:
        action.load_state_dict(tensors)
    except RuntimeError as exc:
        msg = " ".join(str(exc).split())[:300]
        raise RunFileError(f"{str(run.file('action.safetensors'))!r} does not fit the run's config.json ({msg}).") from None
    return action.eval()


class TrainedRun(NamedTuple):
    """A finished preset run, rebuilt: its action, problem, scales and configuration."""

    action: LearnedAction
    problem: DiscoveryProblem
    scales: Scales
    cfg: DiscoverConfig


def load_trained(run_dir: RunDir | str | os.PathLike, problem: DiscoveryProblem | None = None) -> TrainedRun:
    """Rebuild a finished run for further analysis (the problem: the preset's, or ``problem``)."""
    run = _as_run(run_dir)
    cfg = load_config(run)
    problem = problem if problem is not None else resolve_problem(cfg)
    scales = problem.scales(cfg.objective.beta, scale_generator(cfg), memory_bytes=cfg.train.memory_gb * 2**30 / 4)
    return TrainedRun(load_learned_action(run, problem.target), problem, scales, cfg)
