"""``paramsym align A B --stages ...,canonical,orthogonal,refined --merge ALPHA`` (issue 35, items 2 and 4)
on two save_pretrained GPT-2s built from config objects: the canonical-form stages run from the command
line, each reports B's function error, the merged model loads with ``from_pretrained`` and computes
what the in-memory merge computes, the stage merged and the stages not merged are named; two ViTs run
the canonical stages too; bad stage names and models the canonical form refuses are one named line,
nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_checks import refused, run_cli
from test_align_merge import _lm as _gpt2
from test_align_merge import _vit

transformers = pytest.importorskip("transformers")

STAGES = "before,permutation,full,canonical,orthogonal,refined"


def _moved_norms(model, seed: int):
    """``model`` with every norm parameter moved off its initial 1/0 by N(0, 0.2²) (so folding moves weights)."""
    g = torch.Generator().manual_seed(100 + seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if ".ln_" in n or "ln_f" in n or "norm" in n:
                p.add_(0.2 * torch.randn(p.shape, generator=g))
    return model


def _lm(path: Path, seed: int) -> Path:
    """A tied byte-level GPT-2 (test_align_merge's) with its norms moved."""
    _moved_norms(transformers.GPT2LMHeadModel.from_pretrained(_gpt2(path, seed)), seed).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def lms(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("lms")
    return _lm(root / "a", 0), _lm(root / "b", 1)


def _nothing(out: Path) -> None:
    assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())


def test_canonical_stages_from_the_command_line_merge_a_loadable_model(lms, tmp_path, capsys):
    from paramsym.alignment.align import align
    from paramsym.alignment.io import data_for, load_pair
    from paramsym.census.precision import rounding_tolerance

    a, b = lms
    out = tmp_path / "run"
    rc, text, _ = run_cli(capsys, ["align", a, b, "--stages", STAGES, "--refine-steps", "4", "--merge", "0.5",
                                   "--points", "3", "--json", "--out", out])
    assert rc == 0
    summary = json.loads(text)
    # every stage ran, and each reports B's function error at float64 rounding (L = 1 layer, width 24)
    tol = rounding_tolerance(torch.float64, 1, 24)
    for stage in STAGES.split(",")[1:]:
        assert f"barrier_{stage}" in summary
        err = summary["function_error" if stage == "full" else f"function_error_{stage}"]
        assert 0 <= err <= tol, (stage, err, tol)
    assert summary["distance"]["orthogonal"] < summary["distance"]["canonical"]  # the rotation moved B
    report = (out / "report.md").read_text()
    assert "refined" in report.split("Function error")[1].splitlines()[0]
    # the stage merged is named, and why the canonical stages were not
    merge = summary["merge"]
    assert merge["stage"] == "full" and set(merge["not_merged"]) == {"canonical", "orthogonal", "refined"}
    assert "lm_head.bias" in merge["not_merged"]["refined"]
    assert all(f"Not merged: stage `{s}`" in report for s in merge["not_merged"])
    result = json.loads((out / "result.json").read_text())
    assert result["merged_stage"] == "full" and set(result["not_merged"]) == set(merge["not_merged"])
    # the merged model loads with from_pretrained and computes the in-memory merge of the full stage
    loaded = transformers.GPT2LMHeadModel.from_pretrained(out / "merged", attn_implementation="eager").eval()
    arch, pa, pb, info = load_pair(a, b)
    data, _ = data_for(arch, "auto", info)
    res = align(arch, pa, pb, data, points=3, generator=torch.Generator().manual_seed(0))
    mem = transformers.GPT2LMHeadModel.from_pretrained(a, attn_implementation="eager").eval()
    with torch.no_grad():
        for n, p in mem.named_parameters():
            p.copy_((pa[n].double() + 0.5 * (res.stages["full"][n] - pa[n].double())).float())
    x = data.x_test[:8]
    with torch.no_grad():
        got, want = loaded(x).logits, mem(x).logits
        assert float((got - want).norm() / want.norm()) <= 10 * torch.finfo(torch.float32).eps
        assert float((want - transformers.GPT2LMHeadModel.from_pretrained(a)(x).logits).norm()) > 1e-3  # not A


@pytest.mark.parametrize("stages, needle", [
    ("before,rotated", "unknown stage"),
    ("full,refined", "refines the 'orthogonal'"),
])
def test_bad_stage_names_are_refused(lms, tmp_path, capsys, stages, needle):
    out = tmp_path / "run"
    refused(capsys, ["align", *lms, "--stages", stages, "--out", out], "ConfigError", needle)
    _nothing(out)


def test_canonical_stages_of_two_vits_run_and_an_mlp_chain_is_refused(tmp_path, capsys):
    """Two ViTs (the census traces the patch convolution, CLS token and position embeddings as stream
    writers): the canonical and orthogonal stages run from the command line, B's function error at
    float64 rounding, the rotation moves B. An MLP chain (no canonical form): one named line, nothing written."""
    from paramsym.census.precision import rounding_tolerance

    a, b = _vit(tmp_path / "a", 0), _vit(tmp_path / "b", 1)
    out = tmp_path / "run"
    rc, text, _ = run_cli(capsys, ["align", a, b, "--stages", "full,canonical,orthogonal", "--points", "3", "--json",
                                   "--out", out])
    assert rc == 0
    summary = json.loads(text)
    tol = rounding_tolerance(torch.float64, 1, 24)  # L = 1 layer, widest fan-in 24
    for stage in ("canonical", "orthogonal"):
        assert f"barrier_{stage}" in summary and 0 <= summary[f"function_error_{stage}"] <= tol, (stage, summary)
    assert summary["distance"]["orthogonal"] < summary["distance"]["canonical"]
    refused(capsys, ["align", "--preset", "digits-mlp", "--width", "4", "--stages", "canonical", "--out",
                     tmp_path / "mlp", "--cache-dir", tmp_path / "cache"], "ConfigError", "Hugging Face transformer",
            "--stages canonical")
    _nothing(tmp_path / "mlp")


def _llama(path: Path, seed: int) -> Path:
    """A tied tiny Llama (RMS norms) with its norm gains moved off 1."""
    conf = transformers.LlamaConfig(vocab_size=256, hidden_size=16, intermediate_size=24, num_hidden_layers=1,
                                    num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                                    tie_word_embeddings=True, attn_implementation="eager")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        _moved_norms(transformers.LlamaForCausalLM(conf), seed).save_pretrained(path)
    return path


def test_an_rms_norm_model_merges_its_refined_stage_loadably(tmp_path, capsys):
    """Llama's class computes every stream rotation of its canonical form exactly: the refined stage is
    merged (between the canonical forms, LM head untied), and ``from_pretrained`` of ``merged/`` computes
    the in-memory merge of canonical A and the refined B."""
    from paramsym.alignment.align import align
    from paramsym.alignment.io import data_for, load_pair
    from paramsym.alignment.refine import RefineConfig
    from paramsym.kinds.canonical_pair import canonical_pair_of

    a, b = _llama(tmp_path / "a", 0), _llama(tmp_path / "b", 1)
    out = tmp_path / "run"
    rc, text, _ = run_cli(capsys, ["align", a, b, "--stages", STAGES, "--refine-steps", "3", "--merge", "0.5",
                                   "--points", "3", "--json", "--out", out])
    assert rc == 0
    merge = json.loads(text)["merge"]
    assert merge["stage"] == "refined" and "not_merged" not in merge and merge["path"] == "merged/"
    assert "between the canonical forms" in (out / "report.md").read_text()
    loaded = transformers.LlamaForCausalLM.from_pretrained(out / "merged", attn_implementation="eager").eval()
    assert not loaded.config.tie_word_embeddings
    # the in-memory merge, computed here from the same alignment (seed 0, 3 refinement steps)
    arch, pa, pb, info = load_pair(a, b)
    data, _ = data_for(arch, "auto", info)
    pair = canonical_pair_of(arch, pa, pb, data)
    res = align(arch, pa, pb, data, points=3, generator=torch.Generator().manual_seed(0), stages=STAGES.split(","),
                canonical=pair, refine=RefineConfig(steps=3))
    mem = pair.arch.module.float()
    with torch.no_grad():
        for n, p in mem.named_parameters():
            p.copy_(pair.a[n] + 0.5 * (res.stages["refined"][n] - pair.a[n]))
    x = data.x_test[:8]
    A = transformers.LlamaForCausalLM.from_pretrained(a, attn_implementation="eager").eval()
    with torch.no_grad():
        got, want, fa = loaded(x).logits, mem(x).logits, A(x).logits
    assert float((got - want).norm() / want.norm()) <= 10 * torch.finfo(torch.float32).eps
    assert float((want - fa).norm() / fa.norm()) > 1e-3  # the merge is not A
    # and the refined B the merge used is B's function (float32 inside Llama's RMS norm)
    assert json.loads(text)["function_error_refined"] <= 1e-5
