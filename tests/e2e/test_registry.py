"""The experiments registry: every run kind and preset is listed, loads, resolves its typed
configuration from plain values, and reports dispatch through it; the command line's safety net
turns file errors into one line."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from paramsym.cli import main
from paramsym.discovery.problems import DEFAULT_PRESET
from paramsym.discovery.problems import PRESETS as DISCOVERY_PRESETS
from paramsym.discovery.resolve import resolve_discover_config
from paramsym.errors import ConfigError, RunDirError
from paramsym.experiments.attribution.presets import ATTRIBUTION_PRESETS, resolve_attribution_config
from paramsym.runs.kinds import KINDS, get_kind
from paramsym.runs.reports import regenerate
from paramsym.runs.rundir import RunDir

SRC = Path(__file__).resolve().parents[2] / "src" / "paramsym"


def test_list_json_covers_every_preset_with_its_kind() -> None:
    out = subprocess.run([sys.executable, "-m", "paramsym.cli", "list", "--json"], capture_output=True, text=True,
                         check=True, timeout=300)
    rows = json.loads(out.stdout)
    got = {(r["name"], r["kind"]) for r in rows}
    from paramsym.census.presets import PRESETS as CENSUS_PRESETS
    from paramsym.exact.presets import AFFINE_PRESETS
    from paramsym.kinds.align_presets import PRESETS as ALIGN_PRESETS
    from paramsym.kinds.compensate import MODELS
    from paramsym.kinds.math import MATH_PRESETS
    from paramsym.kinds.teleport_presets import PRESETS as TELEPORT_PRESETS

    want = ({(n, "discovery") for n in DISCOVERY_PRESETS} | {(n, "attribution") for n in ATTRIBUTION_PRESETS}
            | {(n, "affine") for n in AFFINE_PRESETS} | {(n, "census") for n in CENSUS_PRESETS}
            | {(n, "compensate") for n in MODELS} | {(n, "teleport") for n in TELEPORT_PRESETS}
            | {(n, "align") for n in ALIGN_PRESETS} | {(p.name, p.kind) for p in MATH_PRESETS.values()})
    assert got == want
    # every command that takes --preset/--model NAME is covered, and the pure-math commands' cases, in one vocabulary
    assert {r["kind"] for r in rows} == {"discovery", "attribution", "affine", "census", "compensate", "teleport",
                                         "align", "group", "attention", "attention-count", "attention-clusterings"}
    assert all(set(r) >= {"name", "kind", "summary", "default", "stages", "command"} for r in rows)
    named = [r for r in rows if r["kind"] not in ("group", "attention", "attention-count", "attention-clusterings")]
    assert all(r["command"].split()[1] in ("discover", "attribute", "affine", "census", "compensate", "teleport",
                                           "align") and r["name"] in r["command"] for r in named)
    assert all(r["command"].split()[1] in ("group", "attention") for r in rows if r not in named)
    assert [r["name"] for r in rows if r["default"]] == [DEFAULT_PRESET]
    for r in rows:
        assert r["summary"] and r["command"].startswith("paramsym ")
    assert {r["name"]: r["stages"] for r in rows}["annulus-wedge"] == ["trained", "init"]


def test_list_text_covers_every_preset(capsys) -> None:
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert "discovery presets" in text and "attribution presets" in text and "census presets" in text
    from paramsym.exact.presets import AFFINE_PRESETS

    for name in [*DISCOVERY_PRESETS, *ATTRIBUTION_PRESETS, *AFFINE_PRESETS]:
        assert f"  {name} " in text, name


def test_every_kind_and_preset_loads_with_a_typed_quick_config() -> None:
    assert {"discovery", "discovery-objectives", "discovery-lifting", "transformer-discovery", "attribution",
            "attention", "census", "affine", "compensate"} <= set(KINDS)
    for kind in KINDS.values():
        spec = kind.load()
        assert callable(spec.render)
        if spec.config is not None:
            assert dataclasses.is_dataclass(spec.config) and callable(spec.run)
    for name in KINDS:  # every kind runs through execute (the one run verb) and takes --resume
        cfg_cls = KINDS[name].load().config
        assert isinstance(cfg_cls.quick(), cfg_cls) and KINDS[name].load().managed and KINDS[name].resumable
    for name in ("discovery-objectives", "discovery-lifting", "transformer-discovery"):
        cfg_cls = KINDS[name].load().config
        quick, full = cfg_cls.quick(), cfg_cls()
        assert isinstance(quick, cfg_cls) and quick.steps is not None and full.steps is None
    for name, preset in ATTRIBUTION_PRESETS.items():
        spec = preset.load()
        assert isinstance(spec.config.quick(), spec.config) and callable(spec.run)
        cfg = resolve_attribution_config(name, quick=True)
        for key, value in preset.fields.items():
            assert getattr(cfg, key) == value
        if preset.stages:
            assert cfg.stage == preset.stages[0]


def test_attribution_config_resolution_order() -> None:
    # quick() ← entry fields ← stage/seed/flows ← overrides
    cfg = resolve_attribution_config("annulus-full", stage="init", seed=7, quick=True, flows=["fixed", "fixed"],
                                     overrides=["dt=0.01"])
    assert (cfg.data, cfg.stage, cfg.seed, cfg.flows, cfg.dt, cfg.epochs) == ("full", "init", 7, ("fixed",), 0.01, 60)
    assert resolve_attribution_config("annulus-wedge").epochs == 200
    ham = resolve_attribution_config("hamiltonian", quick=True, overrides=["train.epochs=5"])
    assert ham.train.epochs == 5 and ham.system.train_alphas == (-1.1, 0.6)
    with pytest.raises(ConfigError, match="valid presets"):
        resolve_attribution_config("nope")
    with pytest.raises(ConfigError, match="not a stage"):
        resolve_attribution_config("lifting-sanity", stage="init")
    with pytest.raises(ConfigError, match="no stages"):
        resolve_attribution_config("hamiltonian", stage="init")
    with pytest.raises(ConfigError, match="unknown config key"):
        resolve_attribution_config("lifting-sanity", overrides=["nosuchkey=1"])


def test_discover_config_from_plain_values() -> None:
    cfg = resolve_discover_config("relu242", "finite", seed=3, steps=11, device="cpu", overrides=["train.lr=1e-4"])
    assert (cfg.problem.preset, cfg.objective.variant, cfg.seed, cfg.train.steps, cfg.device) == (
        "relu242", "finite", 3, 11, "cpu")
    assert cfg.train.lr == 1e-4
    assert resolve_discover_config(device="cpu").problem.preset == DEFAULT_PRESET
    with pytest.raises(ConfigError, match="unknown preset"):
        resolve_discover_config("nope")


def test_report_dispatch_names_bad_run_directories(tmp_path: Path, capsys) -> None:
    run = RunDir(tmp_path / "r")
    run.write_json("config.json", {"kind": "no-such-kind"})
    with pytest.raises(RunDirError, match="known kinds"):
        regenerate(run)
    run.write_json("config.json", {"kind": "discovery"})
    with pytest.raises(RunDirError, match="did not finish"):
        regenerate(run)
    (tmp_path / "r" / "config.json").write_text("{truncated")
    assert main(["report", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("paramsym report: error: RunFileError: ") and "config.json" in err
    assert len(err.strip().splitlines()) == 1
    assert get_kind("attribution").command == "paramsym attribute"


@pytest.mark.parametrize("exc, name, needle", [
    (FileNotFoundError(2, "No such file or directory", "/nowhere/x.json"), "FileNotFoundError", "/nowhere/x.json"),
    (json.JSONDecodeError("Expecting value", "{", 1), "JSONDecodeError", "delete it and rerun"),
    (None, "SafetensorError", "corrupt or truncated"),
])
def test_safety_net_prints_one_line(monkeypatch, capsys, exc, name, needle) -> None:
    import paramsym.cli.discover as discover

    if exc is None:
        from safetensors import SafetensorError

        exc = SafetensorError("Error while deserializing header: HeaderTooLarge")

    def boom(args):
        raise exc

    monkeypatch.setattr(discover, "cmd_report", boom)
    assert main(["report", "anything"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"paramsym report: error: {name}: ") and needle in err


def test_experiments_take_no_argparse_and_the_library_sets_no_threads() -> None:
    for path in sorted((SRC / "experiments").glob("*.py")):
        text = path.read_text()
        assert not re.search(r"^\s*(import argparse|from argparse)", text, re.M) and "Namespace" not in text, path
    for area in ("experiments", "attribution"):
        for path in sorted((SRC / area).glob("*.py")):
            text = path.read_text()
            assert "set_num_threads" not in text and "manual_seed_all" not in text, path
            assert "torch.manual_seed(" not in text, path
