"""Exports name the checkpoint's stored tensors (issue 34), and bad checkpoints are refused.

Each tiny model is saved *sharded*; the exported permutation spec is applied by code independent
of the exporter (``_apply_file``: reshape-and-take) to the tensors read from the shards with
``safetensors``, written as a new checkpoint, reloaded with ``from_pretrained`` — the logits must
not change. Names and shapes come from the safetensors files, not from the code under test.
"""

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from test_census_spaces import _apply_file  # the independent applier (tests/census on sys.path)

from paramsym.census.zoo import MORE, TINY, tiny_model
from paramsym.cli import main

transformers = pytest.importorskip("transformers")

ENCODERS = {"bert", "roberta", "distilbert"}


def _stored(directory):
    out = {}
    for f in sorted(directory.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as fh:
            out.update({k: fh.get_tensor(k) for k in fh.keys()})
    return out


def _save_sharded(model, path):
    model.save_pretrained(path, max_shard_size="40KB")
    assert len(list(path.glob("*.safetensors"))) >= 2 and (path / "model.safetensors.index.json").is_file()
    return path


def _reload_logits(directory, cls, inputs):
    m = cls.from_pretrained(directory, attn_implementation="eager").eval()
    with torch.no_grad():
        out = m(**inputs)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def _rewrite(src, dst, tensors):
    dst.mkdir()
    for f in src.iterdir():
        if f.suffix == ".json" and f.name != "model.safetensors.index.json":
            shutil.copy(f, dst / f.name)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(dst / "model.safetensors"))


def _wrong(spec):
    """The spec with the stream permutation left off one layer-0 reader or writer (every axis of it):
    a wrong spec, which the reloaded logits must expose."""
    layer0 = [n for n, axes in spec["axes"].items() if ".0." in n and n.endswith("weight") and "P_res" in json.dumps(axes)]
    victim = sorted(layer0)[0]
    axes = [None if a == "P_res" else a for a in spec["axes"][victim]]
    return {**spec, "axes": {**spec["axes"], victim: axes}}, victim


@pytest.mark.parametrize("name", TINY + MORE)
def test_spec_names_the_stored_tensors_and_reloads_with_unchanged_logits(tmp_path, name):
    causal = name not in ENCODERS
    model = tiny_model(name, causal_lm=causal)
    src = _save_sharded(model, tmp_path / "src")
    out = tmp_path / "spec"
    assert main(["census", "--model", str(src), "--export", "permutation-spec", "--out", str(out)]) == 0
    spec = json.loads((out / "permutation_spec.json").read_text())
    stored = _stored(src)
    assert set(spec["axes"]) <= set(stored), sorted(set(spec["axes"]) - set(stored))
    for n, axes in spec["axes"].items():  # every axis a spec permutes has the spec's length
        assert len(axes) == stored[n].dim()
    cls = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
    inputs = {"input_ids": torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(0))}
    base = _reload_logits(src, cls, inputs)
    new, perms = _apply_file(stored, spec, np.random.default_rng(1))
    assert sum(float((new[k].double() - stored[k].double()).norm()) for k in stored) > 1.0
    _rewrite(src, tmp_path / "permuted", new)
    got = _reload_logits(tmp_path / "permuted", cls, inputs)
    ref = base if causal else base[..., perms["P_res"]]  # an encoder's hidden states lie in the stream
    assert float((got - ref).norm() / base.norm()) <= 1e-5  # float32 checkpoints: summation order only
    wrong, victim = _wrong(spec)  # the same permutations, one tensor left unpermuted: detected
    new, _ = _apply_file(stored, wrong, np.random.default_rng(1))
    _rewrite(src, tmp_path / "wrong", new)
    got = _reload_logits(tmp_path / "wrong", cls, inputs)
    assert float((got - ref).norm() / base.norm()) > 1e-3, victim


def test_gpt_neox_spec_names_embed_out_and_the_loaded_name_would_break_the_logits(tmp_path):
    """GPT-NeoX stores ``embed_out.weight`` (the loaded model calls it ``lm_head.weight``): the
    spec names the stored tensor; the spec with the loaded name, applied by name to the
    checkpoint, leaves the LM head unpermuted and changes the logits (a wrong spec is detected)."""
    model = tiny_model("gpt_neox", causal_lm=True)
    src = _save_sharded(model, tmp_path / "src")
    out = tmp_path / "spec"
    assert main(["census", "--model", str(src), "--export", "permutation-spec", "--out", str(out)]) == 0
    spec = json.loads((out / "permutation_spec.json").read_text())
    assert "embed_out.weight" in spec["axes"] and "lm_head.weight" not in spec["axes"]
    assert spec["axes"]["embed_out.weight"] == [None, "P_res"]
    wrong = dict(spec, axes={("lm_head.weight" if k == "embed_out.weight" else k): v for k, v in spec["axes"].items()})
    stored = _stored(src)
    inputs = {"input_ids": torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(0))}
    base = _reload_logits(src, transformers.AutoModelForCausalLM, inputs)
    new, _ = _apply_file(stored, wrong, np.random.default_rng(1))
    _rewrite(src, tmp_path / "wrong", new)
    got = _reload_logits(tmp_path / "wrong", transformers.AutoModelForCausalLM, inputs)
    assert float((got - base).norm() / base.norm()) > 0.1


def test_mergekit_export_of_gpt_neox_names_the_stored_head(tmp_path):
    model = tiny_model("gpt_neox", causal_lm=True)
    src = _save_sharded(model, tmp_path / "src")
    out = tmp_path / "mk"
    assert main(["census", "--model", str(src), "--export", "mergekit", "--out", str(out)]) == 0
    arch = json.loads((out / "mergekit_architecture.json").read_text())
    L = model.config.num_hidden_layers
    names = [e["name"] for e in arch["pre_weights"] + arch["post_weights"]] + [
        w["name"].replace("${layer_index}", str(i)) for i in range(L) for w in arch["layer_templates"]["weights"]]
    assert sorted(names) == sorted(_stored(src))
    head = next(e for e in arch["post_weights"] if e["name"] == "embed_out.weight")
    assert head["vocabulary_axis"] == 0


def _break(kind, src):
    index = src / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    shards = sorted(set(data["weight_map"].values()))
    if kind == "shard missing from the index":
        data["weight_map"] = {k: v for k, v in data["weight_map"].items() if v != shards[-1]}
        index.write_text(json.dumps(data))
        return shards[-1]
    if kind == "shard missing from the directory":
        (src / shards[-1]).unlink()
        return shards[-1]
    if kind == "truncated shard":
        f = src / shards[0]
        f.write_bytes(f.read_bytes()[:-100])
        return shards[0]
    if kind == "index names a tensor no shard holds":
        data["weight_map"]["model.layers.9.mlp.up_proj.weight"] = shards[0]
        index.write_text(json.dumps(data))
        return "model.layers.9.mlp.up_proj.weight"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["shard missing from the index", "shard missing from the directory", "truncated shard",
                                  "index names a tensor no shard holds"])
def test_bad_checkpoints_are_named_errors_and_nothing_is_written(tmp_path, capsys, kind):
    src = _save_sharded(tiny_model("llama", causal_lm=True), tmp_path / "src")
    what = _break(kind, src)
    out = tmp_path / "spec"
    capsys.readouterr()  # the progress bar of save_pretrained
    rc = main(["census", "--model", str(src), "--export", "permutation-spec", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "CheckpointError" in err and what in err and not out.exists()
    assert len(err.strip().splitlines()) == 1
