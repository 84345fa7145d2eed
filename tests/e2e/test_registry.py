"""The experiments registry: every run kind and preset is listed, loads, resolves its typed
configuration from plain values, and reports dispatch through it; the command line's safety net
turns file errors into one line."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
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
    with pytest.raises(ConfigError, match=r"stage must be one of \('trainable', 'frozen'\), received 'init'"):
        resolve_attribution_config("lifting-sanity", stage="init")
    with pytest.raises(ConfigError, match="no stages"):
        resolve_attribution_config("hamiltonian", stage="init")
    with pytest.raises(ConfigError, match="no stages"):  # the key, however it is written
        resolve_attribution_config("hamiltonian", overrides=["stage=init"])
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


#: module names whose argparse is a command's own parser: the pure-math areas' commands (no torch)
COMMAND_MODULES = {"cli.py", "commands.py"}
#: functions that run in a worker process of their own and set its threads (sweep workers)
WORKER_FUNCTIONS = {"_init_worker", "_ray_trainable"}


def _attr_path(node: ast.AST) -> str:
    """``torch.cuda.manual_seed`` for the attribute chain of a call's function ('' if not names)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def library_rule_violations(source: str, relpath: str) -> list[str]:
    """What a library module does that belongs to the command line (``relpath`` below src/paramsym):
    argparse outside the ``cli`` package, a command module or a ``main()`` entry; torch thread
    settings outside ``cli`` or a worker process's own function; seeding torch's global generator
    unless inside ``with torch.random.fork_rng(...)`` (which restores it)."""
    in_cli = relpath.split("/")[0] == "cli" or relpath == "__main__.py"
    tree = ast.parse(source)
    out: list[str] = []

    def visit(node: ast.AST, functions: tuple[str, ...], forked: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if "argparse" in names and not (in_cli or relpath.rsplit("/", 1)[-1] in COMMAND_MODULES
                                            or "main" in functions):
                out.append(f"{relpath}:{node.lineno}: imports argparse (the command line's job)")
        if isinstance(node, ast.Call):
            path = _attr_path(node.func)
            if path.endswith("set_num_threads") and not (in_cli or set(functions) & WORKER_FUNCTIONS):
                out.append(f"{relpath}:{node.lineno}: sets torch's threads (the command line's job)")
            if path in ("torch.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all",
                        "torch.random.manual_seed") and not (in_cli or forked):
                out.append(f"{relpath}:{node.lineno}: seeds torch's global generator outside fork_rng")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions = (*functions, node.name)
        if isinstance(node, ast.With) and any(_attr_path(i.context_expr.func).endswith("fork_rng")
                                              for i in node.items if isinstance(i.context_expr, ast.Call)):
            forked = True
        for child in ast.iter_child_nodes(node):
            visit(child, functions, forked)

    visit(tree, (), False)
    return out


def test_library_rule_checker_catches_each_rule() -> None:
    bad = ("import argparse\nimport torch\n\ndef f():\n    torch.set_num_threads(2)\n    torch.manual_seed(0)\n"
           "    with torch.random.fork_rng(devices=[]):\n        torch.manual_seed(1)\n"
           "    torch.Generator().manual_seed(3)\n\ndef main():\n    import argparse\n"
           "\ndef _init_worker():\n    torch.set_num_threads(1)\n")
    assert library_rule_violations(bad, "sweep/x.py") == [
        "sweep/x.py:1: imports argparse (the command line's job)", "sweep/x.py:5: sets torch's threads (the command line's job)",
        "sweep/x.py:6: seeds torch's global generator outside fork_rng"]
    assert library_rule_violations(bad, "cli/x.py") == []


def test_the_library_takes_no_argparse_and_sets_no_threads_or_global_seeds() -> None:
    """Every module of src/paramsym, sub-packages at any depth included (os.walk: a module moved into
    a new package is still checked)."""
    modules = [Path(d) / f for d, _, files in os.walk(SRC) for f in files if f.endswith(".py")]
    rel = [m.relative_to(SRC).as_posix() for m in modules]
    assert any(r.count("/") >= 2 for r in rel), "the walk saw no nested sub-package"
    problems = [v for m, r in zip(modules, rel) for v in library_rule_violations(m.read_text(), r)]
    assert not problems, "\n".join(problems)
