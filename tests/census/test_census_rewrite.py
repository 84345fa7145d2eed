"""A permutation spec applied to a sharded checkpoint one tensor at a time (issue 34).

The spec is exported without weights from a tiny sharded checkpoint, one random element of its
group is written shard by shard (:func:`paramsym.census.rewrite.permute_checkpoint`); the written
tensors must equal those of the independent applier of the tests (numpy-drawn permutations,
split / take / merge on the file's data), the index layout must be the source's, the reloaded
model's logits unchanged; a wrong spec changes them; bad input is refused with nothing written.
"""

import json

import numpy as np
import pytest
import torch
from test_census_spaces import _apply_file
from test_census_stored_names import _reload_logits, _stored
from test_census_streaming import _checkpoint

from paramsym.census.configspec import spec_without_weights
from paramsym.census.rewrite import permute_checkpoint
from paramsym.errors import CheckpointError, ConfigError, OutputFileError, ShapeError

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("name", ["llama", "qwen2", "gpt2"])
def test_spec_written_shard_by_shard_keeps_the_logits(tmp_path, name):
    src, _ = _checkpoint(name, tmp_path)
    spec, _ = spec_without_weights(src)
    stored = _stored(src)
    expected, perms = _apply_file(stored, spec, np.random.default_rng(3))
    out = tmp_path / "permuted"
    info = permute_checkpoint(src, spec, perms, out)
    assert info["shards"] == len(list(src.glob("*.safetensors"))) > 2
    got = _stored(out)
    assert got.keys() == expected.keys()
    assert all(torch.equal(got[k], expected[k]) and got[k].dtype == stored[k].dtype for k in got)
    assert sum(not torch.equal(got[k], stored[k]) for k in got) > len(got) // 2  # the weights moved
    index = "model.safetensors.index.json"
    assert json.loads((out / index).read_text())["weight_map"] == json.loads((src / index).read_text())["weight_map"]
    cls = transformers.AutoModelForCausalLM
    ids = {"input_ids": torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(0))}
    base = _reload_logits(src, cls, ids)
    assert float((_reload_logits(out, cls, ids) - base).norm() / base.norm()) < 1e-5
    # a wrong spec: one tensor's permuted axis left out, so its units no longer follow the others
    name_ffn = next(n for n, ax in spec["axes"].items() if any(isinstance(e, str) and e.startswith("P_ffn") for e in ax))
    wrong = {**spec, "axes": {**spec["axes"], name_ffn: [None] * len(spec["axes"][name_ffn])}}
    permute_checkpoint(src, wrong, perms, tmp_path / "wrong")
    assert float((_reload_logits(tmp_path / "wrong", cls, ids) - base).norm() / base.norm()) > 1e-2


def test_bad_input_writes_nothing(tmp_path):
    src, _ = _checkpoint("llama", tmp_path)
    spec, _ = spec_without_weights(src)
    _, perms = _apply_file(_stored(src), spec, np.random.default_rng(0))
    out = tmp_path / "out"
    with pytest.raises(CheckpointError, match="does not store"):
        permute_checkpoint(src, {**spec, "axes": {**spec["axes"], "lm_head.bias": [None]}}, perms, out)
    with pytest.raises(ShapeError, match="axes"):
        permute_checkpoint(src, {**spec, "axes": {**spec["axes"], "lm_head.weight": [None]}}, perms, out)
    with pytest.raises(ConfigError, match="permutation of"):
        permute_checkpoint(src, spec, {**perms, "P_res": torch.zeros(64, dtype=torch.long)}, out)
    shard = sorted(src.glob("*.safetensors"))[1]
    raw = shard.read_bytes()
    shard.write_bytes(raw[:-8])
    with pytest.raises(CheckpointError, match="truncated"):
        permute_checkpoint(src, spec, perms, out)
    shard.write_bytes(raw)
    assert not out.exists() and not list(tmp_path.glob(".out.*"))
    out.mkdir()
    (out / "x").write_text("")
    with pytest.raises(OutputFileError, match="not an empty directory"):
        permute_checkpoint(src, spec, perms, out)
    assert [p.name for p in out.iterdir()] == ["x"]
