"""``paramsym align A B --merge ALPHA --out DIR`` as a user runs it on two save_pretrained directories
(tiny ViTs and byte-level GPT-2s built from config objects), and its bad inputs: one named line,
exit 2, nothing written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from cli_checks import refused, run_cli

transformers = pytest.importorskip("transformers")


def _vit(path: Path, seed: int, hidden: int = 16) -> Path:
    conf = transformers.ViTConfig(image_size=8, patch_size=4, num_channels=1, hidden_size=hidden, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=24, num_labels=10, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, attn_implementation="eager")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        transformers.ViTForImageClassification(conf).save_pretrained(path)
    return path


def _lm(path: Path, seed: int, tie: bool = True, nan: bool = False) -> Path:
    conf = transformers.GPT2Config(vocab_size=256, n_positions=16, n_embd=16, n_layer=1, n_head=2, n_inner=24,
                                   tie_word_embeddings=tie, bos_token_id=10, eos_token_id=10,
                                   attn_implementation="eager")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = transformers.GPT2LMHeadModel(conf)
    if nan:
        with torch.no_grad():
            model.transformer.h[0].mlp.c_fc.weight[0, 0] = math.nan
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def vits(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("vits")
    return _vit(root / "a", 0), _vit(root / "b", 1)


def _load(path: Path):
    return transformers.AutoModelForImageClassification.from_pretrained(path, attn_implementation="eager").eval()


def _params(model) -> dict[str, torch.Tensor]:
    return {k: v.detach() for k, v in model.named_parameters()}


def test_merge_writes_a_loadable_model_on_the_aligned_segment(vits, tmp_path, capsys):
    """α = 1 is the aligned B: the loaded merged model computes B's function (float32 rounding);
    α = 0 is A exactly; α = 0.25 lies a quarter of the way between them, tensor by tensor."""
    from paramsym.models.datasets import digits_images

    a, b = vits
    merged = {}
    for alpha in ("0", "1", "0.25"):
        out = tmp_path / f"run{alpha}"
        rc, text, _ = run_cli(capsys, ["align", a, b, "--merge", alpha, "--points", "3", "--json", "--out", out])
        assert rc == 0
        summary = json.loads(text)
        assert summary["merge"]["alpha"] == float(alpha) and summary["merge"]["path"] == "merged/"
        merged[alpha] = _load(out / "merged")
        report = (out / "report.md").read_text()
        assert "![loss along the path" in report and (out / "path_loss.png").stat().st_size > 1000
        result = json.loads((out / "result.json").read_text())
        stages = [k[len("barrier_"):] for k in summary if k.startswith("barrier_") and not k.endswith("_train")]
        assert set(result["curves"]) == set(stages) >= {"before", "permutation", "full"}
        for stage in stages:
            assert f"| {stage} |" in report
            assert len(result["curves"][stage]["test_loss"]) == 3
    A, B = _load(a), _load(b)
    x = digits_images(0).x_test[:32]
    with torch.no_grad():
        fb, f1 = B(x).logits, merged["1"](x).logits
    assert float((f1 - fb).norm() / fb.norm()) <= 1e-5  # float32 weights: rounding of the aligned copy
    pa, p0, p1, pq = (_params(m) for m in (A, merged["0"], merged["1"], merged["0.25"]))
    assert all(torch.equal(pa[n], p0[n]) for n in pa)
    assert sum(float((p1[n] - pa[n]).norm()) for n in pa) > 1.0  # the aligned B is not A
    for n in pa:
        want = pa[n].double() + 0.25 * (p1[n].double() - pa[n].double())
        assert torch.allclose(pq[n].double(), want, atol=4 * torch.finfo(torch.float32).eps * float(want.abs().max()) + 1e-30)


def test_merge_of_two_tied_language_models_stays_tied(tmp_path, capsys):
    a, b = _lm(tmp_path / "a", 0), _lm(tmp_path / "b", 1)
    out = tmp_path / "run"
    rc, text, _ = run_cli(capsys, ["align", a, b, "--merge", "0.5", "--points", "3", "--json", "--out", out])
    assert rc == 0
    summary = json.loads(text)
    assert summary["model"]["data"] == "stdlib"
    m = transformers.GPT2LMHeadModel.from_pretrained(out / "merged", attn_implementation="eager")
    assert m.lm_head.weight.data_ptr() == m.transformer.wte.weight.data_ptr()
    # resuming the finished run gives the same metrics
    rc, again, _ = run_cli(capsys, ["align", "--resume", out, "--json"])
    assert rc == 0 and json.loads(again)["barrier_full"] == summary["barrier_full"]


def _nothing(out: Path) -> None:
    assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())


@pytest.mark.parametrize("alpha", ["1.5", "-0.1", "nan", "inf", "half"])
def test_merge_outside_the_unit_interval_is_refused(vits, tmp_path, capsys, alpha):
    out = tmp_path / "run"
    refused(capsys, ["align", *vits, "--merge", alpha, "--out", out], "ConfigError", "--merge", "[0, 1]")
    _nothing(out)


def test_models_of_different_widths_or_architectures_are_refused(vits, tmp_path, capsys):
    wide = _vit(tmp_path / "wide", 2, hidden=32)
    lm = _lm(tmp_path / "lm", 0)
    for other, needle in ((wide, "different shapes"), (lm, "ViTForImageClassification")):
        out = tmp_path / f"run-{other.name}"
        refused(capsys, ["align", vits[0], other, "--merge", "0.5", "--out", out], "ArchitectureMismatchError", needle)
        _nothing(out)


def test_tied_and_untied_models_are_refused(tmp_path, capsys):
    a, b = _lm(tmp_path / "a", 0, tie=True), _lm(tmp_path / "b", 1, tie=False)
    out = tmp_path / "run"
    refused(capsys, ["align", a, b, "--merge", "0.5", "--out", out], "ArchitectureMismatchError",
            "tie_word_embeddings")
    _nothing(out)


def test_nan_weights_are_refused(tmp_path, capsys):
    a, b = _lm(tmp_path / "a", 0), _lm(tmp_path / "b", 1, nan=True)
    out = tmp_path / "run"
    refused(capsys, ["align", a, b, "--merge", "0.5", "--out", out], "NonFiniteError", "c_fc")
    _nothing(out)
