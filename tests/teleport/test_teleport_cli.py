"""``paramsym teleport``: JSON keys, output files, named errors for bad arguments."""

from __future__ import annotations

import json

import pytest

from paramsym.cli import main


def _status(argv):
    """Exit status of ``paramsym ARGV`` (usage errors exit, library errors return 2)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_booth_json_reports_the_required_keys(capsys):
    out = _json(capsys, ["teleport", "--preset", "booth", "--json"])
    for key in ("step_ratio", "max_loss_change", "grad_norm_factor"):
        assert key in out
    assert out["loss_at_step_9"]["teleport"] <= 4.9e-3 < out["loss_at_step_9"]["baseline"]
    assert out["step_ratio"] > 1 and out["grad_norm_factor"] > 1


def test_small_regression_run(capsys):
    out = _json(capsys, ["teleport", "--preset", "regression-mlp", "--seeds", "0", "--steps", "12", "--json"])
    assert set(out["optimizers"]) == {"gd", "adagrad"}
    assert out["max_loss_change"] <= 1e-10


def test_small_digits_run_writes_result_report_and_curves(capsys, tmp_path):
    d = tmp_path / "digits"
    out = _json(capsys, ["teleport", "--preset", "digits-mlp", "--seeds", "0", "--steps", "4", "--every", "2",
                         "--optimizer", "adam", "--json", "--out", str(d)])
    assert set(out["optimizers"]) == {"adam"}
    assert "val_acc_teleport" in out["optimizers"]["adam"]
    assert (d / "result.json").is_file() and (d / "report.md").is_file()
    assert "step_ratio" in (d / "report.md").read_text()
    assert json.loads((d / "result.json").read_text())["runs"][0]["teleport"]["teleports"]


@pytest.mark.parametrize("argv, message", [
    (["--preset", "booth", "--every", "0"], "--every must be an integer >= 1"),
    (["--preset", "rosenbrock", "--seeds", "-2"], "--seeds must be comma-separated integers >= 0"),
    (["--preset", "regression-mlp", "--optimizer", "adam"], "runs the optimizers"),
    (["--preset", "nope"], "invalid choice"),
])
def test_bad_arguments_are_one_line_errors(capsys, argv, message):
    assert _status(["teleport", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_nonempty_out_directory_is_refused_before_work(capsys, tmp_path):
    (tmp_path / "x").write_text("1")
    assert _status(["teleport", "--preset", "booth", "--out", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err
