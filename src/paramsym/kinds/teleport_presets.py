"""``paramsym teleport --preset NAME``: training with and without symmetry teleports, over seeds.

Presets (each returns per-seed loss curves with and without teleports, the teleports' summaries
and the aggregates of :func:`aggregate`):

* ``booth`` — GD (lr 0.08) on Booth from (5, −5), one teleport at step 4 (default) with the exact
  SO(2) action (:mod:`paramsym.teleport.functions`), objective ``‖∇f‖²`` (deterministic: the seeds
  are identical runs), 30 steps. Target loss 4.9e-3; ``loss_at_step_9`` is reported.
* ``rosenbrock`` — GD (lr 1e-3, 1000 steps) from (−1, −1), teleports on steps 99, 199, … (every
  100, as in the anchor), objective: the decrease of one GD step (``descent_objective``: ``‖∇f‖²``
  itself sends GD at lr 1e-3 to a point where it diverges). Seed 0 starts at (−1, −1) exactly;
  seed ``s > 0`` at (−1, −1) + 0.05 ξ, ξ ~ N(0, I₂) from ``torch.Generator().manual_seed(s)``.
  Target loss 1e-6.
* ``regression-mlp`` — the anchor's multi-layer regression (:mod:`.teleport_mlp`).
* ``digits-mlp`` — an MLP 64 → 32 → 32 → 10 on scikit-learn digits (:mod:`.teleport_mlp`).

Seeds: ``TeleportConfig.seeds`` lists the seed values (``--seeds 0,1,2``, as in every command);
by default seeds ``0 .. n−1`` with the preset's ``n`` (:data:`DEFAULT_SEEDS`). Each (optimizer,
seed) pair is one *job* (baseline and teleport run from the same initialisation); :func:`paramsym.kinds.teleport_mlp.run`
takes a ``job`` hook through which the ``teleport`` run kind checkpoints every finished job
(:mod:`paramsym.kinds.teleport`), so an interrupted run continues where it stopped.

``step_ratio`` is the median over seeds of (steps to the target without teleports) / (steps with);
(a baseline that never reaches the target counts its full length: a lower bound, flagged by
``baseline_reached``); ``max_loss_change`` the largest relative loss change of an accepted
teleport; ``grad_norm_factor`` the median of the accepted teleports' ``‖∇L(after)‖ / ‖∇L(before)‖``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..presets import Preset, PresetTable

if TYPE_CHECKING:
    import torch

    from ..teleport import AscentConfig

__all__ = ["DEFAULT_SEEDS", "DEFAULT_STEPS", "PRESETS", "TELEPORT_PRESETS", "TeleportConfig", "aggregate", "steps_to",
           "OPTIMIZERS", "Job"]

#: accepted optimizers per preset; the first ones are the defaults (run when --optimizer is not given)
OPTIMIZERS = {"booth": ["gd"], "rosenbrock": ["gd"], "regression-mlp": ["gd", "adagrad"], "digits-mlp": ["sgd", "adam"]}
#: default number of seeds per preset (seeds ``0 .. n−1``)
DEFAULT_SEEDS = {"booth": 1, "rosenbrock": 5, "regression-mlp": 5, "digits-mlp": 10}
#: training steps per preset (when --steps is not given)
DEFAULT_STEPS = {"booth": 30, "rosenbrock": 1000, "regression-mlp": 300, "digits-mlp": 600}
_SUMMARIES = {"booth": "GD on Booth from (5, −5), one exact SO(2) teleport at step 4",
              "rosenbrock": "GD on Rosenbrock, teleports every 100 steps (one-step descent objective)",
              "regression-mlp": "the anchor's 5→6→7→8 LeakyReLU regression, one rescaling teleport at step 5",
              "digits-mlp": "MLP 64→32→32→10 on digits, rescaling teleports every 200 (SGD) / 100 (Adam) steps"}


def _preset(name: str) -> Preset:
    return Preset(name, "teleport", "paramsym teleport --preset " + name,
                  f"{_SUMMARIES[name]} (optimizers {', '.join(OPTIMIZERS[name])}; {DEFAULT_SEEDS[name]} seeds)",
                  info={"optimizers": list(OPTIMIZERS[name]), "seeds": DEFAULT_SEEDS[name]})


#: the ``paramsym teleport --preset`` entries (listed by ``paramsym list``)
TELEPORT_PRESETS: PresetTable = PresetTable("teleport preset", [_preset(n) for n in _SUMMARIES])
PRESETS = tuple(TELEPORT_PRESETS)
#: ``job(optimizer, seed, compute) -> record``: returns the job's record, calling ``compute()`` unless
#: it is already known (the run kind's checkpoint)
Job = Callable[[str, int, Callable[[], dict]], dict]


def _no_checkpoint(optimizer: str, seed: int, compute: Callable[[], dict]) -> dict:
    return compute()


@dataclass
class TeleportConfig:
    """One ``paramsym teleport`` run.

    Attributes:
        preset: one of :data:`PRESETS`.
        every: teleport every ``every`` steps (``None``: the preset's schedule).
        seeds: the seed values (``None``: ``0 .. n−1``, ``n`` the preset's :data:`DEFAULT_SEEDS`).
        optimizers: optimizers to compare (``None``: the preset's, :data:`OPTIMIZERS`).
        steps: training steps (``None``: the preset's, :data:`DEFAULT_STEPS`).
        cache_dir: where trained/initial models are cached (digits).

    The remaining fields tune the MLP presets (:mod:`.teleport_mlp`; docs/teleport.md has how
    the digits values were chosen):

    Attributes:
        lr: learning rate per optimizer.
        regression_ascent_steps: ascent steps of a regression teleport (3: teleport time ≈ 7–8 %
            of the run, still ≥ 4 of 5 seeds at the baseline's step-300 loss by step 150 for GD
            and AdaGrad; 5 steps put GD's share at 0.10–0.12).
        ascent_steps: ascent steps of a digits teleport.
        every_per_optimizer: the digits schedule per optimizer when ``every`` is not given (Adam
            reaches the target in ~240 steps: teleport earlier; every 100/50 reached the target
            in fewer steps but lowered the validation accuracy).
        targets: the fixed target training loss of digits-mlp per optimizer.
        lookahead_lr: step size of a digits teleport's GD lookahead: twice SGD's lr, so that a
            point where the next steps at lr would oscillate (sharpness near 2/lr) scores badly
            (a 2× stability margin).
        lookahead_steps: GD steps of that lookahead.
        teleport_batch: training examples in a digits teleport's batch (``None``: all; the
            rescaling is exact on every input, so a subsample only makes the objective cheaper,
            not the teleport less exact).
        radius: trust region of a digits teleport: path length in the algebra.
        max_factor: trust region of a digits teleport: gradient-norm factor.
        norm_penalty: λ of an optional penalty ``−λ (‖θ‖²/‖θ_0‖² − 1)`` added to the digits
            teleports' objective (keeps the weight norm from growing; measured at λ = 0.05 with
            the 5-step objective: step ratio 1.08 for SGD instead of 1.45, so off by default).
    """

    preset: str
    every: int | None = None
    seeds: tuple[int, ...] | None = None
    optimizers: list[str] | None = None
    steps: int | None = None
    cache_dir: str | None = None
    lr: dict[str, float] = field(default_factory=lambda: {"gd": 1e-4, "adagrad": 0.1, "sgd": 0.1, "adam": 1e-3})
    regression_ascent_steps: int = 3
    ascent_steps: int = 3
    every_per_optimizer: dict[str, int] = field(default_factory=lambda: {"sgd": 200, "adam": 100})
    targets: dict[str, float] = field(default_factory=lambda: {"sgd": 0.05, "adam": 0.05})
    lookahead_lr: float = 0.2
    lookahead_steps: int = 2
    teleport_batch: int | None = 256
    radius: float = 2.0
    max_factor: float = 2.0
    norm_penalty: float = 0.0

    @classmethod
    def quick(cls) -> TeleportConfig:
        """Booth, one seed (a fraction of a second)."""
        return cls(preset="booth")

    def seed_values(self) -> list[int]:
        """The seeds run: ``seeds``, or ``0 .. n−1`` with the preset's default ``n``."""
        return list(self.seeds) if self.seeds is not None else list(range(DEFAULT_SEEDS[self.preset]))

    def validate(self) -> TeleportConfig:
        """Check the fields; raise :class:`ConfigError` naming the bad one."""
        if self.preset not in PRESETS:
            raise ConfigError(f"unknown teleport preset {self.preset!r}; choose one of {', '.join(PRESETS)}.")
        if self.seeds is not None:
            seeds = list(self.seeds)
            if not seeds or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in seeds) \
                    or len(set(seeds)) != len(seeds):
                raise ConfigError(f"--seeds must be distinct integers >= 0, e.g. 0,1,2; received {self.seeds!r}.")
        for name in ("every", "steps"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ConfigError(f"--{name} must be an integer ≥ 1; received {v!r}.")
        allowed = OPTIMIZERS[self.preset]
        for o in self.optimizers or []:
            if o not in allowed:
                raise ConfigError(f"preset {self.preset!r} runs the optimizers {allowed}; received --optimizer {o!r}.")
        for name in ("regression_ascent_steps", "ascent_steps", "lookahead_steps", "teleport_batch"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ConfigError(f"{name} must be an integer ≥ 1; received {v!r}.")
        for name in ("lookahead_lr", "radius", "max_factor"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0; received {getattr(self, name)!r}.")
        if not self.norm_penalty >= 0:
            raise ConfigError(f"norm_penalty must be ≥ 0; received {self.norm_penalty!r}.")
        for name, table in (("lr", self.lr), ("every_per_optimizer", self.every_per_optimizer),
                            ("targets", self.targets)):
            if self.preset in ("regression-mlp", "digits-mlp"):
                need = [o for o in (self.optimizers or OPTIMIZERS[self.preset])
                        if name == "lr" or self.preset == "digits-mlp"]
                missing = [o for o in need if o not in table]
                if missing:
                    raise ConfigError(f"{name} has no value for the optimizer(s) {missing}; received {table!r}.")
        return self


def steps_to(losses: list[float], target: float) -> int | None:
    """First step ``k`` with ``losses[k] ≤ target`` (``None`` if never)."""
    return next((k for k, v in enumerate(losses) if v <= target), None)


def gd_run(f: Callable, p0: torch.Tensor, lr: float, steps: int, due: Callable[[int], bool] | None = None,
           action=None, ascent: AscentConfig | None = None, objective=None) -> dict:
    """Plain GD on a 2-D function ``f`` with teleports (``paramsym.teleport.teleport`` with the
    settings ``ascent`` and the orbit ``objective``, default ``‖∇f‖²``) on ``due`` steps.

    ``losses[k]`` is the loss after ``k`` updates; a teleport on step ``k`` happens before update ``k``.
    """
    import torch

    from ..teleport import teleport

    p, losses, summaries, t_tele = p0.clone(), [], [], 0.0
    t0 = time.perf_counter()
    for k in range(steps + 1):
        if due is not None and k < steps and due(k):
            res = teleport(action, p, f, ascent, objective=objective)
            p, t_tele = res.theta, t_tele + res.seconds
            summaries.append({"step": k, **res.summary()})
        p = p.detach().requires_grad_(True)
        loss = f(p)
        losses.append(float(loss.detach()))
        if k == steps:
            break
        (grad,) = torch.autograd.grad(loss, p)
        p = (p - lr * grad).detach()
    return {"losses": losses, "teleports": summaries, "seconds": time.perf_counter() - t0, "teleport_seconds": t_tele}


def _two_d(cfg: TeleportConfig, progress: bool, job: Job = _no_checkpoint) -> dict:
    import torch

    from ..teleport import AscentConfig, descent_objective
    from ..teleport.functions import BoothRotation, RosenbrockRotation, booth, rosenbrock

    booth_like = cfg.preset == "booth"
    f, action = (booth, BoothRotation()) if booth_like else (rosenbrock, RosenbrockRotation())
    action = action.double()
    lr = 0.08 if booth_like else 1e-3
    steps = cfg.steps or DEFAULT_STEPS[cfg.preset]
    target = 4.9e-3 if booth_like else 1e-6
    if cfg.every is not None:
        due = (lambda k, e=cfg.every: k > 0 and k % e == e - 1) if not booth_like else (lambda k, e=cfg.every: k > 0 and k % e == 0)
    else:
        due = (lambda k: k == 4) if booth_like else (lambda k: k % 100 == 99)
    ascent = AscentConfig(steps=50, step_size=0.1, tol=1e-10)
    objective = None if booth_like else descent_objective(f, lr)
    def one(seed: int) -> dict:
        p0 = torch.tensor([5.0, -5.0] if booth_like else [-1.0, -1.0], dtype=torch.float64)
        if seed > 0 and not booth_like:
            p0 = p0 + 0.05 * torch.randn(2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        base = gd_run(f, p0, lr, steps)
        tele = gd_run(f, p0, lr, steps, due, action, ascent, objective)
        return {"seed": seed, "optimizer": "gd", "start": p0.tolist(), "baseline": base, "teleport": tele}

    runs = [job("gd", seed, lambda seed=seed: one(seed)) for seed in cfg.seed_values()]
    out = {"runs": runs, "target": {"gd": target}, "lr": {"gd": lr}, "steps": steps}
    if booth_like and steps >= 9:
        out["loss_at_step_9"] = {"baseline": runs[0]["baseline"]["losses"][9], "teleport": runs[0]["teleport"]["losses"][9]}
    return out


def aggregate(result: dict) -> dict:
    """Per optimizer and overall: step_ratio, max_loss_change, grad_norm_factor, overheads, hits."""
    per: dict[str, dict] = {}
    for opt in sorted({r["optimizer"] for r in result["runs"]}):
        runs = [r for r in result["runs"] if r["optimizer"] == opt]
        ratios, reached, base_reached, changes, factors, overhead, frac = [], 0, 0, [], [], [], []
        for r in runs:
            target = r.get("target", result["target"][opt])
            sb, st = steps_to(r["baseline"]["losses"], target), steps_to(r["teleport"]["losses"], target)
            r["steps_to_target"] = {"baseline": sb, "teleport": st}
            reached += st is not None
            base_reached += sb is not None
            n = len(r["teleport"]["losses"])
            ratios.append((sb if sb is not None else n) / max(st if st is not None else n, 1))
            acc = [t for t in r["teleport"]["teleports"] if t["steps"] > 0]
            changes += [t["rel_loss_change"] for t in acc]
            factors += [t["factor"] for t in acc]
            overhead.append(r["teleport"]["seconds"] / max(r["baseline"]["seconds"], 1e-12) - 1)
            frac.append(r["teleport"]["teleport_seconds"] / max(r["teleport"]["seconds"], 1e-12))
        per[opt] = {
            "step_ratio": statistics.median(ratios), "step_ratios": ratios, "reached": reached,
            "baseline_reached": base_reached, "seeds": len(runs),
            "max_loss_change": max(changes, default=0.0), "grad_norm_factor": statistics.median(factors) if factors else 1.0,
            "grad_norm_factors": factors, "wall_time_overhead": statistics.median(overhead),
            "teleport_time_fraction": statistics.median(frac),
            "final_loss_baseline": [r["baseline"]["losses"][-1] for r in runs],
            "final_loss_teleport": [r["teleport"]["losses"][-1] for r in runs],
        }
        for key in ("val_acc_baseline", "val_acc_teleport", "val_acc_at_target_baseline", "val_acc_at_target_teleport"):
            vals = [r[key] for r in runs if r.get(key) is not None]
            if vals:
                per[opt][key] = statistics.median(vals)
    return {
        "step_ratio": min(p["step_ratio"] for p in per.values()),
        "max_loss_change": max(p["max_loss_change"] for p in per.values()),
        "grad_norm_factor": min(p["grad_norm_factor"] for p in per.values()),
        "optimizers": per,
    }
