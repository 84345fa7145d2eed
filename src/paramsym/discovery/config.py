"""Configuration of a discovery run (every key can be overridden with ``--set key=value``).

From Python::

    cfg = DiscoverConfig.for_preset("sigmoid-scalar")           # the tuned recipe, as the CLI uses
    cfg = DiscoverConfig.quick("sigmoid-scalar")                 # the same, on a tiny budget
    cfg = with_overrides(cfg, {"train.lr": 3e-4})                # or ["train.lr=3e-4"], as --set

A recipe (:func:`paramsym.discovery.config.recipe`) is a function returning a
:class:`DiscoverConfig`; overrides are :class:`DiscoverOverrides` (typed when built, see
:class:`paramsym.config.Overrides`); the quick budget is :meth:`DiscoverConfig.quick`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..config import Overrides, validate_tree
from ..errors import ConfigError
from ..groups.memory import MemoryBudget

__all__ = ["DEFAULT_PRESET", "RECIPES", "ActionConfig", "DiscoverConfig", "DiscoverOverrides", "GroupConfig",
           "MAX_THREADS", "ObjectiveConfig",
           "ProblemConfig", "TrainConfig", "VerdictConfig", "recipe", "with_overrides"]


@dataclass
class ProblemConfig:
    """Which reference target and how it is built."""

    preset: str = "sigmoid-scalar"
    target_seed: int = 0  #: seed of the target network / batch (fixed across training seeds)
    perturb_std: float | None = None  #: override the preset's μ standard deviation


@dataclass
class GroupConfig:
    """The learned matrix group: ``r`` generators of size ``s × s``."""

    size: int = 2
    generators: int = 1

    def validate(self) -> None:
        if self.size < 1 or self.generators < 1:
            raise ConfigError(f"group.size and group.generators must be ≥ 1; received {self.size}, {self.generators}.")


#: the values of ``action.coordinates``
COORDINATES = ("block", "unit-span", "compensation")


@dataclass
class ActionConfig:
    """The action network: MLP of width × depth, SiLU; its kind (``direct`` map or ``flow``)."""

    width: int = 256
    depth: int = 3
    #: what multiplies the network output: ``theta`` (s_θ) or ``field`` (β s_θ, the field
    #: magnitude: for small β, e.g. edits of pretrained weights, so that Adam's step size is
    #: relative to the motion rather than to the weights)
    out_scale: str = "theta"
    #: what divides ``θ − θ_c`` at the network input: ``mu`` (μ's perturbation std σ), ``entry``
    #: (``max(σ, β s_θ / √p)``, the per-entry RMS of a move of the field's magnitude) or ``move``
    #: (``max(σ, β s_θ)``, that move's norm: the network input moves O(1) in norm along an orbit).
    #: For a μ much narrower than the orbit (e.g. anchored at pretrained weights) the points an
    #: orbit visits are then O(1) network inputs instead of hundreds of σ away; ``move`` also keeps
    #: a flow's field nearly constant along its RK4 path
    theta_scale: str = "mu"
    #: ``direct``: the paper's ``θ + b(g, θ) − b(I, θ)``; ``flow``: the RK4 flow of learned fields
    #: along the algebra coordinates of ``g``, a group action by construction for one generator
    #: (:class:`paramsym.actions.learned.LearnedAction`)
    kind: str = "direct"
    #: RK4 steps of the flow kind (``4·flow_steps`` network evaluations per action)
    flow_steps: int = 4
    #: the coordinates the network reads and moves (:class:`paramsym.actions.learned.LearnedAction`,
    #: reduced coordinates): ``block`` (all p entries) or ``unit-span`` (an FFN boundary target only:
    #: the moving units' incoming weights and biases, and the compensators' outgoing columns moved only
    #: along the moving units' outgoing directions, :func:`paramsym.actions.ffn_unit.unit_span_basis`;
    #: the span the closed-form compensation moves in), or ``compensation`` (an FFN boundary target only:
    #: the unit span without its two trivially symmetric families — incoming moves that keep the prefix
    #: pre-activations, compensator increments in the null space of their features —,
    #: :func:`paramsym.actions.ffn_unit.compensation_span_basis`; q = 2N)
    coordinates: str = "block"

    def validate(self) -> None:
        if self.width < 1 or self.depth < 1:
            raise ConfigError(f"action.width and action.depth must be ≥ 1; received {self.width}, {self.depth}.")
        if self.kind not in ("direct", "flow"):
            raise ConfigError(f"action.kind must be 'direct' or 'flow'; received {self.kind!r}.")
        if self.flow_steps < 1:
            raise ConfigError(f"action.flow_steps must be ≥ 1 (RK4 steps of the flow kind); received {self.flow_steps}.")
        if self.out_scale not in ("theta", "field"):
            raise ConfigError(f"action.out_scale must be 'theta' or 'field'; received {self.out_scale!r}.")
        if self.coordinates not in COORDINATES:
            raise ConfigError(f"action.coordinates must be one of {list(COORDINATES)}; received {self.coordinates!r}.")
        if self.theta_scale not in ("mu", "entry", "move"):
            raise ConfigError(f"action.theta_scale must be 'mu', 'entry' or 'move'; received {self.theta_scale!r}.")


@dataclass
class ObjectiveConfig:
    """Loss weights ([Discovery] §5.1–5.2): hybrid = w L_inv + γ1 L_trans + γ2 (L_comp + w L_pres) + λ_s R_scale + λ_d R_div
    (w = ``invariance_weight``, 1 in the paper's writing; finite = w L_pres + L_comp, infinitesimal = w L_inv + γ1 L_trans)."""

    variant: Literal["hybrid", "infinitesimal", "finite"] = "hybrid"
    gamma_transport: float = 1.0
    gamma_finite: float = 1.0
    lambda_scale: float = 1.0
    lambda_div: float = 1.0
    lambda_sparse: float = 0.0
    beta: float = 0.3  #: field magnitude in units of s_θ
    #: the output scale s_F dividing L_inv and L_pres: ``mu`` (the spread of F over μ, the
    #: paper's) or ``motion`` (``γ β s_θ`` with γ the median gain ``‖D_θF(θ0) z‖ / ‖z‖`` of random
    #: directions z: the output change of a random move of the field's magnitude, so that L_inv is
    #: the squared *relative* non-invariance of the fields; :meth:`DiscoveryProblem.jacobian_gain`)
    output_scale: str = "mu"
    #: weight w of the two invariance terms (L_inv and L_pres) against all others; equivalent to
    #: dividing s_F by √w (1: the paper's objective as written)
    invariance_weight: float = 1.0
    inverse_fraction: float = 0.25  #: share of inverse pairs (g, g⁻¹) in L_comp

    def validate(self) -> None:
        if self.beta <= 0:
            raise ConfigError(f"objective.beta must be > 0; received {self.beta}.")
        if self.output_scale not in ("mu", "motion"):
            raise ConfigError(f"objective.output_scale must be 'mu' or 'motion'; received {self.output_scale!r}.")
        if not (math.isfinite(self.invariance_weight) and self.invariance_weight > 0):
            raise ConfigError(f"objective.invariance_weight must be a finite number > 0; received {self.invariance_weight}.")
        for k in ("gamma_transport", "gamma_finite", "lambda_scale", "lambda_div", "lambda_sparse"):
            if getattr(self, k) < 0:
                raise ConfigError(f"objective.{k} must be ≥ 0; received {getattr(self, k)}.")
        if not 0 <= self.inverse_fraction <= 1:
            raise ConfigError(f"objective.inverse_fraction must lie in [0, 1]; received {self.inverse_fraction}.")
        if self.variant == "hybrid" and self.gamma_finite <= 0:
            raise ConfigError("the hybrid objective needs objective.gamma_finite > 0 (use variant=infinitesimal for γ2 = 0).")


def _gib_budget(gib: Any, key: str) -> MemoryBudget:
    """The former ``train.memory_gb`` (GiB as a number) as a :class:`MemoryBudget` in bytes."""
    if isinstance(gib, bool) or not isinstance(gib, (int, float)):
        raise ConfigError(f"{key}: expected a number of GiB (the former name of train.max_memory); received {gib!r}.")
    return MemoryBudget(gib * 2**30, key)


@dataclass
class TrainConfig:
    """Optimisation (Adam, float32, clipping) and the ρ/factor curriculum.

    Curriculum: the first ``warmup_fraction`` of the steps sample one-factor products with
    radius ``warmup_rho_factor · rho``; the rest sample up to ``max_factors`` factors with radius
    ``rho``. The learning rate is constant, then cosine-decays to ``lr_final_factor · lr`` over
    the last ``decay_fraction`` of the steps.
    """

    steps: int = 5000
    lr: float = 1e-3
    lr_final_factor: float = 0.05
    decay_fraction: float = 0.6
    batch: int = 32
    clip: float = 10.0
    rho: float = 0.5
    max_factors: int = 3
    warmup_fraction: float = 0.2
    warmup_rho_factor: float = 0.5
    checkpoint_every: int = 500
    #: also checkpoint when this many seconds of wall-clock time passed since the last one (0 = off)
    checkpoint_seconds: float = 60.0
    log_every: int = 50
    #: memory budget of a run (a :class:`~paramsym.groups.memory.MemoryBudget`, bytes; ``--set
    #: train.max_memory=2GiB``): the action network with its Adam state and a step's work, and (a
    #: quarter of it) the chunks of the scale estimate; a larger run is refused with the estimate
    max_memory: MemoryBudget = MemoryBudget(8 * 2**30)

    #: former keys still read from an old run's config.json (``memory_gb``: GiB as a number)
    RENAMED: ClassVar[dict[str, tuple[str, Callable[[Any, str], Any], str]]] = {
        "memory_gb": ("max_memory", lambda gib, key: _gib_budget(gib, key),
                      "a memory size such as 8GiB, 512MiB or bytes; memory_gb was GiB as a number"),
    }

    def validate(self) -> None:
        if self.steps < 1:
            raise ConfigError(f"train.steps must be ≥ 1; received {self.steps}.")
        if self.batch < 2 or self.batch % 2:
            raise ConfigError(f"train.batch must be an even number ≥ 2 (half original, half transformed points); received {self.batch}.")
        if self.lr <= 0 or self.rho <= 0 or self.max_factors < 1:
            raise ConfigError(f"train.lr, train.rho must be > 0 and train.max_factors ≥ 1; received {self.lr}, {self.rho}, {self.max_factors}.")
        if not 0 <= self.warmup_fraction < 1 or not 0 <= self.decay_fraction <= 1:
            raise ConfigError("train.warmup_fraction must lie in [0, 1) and train.decay_fraction in [0, 1].")
        MemoryBudget(self.max_memory, "train.max_memory")  # > 0 (a MemoryBudgetError names the key)
        if self.checkpoint_every < 1 or self.log_every < 1:
            raise ConfigError("train.checkpoint_every and train.log_every must be ≥ 1.")
        if not self.checkpoint_seconds >= 0:
            raise ConfigError(f"train.checkpoint_seconds must be ≥ 0 (0 = only step-based checkpoints); "
                              f"received {self.checkpoint_seconds}.")


@dataclass
class VerdictConfig:
    """Finite-action test grid and tolerances ([Discovery] App. D.2)."""

    rhos: list[float] = field(default_factory=lambda: [0.1, 0.3, 0.5, 0.8, 1.2])
    factors: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    samples: int = 512
    curve_points: int = 32
    curve_times: int = 61
    curve_tmax: float = 0.5
    eval_seed: int = 12345

    def validate(self) -> None:
        if not self.rhos or any(r <= 0 for r in self.rhos):
            raise ConfigError(f"verdict.rhos must be a nonempty list of positive radii; received {self.rhos}.")
        if not self.factors or any(f < 1 for f in self.factors):
            raise ConfigError(f"verdict.factors must be a nonempty list of integers ≥ 1; received {self.factors}.")
        if self.samples < 20:
            raise ConfigError(f"verdict.samples must be ≥ 20 for a 95th percentile; received {self.samples}.")


@dataclass
class DiscoverConfig:
    """A complete discovery run."""

    problem: ProblemConfig = field(default_factory=ProblemConfig)
    group: GroupConfig = field(default_factory=GroupConfig)
    action: ActionConfig = field(default_factory=ActionConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    verdict: VerdictConfig = field(default_factory=VerdictConfig)
    seed: int = 0
    device: str = "cpu"
    #: CPU threads for torch; 0 = auto: one thread when the block and action network are small
    #: (intra-op parallelism then costs far more than it gains: measured 7-18× slower steps with
    #: 2 threads on the 2-core CI machine), torch's default otherwise.
    threads: int = 0

    @classmethod
    def for_preset(cls, preset: str | None = None, objective: str | None = None) -> DiscoverConfig:
        """The tuned training recipe of ``preset`` for ``objective`` (what the CLI runs).

        Args:
            preset: a reference preset (``paramsym list``); default ``sigmoid-scalar``.
            objective: ``hybrid`` (default), ``infinitesimal`` or ``finite``.

        Raises:
            ConfigError: unknown preset or objective.
        """
        preset = preset or DEFAULT_PRESET
        if preset not in RECIPES:  # RECIPES has one entry per preset of problems.PRESETS
            raise ConfigError(f"unknown preset {preset!r}; available: {sorted(RECIPES)} (see `paramsym list`).")
        if objective is not None and objective not in ("hybrid", "infinitesimal", "finite"):
            raise ConfigError(f"objective.variant: expected one of ['hybrid', 'infinitesimal', 'finite'], "
                              f"received {objective!r}.")
        cfg = recipe(preset, objective or "hybrid")
        validate_tree(cfg)
        return cfg

    @classmethod
    def quick(cls, preset: str | None = None, objective: str | None = None) -> DiscoverConfig:
        """:meth:`for_preset` on a tiny budget (300 steps, width 64, a one-radius verdict):
        seconds on a CPU, for smoke tests and examples, not for results. The one quick budget
        of the ``discovery`` kind (also the sweep's ``quick: true``)."""
        cfg = cls.for_preset(preset, objective)
        cfg = dataclasses.replace(
            cfg, train=dataclasses.replace(cfg.train, steps=300, checkpoint_every=100),
            action=dataclasses.replace(cfg.action, width=64),
            verdict=dataclasses.replace(cfg.verdict, samples=64, rhos=[0.5], factors=[1, 2], curve_points=4,
                                        curve_times=11))
        validate_tree(cfg)
        return cfg

    def validate(self) -> None:
        for key, value in (("seed", self.seed), ("problem.target_seed", self.problem.target_seed),
                           ("verdict.eval_seed", self.verdict.eval_seed)):
            if value < 0:
                raise ConfigError(f"{key} must be an integer ≥ 0 (torch.Generator seeds are unsigned); received {value}.")
        if not 0 <= self.threads <= MAX_THREADS:
            raise ConfigError(f"threads must be between 0 (auto) and {MAX_THREADS}; received {self.threads}.")
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ConfigError(f"device must be 'cpu' or 'cuda'; received {self.device!r}.")


#: Most CPU threads a configuration may ask for (torch.set_num_threads takes a C int).
MAX_THREADS = 4096

class DiscoverOverrides(Overrides):
    """Typed overrides of a :class:`DiscoverConfig` (``--set`` of ``paramsym discover``; the
    sub-run overrides of the comparison experiments): ``DiscoverOverrides({"train.lr": 3e-4})``,
    ``DiscoverOverrides.parse(["train.lr=3e-4"])``; ``.apply(cfg)``."""

    config = DiscoverConfig


def with_overrides(cfg: DiscoverConfig, overrides: Overrides | Mapping[str, Any] | Iterable[str] | None
                   ) -> DiscoverConfig:
    """``cfg`` with overrides applied and validated (:meth:`DiscoverOverrides.apply`).

    Args:
        cfg: a configuration.
        overrides: :class:`DiscoverOverrides`, ``{"train.lr": 3e-4, ...}`` or ``["train.lr=3e-4", ...]`` (as ``--set``).

    Raises:
        ConfigError: unknown key (the valid keys are listed) or a value of the wrong type.
    """
    if not overrides:
        return cfg
    return DiscoverOverrides.of(overrides).apply(cfg)


# The training recipes are pure configuration (no problem is built), so they live here and
# problems.py (which builds the problems) re-exports them: the import goes problems -> config only.
DEFAULT_PRESET = "sigmoid-scalar"

def _recipe(preset: str, variant: str, beta: float, rho: float, max_factors: int, **train: Any) -> DiscoverConfig:
    """The defaults with ``preset``, ``variant``, β and the curriculum's ρ and factor count (and ``train`` fields)."""
    return DiscoverConfig(problem=ProblemConfig(preset=preset), objective=ObjectiveConfig(variant=variant, beta=beta),
                          train=TrainConfig(rho=rho, max_factors=max_factors, **train))


def _tuned(preset: str, variant: str, beta: float, rho: float, max_factors: int, steps: int, lr: float) -> DiscoverConfig:
    """The known-answer recipes: γ_transport = 10, longer runs at a larger learning rate."""
    cfg = _recipe(preset, variant, beta, rho, max_factors, steps=steps, lr=lr)
    return dataclasses.replace(cfg, objective=dataclasses.replace(cfg.objective, gamma_transport=10.0))


#: training steps of the ``minilm-ffn-unit`` recipe (protocol v2)
MINILM_STEPS = 6000


def _minilm_recipe(preset: str, variant: str) -> DiscoverConfig:
    # The paper's protocol (issue 17): trained at the radius it is evaluated at, ρ = 0.5, at most 3
    # factors (the default warm-up: the first 20 % of the steps at ρ/2, one factor); μ anchored at
    # the real weights (AnchoredProblem, 0.9); network output in units of s_θ; λ_scale = 3.
    # objective.beta = 0.01 is only the preset's standalone value: `paramsym experiment transformer`
    # and `paramsym compensate --learned` set β per unit before training from the unit's own scales
    # (paramsym.actions.ffn_unit.motion_beta) so that the median entrywise motion reaches the
    # paper's 0.069 %.
    # Conditioning (issue 17; measured on layer 3's unit, seed 0, hybrid, 600 steps, k = 32
    # compensators): s_F is the output change of a random block move of the field's magnitude
    # (objective.output_scale = motion: L_inv is the squared relative non-invariance; with s_F
    # over the anchored μ a field of magnitude β cost ~10⁴ and collapsed to zero in 20 steps), and
    # the network reads θ in units of that move (action.theta_scale = move; with μ's σ the orbit is
    # ~40 σ per entry away from the points it was trained on): ratio random / uncompensated /
    # composition 1449 / 17.1 / 0.17 % (move) vs 994 / 11.7 / 0.24 % (entry); k = 16: 30 / 3.5 / 0.18 %.
    # Transport weight and steps (benchmarks/transformer_levers.py, layer 3's unit, seed 0): γ_transport
    # = 10, the known-answer recipes' weight, with 1500 steps (410 CPU s): ratio random / uncompensated
    # / stored composition 1669 / 19.6 / 0.043 %, against 1278 / 16.1 / 0.217 % at γ = 1 and 500
    # steps (γ = 10 at 500 steps: 902 / 10.9 / 0.113 %; γ = 30 / 100 worse). The flow action keeps
    # 500 steps (transformer_discovery.FLOW_STEPS: 4× the cost per step; protocol v3: 2000).
    # Protocol v2 (2026-12-03, fixed before the grid's runs, developed on seed 0 of layers 1, 3, 5):
    # the action moves in the unit-span coordinates (action.coordinates = unit-span: the incoming
    # weights and bias, the compensators' outgoing columns only along the unit's outgoing direction;
    # q = 417 of p = 12,673), which removes the outgoing noise orthogonal to the unit's output that
    # limited ratio uncompensated (measured: 7× the residual along it), and the invariance terms
    # weigh 10× (objective.invariance_weight = 10; 100 collapses the field). Layer 3, seed 0, 2000
    # steps: ratio random / uncompensated / stored composition / motion 1090 / 74.8 / 0.046 % /
    # 0.097 % in 63 CPU s (block coordinates, 1500 steps: 1669 / 19.6 / 0.043 % / 8.2 % in 410 s).
    # Protocol v3 (2026-12-03, fixed before the grid's runs on fresh seeds 6-8, developed on seed 0):
    # v2's grid failed the motion bar on layer 3 because its learned field spent ~99 % of its norm on
    # incoming moves orthogonal to the prefix's FFN inputs — exact, trivial symmetries of the prefix
    # that need no compensation (range fraction of the incoming part 0.06 vs 0.19 for an isotropic
    # move), so the compensators' entries, which set the median motion, barely moved. The action now
    # moves in the compensation span (action.coordinates = compensation, q = 2N = 32: incoming moves
    # that change the prefix pre-activations, compensator increments along w_j in the row space of
    # their features), where every symmetric direction is a compensation; there the β rule's
    # prediction of the median motion held (realised / predicted 0.88 on layer 3, 1.18 on layer 1,
    # seed 0), so beta_margin = 2. Without the trivial directions the field can no longer collapse
    # into them, and the invariance weight can rise: w = 100 (layer 1, seed 0, 2000 steps: ratio
    # random / uncompensated 60 / 9.1 at w = 10, 116 / 16.6 at 30, 345 / 43.3 at 100, 307 / 60.2 at
    # 300, 67 / 22.1 at 1000; 6000 steps: 825 / 101 / composition 0.030 % / motion 0.142 % at w = 100,
    # 537 / 93.1 / 0.017 % / 0.166 % at 300).
    cfg = _recipe(preset, variant, 0.01, 0.5, 3, steps=MINILM_STEPS, batch=16, lr=1e-3, checkpoint_every=500,
                  log_every=50)
    return dataclasses.replace(
        cfg, objective=dataclasses.replace(cfg.objective, gamma_transport=10.0, lambda_scale=3.0, output_scale="motion",
                                           invariance_weight=100.0),
        action=dataclasses.replace(cfg.action, theta_scale="move", coordinates="compensation"),
        verdict=VerdictConfig(samples=64, rhos=[0.5], factors=[1, 2], curve_points=4, curve_times=11))


#: Training recipe per preset: ``(preset, objective variant) -> DiscoverConfig`` (each objective
#: was tuned separately on seed 0, as in the paper's per-objective validation search; the scalar
#: sigmoid's finite objective takes lr 4e-3; see docs/results.md).
RECIPES: dict[str, Callable[[str, str], DiscoverConfig]] = {
    "linear2x2": lambda p, v: _tuned(p, v, 0.3, 0.5, 3, 15000, 2e-3),
    "relu242": lambda p, v: _tuned(p, v, 0.3, 0.5, 3, 15000, 2e-3),
    "sigmoid-scalar": lambda p, v: _tuned(p, v, 0.4, 0.8, 6, 10000, 4e-3 if v == "finite" else 2e-3),
    "sigmoid-two-input": lambda p, v: _recipe(p, v, 0.3, 0.5, 3),
    "tanh-student": lambda p, v: _recipe(p, v, 0.2, 0.5, 3),
    "gelu-student": lambda p, v: _recipe(p, v, 0.2, 0.5, 3),
    "relu2881-unit": lambda p, v: _recipe(p, v, 0.2, 0.5, 3),
    "relu2881-all": lambda p, v: _recipe(p, v, 0.2, 0.5, 3),
    "minilm-ffn-unit": _minilm_recipe,
}


def recipe(preset: str, variant: str = "hybrid") -> DiscoverConfig:
    """The training recipe of ``preset`` for objective ``variant``: a complete :class:`DiscoverConfig`
    (the defaults where the preset has no recipe)."""
    make = RECIPES.get(preset)
    if make is None:
        return DiscoverConfig(problem=ProblemConfig(preset=preset), objective=ObjectiveConfig(variant=variant))
    return make(preset, variant)
