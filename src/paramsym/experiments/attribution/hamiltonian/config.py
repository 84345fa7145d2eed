"""Configuration of the ``hamiltonian`` preset (:mod:`paramsym.experiments.attribution.hamiltonian.run`).

Every key can be overridden with ``--set section.key=value`` (e.g. ``--set train.epochs=300``);
:meth:`HamiltonianConfig.quick` is the small version behind ``--quick``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from ....attribution.flows import FLOW_MODES
from ....errors import ConfigError

__all__ = ["HamiltonianConfig", "ModelConfig", "ProbeConfig", "SweepConfig", "SystemConfig", "TrainConfig",
           "WalkConfig"]


@dataclass
class SystemConfig:
    """Ground truth and data."""

    train_alphas: tuple[float, ...] = (-1.1, -0.8, -0.6, -0.2, 0.2, 0.6, 0.8, 1.1)
    analysis_alphas: tuple[float, ...] = (-1.0, 0.0, 1.0)
    n_initial: int = 10
    num_steps: int = 30
    dt: float = 0.1
    q_radius: float = 1.0
    p_radius: float = 0.5
    n_test_initial: int = 5


@dataclass
class ModelConfig:
    width: int = 32
    depth: int = 3


@dataclass
class TrainConfig:
    epochs: int = 1500
    lr: float = 1e-3
    l1: float = 1e-5
    horizon: int = 5
    stride: int = 5
    dtype: Literal["float32", "float64"] = "float32"
    checkpoint_every: int = 250


@dataclass
class ProbeConfig:
    n_radii: int = 15
    n_angles: int = 32
    r_max: float = 1.0
    n_quadrature: int = 64
    rtol: float = 1e-3
    gauge: Literal["column", "none", "paper"] = "column"
    rotation_deg: float = 73.0
    n_error_angles: int = 40
    profile_radius: float = 0.8
    profile_angles: int = 360
    profile_alphas: tuple[float, ...] = (-1.1, 0.0, 1.1)


@dataclass
class WalkConfig:
    step: float = 0.02
    forward: int = 5
    backward: int = 3


@dataclass
class SweepConfig:
    eps_max: float = 0.2
    n: int = 21


@dataclass
class HamiltonianConfig:
    """Configuration of the ``hamiltonian`` preset (``--set section.key=value``)."""

    seed: int = 0
    system: SystemConfig = field(default_factory=SystemConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    probe: ProbeConfig = field(default_factory=ProbeConfig)
    walk: WalkConfig = field(default_factory=WalkConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    #: walk modes to run (``"resolved"``, ``"fixed"``; ``--flow``)
    flows: tuple[str, ...] = FLOW_MODES

    @classmethod
    def quick(cls) -> HamiltonianConfig:
        """A small, fast version for tests and smoke runs (two training α, 40 epochs, 4×12 probes)."""
        c = cls()
        c.system = replace(c.system, train_alphas=(-1.1, 0.6), analysis_alphas=(0.0,), n_initial=3,
                           num_steps=10, n_test_initial=2)
        c.train = replace(c.train, epochs=40, checkpoint_every=20)
        c.probe = replace(c.probe, n_radii=4, n_angles=12, n_quadrature=24, profile_angles=90,
                          profile_alphas=(-1.1,))
        c.walk = replace(c.walk, forward=2, backward=1)
        c.sweep = replace(c.sweep, n=5)
        return c

    def validate(self) -> None:
        s, w, p = self.system, self.walk, self.probe
        if not s.train_alphas:
            raise ConfigError("system.train_alphas must list at least one α.")
        if w.step <= 0 or w.forward < 1 or w.backward < 0:
            raise ConfigError(
                f"walk needs step > 0, forward ≥ 1, backward ≥ 0; received {w.step}, {w.forward}, {w.backward}."
            )
        if self.sweep.n < 2 or self.sweep.eps_max <= 0:
            raise ConfigError(f"sweep needs n ≥ 2 and eps_max > 0; received {self.sweep.n}, {self.sweep.eps_max}.")
        if not 0 < p.profile_radius <= p.r_max:
            raise ConfigError(f"probe.profile_radius must lie in (0, r_max={p.r_max}]; received {p.profile_radius}.")
        if not p.profile_alphas:
            raise ConfigError("probe.profile_alphas must list at least one α.")
        bad = [f for f in self.flows if f not in FLOW_MODES]
        if bad:
            raise ConfigError(f"flows must be among {FLOW_MODES}; received {list(self.flows)}.")
