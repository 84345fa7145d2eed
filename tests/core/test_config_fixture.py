"""The one configuration path resolves exactly the configurations of the old paths.

``tests/fixtures/configs/resolved_configs.json`` was written by
``tests/fixtures/configs/capture_old.py`` from the code BEFORE the refactoring (dict recipes,
QUICK dicts, "k=v" string lists in the experiment configs, dict → string → YAML overrides,
teleport tuning constants in module globals). Every discovery preset × objective, every
recipe, every quick budget, the CLI's --set path, the experiments' sub-runs and the sweep's
trials must resolve to the same configuration now. One deliberate change since: the
``minilm-ffn-unit`` entries and the ``transformer`` experiment fields were regenerated for issue 17
(the paper's protocol: trained and evaluated at ρ = 0.5, β set per unit by the experiment), and
the lifting experiment's default radii became the paper's test grid (issue 17, item 5).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paramsym.config import to_dict
from paramsym.discovery.config import DiscoverConfig, DiscoverOverrides
from paramsym.discovery.problems import PRESETS
from paramsym.discovery.resolve import resolve_discover_config
from paramsym.experiments.discovery.lifting.run import LiftingConfig
from paramsym.experiments.discovery.table1.run import ObjectivesConfig
from paramsym.experiments.discovery.transformer.run import PRESET, TransformerDiscoveryConfig
from paramsym.sweep.trials import make_trial, trial_config

OLD = json.loads((Path(__file__).parents[1] / "fixtures" / "configs" / "resolved_configs.json").read_text())
OBJECTIVES = [None, "hybrid", "infinitesimal", "finite"]
# the fixture's "train.memory_gb=1" (GiB as a number) is today's "train.max_memory=1GiB" (a MemoryBudget)
CLI_SETS = ["train.lr=3e-4", "verdict.rhos=[0.1,0.5]", "objective.beta=2E-1", "problem.perturb_std=0.15",
            "seed=5", "threads=2", "action.out_scale=field", "train.max_memory=1GiB"]


def _renamed(old: dict) -> dict:
    """The old configuration with ``train.memory_gb`` (GiB, a float) written as today's
    ``train.max_memory`` (bytes, an integer): the one rename since the fixture was captured."""
    old = json.loads(json.dumps(old))
    if "memory_gb" in old.get("train", {}):
        old["train"]["max_memory"] = int(old["train"].pop("memory_gb") * 2**30)
    return old


#: keys added after the capture, with the defaults that keep the old behaviour (issue 17: the
#: flow kind of LearnedAction, the network's input scale, the output scale s_F, the reduced
#: coordinates and the invariance weight); a resolved
#: configuration must hold exactly these values
ADDED = {("action", "kind"): "direct", ("action", "flow_steps"): 4, ("action", "theta_scale"): "mu",
         ("objective", "output_scale"): "mu", ("action", "coordinates"): "block", ("objective", "invariance_weight"): 1.0}


#: the deliberate retuning of the ``minilm-ffn-unit`` recipe (issue 17's conditioning): its values of the
#: added keys, and ``(captured, today)`` of the fields it changed
MINILM_RECIPE = {("action", "theta_scale"): "move", ("objective", "output_scale"): "motion",
                 ("action", "coordinates"): "compensation", ("objective", "invariance_weight"): 100.0}
MINILM_RETUNED = {("train", "steps"): (3000, 6000), ("objective", "gamma_transport"): (1.0, 10.0)}
#: fields added to the transformer experiment's configuration (issue 17: several units), with their defaults
TRANSFORMER_ADDED = {"units": [[3, None]], "compensators": 32, "tokens": 16, "flow_seeds": None, "beta_rule": "median"}
#: the transformer experiment's deliberate retuning: ``(captured, today)`` (protocol v3's β margin)
TRANSFORMER_RETUNED = {"beta_margin": (4.0, 2.0)}
#: the lifting experiment's default radii: (captured, today) — today the paper's test grid (App. D.2)
LIFTING_RHOS = ([0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.2], [0.1, 0.3, 0.5, 0.8, 1.2])


def _without_added(cfg: dict, recipe: bool = True) -> dict:
    cfg = json.loads(json.dumps(cfg))
    if isinstance(cfg.get("action"), dict):  # a DiscoverConfig (not a sweep/teleport record)
        minilm = recipe and cfg["problem"]["preset"] == "minilm-ffn-unit"
        for (section, key), default in ADDED.items():
            want = MINILM_RECIPE.get((section, key), default) if minilm else default
            assert cfg[section].pop(key) == want, (section, key)
        for (section, key), (captured, today) in MINILM_RETUNED.items() if minilm else ():
            if cfg[section][key] == today:
                cfg[section][key] = captured
    elif "units" in cfg and "motion_target" in cfg:  # the transformer experiment's fields
        for key, default in TRANSFORMER_ADDED.items():
            assert cfg.pop(key) == default, key
        for key, (captured, today) in TRANSFORMER_RETUNED.items():
            if cfg.get(key) == today:
                cfg[key] = captured
    return cfg


def _same(new: dict, old: dict, recipe: bool = True) -> None:
    """``recipe=False``: ``new`` was read from the old ``config.json`` (today's defaults fill the added keys)."""
    # JSON equality, types included (an int where a float was would be a different config.json)
    assert json.dumps(_without_added(new, recipe), sort_keys=True) == json.dumps(_renamed(old), sort_keys=True)


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


def test_old_config_json_with_memory_gb_reads_as_today_s_configuration() -> None:
    """Every configuration of the fixture, as an old run's config.json stored it (``memory_gb``),
    loads (``from_dict``, what ``discovery.files.load_config`` and ``--resume`` use) into the
    configuration whose JSON is the independently renamed one; ``--set train.memory_gb`` is refused
    naming the new key."""
    from paramsym.config import from_dict
    from paramsym.errors import ConfigError

    olds = [*OLD["for_preset"].values(), *OLD["quick"].values(), *OLD["cli"].values()]
    assert any(o["train"]["memory_gb"] == 1.0 for o in olds) and any(o["train"]["memory_gb"] == 8.0 for o in olds)
    for old in olds:
        _same(to_dict(from_dict(DiscoverConfig, old)), old, recipe=False)
    with pytest.raises(ConfigError, match=r"'train.memory_gb' is the former name of 'train.max_memory'"):
        DiscoverOverrides.parse(["train.memory_gb=1"])
    both = _renamed(olds[0])
    both["train"]["memory_gb"] = 1.0
    with pytest.raises(ConfigError, match="both given"):
        from_dict(DiscoverConfig, both)


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
        if name.startswith("lifting"):
            assert d.pop("unit_beta") is None  # added (issue 17, item 5): None keeps the recipe's β
        if name.startswith("transformer"):  # added (issue 33): no held-out draw by default
            assert (d.pop("held_out"), d.pop("draw_seed"), d.pop("held_out_variants")) == (0, 0, ["hybrid", "finite"])
        if name == "lifting":
            assert d["rhos"] == LIFTING_RHOS[1]
            d["rhos"] = LIFTING_RHOS[0]
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
    from paramsym.kinds.teleport_presets import DEFAULT_STEPS, TeleportConfig

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
