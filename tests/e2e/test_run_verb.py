"""One run verb, walked from the real command-line parser (issue 32, item 2).

Every leaf command of :func:`paramsym.cli.build_parser` is either a computing command, run here at
its quick budget into ``--out``, or named in :data:`NOT_RUNS` with the reason (a command added
later fails :func:`test_every_command_is_classified` until it is one or the other). For each
computing command the run directory holds ``config.json`` (``{"kind", <fields>, "provenance"}``
with ``code_version`` and ``config_hash``, the hash of the typed configuration read back),
``metrics.json``, ``env.json`` and ``report.md``; ``paramsym report`` renders it; and the run,
interrupted, continues with ``--resume DIR`` to the same ``metrics.json``, byte for byte.

The interruption: ``discover`` (the kind that keeps a training checkpoint, and the sub-runs of the
``experiment`` kinds) is killed for real — SIGKILL of a CLI subprocess at its first checkpoint;
every other kind is interrupted by removing ``metrics.json`` and ``report.md`` of a finished run
(what a kill after the kind's own files and before ``execute`` wrote its metrics leaves behind:
their checkpoints are tested where they are, e.g. ``tests/teleport/test_teleport_kind.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_checks import cli_argv, cli_env, kill_at_checkpoint

from paramsym.cli import build_parser, main
from paramsym.runs.kinds import KINDS

TINY_SWEEP = str(Path(__file__).resolve().parents[2] / "examples" / "sweeps" / "tiny.yaml")
DISCOVER = ["discover", "--preset", "sigmoid-scalar", "--steps", "40", "--set", "train.checkpoint_every=10",
            "--set", "action.width=16", "--set", "verdict.samples=32", "--set", "verdict.rhos=[0.5]",
            "--set", "verdict.factors=[1,2]", "--set", "verdict.curve_points=2", "--set", "verdict.curve_times=5"]

#: computing command → (run kind, its quick argv; LAYER, CACHE, ACTION, HF_A and HF_B are filled in by the fixture)
RUNS: dict[str, tuple[str, list[str]]] = {
    "discover": ("discovery", DISCOVER),
    "experiment objectives": ("discovery-objectives", ["experiment", "objectives", "--quick"]),
    "experiment lifting": ("discovery-lifting", ["experiment", "lifting", "--quick"]),
    "experiment transformer": ("transformer-discovery", ["experiment", "transformer", "--quick"]),
    "attribute": ("attribution", ["attribute", "--preset", "lifting-sanity", "--quick"]),
    "affine": ("affine", ["affine", "--preset", "linear2x2"]),
    "census": ("census", ["census", "--preset", "mlp-relu"]),
    "census --export": ("census-export", ["census", "--model", "HF_A", "--export", "permutation-spec"]),
    "census --export --without-weights": ("census-export", ["census", "--model", "HF_A", "--export",
                                                            "permutation-spec", "--without-weights"]),
    "compensate": ("compensate", ["compensate", "--model", "llama-tiny", "--layer", "1", "--unit", "3", "--tokens",
                                  "8"]),
    "teleport": ("teleport", ["teleport", "--preset", "regression-mlp", "--seeds", "0", "--steps", "12"]),
    "teleport --action": ("teleport-learned", ["teleport", "--action", "ACTION"]),
    "align": ("align", ["align", "--preset", "digits-mlp", "--width", "4", "--points", "3", "--cache-dir", "CACHE"]),
    "align --census-groups": ("align-census", ["align", "HF_A", "HF_B", "--census-groups"]),
    "align --stream": ("align-stream", ["align", "HF_A", "HF_B", "--stream", "--merge", "0.5"]),
    "sweep": ("sweep", ["sweep", TINY_SWEEP]),
    "group": ("group", ["group", "S3", "--rep", "perm"]),
    "attention table": ("attention", ["attention", "table", "--group", "C4", "--copies", "1..3", "--heads", "2"]),
    "attention count": ("attention-count", ["attention", "count", "--group", "D4", "--copies", "3", "--heads", "8"]),
    "attention clusterings": ("attention-clusterings", ["attention", "clusterings", "--group", "C6", "--heads", "3",
                                                        "--limit", "2"]),
    "attention classify": ("attention-classify", ["attention", "classify", "LAYER", "--group", "D4"]),
    "attention build": ("attention-build", ["attention", "build", "--group", "D4", "--heads", "3", "--index", "2"]),
}
#: the file a run writes besides the run verb's four (its ``sha256`` is in its metrics)
ARTIFACTS = {"census --export": "permutation_spec.json", "census --export --without-weights": "permutation_spec.json",
             "attention build": "layer.safetensors"}
#: slower than the default selection allows (MiniLM-L6's FFN units: ≈ 40 s)
SLOW = {"experiment transformer"}

#: leaf commands that compute no run, and why
NOT_RUNS = {
    "list": "reads the preset tables only",
    "report": "re-renders an existing run directory",
    "reproduce": "an orchestrator: each of its rows is a sub-run that is a run directory of a kind above, with its "
                 "own provenance record (docs/DESIGN.md)",
}


def _leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The sub-command paths of ``parser`` (``("attention", "count")``, ...)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [prefix]
    return [leaf for a in subs for name, p in a.choices.items() for leaf in _leaves(p, (*prefix, name))]


def test_every_command_is_classified() -> None:
    """Each leaf command of the real parser is a run (with ``--out`` and ``--resume DIR``) or named in NOT_RUNS."""
    parser = build_parser()
    leaves = {" ".join(leaf) for leaf in _leaves(parser)}
    runs = {name.split(" --")[0] for name in RUNS}
    assert leaves == runs | set(NOT_RUNS), (leaves ^ (runs | set(NOT_RUNS)))
    assert {kind for kind, _ in RUNS.values()} == set(KINDS)  # every registered kind is made by a command here
    for name in runs:
        sub = parser
        for word in name.split():
            sub = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
        flags = {o: a for a in sub._actions for o in a.option_strings}
        assert "--out" in flags and "--resume" in flags, name
        assert flags["--resume"].nargs is None and flags["--resume"].metavar == "DIR", name  # --resume DIR, one form


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    """What some commands read: an equivariant layer (``attention classify``), a model cache
    (``align``), a finished discovery run (``teleport --action``), two tiny GPT-2 checkpoints
    (``align --census-groups``, ``align --stream``)."""
    from paramsym.census.zoo import tiny_model

    root = tmp_path_factory.mktemp("inputs")
    for seed, name in enumerate("AB"):
        tiny_model("gpt2", seed=seed, causal_lm=True).save_pretrained(root / name)
    layer = root / "layer" / "layer.safetensors"
    assert main(["attention", "build", "--group", "D4", "--heads", "3", "--index", "2", "--quiet", "--out",
                 str(layer.parent)]) == 0
    action = root / "action"
    assert main([*DISCOVER, "--quiet", "--out", str(action)]) == 0
    return {"LAYER": str(layer), "CACHE": str(root / "cache"), "ACTION": str(action), "HF_A": str(root / "A"),
            "HF_B": str(root / "B")}


def _argv(name: str, inputs: dict[str, str]) -> list[str]:
    return [inputs.get(a, a) for a in RUNS[name][1]]


def _params() -> list:
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in RUNS]


@pytest.mark.parametrize("name", _params())
def test_runs_into_out_with_provenance_resumes_and_reports(name, inputs, tmp_path, capsys) -> None:
    from paramsym.runs.execute import load_run_config
    from paramsym.runs.provenance import code_version, config_hash
    from paramsym.runs.rundir import RunDir

    kind, _ = RUNS[name]
    d = tmp_path / "run"
    rc = main([*_argv(name, inputs), "--quiet", "--out", str(d)])
    assert rc == 0, (name, capsys.readouterr().err)
    for file in ("config.json", "metrics.json", "env.json", "report.md"):
        assert (d / file).is_file(), (name, file)
    config = json.loads((d / "config.json").read_text())
    assert config["kind"] == kind
    prov = config["provenance"]
    assert prov["code_version"] == code_version() and prov["command"].startswith("paramsym " + name.split(" --")[0])
    assert config_hash(load_run_config(RunDir(d))) == prov["config_hash"]  # one reader for every kind
    metrics = (d / "metrics.json").read_bytes()
    if name in ARTIFACTS:  # the exported file / the layer, inside the run directory, named by its metrics
        recorded = json.loads(metrics)
        assert recorded["file"] == ARTIFACTS[name]
        assert hashlib.sha256((d / ARTIFACTS[name]).read_bytes()).hexdigest() == recorded["sha256"]

    # interrupted after its own files: metrics.json and report.md missing
    os.remove(d / "metrics.json")
    os.remove(d / "report.md")
    assert main(["report", str(d)]) == 2 and "--resume" in capsys.readouterr().err
    words = _argv(name, inputs)[:2] if name.startswith(("attention ", "experiment ")) else _argv(name, inputs)[:1]
    assert main([*words, "--resume", str(d), "--quiet"]) == 0, (name, capsys.readouterr().err)
    assert (d / "metrics.json").read_bytes() == metrics, name
    if name in ARTIFACTS:  # written again, byte for byte (its sha256 is in the metrics)
        assert hashlib.sha256((d / ARTIFACTS[name]).read_bytes()).hexdigest() == json.loads(metrics)["sha256"]
        if kind == "census-export":  # the interrupted run's export was moved aside, not deleted
            assert [p.name.split(".stale-")[0] for p in d.glob("*.stale-*")] == [ARTIFACTS[name]]
    starts = json.loads((d / "env.json").read_text())["starts"]
    assert [s.get("resumed") for s in starts] == [False, True], name
    capsys.readouterr()
    assert main(["report", str(d)]) == 0 and (d / "report.md").is_file()
    assert main([*words, "--resume", str(d), "--quiet"]) == 0  # a finished run is reported, not rerun
    assert (d / "metrics.json").read_bytes() == metrics


def test_discover_killed_at_a_checkpoint_resumes_to_the_same_metrics(tmp_path: Path) -> None:
    """The real kill: SIGKILL of `paramsym discover` at its first checkpoint, then --resume."""
    full, killed = tmp_path / "full", tmp_path / "killed"
    subprocess.run(cli_argv(*DISCOVER, "--quiet", "--out", str(full)), check=True, env=cli_env(), capture_output=True,
                   timeout=600)
    step = kill_at_checkpoint(cli_argv(*DISCOVER, "--quiet", "--out", str(killed)), killed,
                              killed / "checkpoint" / "state.json", timeout=300)
    assert 0 < step < 40
    assert json.loads((killed / "config.json").read_text())["provenance"]["config_hash"]  # written before training
    subprocess.run(cli_argv("discover", "--resume", str(killed), "--quiet"), check=True, env=cli_env(),
                   capture_output=True, timeout=600)
    assert (killed / "metrics.json").read_bytes() == (full / "metrics.json").read_bytes()
    starts = json.loads((killed / "env.json").read_text())["starts"]
    assert [(s["resumed"], s["resumed_from_step"]) for s in starts] == [(False, None), (True, step)]
    subprocess.run(cli_argv("report", str(killed)), check=True, env=cli_env(), capture_output=True, timeout=300)
