"""``models.checks.LazyTensors``: a checkpoint's tensors read on access, one at a time (issue 34)."""

import torch
from safetensors.torch import load_file, save_file

from paramsym.models.checks import LazyTensors, read_header


def test_reads_each_stored_tensor_as_stored(tmp_path):
    g = torch.Generator().manual_seed(0)
    parts = {"a.safetensors": {"x": torch.randn(3, 4, generator=g).to(torch.bfloat16)},
             "b.safetensors": {"y": torch.randn(5, generator=g), "z": torch.arange(6).reshape(2, 3)}}
    stored = {}
    for f, tensors in parts.items():
        save_file(tensors, str(tmp_path / f))
        stored.update(read_header(tmp_path / f))
    lazy = LazyTensors(stored)
    assert sorted(lazy) == ["x", "y", "z"] and len(lazy) == 3 and lazy.shape("x") == (3, 4)
    for f in parts:
        for k, v in load_file(str(tmp_path / f)).items():
            assert lazy[k].dtype == v.dtype and torch.equal(lazy[k], v)
    assert lazy["y"] is not lazy["y"]  # read anew each time: nothing is cached
