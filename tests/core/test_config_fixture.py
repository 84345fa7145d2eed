"""The one configuration path resolves exactly the configurations of the old paths.

``tests/fixtures/configs/resolved_configs.json`` was written by
``tests/fixtures/configs/capture_old.py`` from the code BEFORE the refactoring (dict recipes,
QUICK dicts, "k=v" string lists in the experiment configs, dict → string → YAML overrides,
teleport tuning constants in module globals). Every discovery preset × objective, every
recipe, every quick budget, the CLI's --set path, the experiments' sub-runs and the sweep's
trials must resolve to the same configuration now. One deliberate change since: the
``minilm-ffn-unit`` entries and the ``transformer`` experiment fields were regenerated for issue 17
(the paper's protocol: trained and evaluated at ρ = 0.5, β set per unit by the experiment).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paramsym.config import to_dict
from paramsym.discovery.config import DiscoverConfig, DiscoverOverrides
from paramsym.discovery.problems import PRESETS
from paramsym.experiments.configs import resolve_discover_config
from paramsym.experiments.lifting import LiftingConfig
from paramsym.experiments.objectives import ObjectivesConfig
from paramsym.experiments.sweep.trials import make_trial, trial_config
from paramsym.experiments.transformer_discovery import PRESET, TransformerDiscoveryConfig

OLD = json.loads((Path(__file__).parents[1] / "fixtures" / "configs" / "resolved_configs.json").read_text())
OBJECTIVES = [None, "hybrid", "infinitesimal", "finite"]
CLI_SETS = ["train.lr=3e-4", "verdict.rhos=[0.1,0.5]", "objective.beta=2E-1", "problem.perturb_std=0.15",
            "seed=5", "threads=2", "action.out_scale=field", "train.memory_gb=1"]


def _same(new: dict, old: dict) -> None:
    # JSON equality, types included (an int where a float was would be a different config.json)
    assert json.dumps(new, sort_keys=True) == json.dumps(old, sort_keys=True)


def test_the_fixture_covers_every_preset() -> None:
    assert {k.split("/")[0] for k in OLD["for_preset"]} == set(PRESETS)
    assert len(OLD["for_preset"]) == len(PRESETS) * len(OBJECTIVES)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_recipes_quick_budgets_and_set_resolve_as_before(preset: str, objective: str | None) -> None:
    key = f"{preset}/{objective}"
    _same(to_dict(DiscoverConfig.for_preset(preset, objective)), OLD["for_preset"][key])
    _same(to_dict(DiscoverConfig.quick(preset, objective)), OLD["quick"][key])
    _same(to_dict(resolve_discover_config(preset, objective, None, None, "cpu", DiscoverOverrides())),
          OLD["cli"][key + "/plain"])
    _same(to_dict(resolve_discover_config(preset, objective, 3, 11, "cpu", DiscoverOverrides.parse(CLI_SETS))),
          OLD["cli"][key + "/set"])


def test_default_preset_resolves_as_before() -> None:
    _same(to_dict(resolve_discover_config(None, None, None, None, "cpu")), OLD["cli"]["default/plain"])


def test_experiment_sub_runs_resolve_as_before() -> None:
    checked = 0
    for name, cfg in (("default", ObjectivesConfig()), ("quick", ObjectivesConfig.quick())):
        for v in ("hybrid", "infinitesimal", "finite"):
            for seed in (0, 1):
                _same(to_dict(resolve_discover_config(cfg.preset, v, seed, cfg.steps, "cpu", cfg.overrides)),
                      OLD["experiments"][f"objectives/{name}/{v}/{seed}"])
                checked += 1
    for name, cfg in (("default", LiftingConfig()), ("quick", LiftingConfig.quick())):
        for p in ("relu2881-unit", "relu2881-all"):
            for seed in (0, 1):
                _same(to_dict(resolve_discover_config(p, None, seed, cfg.steps, "cpu", cfg.overrides)),
                      OLD["experiments"][f"lifting/{name}/{p}/{seed}"])
                checked += 1
    for name, cfg in (("default", TransformerDiscoveryConfig()), ("quick", TransformerDiscoveryConfig.quick())):
        for v in ("hybrid", "finite"):
            for seed in (0, 1):
                _same(to_dict(resolve_discover_config(PRESET, v, seed, cfg.steps, "cpu", cfg.overrides)),
                      OLD["experiments"][f"transformer/{name}/{v}/{seed}"])
                checked += 1
    for name, cfg in (("objectives", ObjectivesConfig()), ("objectives-quick", ObjectivesConfig.quick()),
                      ("lifting", LiftingConfig()), ("lifting-quick", LiftingConfig.quick()),
                      ("transformer", TransformerDiscoveryConfig()),
                      ("transformer-quick", TransformerDiscoveryConfig.quick())):
        d = to_dict(cfg)
        d.pop("overrides")
        _same(d, OLD["experiments"][f"fields/{name}"])
        checked += 1
    assert checked == len(OLD["experiments"])


def test_sweep_trials_resolve_as_before() -> None:
    for quick in (False, True):
        for v in ("hybrid", "finite"):
            t = make_trial(preset="sigmoid-two-input", variant=v, base={"action.width": 32},
                           point={"train.lr": 3e-3, "objective.beta": 0.25}, seed=7, steps=40, quick=quick,
                           device="cpu", figures=False, stage="candidates")
            _same(to_dict(trial_config(t)), OLD["sweep"][f"{v}/quick={quick}"])


def test_teleport_tuning_values_are_the_old_module_constants() -> None:
    from paramsym.experiments.teleport_presets import DEFAULT_STEPS, TeleportConfig

    old = OLD["teleport"]
    for preset in ("regression-mlp", "digits-mlp"):
        cfg = TeleportConfig(preset).validate()
        assert cfg.lr == old["LR"] and cfg.targets == old["TARGETS"] and cfg.every_per_optimizer == old["EVERY"]
        assert DEFAULT_STEPS[preset] == old["STEPS"][preset]
        assert (cfg.lookahead_lr, cfg.lookahead_steps, cfg.teleport_batch) == \
            (old["LOOKAHEAD_LR"], old["LOOKAHEAD_STEPS"], old["TELEPORT_BATCH"])
        assert (cfg.ascent_steps, cfg.regression_ascent_steps) == (old["ASCENT_STEPS"], old["REGRESSION_ASCENT_STEPS"])
        assert (cfg.radius, cfg.max_factor, cfg.norm_penalty) == (old["RADIUS"], old["MAX_FACTOR"], old["NORM_PENALTY"])
    assert not hasattr(TeleportConfig("booth"), "extra")


def test_every_preset_has_exactly_one_recipe():
    """``DiscoverConfig.for_preset`` checks names against the recipes (config.py), the problems
    are built from ``PRESETS`` (problems.py): the two registries must name the same presets."""
    from paramsym.discovery.config import DEFAULT_PRESET, RECIPES

    assert set(RECIPES) == set(PRESETS)
    assert DEFAULT_PRESET in PRESETS
