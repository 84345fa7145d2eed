"""``paramsym teleport`` as a run kind: config/metrics/env, ``paramsym report``, and ``--resume`` of an
interrupted run ending with the same ``metrics.json``, byte for byte, as an uninterrupted one."""

from __future__ import annotations

import json

import pytest

from paramsym.cli import main

ARGS = ["teleport", "--preset", "regression-mlp", "--seeds", "0,1", "--steps", "12", "--quiet"]


def test_interrupted_run_resumes_to_the_same_metrics(tmp_path, monkeypatch, capsys):
    import paramsym.kinds.teleport_mlp as tm

    ref, cut = tmp_path / "ref", tmp_path / "cut"
    assert main([*ARGS, "--out", str(ref)]) == 0
    for name in ("config.json", "metrics.json", "env.json", "report.md", "result.json", "timing.json"):
        assert (ref / name).is_file(), name
    cfg = json.loads((ref / "config.json").read_text())
    assert cfg["kind"] == "teleport" and cfg["seeds"] == [0, 1] and cfg["provenance"]["config_hash"]
    metrics = json.loads((ref / "metrics.json").read_text())
    assert "seconds" not in metrics and "wall_time_overhead" not in metrics["optimizers"]["gd"]

    real, calls = tm.train_preset, []

    def interrupt_third(*a, **k):  # 2 trainings per job: the 3rd call is the 2nd job's baseline
        calls.append(a)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(tm, "train_preset", interrupt_third)
    assert main([*ARGS, "--out", str(cut)]) == 130  # interrupted (the CLI's Ctrl-C status)
    assert not (cut / "metrics.json").exists()
    assert sorted(p.name for p in (cut / "checkpoint").iterdir()) == ["gd-seed0.json"]
    # a fresh start in the interrupted directory is refused (nothing replaced), with the remedy
    assert main([*ARGS, "--out", str(cut)]) == 2
    assert "--resume" in capsys.readouterr().err
    # --resume takes no configuration flags
    assert main(["teleport", "--resume", str(cut), "--steps", "5"]) == 2
    assert "do not pass --steps" in capsys.readouterr().err

    calls.clear()
    monkeypatch.setattr(tm, "train_preset", lambda *a, **k: (calls.append(a), real(*a, **k))[1])
    assert main(["teleport", "--resume", str(cut), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(calls) == 6  # 4 jobs of 2 trainings, the finished first job not rerun
    assert (cut / "metrics.json").read_bytes() == (ref / "metrics.json").read_bytes()
    for key in ("step_ratio", "max_loss_change", "grad_norm_factor", "optimizers", "per_seed", "seconds"):
        assert key in out  # the --json keys of the summary, wall times included
    starts = json.loads((cut / "env.json").read_text())["starts"]
    assert [s.get("resumed", False) for s in starts] == [False, True]
    # resuming a finished run reruns nothing
    calls.clear()
    assert main(["teleport", "--resume", str(cut), "--quiet"]) == 0
    assert calls == []


def test_report_renders_a_teleport_directory(tmp_path, capsys):
    d = tmp_path / "booth"
    assert main(["teleport", "--preset", "booth", "--out", str(d), "--quiet"]) == 0
    (d / "report.md").unlink()
    assert main(["report", str(d)]) == 0
    text = (d / "report.md").read_text()
    assert text.startswith("# paramsym teleport --preset booth") and "step_ratio" in text


@pytest.mark.parametrize("argv, message", [
    (["--resume", "/nonexistent/teleport-run"], "RunDirError: --resume '/nonexistent/teleport-run': no such directory"),
    (["--preset", "booth", "--seeds", "0,0"], "--seeds lists seed(s) [0] more than once"),
    (["--preset", "booth", "--threads", "0"], "--threads must be an integer >= 1"),
])
def test_shared_flags_mean_the_same(capsys, argv, message):
    assert main(["teleport", *argv]) == 2
    assert message in capsys.readouterr().err
