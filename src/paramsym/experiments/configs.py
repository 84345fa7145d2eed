"""Resolution of a discovery run's configuration from plain values (no argparse).

``paramsym discover`` and the comparison experiments (:mod:`paramsym.experiments.objectives`,
:mod:`paramsym.experiments.lifting`) build their :class:`~paramsym.discovery.config.DiscoverConfig`
in one order: defaults ← the preset's recipe (for the objective variant) ← the explicit values
(objective, seed, steps, device) ← ``key=value`` overrides.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..discovery.config import DiscoverConfig, with_overrides

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
    """Defaults ← preset recipe (:meth:`DiscoverConfig.for_preset`) ← explicit values ← ``overrides``.

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
    explicit: dict[str, object] = {}
    if seed is not None:
        explicit["seed"] = seed
    if steps is not None:
        explicit["train.steps"] = steps
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    explicit["device"] = device
    cfg = with_overrides(DiscoverConfig.for_preset(preset, objective), explicit)
    return with_overrides(cfg, list(overrides))
