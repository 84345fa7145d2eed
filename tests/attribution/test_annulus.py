"""Annulus experiment: data and model facts, and the command end to end (quick version)."""

import json
import math
import os

import pytest
import torch

from paramsym.cli import main
from paramsym.errors import ConfigError
from paramsym.experiments.attribution.annulus.run import (
    AnnulusConfig,
    build_model,
    make_data,
    probe_grid,
    train,
)
from paramsym.runs.reports import render
from paramsym.runs.rundir import RunDir


def test_data_probe_grid_and_model_match_the_spec():
    for data, arc in (("wedge", math.pi / 2), ("full", 2 * math.pi)):
        cfg = AnnulusConfig(data=data)
        x, y = make_data(cfg)
        assert x.shape == (200, 2) and int(y.sum()) == 100
        r = x.norm(dim=1)
        assert float(r[:100].max()) <= 1.0
        assert float(r[100:].min()) >= 2.3 and float(r[100:].max()) <= 3.0
        ang = torch.atan2(x[100:, 1], x[100:, 0])
        if data == "wedge":
            assert float(ang.abs().max()) <= arc / 2 + 1e-12
        else:
            assert float(ang.max() - ang.min()) > 1.6 * math.pi
    assert probe_grid(24, 3.5).shape == (408, 2)
    model = build_model(AnnulusConfig())
    assert sum(p.numel() for p in model.parameters()) == 19009


def test_training_separates_the_classes():
    cfg = AnnulusConfig(epochs=100)
    model = build_model(cfg)
    x, y = make_data(cfg)
    losses = train(model, x, y, cfg)
    assert losses[-1] < 0.1 * losses[0]
    with torch.no_grad():
        acc = float(((model(x).squeeze(-1) > 0).double() == y).double().mean())
    assert acc == 1.0


def test_bad_config_is_named():
    from paramsym.config import apply_overrides

    with pytest.raises(ConfigError, match="data"):
        apply_overrides(AnnulusConfig(), ["data=half"])
    with pytest.raises(ConfigError, match="directions"):
        apply_overrides(AnnulusConfig(), ["directions=[+x]"])


def test_attribute_command_quick_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["attribute", "--preset", "annulus-wedge", "--quick", "--json", "--out", str(out)])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["preset"] == "annulus-wedge" and summary["stage"] == "trained"
    flows = {(r["flow"], r["direction"]): r for r in summary["flows"]}
    assert set(flows) == {("resolved", "+c"), ("resolved", "-b"), ("fixed", "+c"), ("fixed", "-b")}
    for r in flows.values():
        for k in ("delta_start", "delta_end", "delta_predicted", "residual_start", "residual_end"):
            assert isinstance(r[k], float) and math.isfinite(r[k])
    # −b along 2 Euler steps of 0.02: prediction e^{−0.04}‖δ₀‖
    b = flows["resolved", "-b"]
    assert b["delta_predicted"] == pytest.approx(math.exp(-0.04) * b["delta_start"], rel=1e-9)
    assert b["delta_end"] < b["delta_start"]
    lifts = {r["name"]: r for r in summary["lifts"]}
    assert set(lifts) == {"c*", "b*", "c* (τ=1e-08)", "b* (τ=1e-08)"}
    # the first layer is trainable, so η ∈ Im J (ΔW₁ = −W₁ξ): the criterion holds at τ = 1e-8
    assert lifts["c* (τ=1e-08)"]["liftable"] and lifts["c* (τ=1e-08)"]["residual"] <= 1e-6
    assert "liftable at τ = 1e-08" in lifts["c* (τ=1e-08)"]["verdict"]
    run = RunDir(out)
    cfg = run.read_json("config.json")
    assert cfg["kind"] == "attribution" and cfg["preset"] == "annulus-wedge"
    assert run.read_json("metrics.json")["summary"]["flows"] == summary["flows"]
    assert run.has("env.json") and run.has("report.md")
    text = (out / "report.md").read_text()
    assert "298 → 109 (110)" in text and "Lifting verdicts" in text
    assert (out / "figures" / "delta_norm.png").exists()
    assert (out / "figures" / "boundary_resolved_c.png").exists()
    # the report is regenerated from the directory's files alone
    os.remove(out / "figures" / "delta_norm.png")
    assert render(run) == text
    assert (out / "figures" / "delta_norm.png").exists()
    # an interrupted run (no metrics.json yet) continues with --resume: finished flows are not
    # recomputed, and it ends with the same metrics; other options beside --resume, or the same
    # directory as a fresh --out, are refused with nothing touched (no mix-up)
    metrics = (out / "metrics.json").read_bytes()
    os.remove(out / "metrics.json")
    os.remove(out / "report.md")
    stamp = {p.name: p.stat().st_mtime_ns for p in (out / "flows").iterdir()}
    assert main(["attribute", "--resume", str(out), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["flows"] == summary["flows"] and (out / "metrics.json").read_bytes() == metrics
    assert {p.name: p.stat().st_mtime_ns for p in (out / "flows").iterdir()} == stamp
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main(["attribute", "--resume", str(out), "--json", "--flow", "fixed"]) == 2
    assert "ConfigError" in capsys.readouterr().err
    assert main(["attribute", "--preset", "annulus-wedge", "--quick", "--json", "--out", str(out)]) == 2
    assert "RunDirError" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_command_errors_and_sanity_verdict(tmp_path, capsys):
    assert main(["attribute", "--preset", "nope"]) == 2
    assert "valid presets" in capsys.readouterr().err
    assert main(["attribute", "--preset", "lifting-sanity", "--stage", "init"]) == 2
    assert "stage must be one of ('trainable', 'frozen')" in capsys.readouterr().err
    assert main(["attribute", "--preset", "annulus-full", "--quick", "--set", "nosuchkey=1",
                 "--out", str(tmp_path / "x")]) == 2
    assert "unknown config key" in capsys.readouterr().err
    rc = main(["attribute", "--preset", "lifting-sanity", "--stage", "frozen", "--out", str(tmp_path / "s")])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "NOT liftable" in printed
    rc = main(["attribute", "--preset", "lifting-sanity", "--json", "--out", str(tmp_path / "t")])
    s = json.loads(capsys.readouterr().out)
    assert s["liftable"] is True and s["lifts"][0]["residual"] <= 1e-8
