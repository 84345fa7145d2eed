"""Issue 20: every bad input of the report gets a named one-line error (exit 2) before any file is
written, or the right behaviour when the input is legitimate.

Each test reproduces one case of the issue through :func:`paramsym.cli.main` in-process (stderr
captured) and checks: exit status 2, exactly one stderr line ``paramsym CMD: error: <Name>: ...``
naming the argument, and that nothing was written. Models are tiny (built from config objects
or a few random tensors), so every test takes seconds.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch
from cli_checks import refused, run_cli
from safetensors.torch import save_file


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture()
def fx(tmp_path: Path, monkeypatch) -> Path:
    """MLP safetensors files a, b (and B with a NaN, in float16), a tiny BERT directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def mlp(seed: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        return {"fc1.weight": torch.randn(16, 64, generator=g), "fc1.bias": torch.randn(16, generator=g),
                "fc2.weight": torch.randn(10, 16, generator=g), "fc2.bias": torch.randn(10, generator=g)}

    save_file(mlp(0), "a.safetensors")
    b = mlp(1)
    save_file(b, "b.safetensors")
    save_file({k: v.half() for k, v in b.items()}, "b_half.safetensors")
    b["fc1.weight"][3, 5] = math.nan
    save_file(b, "b_nan.safetensors")
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=32)).save_pretrained("bert")
    return tmp_path


# ------------------------------------------------------------------------------ tracebacks
@pytest.mark.parametrize("argv", [
    ["census", "--preset", "mlp-relu"], ["affine", "--preset", "relu242"],
    ["align", "a.safetensors", "b.safetensors"],
])
@pytest.mark.parametrize("seed", [str(2**64), "-1"])
def test_seed_out_of_range(fx, capsys, argv, seed) -> None:
    refused(capsys, [*argv, "--seed", seed], "ConfigError", "--seed", "0 <= seed < 2**63")
    assert not (fx / "runs").exists()


@pytest.mark.parametrize("sub", [["classify", "a.safetensors", "--group", "C2"],
                                 ["build", "--group", "C2", "--heads", "1", "--index", "0", "--out", "l"]])
def test_attention_seed_out_of_range(fx, capsys, sub) -> None:
    refused(capsys, ["attention", *sub, "--seed", str(2**64)], "--seed", "0 <= seed < 2**63")
    assert not (fx / "l").exists()


def test_census_tokens_beyond_the_positions(fx, capsys) -> None:
    refused(capsys, ["census", "--model", "bert", "--tokens", "1000000", "--json"], "ConfigError", "--tokens", "32 positions")


def test_align_with_nan_in_b(fx, capsys) -> None:
    refused(capsys, ["align", "a.safetensors", "b_nan.safetensors", "--out", "o"], "NonFiniteError", "model B",
            "fc1.weight")
    assert not (fx / "o").exists()


def test_attention_count_huge_copies(capsys) -> None:
    refused(capsys, ["attention", "count", "--group", "D4", "--heads", "2", "--copies", "999999999999999999"],
            "TooLargeError", "--max-memory")
    # beyond 64 bits the configuration itself refuses the value (every integer key: torch and numpy take 64 bits)
    refused(capsys, ["attention", "count", "--group", "D4", "--heads", "2", "--copies", "99999999999999999999"],
            "ConfigError", "copies", "64 bits")


def test_attention_count_bound_beyond_printable_digits(capsys) -> None:
    # the exact bound c^(2H)/H! is printed in full; beyond Python's int->str limit it was a ValueError
    refused(capsys, ["attention", "count", "--group", "C2", "--heads", "2000", "--copies", "2000"],
            "TooLargeError", "decimal digits")


# ------------------------------------------------------------------------------ never finish
def test_align_points_estimated(fx, capsys) -> None:
    line = refused(capsys, ["align", "a.safetensors", "b.safetensors", "--points", "1000000000"], "TooLargeError",
                   "--max-memory", "GiB")
    assert "1000000000 points" in line


def test_clusterings_heads_estimated(capsys) -> None:
    refused(capsys, ["attention", "clusterings", "--group", "C6", "--heads", "100000", "--count-only"],
            "TooLargeError", "--max-memory")
    refused(capsys, ["attention", "clusterings", "--group", "C2", "--heads", "2000", "--count-only"],
            "TooLargeError", "CPU seconds")


def test_size_estimates_are_the_budget_not_a_ceiling(fx, capsys) -> None:
    """The same inputs pass with a larger --max-memory up to the estimate (the estimate is the real cost)."""
    from paramsym.alignment.align import _BYTES_PER_POINT, check_points
    from paramsym.errors import TooLargeError

    check_points(10**6, max_memory=10**6 * _BYTES_PER_POINT)
    with pytest.raises(TooLargeError):
        check_points(10**6, max_memory=10**6 * _BYTES_PER_POINT - 1)
    rc, out, _ = run_cli(capsys, ["attention", "clusterings", "--group", "C6", "--heads", "3", "--count-only", "--json"])
    assert rc == 0 and json.loads(out)["count"] == 33  # the paper's count


# ------------------------------------------------------------------------------ wrong input accepted
def test_attribute_int_weights(fx, capsys) -> None:
    save_file({"fc1.weight": torch.ones(8, 2, dtype=torch.int64)}, "int.safetensors")
    refused(capsys, ["attribute", "--preset", "annulus-wedge", "--quick", "--weights", "int.safetensors", "--out", "o"],
            "--weights", "int64", "not floating point")
    assert not (fx / "o").exists()


@pytest.mark.parametrize("motion", ["-1", "nan", "0"])
def test_compensate_motion(fx, capsys, motion) -> None:
    refused(capsys, ["compensate", "--model", "pythia-tiny", "--layer", "0", "--unit", "0", f"--motion={motion}",
                     "--out", "o"], "ConfigError", "--motion", "> 0")
    assert not (fx / "o").exists()


def test_compensate_empty_prefix(fx, capsys) -> None:
    refused(capsys, ["compensate", "--model", "bert", "--layer", "0", "--unit", "0", "--prefix", " "], "--prefix",
            "non-empty")


def test_sweep_address_without_ray(fx, capsys) -> None:
    refused(capsys, ["sweep", "spec.yaml", "--address", "1.2.3.4:6379", "--plan"], "--address", "--backend ray")


def test_align_mixed_dtypes(fx, capsys) -> None:
    refused(capsys, ["align", "a.safetensors", "b_half.safetensors"], "ArchitectureMismatchError", "float32 vs float16")


def test_out_with_a_newline(fx, capsys) -> None:
    refused(capsys, ["census", "--preset", "mlp-relu", "--out", "a\nb"], "control character")
    assert sorted(p.name for p in fx.iterdir() if p.name.startswith("a")) == ["a.safetensors"]


def test_report_names_a_corrupt_env_or_truncated_tensors(fx, capsys) -> None:
    run = fx / "table"
    assert run_cli(capsys, ["attention", "table", "--group", "C4", "--copies", "1..2", "--heads", "2", "--out", run,
                         "--quiet"])[0] == 0
    (run / "env.json").write_text('{"starts": [')
    before = _files(run)
    refused(capsys, ["report", run], "RunFileError", "env.json")
    assert _files(run) == before
    (run / "env.json").unlink()
    save_file({"x": torch.ones(64)}, run / "action.safetensors")
    (run / "action.safetensors").write_bytes((run / "action.safetensors").read_bytes()[:40])
    refused(capsys, ["report", run], "RunFileError", "action.safetensors")


def test_teleport_action_on_runs_that_are_not_finished_discoveries(fx, capsys) -> None:
    refused(capsys, ["teleport", "--action", "MISSING"], "RunDirError", "paramsym discover")
    unfinished = fx / "unfinished"
    unfinished.mkdir()
    (unfinished / "config.json").write_text('{"kind": "discovery"}')
    refused(capsys, ["teleport", "--action", unfinished], "unfinished", "--resume")
    (unfinished / "config.json").write_text('{"kind": "attention"}')
    refused(capsys, ["teleport", "--action", unfinished], "'attention' run")


# ------------------------------------------------------------------------------ messages
def test_attention_table_empty_range_names_the_flag(capsys) -> None:
    refused(capsys, ["attention", "table", "--group", "C2", "--copies", "5..1"], "--copies")


def test_align_width_names_the_flag(capsys) -> None:
    refused(capsys, ["align", "--preset", "digits-mlp", "--width", "0"], "--width")


def test_user_files_get_user_advice(fx, capsys) -> None:
    Path("trunc.safetensors").write_bytes(Path("b.safetensors").read_bytes()[:100])
    line = refused(capsys, ["align", "a.safetensors", "trunc.safetensors"], "InputFileError", "trunc.safetensors")
    assert "start the run again" not in line and "save it again" in line


def test_truncated_newest_checkpoint_falls_back(tmp_path: Path, capsys) -> None:
    from paramsym.runs.rundir import RunDir

    run = RunDir(tmp_path / "r")
    run.save_checkpoint({"w": torch.full((3,), 1.0)}, {"step": 10})
    run.save_checkpoint({"w": torch.full((3,), 2.0)}, {"step": 20})
    newest = run.checkpoint_dir / "tensors-00000020.safetensors"
    newest.write_bytes(newest.read_bytes()[:30])
    capsys.readouterr()
    tensors, state = run.load_checkpoint()
    assert state["step"] == 10 and torch.equal(tensors["w"], torch.full((3,), 1.0))
    err = capsys.readouterr().err
    assert "step 10" in err and "unreadable" in err  # and says so
    # with no intact older checkpoint the damage is still a named error
    (run.checkpoint_dir / "tensors-00000010.safetensors").unlink()
    from paramsym.errors import RunFileError

    with pytest.raises(RunFileError):
        run.load_checkpoint()


# ------------------------------------------------------------------------------ silent mix-up
def test_attribute_out_holding_another_run_is_refused(fx, capsys) -> None:
    """A seed-42 annulus run (its config.json and flows) is never mixed with a seed-5 run: --out must be
    empty, --resume takes the saved configuration only, and re-entering the directory from Python
    (as `paramsym reproduce` does) names the differing key."""
    from paramsym.config import to_dict
    from paramsym.errors import RunDirError
    from paramsym.experiments.attribution.presets import (
        AttributionConfig,
        check_resumable,
        resolve_attribution_config,
        run_attribution,
    )
    from paramsym.runs.rundir import RunDir

    out = fx / "att"
    cfg = AttributionConfig("annulus-wedge", resolve_attribution_config(
        "annulus-wedge", stage=None, seed=42, quick=True, flows=None, overrides=[], weights=None, probes=None))
    RunDir(out).write_json("config.json", {"kind": "attribution", **to_dict(cfg)})
    (out / "flows").mkdir()
    (out / "flows" / "resolved_c.json").write_text('{"record": {}}')
    before = _files(out)
    refused(capsys, ["attribute", "--preset", "annulus-wedge", "--quick", "--seed", "5", "--out", out], "RunDirError",
            "not empty")
    refused(capsys, ["attribute", "--resume", out, "--seed", "5"], "ConfigError", "--seed")
    refused(capsys, ["attribute", "--preset", "lifting-sanity", "--quick", "--out", out], "RunDirError", "not empty")
    other = AttributionConfig("annulus-wedge", resolve_attribution_config("annulus-wedge", seed=5, quick=True))
    with pytest.raises(RunDirError, match="config.seed"):
        run_attribution("annulus-wedge", other, RunDir(out), progress=False)
    assert _files(out) == before
    assert check_resumable(RunDir(out), cfg)  # the same configuration resumes


# ------------------------------------------------------------------------------ noise
def test_hf_progress_bars_silenced_under_json(fx, capsys) -> None:
    rc, out, err = run_cli(capsys, ["census", "--model", "bert", "--tokens", "4", "--json"])
    assert rc == 0 and json.loads(out)["all_verified"] and err == ""
    from transformers.utils import logging as hf_logging

    assert hf_logging.is_progress_bar_enabled()  # restored after the command


# ------------------------------------------------------------------------------ Python API
def test_python_api_bad_inputs() -> None:
    from paramsym.actions.linear import RescalingAction
    from paramsym.errors import ActionError, ConfigError, MaskError, ShapeError
    from paramsym.targets import Target
    from paramsym.testing import check_action

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).double()
    block = ["0.weight", "0.bias", "2.weight"]
    x = torch.randn(5, 3, dtype=torch.float64)
    F = Target(net, block, x)
    with pytest.raises(ShapeError, match="cannot be evaluated"):
        Target(net, block, torch.randn(5, 7, dtype=torch.float64))  # wrong width
    with pytest.raises(ShapeError, match="float32"):
        Target(net, block, x.float())  # wrong dtype
    with pytest.raises(ShapeError, match="0 rows"):
        Target(net, block, x[:0])
    with pytest.raises(ConfigError, match="meta"):
        Target(net, block, x.to("meta"))
    with pytest.raises(ConfigError, match="meta"):
        Target(copy.deepcopy(net).to("meta"), block, x)
    with pytest.raises(MaskError, match="more than once"):
        Target(net, ["0.weight", "0.weight"], x)
    with pytest.raises(ActionError, match="target.block"):
        RescalingAction(F, "0.weight", "2.weight")
    action = RescalingAction(F.block, "0.weight", "2.weight", earlier_bias="0.bias")
    with pytest.raises(ConfigError, match="seed"):
        check_action(action, F, seed=-1)


def test_missing_model_suggests_only_flags_the_command_has(capsys, tmp_path):
    """`compensate --model /nonexistent` named `--preset`, which compensate does not have; the
    argument is named once; census (which has --preset) still suggests it."""
    missing = str(tmp_path / "nonexistent")
    code, _, err = run_cli(capsys, ["compensate", "--model", missing, "--layer", "0", "--unit", "0"])
    assert code == 2 and "--preset" not in err and "--model: --model" not in err
    assert "InputFileError" in err and "llama-tiny" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, ["census", "--model", missing])
    assert code == 2 and "--preset NAME" in err and "--model: --model" not in err
