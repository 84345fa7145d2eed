"""``--export mergekit-0.1.4`` and the version refusals (issue 34).

MergeKit 0.1.4's ``WeightInfo`` (its last tagged source) has the fields ``name, is_embed, optional,
aliases, force_dtype, tied_names`` and ignores unknown ones, so a 0.1.5 file's ``vocabulary_axis``
would be dropped silently; 0.1.5 forbids ``is_embed``. The field lists below are written from
those sources, not taken from the code under test.
"""

import json

import pytest
import torch
from safetensors import safe_open

from paramsym.census.export import verify_mergekit_v01
from paramsym.census.mergekit_versions import check_version
from paramsym.census.walk import _output, default_inputs
from paramsym.census.zoo import tiny_model
from paramsym.cli import main
from paramsym.errors import MergekitVersionError

transformers = pytest.importorskip("transformers")
V014 = {"name", "is_embed", "optional", "aliases", "force_dtype", "tied_names"}
V015 = {"name", "vocabulary_axis", "optional", "aliases", "force_dtype", "tied_names"}


def _export(tmp_path, name, fmt):
    model = tiny_model(name, causal_lm=True)
    src = tmp_path / "m"
    model.save_pretrained(src, max_shard_size="40KB")
    out = tmp_path / fmt
    assert main(["census", "--model", str(src), "--export", fmt, "--out", str(out)]) == 0
    stored = set()
    for f in src.glob("*.safetensors"):
        with safe_open(str(f), "pt") as fh:
            stored |= set(fh.keys())
    return model, json.loads((out / "mergekit_architecture.json").read_text()), stored


def _entries(arch, L):
    return arch["pre_weights"] + arch["post_weights"] + [
        dict(w, name=w["name"].replace("${layer_index}", str(i))) for i in range(L) for w in arch["layer_templates"]["weights"]]


@pytest.mark.parametrize("name", ["llama", "gpt2", "gpt_neox"])
def test_v014_file_marks_embeddings_with_is_embed_and_has_only_its_fields(tmp_path, name):
    model, arch, stored = _export(tmp_path, name, "mergekit-0.1.4")
    entries = _entries(arch, getattr(model.config, arch["num_layers_config_key"]))
    assert all(set(e) <= V014 for e in entries), [sorted(set(e) - V014) for e in entries if set(e) - V014]
    assert sorted(e["name"] for e in entries if not e.get("optional")) == sorted(stored)
    emb = {"llama": ["model.embed_tokens.weight", "lm_head.weight"], "gpt2": ["transformer.wte.weight", "lm_head.weight"],
           "gpt_neox": ["gpt_neox.embed_in.weight", "embed_out.weight"]}[name]
    assert sorted(e["name"] for e in entries if e.get("is_embed")) == sorted(emb)
    _, arch15, _ = _export(tmp_path / "b", name, "mergekit")
    assert all(set(e) <= V015 for e in _entries(arch15, getattr(model.config, arch15["num_layers_config_key"])))
    # the same tensors, the one field translated
    assert [e["name"] for e in arch15["pre_weights"] + arch15["post_weights"]] == [
        e["name"] for e in arch["pre_weights"] + arch["post_weights"]]


def test_each_version_refuses_the_others_file(tmp_path):
    model, arch14, _ = _export(tmp_path / "a", "llama", "mergekit-0.1.4")
    _, arch15, _ = _export(tmp_path / "b", "llama", "mergekit")
    with pytest.raises(MergekitVersionError, match="is_embed.*0.1.4"):
        check_version(arch14, "0.1.5")
    with pytest.raises(MergekitVersionError, match="vocabulary_axis.*silently dropped"):
        check_version(arch15, "0.1.4")
    model = model.double()
    inputs = default_inputs(model, torch.Generator().manual_seed(0))
    with pytest.raises(MergekitVersionError):
        verify_mergekit_v01(arch14, model, inputs, _output, torch.Generator().manual_seed(0))
    check_version(arch14, "0.1.4")
    check_version(arch15, "0.1.5")
