"""A discovery run end to end: problem → scales → training (checkpointed) → verdict → files.

Files written into the run directory (see :mod:`paramsym.runs`): ``config.json`` (resolved,
with ``kind = "discovery"``), ``env.json``, ``checkpoint/`` (every ``train.checkpoint_every``
steps, atomic), ``action.safetensors`` (final weights), ``history.json`` (loss curves),
``curves.json`` (generated curves), ``metrics.json`` (verdict and analyses; written last),
``timing.json``, ``figures/*.png`` and ``report.md``.

``metrics.json`` depends only on the configuration (not on wall-clock time or on whether the run
was interrupted and resumed), so a resumed run reproduces an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .. import verdict as V
from ..actions.learned import LearnedAction
from ..config import from_dict, to_dict
from ..errors import ConfigError, RunDirError
from ..runs import RunDir, load_tensors, save_tensors
from ..targets import Target
from .analysis import span_alignment
from .config import DiscoverConfig
from .problems import DiscoveryProblem, build_problem
from .train import Trainer

KIND = "discovery"


def resolve_problem(cfg: DiscoverConfig) -> DiscoveryProblem:
    """Build the configured problem (with the optional μ-std override)."""
    problem = build_problem(cfg.problem.preset, cfg.problem.target_seed)
    if cfg.problem.perturb_std is not None:
        if cfg.problem.perturb_std <= 0:
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
    data = run.read_json("config.json")
    if data.pop("kind", None) != KIND:
        raise RunDirError(f"{run.path} is not a discovery run directory (config kind is not {KIND!r}).")
    return from_dict(DiscoverConfig, data)


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


def choose_threads(cfg: DiscoverConfig, p: int) -> int:
    """Torch CPU threads for a run: ``cfg.threads``, or 1 for small problems when 0 (auto)."""
    if cfg.threads > 0:
        return cfg.threads
    work = (p + cfg.group.size**2) * cfg.action.width + cfg.action.depth * cfg.action.width**2
    return 1 if work < 4_000_000 else torch.get_num_threads()


def run_discovery(
    cfg: DiscoverConfig, run: RunDir, *, resume: bool = False, progress: bool = True,
    problem: DiscoveryProblem | None = None,
) -> dict[str, Any]:
    """Train and judge a learned action; write everything into ``run``; return the metrics.

    Args:
        cfg: the resolved configuration.
        run: the run directory.
        resume: continue from the run directory's last checkpoint.
        progress: show progress bars.
        problem: a custom problem (your own target); default: the preset ``cfg.problem.preset``.
    """
    torch.manual_seed(cfg.seed)
    device = cfg.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was requested but CUDA is not available here; use --device cpu.")
    problem = problem if problem is not None else resolve_problem(cfg)
    if device == "cpu":
        torch.set_num_threads(choose_threads(cfg, problem.target.p))
    scales = problem.scales(cfg.objective.beta, scale_generator(cfg))
    trainer = Trainer(problem, cfg, scales, device=device)
    if resume:
        ck = run.load_checkpoint()
        if ck is None:
            raise RunDirError(f"{run.path} has no checkpoint to resume from; start a new run instead.")
        trainer.load(*ck)
    else:
        if problem.name != cfg.problem.preset:
            cfg = dataclasses.replace(cfg, problem=dataclasses.replace(cfg.problem, preset=problem.name))
        save_config(run, cfg)
    run.write_env(cfg.seed, device, preset=problem.name, resumed_from_step=trainer.state.step if resume else None,
                  torch_threads_used=torch.get_num_threads())

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
    return metrics


@dataclass
class DiscoveryResult:
    """What :func:`discover` returns: the trained action, its metrics and the run directory."""

    action: LearnedAction
    metrics: dict[str, Any]
    run: RunDir


def discover(
    target: Target,
    perturb_std: float,
    *,
    cfg: DiscoverConfig | None = None,
    out: str | Path | None = None,
    progress: bool = True,
    **problem_kwargs: Any,
) -> DiscoveryResult:
    """Learn a symmetry of your own target (Python entry point of ``paramsym discover``).

    Args:
        target: ``F_X(θ)`` of your model and block (:class:`~paramsym.targets.Target`).
        perturb_std: standard deviation σ of the parameter distribution ``μ = θ0 + σ N(0, I)``.
        cfg: configuration (defaults of :class:`DiscoverConfig`); ``cfg.problem`` is ignored.
        out: run directory (default ``runs/discover-<target name>-<time>``).
        progress: show progress bars.
        **problem_kwargs: further :class:`DiscoveryProblem` fields (``reference_span``,
            ``unit_outputs``, ``reject``, ``description``).

    Example:
        >>> res = discover(Target(model, ["fc1.weight", "fc2.weight"], X), 0.1)  # doctest: +SKIP
        >>> res.metrics["verdict"]["declared"]["output_err_p95"]  # doctest: +SKIP
    """
    from ..runs import default_run_dir

    cfg = cfg or DiscoverConfig()
    name = problem_kwargs.pop("name", target.name)
    problem = DiscoveryProblem(name=name, description=problem_kwargs.pop("description", f"custom target {name}"),
                               target=target, perturb_std=float(perturb_std), **problem_kwargs)
    run = RunDir(out or default_run_dir("discover", name))
    metrics = run_discovery(cfg, run, progress=progress, problem=problem)
    action = load_tensors(run.file("action.safetensors"))
    scales = problem.scales(cfg.objective.beta, scale_generator(cfg))
    trainer = Trainer(problem, cfg, scales)
    trainer.action.load_state_dict(action)
    return DiscoveryResult(action=trainer.action.eval(), metrics=metrics, run=run)


def load_action(run: RunDir):
    """Rebuild the trained action of a finished run (for further analysis)."""
    cfg = load_config(run)
    problem = resolve_problem(cfg)
    scales = problem.scales(cfg.objective.beta, scale_generator(cfg))
    trainer = Trainer(problem, cfg, scales)
    trainer.action.load_state_dict(load_tensors(run.file("action.safetensors")))
    trainer.action.eval()
    return trainer.action, problem, scales, cfg
