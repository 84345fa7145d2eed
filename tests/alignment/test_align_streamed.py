"""Weight matching of two sharded checkpoints read one tensor at a time (issue 34).

A scrambled copy (one random element of the exported spec's group, written shard by shard) is
aligned back: every stored tensor recovered bit for bit. Two independent checkpoints: the
streamed matching ends at a point the in-memory implementation (``match_permutations`` over
``spec_groups``) confirms as converged, with the distance it computes itself.
"""

from types import SimpleNamespace

import pytest
import torch

from paramsym.alignment import match_permutations, spec_groups
from paramsym.alignment.matching import distance, permute
from paramsym.alignment.streamed import match_streamed
from paramsym.census.configspec import spec_without_weights
from paramsym.census.permspec import random_perms
from paramsym.census.rewrite import permute_checkpoint
from paramsym.census.stored import read_checkpoint
from paramsym.errors import ArchitectureMismatchError
from paramsym.models.checks import LazyTensors

transformers = pytest.importorskip("transformers")


def _checkpoint(path, seed, layers=3):
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=layers, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=64, max_position_embeddings=32,
                                   tie_word_embeddings=False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        m = transformers.LlamaForCausalLM(cfg)
        with torch.no_grad():
            for p in m.parameters():
                p.copy_((1 if p.dim() == 1 else 0) + 0.2 * torch.randn_like(p))
    m.save_pretrained(path, max_shard_size="20KB")
    return LazyTensors(read_checkpoint(path))


def test_scrambled_copy_recovered_exactly(tmp_path):
    a = _checkpoint(tmp_path / "a", 0)
    spec, _ = spec_without_weights(tmp_path / "a")
    permute_checkpoint(tmp_path / "a", spec, random_perms(spec, torch.Generator().manual_seed(5)), tmp_path / "b")
    b = LazyTensors(read_checkpoint(tmp_path / "b"))
    assert any(not torch.equal(a[n], b[n]) for n in a)
    perms, info = match_streamed(a, b, spec)
    assert info["distance_before"] > 1 and info["distance_after"] == 0.0 and info["changed"][-1] == 0
    permute_checkpoint(tmp_path / "b", spec, perms, tmp_path / "aligned")
    back = LazyTensors(read_checkpoint(tmp_path / "aligned"))
    assert all(torch.equal(back[n], a[n]) for n in a)


def test_independent_pair_ends_where_the_in_memory_matching_stops(tmp_path):
    a = _checkpoint(tmp_path / "a", 0)
    b = _checkpoint(tmp_path / "b", 1)
    spec, _ = spec_without_weights(tmp_path / "a")
    perms, info = match_streamed(a, b, spec, dtype=torch.float64)
    A = {n: a[n].double() for n in a}
    B = {n: b[n].double() for n in b}
    groups = spec_groups(SimpleNamespace(perms=spec["perms"], axes=spec["axes"]), A)
    again, sweeps = match_permutations(A, B, groups, init=perms)
    assert sweeps == 1 and all(torch.equal(again[k], perms[k]) for k in perms)
    cur = B
    for g in groups:
        cur = permute(cur, g, perms[g.name])
    assert info["distance_after"] == pytest.approx(distance(A, cur) ** 0.5, rel=1e-12)
    assert info["distance_after"] < info["distance_before"]


def test_different_architectures_refused(tmp_path):
    a = _checkpoint(tmp_path / "a", 0)
    b = _checkpoint(tmp_path / "b", 0, layers=2)
    spec, _ = spec_without_weights(tmp_path / "a")
    with pytest.raises(ArchitectureMismatchError, match="different tensors"):
        match_streamed(a, b, spec)
