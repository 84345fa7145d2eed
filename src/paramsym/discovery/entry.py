"""The entry points of a discovery run: problem → scales → training (checkpointed) → verdict → files.

:func:`discover` (Python, one configuration), :func:`start_run`, :func:`resume_run` and
:func:`run_discovery` all go through the run verb, :func:`paramsym.runs.execute.execute` (which
writes ``config.json`` with its provenance, ``env.json``, ``metrics.json`` and ``report.md``),
around :func:`train`, the ``discovery`` kind's ``run``; :func:`prepare_run` validates first. Files
written into the run directory (see :mod:`paramsym.runs.rundir`): ``config.json``, ``block.json``
(:mod:`.files`), ``env.json`` (one entry per start), ``checkpoint/`` (every ``train.checkpoint_every`` steps and every
``train.checkpoint_seconds`` seconds, atomic), ``action.safetensors`` (final weights),
``history.json`` (loss curves), ``curves.json`` (generated curves), ``metrics.json`` (verdict
and analyses; written last), ``timing.json``, ``figures/*.png`` and ``report.md``.

Everything is validated (configuration, device, problem, scales, a checkpoint to resume) before
the first file is written, so a bad input never leaves an unusable directory behind.
``metrics.json`` depends only on the configuration (not on wall-clock time or on whether the run
was interrupted and resumed), so a resumed run reproduces an uninterrupted one exactly. All
randomness comes from explicit generators; the global torch seed and thread count are never
touched (a command line may set threads with :func:`~paramsym.discovery.threads.choose_threads`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..actions.learned import LearnedAction
from ..config import validate_tree
from ..errors import ConfigError, RunDirError, RunFileError
from ..runs.rundir import RunDir, default_run_dir, save_tensors
from ..targets import Target
from .config import DiscoverConfig, DiscoverOverrides
from .evaluation import evaluate_action
from .files import KIND, check_block, describe_block, load_config, read_block
from .objectives import Scales
from .problems import PRESETS, DiscoveryProblem, problem_scales, resolve_problem
from .reload import load_learned_action
from .train import Trainer, check_memory

__all__ = ["DiscoveryResult", "Prepared", "discover", "prepare_run", "resume_run", "run_discovery", "start_run", "train",
           "train_run"]


def _prepare(cfg: DiscoverConfig, problem: DiscoveryProblem | None) -> tuple[DiscoverConfig, DiscoveryProblem, Scales, Trainer]:
    """Everything that can fail on bad input, before any file is written."""
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was requested but CUDA is not available here; use --device cpu.")
    problem = problem if problem is not None else resolve_problem(cfg)
    if problem.name != cfg.problem.preset:
        cfg = dataclasses.replace(cfg, problem=dataclasses.replace(cfg.problem, preset=problem.name))
    check_memory(problem, cfg)
    scales = problem_scales(problem, cfg)
    return cfg, problem, scales, Trainer(problem, cfg, scales, device=cfg.device)


@dataclass
class Prepared:
    """A discovery run validated and ready to train: the configuration (problem name resolved),
    its problem, scales and trainer (holding the checkpoint it continues from, if any)."""

    cfg: DiscoverConfig
    problem: DiscoveryProblem
    scales: Scales
    trainer: Trainer
    #: the step of the checkpoint loaded (``None``: none)
    from_step: int | None = None


def prepare_run(cfg: DiscoverConfig, run: RunDir, *, resume: bool = False, problem: DiscoveryProblem | None = None,
                from_checkpoint: bool = False) -> Prepared:
    """Everything that can fail on bad input, before any file of ``run`` is written: the problem,
    its scales and memory, the trainer, the checkpoint to continue from (``resume`` or
    ``from_checkpoint``), the recorded block (``resume``) and a readable ``env.json``."""
    cfg, problem, scales, trainer = _prepare(cfg, problem)
    ck = run.load_checkpoint() if resume or from_checkpoint else None
    if ck is not None:
        trainer.load(*ck)
    if resume and run.has("block.json"):
        check_block(read_block(run), problem.target)
    run.starts()  # read env.json first: a damaged one refuses the resume before any file is (re)written
    return Prepared(cfg, problem, scales, trainer, trainer.state.step if ck is not None else None)


def train(cfg: DiscoverConfig, run: RunDir, *, progress: bool = True, prepared: Prepared | None = None,
          problem: DiscoveryProblem | None = None) -> dict[str, Any]:
    """The ``run`` of the ``discovery`` kind (called by :func:`paramsym.runs.execute.execute`, which
    writes ``config.json``, ``env.json``, ``metrics.json`` and ``report.md`` around it): train from
    the checkpoint in ``run`` if any, judge, write the run's own files; return the metrics.

    ``prepared``: the run already validated by :func:`prepare_run` (else it is prepared here,
    continuing from a checkpoint in ``run`` if one is there).
    """
    if prepared is None:
        prepared = prepare_run(cfg, run, problem=problem, from_checkpoint=True)
    cfg, problem, scales, trainer = prepared.cfg, prepared.problem, prepared.scales, prepared.trainer
    if not run.has("block.json"):
        run.write_json("block.json", describe_block(problem))

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
    return metrics


def run_discovery(
    cfg: DiscoverConfig, run: RunDir, *, resume: bool = False, progress: bool = True,
    problem: DiscoveryProblem | None = None, from_checkpoint: bool = False, command: str | None = None,
) -> dict[str, Any]:
    """Train and judge a learned action; write everything into ``run``; return the metrics.

    The run goes through the run verb (:func:`paramsym.runs.execute.execute`): ``config.json``
    with its provenance, ``env.json``, ``metrics.json`` and ``report.md`` are written there.

    Args:
        cfg: the resolved configuration.
        run: the run directory (created by the first write, after every input was validated).
        resume: continue from the run directory's last checkpoint; a run without a checkpoint
            (killed before its first one) restarts from step 0 with its saved configuration.
        progress: show progress bars.
        problem: a custom problem (your own target); default: the preset ``cfg.problem.preset``.
        from_checkpoint: a new run (its ``config.json`` written now) that trains on from the
            checkpoint already in ``run`` (a sweep's continued trial).
        command: the command line recorded in the provenance.

    Raises:
        ConfigError: invalid configuration or device; RunFileError: unwritable directory or a
        corrupt checkpoint; BlockMismatchError: ``problem`` is not the block the run trained.
    """
    return train_run(cfg, run, resume=resume, progress=progress, problem=problem, from_checkpoint=from_checkpoint,
                     command=command)[0]


def train_run(cfg: DiscoverConfig, run: RunDir, *, resume: bool = False, progress: bool = True,
              problem: DiscoveryProblem | None = None, from_checkpoint: bool = False, command: str | None = None
              ) -> tuple[dict[str, Any], LearnedAction]:
    """:func:`run_discovery` that also returns the trained action (in memory, eval mode), for callers
    that evaluate it further without reloading it from ``action.safetensors``."""
    from ..runs.execute import execute

    prepared = prepare_run(cfg, run, resume=resume, problem=problem, from_checkpoint=from_checkpoint)
    cfg = prepared.cfg
    from_step = prepared.from_step if prepared.from_step is not None else (0 if resume else None)
    outcome = execute(KIND, cfg, run, resume=resume, command=command, progress=progress, seed=cfg.seed,
                      options={"prepared": prepared},
                      env={"device": cfg.device, "preset": prepared.problem.name, "resumed_from_step": from_step})
    if outcome.already_finished:
        return outcome.metrics, load_learned_action(run)
    return outcome.metrics, prepared.trainer.action.eval()


@dataclass
class DiscoveryResult:
    """What :func:`discover`, :func:`start_run` and :func:`resume_run` return."""

    action: LearnedAction
    metrics: dict[str, Any]
    run: RunDir
    #: True when :func:`resume_run` found the run already finished (nothing was trained)
    already_finished: bool = False


def start_run(cfg: DiscoverConfig, out: str | os.PathLike | None = None, *, progress: bool = True,
              problem: DiscoveryProblem | None = None, command: str | None = None) -> DiscoveryResult:
    """A new discovery run in ``out`` (missing or empty; default ``runs/discover-<name>-<time>``).

    Raises:
        RunFileError: ``out`` is a file or not writable; RunDirError: ``out`` is not empty;
        ConfigError and the errors of :func:`run_discovery`.
    """
    name = problem.name if problem is not None else cfg.problem.preset
    run = RunDir.fresh(out if out is not None else default_run_dir("discover", name), command="paramsym discover")
    metrics, action = train_run(cfg, run, progress=progress, problem=problem, command=command)
    return DiscoveryResult(action=action, metrics=metrics, run=run)


def resume_run(path: str | os.PathLike, *, device: str | None = None, progress: bool = True,
               target: Target | None = None, problem: DiscoveryProblem | None = None, command: str | None = None,
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
        cfg = DiscoverOverrides({"device": device}).apply(cfg)
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
    metrics, action = train_run(cfg, run, resume=True, progress=progress, problem=problem, command=command)
    return DiscoveryResult(action=action, metrics=metrics, run=run)


def discover(
    target: Target | str,
    perturb_std: float | None = None,
    *,
    cfg: DiscoverConfig | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    **problem_kwargs: Any,
) -> DiscoveryResult:
    """Learn a symmetry of your own target, or of a preset (Python entry point of ``paramsym discover``).

    One configuration, ``cfg`` (a :class:`DiscoverConfig`); without it:

    * a preset name (``discover("sigmoid-scalar")``) uses that preset's tuned recipe, exactly as
      ``paramsym discover --preset sigmoid-scalar`` (:meth:`DiscoverConfig.for_preset`);
    * a custom target uses the :class:`DiscoverConfig` defaults (β = 0.3, ρ = 0.5, up to 3
      factors: the recipe of the untuned presets).

    Build ``cfg`` from a recipe and overrides, e.g.
    ``with_overrides(DiscoverConfig.for_preset("linear2x2"), {"train.lr": 3e-4, "train.steps": 2000})``
    or ``DiscoverConfig.quick()``.

    Args:
        target: ``F_X(θ)`` of your model and block (:class:`~paramsym.targets.Target`), or the
            name of a preset (``paramsym list``).
        perturb_std: standard deviation σ of the parameter distribution ``μ = θ0 + σ N(0, I)``
            (required for a custom target; for a preset it overrides the preset's σ).
        cfg: the configuration (see above); for a custom target ``cfg.problem`` is ignored, for a
            preset name ``cfg.problem.preset`` is set to it.
        out: run directory, missing or empty (default ``runs/discover-<target name>-<time>``).
        progress: show progress bars.
        **problem_kwargs: further :class:`DiscoveryProblem` fields (``name``, ``description``,
            ``reference_span``, ``unit_outputs``, ``reject``).

    Returns:
        The trained action (in eval mode), the metrics and the run directory; the action is
        reloaded later with ``load_action(run_dir, target=...)``.

    Raises:
        ConfigError: a bad configuration or argument (before any file is written).

    Example:
        >>> res = discover(Target(model, ["fc1.weight", "fc2.weight"], X), 0.1)  # doctest: +SKIP
        >>> res.metrics["verdict"]["declared"]["output_err_p95"]  # doctest: +SKIP
    """
    for old in ("overrides", "recipe"):
        if old in problem_kwargs:
            raise ConfigError(f"discover() takes one configuration, cfg=; received {old}=. Build it first, e.g. "
                              "cfg=with_overrides(DiscoverConfig.for_preset(preset), {'train.lr': 3e-4}).")
    if cfg is not None and not isinstance(cfg, DiscoverConfig):
        raise ConfigError(f"discover(cfg=...) expects a DiscoverConfig; received {type(cfg).__name__}.")
    if isinstance(target, str):
        if problem_kwargs:
            raise ConfigError("discover(preset_name, ...) takes no problem fields; they belong to a custom Target.")
        base = cfg or DiscoverConfig.for_preset(target)
        problem_cfg = dataclasses.replace(base.problem, preset=target)
        if perturb_std is not None:
            problem_cfg = dataclasses.replace(problem_cfg, perturb_std=float(perturb_std))
        base = dataclasses.replace(base, problem=problem_cfg)
        validate_tree(base)
        return start_run(base, out, progress=progress)
    if not isinstance(target, Target):
        raise ConfigError(f"discover() expects a paramsym Target or a preset name; received {type(target).__name__}.")
    if perturb_std is None or not float(perturb_std) > 0:
        raise ConfigError(f"perturb_std must be a positive number (σ of μ = θ0 + σ N(0, I)); received {perturb_std!r}.")
    base = cfg or DiscoverConfig()
    validate_tree(base)
    name = problem_kwargs.pop("name", target.name)
    problem = DiscoveryProblem(name=name, description=problem_kwargs.pop("description", f"custom target {name}"),
                               target=target, perturb_std=float(perturb_std), **problem_kwargs)
    return start_run(base, out, progress=progress, problem=problem)
