"""Typed overrides (``paramsym.config.Overrides``): parsed once, applied by replacement, saved and read back."""

from __future__ import annotations

import pytest

from paramsym.config import from_dict, to_dict
from paramsym.discovery.config import DiscoverConfig, DiscoverOverrides
from paramsym.errors import ConfigError
from paramsym.experiments.discovery.table1.run import ObjectivesConfig


def test_set_strings_are_parsed_once_into_the_fields_types() -> None:
    o = DiscoverOverrides.parse(["train.lr=3e-4", "verdict.rhos=[0.1,0.5]", "train.steps=7", "problem.perturb_std=null",
                                 "device=cpu", "train.steps=9"])
    assert dict(o) == {"train.lr": 3e-4, "verdict.rhos": [0.1, 0.5], "train.steps": 9, "problem.perturb_std": None,
                       "device": "cpu"}
    assert type(o["train.lr"]) is float and type(o["train.steps"]) is int
    # nested and dotted mappings are the same overrides; an int where a float is declared becomes a float
    assert DiscoverOverrides({"train": {"lr": 1}}) == DiscoverOverrides({"train.lr": 1.0})
    assert type(DiscoverOverrides({"train": {"lr": 1}})["train.lr"]) is float


def test_apply_replaces_without_touching_the_original() -> None:
    base = DiscoverConfig.for_preset("linear2x2")
    new = DiscoverOverrides({"train.lr": 3e-4, "verdict.rhos": [0.2]}).apply(base)
    assert new.train.lr == 3e-4 and new.verdict.rhos == [0.2] and new.train.steps == base.train.steps == 15000
    assert base.train.lr == 2e-3 and base.verdict.rhos == [0.1, 0.3, 0.5, 0.8, 1.2]
    merged = DiscoverOverrides({"train.lr": 1e-3, "seed": 2}) | ["train.lr=5e-4"]
    assert dict(merged) == {"train.lr": 5e-4, "seed": 2}


@pytest.mark.parametrize("items, match", [
    (["train.lrr=1"], "unknown config key 'train.lrr'"),
    (["lr=1"], r"Did you mean \['train.lr'\]"),
    (["train.lr"], "--set expects key=value"),
    (["train.steps=1.5"], "expected an integer"),
    (["objective.variant=exact"], "expected one of"),
    (["train.lr=nan"], "expected a number"),
    (["train.lr=.inf"], "expected a finite number"),
])
def test_bad_overrides_are_refused_when_parsed(items, match) -> None:
    with pytest.raises(ConfigError, match=match):
        DiscoverOverrides.parse(items)


def test_validation_runs_on_apply() -> None:
    with pytest.raises(ConfigError, match="train.batch must be an even number"):
        DiscoverOverrides.parse(["train.batch=3"]).apply(DiscoverConfig())
    with pytest.raises(ConfigError, match="cannot apply"):
        DiscoverOverrides().apply(ObjectivesConfig())


def test_experiment_overrides_round_trip_and_read_the_older_string_lists() -> None:
    cfg = from_dict(ObjectivesConfig, {"overrides": ["train.lr=3e-4", "verdict.factors=[1,2]"]})  # typed once
    assert isinstance(cfg.overrides, DiscoverOverrides)
    assert cfg == ObjectivesConfig(overrides=DiscoverOverrides.parse(["train.lr=3e-4", "verdict.factors=[1,2]"]))
    saved = to_dict(cfg)
    assert saved["overrides"] == {"train.lr": 3e-4, "verdict.factors": [1, 2]}
    assert from_dict(ObjectivesConfig, saved) == cfg
    old = {**saved, "overrides": ["train.lr=3e-4", "verdict.factors=[1,2]"]}  # a config.json written before
    assert from_dict(ObjectivesConfig, old) == cfg
    with pytest.raises(ConfigError, match="unknown config key"):
        from_dict(ObjectivesConfig, {**saved, "overrides": {"train.nope": 1}})
    with pytest.raises(ConfigError, match="train.lr: expected a number"):
        from_dict(ObjectivesConfig, {**saved, "overrides": ["train.lr=fast"]})


@pytest.mark.parametrize("config", ["objectives", "lifting", "transformer"])
def test_untyped_experiment_overrides_are_a_named_error_not_coerced(config: str) -> None:
    """No coercion at construction: raw strings built in Python are refused by ``validate`` (before any run
    directory is written), naming the field and how to type them; the serializer types them once."""
    from paramsym.experiments.discovery.lifting.run import LiftingConfig
    from paramsym.experiments.discovery.transformer.run import TransformerDiscoveryConfig

    cls = {"objectives": ObjectivesConfig, "lifting": LiftingConfig, "transformer": TransformerDiscoveryConfig}[config]
    raw = cls(overrides=["train.lr=3e-4"])
    assert raw.overrides == ["train.lr=3e-4"]  # left as given
    with pytest.raises(ConfigError, match=r"overrides must be DiscoverOverrides .*DiscoverOverrides.parse.*list"):
        raw.validate()
    typed = from_dict(cls, {"overrides": ["train.lr=3e-4"]})
    assert typed.overrides == DiscoverOverrides({"train.lr": 3e-4}) and typed == cls(
        overrides=DiscoverOverrides.parse(["train.lr=3e-4"]))
    typed.validate()


def test_a_mapping_under_a_dict_field_is_its_value() -> None:
    from paramsym.config import Overrides
    from paramsym.kinds.teleport_presets import TeleportConfig

    o = Overrides({"lr": {"sgd": 0.2, "adam": 1e-3}, "radius": 3}, config=TeleportConfig)
    cfg = o.apply(TeleportConfig("digits-mlp"))
    assert cfg.lr == {"sgd": 0.2, "adam": 1e-3} and cfg.radius == 3.0 and type(cfg.radius) is float
