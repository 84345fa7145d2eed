"""``paramsym align`` as a run kind: config/metrics/env, ``paramsym report``, and ``--resume`` of a preset
run interrupted while training its second model: the first model is reused from the cache, and
``metrics.json`` equals an uninterrupted run's byte for byte."""

from __future__ import annotations

import json
import shutil

import pytest

from paramsym.cli import main


@pytest.mark.slow  # trains three 64→4→4→10 MLPs on digits (≈ 15 s at low load)
def test_preset_run_interrupted_in_training_resumes_to_the_same_metrics(tmp_path, monkeypatch, capsys):
    import paramsym.kinds.align_presets as ap

    cache = tmp_path / "cache"
    args = ["align", "--preset", "digits-mlp", "--width", "4", "--points", "3", "--cache-dir", str(cache), "--quiet"]
    ref, cut = tmp_path / "ref", tmp_path / "cut"
    assert main([*args, "--out", str(ref)]) == 0
    for name in ("config.json", "metrics.json", "env.json", "timing.json", "report.md", "result.json",
                 "merged.safetensors"):
        assert (ref / name).is_file(), name
    cfg = json.loads((ref / "config.json").read_text())
    assert cfg["kind"] == "align" and cfg["width"] == 4 and cfg["cache_dir"] == str(cache.resolve())
    assert "seconds" not in json.loads((ref / "metrics.json").read_text())
    shutil.rmtree(cache)  # the interrupted run trains both models again, into the same cache path

    real, calls = ap.train_digits_mlp, []

    def interrupt_second(*a, **k):
        calls.append(a[1])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(ap, "train_digits_mlp", interrupt_second)
    assert main([*args, "--out", str(cut)]) == 130
    assert not (cut / "metrics.json").exists() and len(list((cache / "align").glob("*.safetensors"))) == 1
    calls.clear()
    capsys.readouterr()
    assert main(["align", "--resume", str(cut), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert calls == [1]  # only model B (seed 1) trained on resume
    assert (cut / "metrics.json").read_bytes() == (ref / "metrics.json").read_bytes()
    for key in ("barrier_before", "barrier_permutation", "barrier_full", "function_error", "seconds"):
        assert key in out
    (cut / "report.md").unlink()
    assert main(["report", str(cut)]) == 0
    assert (cut / "report.md").read_text().startswith("# Alignment: preset digits-mlp")


def test_resume_rules(tmp_path, capsys):
    assert main(["align", "--resume", str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("1")
    assert main(["align", "--preset", "digits-mlp", "--out", str(tmp_path / "x")]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["align", "--preset", "digits-mlp", "--points", "1"]) == 2
    assert "--points must be an integer >= 2" in capsys.readouterr().err
