"""The MergeKit comparison (``paramsym.census.mergekit_compare``) on files written here.

MergeKit's own files are not committed: a wheel-shaped zip with hand-written descriptions in
MergeKit's layout exercises every check, including ones that must fail (a wrong vocabulary axis,
a name the model lacks, a parameter left out, untied residual spaces). Where MergeKit's wheel
is available (``PARAMSYM_MERGEKIT``), its real files are compared too.
"""

import json
import os
import zipfile

import pytest
from mergekit_wheel import find_wheel

from paramsym.census.mergekit_compare import compare, mergekit_files
from paramsym.errors import InputFileError

pytest.importorskip("transformers")


def _wheel(tmp_path, files):
    w = tmp_path / "mergekit-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(w, "w") as z:
        for stem, data in files.items():
            z.writestr(f"mergekit/_data/architectures/{stem}.json", json.dumps(data))
    return w


GEMMA = {
    "model_type": "gemma", "architectures": ["GemmaForCausalLM"],
    "pre_weights": [{"name": "model.embed_tokens.weight", "vocabulary_axis": 1}],  # wrong: axis 1 is the stream
    "num_layers_config_key": "num_hidden_layers",
    "layer_templates": {"weights": [{"name": f"model.layers.${{layer_index}}.{n}.weight"} for n in (
        "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "post_attention_layernorm", "mlp.up_proj", "mlp.gate_proj")] + [{"name": "model.layers.${layer_index}.extra.weight"}],
        "procedural_spaces": [{"name": "h_a_${layer_index}", "type": "residual", "inputs": ["h_${layer_index}"]}]},
    "post_weights": [{"name": "model.norm.weight"}],
}


def test_comparison_reports_disagreements_and_settles_residual_ties(tmp_path):
    r = compare(["gemma"], source=_wheel(tmp_path, {"gemma": GEMMA}))
    assert r["mergekit"]["version"] == "9.9.9" and len(r["mergekit"]["sha256"]) == 64
    g = r["architectures"]["gemma"]
    assert g["disagree"] == ["model.embed_tokens.weight"] and (g["statements"], g["statements_agree"]) == (1, 0)
    assert g["only_mergekit"] == ["model.layers.0.extra.weight", "model.layers.1.extra.weight"]
    assert g["only_model"] == ["model.layers.0.mlp.down_proj.weight", "model.layers.1.mlp.down_proj.weight"]
    assert all(c > 1e-3 for c in g["only_model_zeroed_change"].values())  # the left-out tensors matter
    # the census's one rule a priori: Gemma's RMSNorm computes in float32, so 10·(L+1)·√D·ε₃₂ (L = 2, D = 64)
    assert g["census_error"] <= g["tolerance"] == pytest.approx(10 * 3 * 64**0.5 * 2.0**-23, rel=1e-9)
    assert g["census_motion"] > 0.5
    assert g["residual_tied_error"] <= 1e-5 < 0.1 < g["residual_untied_error"]
    right = json.loads(json.dumps(GEMMA))
    right["pre_weights"][0]["vocabulary_axis"] = 0
    (tmp_path / "b").mkdir()
    g = compare(["gemma"], source=_wheel(tmp_path / "b", {"gemma": right}))
    assert g["architectures"]["gemma"]["disagree"] == []


def test_missing_files_are_a_named_error(tmp_path, monkeypatch):
    import paramsym.census.mergekit_compare as mc

    monkeypatch.setattr(mc, "DEFAULT_DIR", tmp_path / "nowhere")
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    with pytest.raises(InputFileError, match="pip download mergekit --no-deps"):
        mergekit_files()
    with pytest.raises(InputFileError, match="does not exist"):
        mergekit_files(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputFileError, match="no mergekit-"):
        mergekit_files(empty)


@pytest.mark.skipif(find_wheel() is None, reason="MergeKit's wheel data not available (`make mergekit-wheel`, or "
                    "pip download mergekit --no-deps -d DIR; PARAMSYM_MERGEKIT=DIR)")
def test_real_mergekit_files_fused_architectures():
    r = compare(["gpt2", "phi3", "falcon", "gpt_neox"], source=os.environ.get("PARAMSYM_MERGEKIT") or find_wheel().parent)
    for name, a in r["architectures"].items():
        assert not a["disagree"] and a["census_error"] <= a["tolerance"], name
