"""One serializer of a configuration (issue 32, item 3): ``config.to_dict`` / ``config.from_dict``
(validated, ``RENAMED`` keys applied), in a run's ``config.json`` as ``to_document`` /
``from_document``, for every run kind; a bad field is a named error."""

from __future__ import annotations

import dataclasses
import json

import pytest

from paramsym.config import from_dict, from_document, to_dict, to_document
from paramsym.errors import ConfigError, ConfigFileError, RunFileError
from paramsym.runs.kinds import KINDS
from paramsym.runs.provenance import config_hash

#: fields a kind's ``quick()`` leaves for its command to fill (the kind cannot run without them)
REQUIRED = {"teleport-learned": {"action": "runs/some-discover-run"}}


def _configs():
    for name, kind in KINDS.items():
        spec = kind.load()
        if spec.config is None:  # attribution: the preset's configuration (its own records)
            continue
        yield name, spec.config, dataclasses.replace(spec.config.quick(), **REQUIRED.get(name, {}))


def _json(data):
    return json.loads(json.dumps(data, allow_nan=False))


@pytest.mark.parametrize("name", [n for n, *_ in _configs()])
def test_every_kind_round_trips_through_config_json(name: str) -> None:
    cls, cfg = next((c, v) for n, c, v in _configs() if n == name)
    doc = _json(to_document(name, cfg, {"config_hash": config_hash(cfg)}))
    assert doc["kind"] == name and doc["provenance"]["config_hash"] == config_hash(cfg)
    assert set(doc) - {"kind", "provenance"} == {f.name for f in dataclasses.fields(cls)}  # one flat shape
    back = from_document(cls, doc)
    assert type(back) is cls and back == cfg
    assert config_hash(back) == config_hash(cfg) and to_dict(back) == to_dict(cfg)


def test_every_kind_has_a_round_trip() -> None:
    managed = [n for n, k in KINDS.items() if k.load().config is not None]
    assert len(managed) == len(list(_configs())) >= 15


def test_config_hash_is_of_the_serializer_output() -> None:
    """The hash reads the same data ``config.json`` holds: a value changes it, a rebuilt equal config does not."""
    from paramsym.discovery.config import DiscoverConfig

    cfg = DiscoverConfig()
    fields = _json(to_dict(cfg))
    assert config_hash(fields) == config_hash(cfg)
    other = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, lr=cfg.train.lr * 2))
    assert config_hash(other) != config_hash(cfg)


@pytest.mark.parametrize("edit, named", [
    ({"no_such_field": 1}, "no_such_field"),
    ({"train": {"steps": "many"}}, "train.steps"),
    ({"train": {"lr": [1, 2]}}, "train.lr"),
    ({"seed": 1.5}, "seed"),
])
def test_a_bad_field_in_config_json_is_a_named_error(tmp_path, edit, named) -> None:
    """A discovery run's config.json with an unknown or mistyped field: one ConfigFileError naming the file and key."""
    from paramsym.discovery.config import DiscoverConfig
    from paramsym.discovery.files import load_config, save_config
    from paramsym.runs.rundir import RunDir

    run = RunDir(tmp_path / "run")
    save_config(run, DiscoverConfig())
    assert load_config(run) == DiscoverConfig()
    data = run.read_json("config.json")
    for key, value in edit.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    run.write_json("config.json", data)
    with pytest.raises(ConfigFileError) as err:
        load_config(run)
    msg = str(err.value)
    assert named in msg and "config.json" in msg and "\n" not in msg
    assert isinstance(err.value, ConfigError) and isinstance(err.value, RunFileError)


def test_a_renamed_key_reads_back_through_the_one_reader(tmp_path) -> None:
    """``train.memory_gb`` (the former key) in an old config.json reads as ``train.max_memory`` in GiB."""
    from paramsym.discovery.config import DiscoverConfig
    from paramsym.discovery.files import load_config
    from paramsym.runs.rundir import RunDir

    run = RunDir(tmp_path / "old")
    data = to_document("discovery", DiscoverConfig())
    data["train"].pop("max_memory")
    data["train"]["memory_gb"] = 3
    run.write_json("config.json", data)
    assert int(load_config(run).train.max_memory) == 3 * 2**30


def test_a_bad_field_in_a_managed_run_is_named_by_load_run_config(tmp_path) -> None:
    """A real managed run (``group``, no torch) whose config.json gains an unknown field with a matching
    hash (so it is not the "edited" refusal): the reader names the field."""
    from paramsym.groups.cli import DescribeConfig
    from paramsym.runs.execute import execute, load_run_config
    from paramsym.runs.rundir import RunDir

    cfg = DescribeConfig.quick()
    run = RunDir.fresh(tmp_path / "g", command="paramsym group")
    execute("group", cfg, run, progress=False)
    assert load_run_config(run) == cfg
    data = run.read_json("config.json")
    fields = {k: v for k, v in data.items() if k not in ("kind", "provenance")}
    fields["colour"] = "blue"
    data = {"kind": "group", **fields, "provenance": {**data["provenance"], "config_hash": config_hash(fields)}}
    run.write_json("config.json", data)
    with pytest.raises(ConfigFileError, match="colour"):
        load_run_config(run)
    fields.pop("colour")
    run.write_json("config.json", {"kind": "group", **fields, "provenance": data["provenance"]})
    with pytest.raises(RunFileError, match="edited"):  # the hash no longer matches the fields
        load_run_config(run)


@pytest.mark.parametrize("hashed", ["as written", "as read back"])
def test_load_run_config_reads_a_discovery_run_with_a_renamed_key(tmp_path, hashed) -> None:
    """``load_run_config`` is the reader of a discovery run too: an old ``config.json`` with ``train.memory_gb``
    whose ``config_hash`` is of the fields as the old version wrote them, or of the configuration they read
    back as, loads as ``train.max_memory``; a changed value is the "edited" refusal either way."""
    from paramsym.discovery.config import DiscoverConfig
    from paramsym.runs.execute import load_run_config
    from paramsym.runs.rundir import RunDir

    new = from_dict(DiscoverConfig, {"train": {"max_memory": 3 * 2**30}})
    data = to_document("discovery", new)
    data["train"].pop("max_memory")
    data["train"]["memory_gb"] = 3
    fields = {k: v for k, v in data.items() if k != "kind"}
    data["provenance"] = {"config_hash": config_hash(fields if hashed == "as written" else new)}
    run = RunDir(tmp_path / "old")
    run.write_json("config.json", data)
    assert load_run_config(run) == new
    data["train"]["memory_gb"] = 4
    run.write_json("config.json", data)
    with pytest.raises(RunFileError, match="edited"):
        load_run_config(run)


def test_an_attribution_config_is_typed_by_the_serializer_not_at_construction() -> None:
    """``AttributionConfig.config`` is read as its preset's config class by ``from_dict`` (the
    ``dependent_types`` hook); a raw mapping built in Python is left as given and refused by ``validate``."""
    from paramsym.experiments.attribution.annulus.run import AnnulusConfig
    from paramsym.experiments.attribution.presets import (
        AttributionConfig,
        resolve_attribution_config,
    )

    cfg = AttributionConfig("annulus-wedge", resolve_attribution_config("annulus-wedge", quick=True, seed=3))
    back = from_dict(AttributionConfig, _json(to_dict(cfg)))
    assert back == cfg and isinstance(back.config, AnnulusConfig) and back.config.seed == 3
    raw = AttributionConfig("annulus-wedge", to_dict(cfg.config))
    assert isinstance(raw.config, dict)
    with pytest.raises(ConfigError, match="preset annulus-wedge takes a AnnulusConfig as config"):
        raw.validate()
    with pytest.raises(ConfigError, match="unknown config key 'config.nosuch'"):
        from_dict(AttributionConfig, {"preset": "annulus-wedge", "config": {**to_dict(cfg.config), "nosuch": 1}})
    with pytest.raises(ConfigError, match=r"config.dt: expected a number"):
        from_dict(AttributionConfig, {"preset": "annulus-wedge", "config": {**to_dict(cfg.config), "dt": "fast"}})
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        from_dict(AttributionConfig, {"preset": "nope", "config": {}})
