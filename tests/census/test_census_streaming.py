"""``census --stream`` (issue 34): the weighted census verified one decoder layer at a time.

Tiny random checkpoints of 4 layers saved in several shards. The streamed census must verify the
same entries as the in-memory census of the loaded model (whose check is the whole model's
output), each within its tolerance; a false claim must stay unverified; the streamed logits must
be the model's; bad checkpoints and a too-small ``--max-memory`` are named errors raised before any
tensor is read.
"""

import json

import pytest
import torch

from paramsym.census import census
from paramsym.census.finders import AttentionFinder
from paramsym.census.streaming import plan_stream, streaming_census
from paramsym.census.zoo import tiny_model
from paramsym.cli import main
from paramsym.errors import CheckpointError, TooLargeError

transformers = pytest.importorskip("transformers")


def _checkpoint(name, tmp_path, seed=4):
    cfg = tiny_model(name, causal_lm=True).config
    for k in ("num_hidden_layers", "n_layer"):
        if hasattr(cfg, k):
            setattr(cfg, k, 4)
    if getattr(cfg, "layer_types", None):  # per-layer list (Qwen2)
        cfg.layer_types = [cfg.layer_types[0]] * 4
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
        with torch.no_grad():
            for p in model.parameters():
                p.copy_((1 if p.dim() == 1 and bool((p == 1).all()) else 0) + 0.2 * torch.randn_like(p))
    src = tmp_path / name
    model.eval().save_pretrained(src, max_shard_size="40KB")
    assert len(list(src.glob("*.safetensors"))) > 2
    return src, model


@pytest.mark.parametrize("name", ["llama", "mistral", "qwen2", "gpt2", "mixtral"])  # Mixtral: experts stored per expert
def test_streamed_entries_are_the_in_memory_census_entries(tmp_path, name):
    src, model = _checkpoint(name, tmp_path)
    streamed, rep = streaming_census(src, seed=1, spot_check=True)
    whole = census(model, seed=1)
    key = lambda e: (e.module, e.kind, e.dimension)  # noqa: E731
    layered = [e for e in whole.entries if e.kind != "residual_permutation"]
    assert sorted(map(key, streamed.entries)) == sorted(map(key, layered))
    assert all(e.verified for e in layered)
    for e in streamed.entries:
        assert e.verified, (e.module, e.kind, e.verified_error, e.tolerance)
        assert e.verified_error <= e.tolerance and e.motion > 0
    assert streamed.total_dimension == whole.total_dimension  # the residual permutation adds 0
    assert [r["kind"] for r in streamed.refused] == ["residual_permutation"]
    # the streamed layer functions are the model's: logits of from_pretrained in float32
    assert rep["spot_check"]["checked"] and rep["spot_check"]["relative_error"] < 1e-5


def test_streamed_logits_equal_the_float64_model(tmp_path):
    """The spot check's reference, independently: the whole model in float64 on the same tokens."""
    from paramsym.census.streaming import streamed_output

    src, model = _checkpoint("llama", tmp_path)
    ids = torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(0))
    got = streamed_output(src, ids)
    with torch.no_grad():
        ref = model.to(torch.float64)(input_ids=ids).logits
    assert float((got - ref).norm() / ref.norm()) < 1e-12


def test_a_false_claim_stays_unverified_layer_by_layer(tmp_path):
    """GL(d_k) on query/key under rotary embeddings is false; its layer update changes."""
    src, _ = _checkpoint("llama", tmp_path)
    res, _ = streaming_census(src, finders=[AttentionFinder(qk_algebra="gl")])
    qk = [e for e in res.entries if e.kind.startswith("attention.query_key")]
    assert len(qk) == 4 and not any(e.verified for e in qk)
    assert min(e.verified_error for e in qk) > 1e3 * max(e.tolerance for e in qk)
    vo = [e for e in res.entries if e.kind == "attention.value_output.gl"]
    assert len(vo) == 4 and all(e.verified for e in vo)


def _no_reads(monkeypatch):
    import safetensors

    def refuse(*a, **k):
        raise AssertionError("a tensor was read")

    monkeypatch.setattr(safetensors, "safe_open", refuse)


def test_bad_checkpoints_are_named_before_any_read(tmp_path, monkeypatch):
    src, _ = _checkpoint("llama", tmp_path)
    index = src / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    shards = sorted(src.glob("*.safetensors"))
    _no_reads(monkeypatch)
    # an index naming a tensor no shard holds
    bad = dict(data, weight_map={**data["weight_map"], "model.layers.9.mlp.up_proj.weight": shards[0].name})
    index.write_text(json.dumps(bad))
    with pytest.raises(CheckpointError, match="does not hold it"):
        streaming_census(src)
    index.write_text(json.dumps(data))
    # a truncated shard
    raw = shards[1].read_bytes()
    shards[1].write_bytes(raw[:-100])
    with pytest.raises(CheckpointError, match="truncated"):
        streaming_census(src)
    shards[1].write_bytes(raw)
    # a shard missing from the directory, and a shard missing from the index
    shards[2].rename(tmp_path / "away.safetensors")
    with pytest.raises(CheckpointError, match="lacks"):
        streaming_census(src)
    (tmp_path / "away.safetensors").rename(shards[2])
    stray = dict(data, weight_map={k: v for k, v in data["weight_map"].items() if v != shards[2].name})
    index.write_text(json.dumps(stray))
    with pytest.raises(CheckpointError, match="missing from the index"):
        streaming_census(src)
    index.write_text(json.dumps(data))
    with pytest.raises(TooLargeError, match="streaming census"):
        streaming_census(src, max_memory=64 << 20)


def test_max_memory_estimate_grows_with_the_largest_layer_not_the_depth(tmp_path):
    """The estimate is the layer's (×LAYER_FACTOR) or the 2-layer copy's, plus the runtime: the same
    for 4 and 8 layers of one width."""
    a, _ = _checkpoint("llama", tmp_path / "a")
    cfg = json.loads((a / "config.json").read_text())
    plan4 = plan_stream(a)
    b = tmp_path / "b" / "llama8"
    b.mkdir(parents=True)
    cfg["num_hidden_layers"] = 8
    (b / "config.json").write_text(json.dumps(cfg))
    m = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.from_pretrained(b))
    m.save_pretrained(b, max_shard_size="40KB")
    plan8 = plan_stream(b)
    assert plan8.parameters > plan4.parameters and plan8.estimate == plan4.estimate


def test_cli_stream(tmp_path, capsys):
    src, _ = _checkpoint("qwen2", tmp_path)
    assert main(["census", "--model", str(src), "--stream", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["all_verified"] and out["streaming"]["layers"] == 4 and out["symmetries"]
    assert main(["census", "--model", str(src), "--stream", "--max-memory", "100MiB"]) == 2
    err = capsys.readouterr().err
    assert "TooLargeError" in err and len(err.strip().splitlines()) == 1
    assert main(["census", "--model", str(src), "--stream", "--export", "permutation-spec"]) == 2
