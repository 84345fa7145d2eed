"""``paramsym align A B --stream --out DIR [--merge ALPHA] [--max-memory SIZE]`` (issue 34): two
sharded checkpoints aligned by weight matching with both read one tensor at a time, the aligned
and merged checkpoints written shard by shard (:mod:`paramsym.kinds.align_stream`).

The scrambled copy is written by the tests' independent applier (numpy-drawn permutations;
split / take / merge on the stored tensors: ``test_census_spaces._apply_file``) and saved shard by
shard with ``safetensors.torch.save_file``. References: the stored tensors themselves (bit for bit),
``from_pretrained``'s forward of the written checkpoints, the merge recomputed in float64.
"""

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from test_census_spaces import _apply_file
from test_census_stored_names import _reload_logits, _stored
from test_census_streaming import _checkpoint, _no_reads

from paramsym.census.configspec import spec_without_weights
from paramsym.cli import main

transformers = pytest.importorskip("transformers")
INDEX = "model.safetensors.index.json"


def _write_like(src, dst, tensors):
    """``tensors`` saved in ``src``'s shard layout (same shard names, same index and config)."""
    dst.mkdir()
    for f in src.iterdir():
        if f.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(f), framework="pt") as fh:
                names = list(fh.keys())
            save_file({n: tensors[n].contiguous() for n in names}, str(dst / f.name), metadata={"format": "pt"})
        else:
            shutil.copy(f, dst / f.name)
    return dst


def _align(a, b, out, *extra):
    return main(["align", str(a), str(b), "--stream", "--out", str(out), "--quiet", *extra])


def _logits(directory, ids):
    return _reload_logits(directory, transformers.AutoModelForCausalLM, {"input_ids": ids})


@pytest.mark.parametrize("name,dtype", [("llama", torch.float32), ("gpt2", torch.float32), ("llama", torch.bfloat16)])
def test_scrambled_copy_aligned_back_exactly_and_merged_at_zero_is_a(tmp_path, name, dtype):
    src, model = _checkpoint(name, tmp_path)
    if dtype != torch.float32:
        shutil.rmtree(src)
        model.to(dtype).save_pretrained(src, max_shard_size="40KB")
    stored = _stored(src)
    spec, _ = spec_without_weights(src)
    scrambled, _ = _apply_file(stored, spec, np.random.default_rng(7))
    b = _write_like(src, tmp_path / "scrambled", scrambled)
    assert sum(not torch.equal(scrambled[k], stored[k]) for k in stored) > len(stored) // 2  # B really moved
    run = tmp_path / "run"
    assert _align(src, b, run, "--merge", "0") == 0
    aligned, merged = _stored(run / "aligned_b"), _stored(run / "merged")
    assert aligned.keys() == stored.keys() == merged.keys()
    for k in stored:  # recovered bit for bit, in the stored dtype; the α = 0 merge is A itself
        assert aligned[k].dtype == stored[k].dtype == dtype and torch.equal(aligned[k], stored[k]), k
        assert merged[k].dtype == dtype and torch.equal(merged[k], stored[k]), k
    for d in ("aligned_b", "merged"):  # the source's shard layout
        assert sorted(p.name for p in (run / d).glob("*.safetensors")) == sorted(p.name for p in src.glob("*.safetensors"))
        assert json.loads((run / d / INDEX).read_text())["weight_map"] == json.loads((src / INDEX).read_text())["weight_map"]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["distance_before"] > 1 and metrics["distance_after"] == 0.0 and metrics["moved"] > 0
    assert metrics["shards"] == len(list(src.glob("*.safetensors"))) > 2
    config = json.loads((run / "config.json").read_text())
    assert config["kind"] == "align-stream" and config["merge"] == 0.0
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    assert torch.equal(_logits(run / "merged", ids), _logits(src, ids))  # loads with from_pretrained


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_independent_pair_aligned_b_keeps_b_function_and_merge_is_the_mix(tmp_path, name):
    a, _ = _checkpoint(name, tmp_path / "a", seed=4)
    b, _ = _checkpoint(name, tmp_path / "b", seed=5)
    run = tmp_path / "run"
    assert _align(a, b, run, "--merge", "0.5", "--max-memory", "8GiB") == 0
    A, B, P, M = _stored(a), _stored(b), _stored(run / "aligned_b"), _stored(run / "merged")
    assert sum(not torch.equal(P[k], B[k]) for k in B) > len(B) // 2  # the alignment moved B
    for k in B:  # a permutation of B's entries: the same multiset of values
        assert torch.equal(P[k].flatten().sort().values, B[k].flatten().sort().values), k
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    lb, lp = _logits(b, ids), _logits(run / "aligned_b", ids)
    # float32 forward of a reordered model: sums reassociated, relative rounding ~ depth · 2⁻²⁴ √width
    assert float((lp - lb).norm() / lb.norm()) < 1e-5
    metrics = json.loads((run / "metrics.json").read_text())
    # the record's distances, recomputed from the written files in float64
    dist = lambda X, Y: sum(float((X[k].double() - Y[k].double()).pow(2).sum()) for k in X) ** 0.5  # noqa: E731
    assert metrics["distance_before"] == pytest.approx(dist(A, B), rel=1e-12)
    assert metrics["distance_after"] == pytest.approx(dist(A, P), rel=1e-12)
    assert metrics["distance_after"] < metrics["distance_before"]
    for k in A:  # ½a + ½p is exact in float64 and rounds once to float32: the merge bit for bit
        assert torch.equal(M[k], (0.5 * A[k].double() + 0.5 * P[k].double()).to(A[k].dtype)), k
    assert torch.isfinite(_logits(run / "merged", ids)).all()
    perms = _stored(run)  # permutations.safetensors: one permutation of 0..n-1 per ID of the spec
    spec = json.loads((run / "permutation_spec.json").read_text())
    assert {k: v.numel() for k, v in perms.items()} == {k: int(n) for k, n in spec["perms"].items()}


def _fails(capsys, a, b, run, *extra, match):
    capsys.readouterr()  # the checkpoints' own writing progress
    assert _align(a, b, run, *extra) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err, err
    assert not run.exists() or not any(run.iterdir()), list(run.iterdir())  # nothing written


def test_bad_input_named_before_anything_is_written(tmp_path, capsys, monkeypatch):
    a, _ = _checkpoint("llama", tmp_path / "a")
    gpt2, _ = _checkpoint("gpt2", tmp_path / "g")
    run = tmp_path / "run"
    _fails(capsys, a, gpt2, run, match="ArchitectureMismatchError: A is a 'llama' checkpoint and B a 'gpt2' one")
    cfg = transformers.LlamaConfig.from_pretrained(a)
    cfg.intermediate_size += 8  # another size of the same architecture
    wide = tmp_path / "wide"
    transformers.LlamaForCausalLM(cfg).save_pretrained(wide, max_shard_size="40KB")
    _fails(capsys, a, wide, run, match="ArchitectureMismatchError: A stores 'model.layers.0.mlp.down_proj.weight'")
    b = shutil.copytree(a, tmp_path / "b")
    shards = sorted(b.glob("*.safetensors"))
    raw = shards[1].read_bytes()
    shards[1].write_bytes(raw[:-8])
    _fails(capsys, a, b, run, match="truncated")
    shards[1].write_bytes(raw)
    shards[2].unlink()
    _fails(capsys, a, b, run, match="lacks")
    shutil.copy(a / shards[2].name, shards[2])
    with monkeypatch.context() as m:  # refused from the headers: no tensor is read
        _no_reads(m)
        _fails(capsys, a, b, run, "--max-memory", "512MiB", match="TooLargeError")
    capsys.readouterr()
    assert _align(a, b, run, "--merge", "1.5") == 2 and "--merge must be a number" in capsys.readouterr().err
    assert _align(a, b, run, "--points", "3") == 2 and "does not apply" in capsys.readouterr().err
    assert _align(a, b, run, "--census-groups") == 2 and "give one of them" in capsys.readouterr().err
    assert not run.exists()


def test_resume_before_the_record_aligns_again_and_keeps_the_interrupted_outputs(tmp_path):
    a, _ = _checkpoint("llama", tmp_path / "a", seed=4)
    b, _ = _checkpoint("llama", tmp_path / "b", seed=5)
    run = tmp_path / "run"
    assert _align(a, b, run, "--merge", "0.25") == 0
    first = json.loads((run / "metrics.json").read_text())
    written = {d: _stored(run / d) for d in ("aligned_b", "merged")}
    for f in ("alignment.json", "metrics.json", "report.md"):  # killed while writing the checkpoints
        (run / f).unlink()
    assert main(["align", "--resume", str(run), "--quiet"]) == 0
    again = json.loads((run / "metrics.json").read_text())
    assert {k: v for k, v in again.items() if k != "seconds"} == {k: v for k, v in first.items() if k != "seconds"}
    for d, tensors in written.items():
        stale = list(run.glob(f"{d}.stale-*"))
        assert len(stale) == 1  # the interrupted attempt's output, moved aside, never deleted
        now = _stored(run / d)
        assert all(torch.equal(now[k], tensors[k]) for k in tensors)
