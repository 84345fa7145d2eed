"""Resolution of a discovery run's configuration from plain values (no argparse).

``paramsym discover`` and the comparison experiments (:mod:`paramsym.experiments.objectives`,
:mod:`paramsym.experiments.lifting`) build their :class:`~paramsym.discovery.config.DiscoverConfig`
in one order: defaults ← the preset's recipe (for the objective variant) ← the explicit values
(objective, seed, steps, device) ← ``key=value`` overrides.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..config import apply_overrides
from ..discovery.config import DiscoverConfig
from ..discovery.problems import DEFAULT_PRESET, PRESETS, recipe
from ..errors import ConfigError

__all__ = ["QUICK_DISCOVER_OVERRIDES", "QUICK_DISCOVER_STEPS", "resolve_discover_config"]

#: the quick (test, smoke-run) budget of a discovery training run inside an experiment: steps,
#: and a narrow action network with a small verdict (one radius, two factor counts)
QUICK_DISCOVER_STEPS = 20
QUICK_DISCOVER_OVERRIDES = ("action.width=16", "verdict.samples=32", "verdict.rhos=[0.5]", "verdict.factors=[1,2]",
                            "verdict.curve_points=2", "verdict.curve_times=5")


def resolve_discover_config(
    preset: str | None = None,
    objective: str | None = None,
    seed: int | None = None,
    steps: int | None = None,
    device: str | None = None,
    overrides: Iterable[str] = (),
) -> DiscoverConfig:
    """Defaults ← preset recipe ← explicit values ← ``overrides``.

    Args:
        preset: a discovery preset (default :data:`~paramsym.discovery.problems.DEFAULT_PRESET`).
        objective: ``hybrid`` (default), ``infinitesimal`` or ``finite``; selects the recipe too.
        seed: training seed (default: the config's).
        steps: training steps (default: the recipe's).
        device: ``cpu`` or ``cuda`` (default: ``cuda`` when available, else ``cpu``).
        overrides: ``key=value`` strings applied last (e.g. ``train.lr=3e-4``).

    Raises:
        ConfigError: unknown preset or override key, or a value of the wrong type.
    """
    preset = preset or DEFAULT_PRESET
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; available: {sorted(PRESETS)} (see `paramsym list`).")
    items = [f"problem.preset={preset}"] + [f"{k}={v}" for k, v in recipe(preset, objective or "hybrid").items()]
    if objective:
        items.append(f"objective.variant={objective}")
    if seed is not None:
        items.append(f"seed={seed}")
    if steps is not None:
        items.append(f"train.steps={steps}")
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    items.append(f"device={device}")
    cfg = apply_overrides(DiscoverConfig(), items)
    return apply_overrides(cfg, list(overrides))
