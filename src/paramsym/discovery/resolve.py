"""Resolution of a discovery run's configuration from plain values (no argparse).

``paramsym discover`` and the comparison experiments (:mod:`paramsym.experiments.discovery.table1.run`,
:mod:`paramsym.experiments.discovery.lifting.run`, :mod:`paramsym.experiments.discovery.transformer.run`) build
their :class:`~paramsym.discovery.config.DiscoverConfig` in one order: the preset's recipe (for
the objective variant) ← the explicit values (seed, steps, device) ← typed overrides
(:class:`~paramsym.discovery.config.DiscoverOverrides`, parsed once from ``--set`` strings).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ..config import validate_tree
from .config import DiscoverConfig, DiscoverOverrides

__all__ = ["QUICK_DISCOVER_STEPS", "quick_discover_overrides", "resolve_discover_config"]

#: the quick (test, smoke-run) step budget of a discovery training run inside the objectives and
#: lifting comparisons (their ``quick()``; with :func:`quick_discover_overrides`)
QUICK_DISCOVER_STEPS = 20


def quick_discover_overrides() -> DiscoverOverrides:
    """The quick budget of a sub-run of the objectives and lifting comparisons: a narrow action
    network with a small verdict (one radius, two factor counts)."""
    return DiscoverOverrides({"action": {"width": 16},
                              "verdict": {"samples": 32, "rhos": [0.5], "factors": [1, 2], "curve_points": 2,
                                          "curve_times": 5}})


def resolve_discover_config(
    preset: str | None = None,
    objective: str | None = None,
    seed: int | None = None,
    steps: int | None = None,
    device: str | None = None,
    overrides: DiscoverOverrides | Mapping[str, Any] | Iterable[str] = (),
) -> DiscoverConfig:
    """Preset recipe (:meth:`DiscoverConfig.for_preset`) ← explicit values ← ``overrides``.

    Args:
        preset: a discovery preset (default :data:`~paramsym.discovery.problems.DEFAULT_PRESET`).
        objective: ``hybrid`` (default), ``infinitesimal`` or ``finite``; selects the recipe too.
        seed: training seed (default: the config's).
        steps: training steps (default: the recipe's).
        device: ``cpu`` or ``cuda`` (default: ``cuda`` when available, else ``cpu``).
        overrides: :class:`DiscoverOverrides` (or what :meth:`DiscoverOverrides.of` takes:
            ``key=value`` strings, a mapping), applied last (e.g. ``train.lr=3e-4``).

    Raises:
        ConfigError: unknown preset or override key, or a value of the wrong type.
    """
    overrides = DiscoverOverrides.of(overrides)
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg = DiscoverConfig.for_preset(preset, objective)
    cfg = dataclasses.replace(cfg, device=device, seed=cfg.seed if seed is None else seed,
                              train=cfg.train if steps is None else dataclasses.replace(cfg.train, steps=steps))
    validate_tree(cfg)
    return overrides.apply(cfg)
