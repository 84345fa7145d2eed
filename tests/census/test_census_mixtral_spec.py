"""Mixtral's permutation spec names the stored per-expert tensors (issue 34 items 2 and 4).

transformers (≥ 5) stores every expert's ``block_sparse_moe.experts.<e>.w1/w2/w3.weight`` and
fuses them into the 3-D banks ``mlp.experts.gate_up_proj`` / ``down_proj`` on loading. The
exported spec must name what the checkpoint stores: one unit permutation per expert per layer on
``w1``/``w3`` rows and ``w2`` columns, the stream on every tensor touching it (the router's columns
included). Checked by applying the file to the stored tensors with the tests' own applier
(``_apply_file``: independent of the exporter), writing them, reloading with ``from_pretrained``.
"""

import json

import numpy as np
import pytest
import torch
from test_census_spaces import _apply_file
from test_census_stored_names import _reload_logits, _rewrite, _save_sharded, _stored

from paramsym.census.zoo import tiny_model
from paramsym.cli import main

transformers = pytest.importorskip("transformers")

L, E, H = 2, 3, 32  # the tiny config's layers, experts, expert width
MOE = "model.layers.{i}.block_sparse_moe"


def _export(src, out, *extra):
    assert main(["census", "--model", str(src), "--export", "permutation-spec", "--out", str(out), *extra]) == 0
    return json.loads((out / "permutation_spec.json").read_text())


def _rel(a, b):
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mixtral_spec_on_stored_experts_reloads_with_unchanged_logits_and_a_wrong_one_is_caught(tmp_path, seed):
    src = _save_sharded(tiny_model("mixtral", seed=seed, causal_lm=True), tmp_path / "src")
    spec = _export(src, tmp_path / "spec", "--seed", str(seed))
    stored = _stored(src)
    assert set(spec["axes"]) <= set(stored) and not any("gate_up_proj" in n or "down_proj" in n for n in spec["axes"])
    assert {k: v for k, v in spec["perms"].items() if k.startswith("P_ffn")} == {
        f"P_ffn_e{e}_{i}": H for i in range(L) for e in range(E)}
    for i in range(L):
        m = MOE.format(i=i)
        assert spec["axes"][f"{m}.gate.weight"] == [None, "P_res"]  # the router: stream columns, experts fixed
        for e in range(E):
            for w in ("w1", "w3"):
                assert spec["axes"][f"{m}.experts.{e}.{w}.weight"] == [f"P_ffn_e{e}_{i}", "P_res"]
            assert spec["axes"][f"{m}.experts.{e}.w2.weight"] == ["P_res", f"P_ffn_e{e}_{i}"]
    inputs = {"input_ids": torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(seed))}
    cls = transformers.AutoModelForCausalLM
    base = _reload_logits(src, cls, inputs)
    new, _ = _apply_file(stored, spec, np.random.default_rng(seed))
    moved = [n for n in stored if ".experts." in n and not torch.equal(new[n], stored[n])]
    assert len(moved) == 3 * E * L  # every stored expert tensor moved
    _rewrite(src, tmp_path / "permuted", new)
    assert _rel(_reload_logits(tmp_path / "permuted", cls, inputs), base) <= 1e-5  # float32 summation order only
    # one expert's w2 left out of its unit permutation (its w1/w3 rows still permuted): detected
    e = seed % E
    victim = f"{MOE.format(i=0)}.experts.{e}.w2.weight"
    wrong = {**spec, "axes": {**spec["axes"], victim: ["P_res", None]}}
    new, _ = _apply_file(stored, wrong, np.random.default_rng(seed))
    _rewrite(src, tmp_path / "wrong", new)
    assert _rel(_reload_logits(tmp_path / "wrong", cls, inputs), base) > 1e-3, victim


def test_mixtral_spec_without_weights_equals_the_weighted_one(tmp_path):
    """From the headers and config alone (a two-layer copy traced), extended to every layer: the
    same file as the weighted export's, on the tiny model and on a four-layer one."""
    src = _save_sharded(tiny_model("mixtral", seed=3, causal_lm=True), tmp_path / "src")
    assert _export(src, tmp_path / "a", "--without-weights") == _export(src, tmp_path / "b")
    cfg = tiny_model("mixtral", causal_lm=True).config
    cfg.num_hidden_layers = 4
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        deep = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    src4 = _save_sharded(deep, tmp_path / "src4")
    spec = _export(src4, tmp_path / "c", "--without-weights")
    assert spec == _export(src4, tmp_path / "d") and f"P_ffn_e{E - 1}_3" in spec["perms"]


def test_mixtral_stored_fused_banks_are_named_as_stored_and_their_experts_omitted(tmp_path, capsys):
    """A checkpoint storing the loaded model's own fused banks (transformers loads it too): the spec
    names ``gate_up_proj``/``down_proj`` with the stream on their axes, and the per-expert units,
    which no axis entry of a 3-D bank states, are listed as not expressible — not written wrong."""
    model = tiny_model("mixtral", seed=4, causal_lm=True)
    src = _save_sharded(model, tmp_path / "src")
    fused = {k: v.detach() for k, v in model.state_dict().items()}
    _rewrite(src, tmp_path / "fused", fused)
    capsys.readouterr()
    spec = _export(tmp_path / "fused", tmp_path / "spec")
    assert "not expressible" in capsys.readouterr().out
    assert set(spec["axes"]) <= set(fused) and not any(k.startswith("P_ffn") for k in spec["perms"])
    assert spec["axes"]["model.layers.0.mlp.experts.gate_up_proj"] == [None, None, "P_res"]
    inputs = {"input_ids": torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(4))}
    cls = transformers.AutoModelForCausalLM
    base = _reload_logits(tmp_path / "fused", cls, inputs)
    new, _ = _apply_file(fused, spec, np.random.default_rng(4))
    _rewrite(src, tmp_path / "permuted", new)
    assert _rel(_reload_logits(tmp_path / "permuted", cls, inputs), base) <= 1e-5


@pytest.mark.parametrize("fmt", ["mergekit", "mergekit-0.0"])
def test_mixtral_mergekit_export_is_a_named_refusal(tmp_path, capsys, fmt):
    src = _save_sharded(tiny_model("mixtral", causal_lm=True), tmp_path / "src")
    capsys.readouterr()
    out = tmp_path / "arch"
    assert main(["census", "--model", str(src), "--export", fmt, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "per expert" in err and "permutation-spec" in err and len(err.splitlines()) == 1
    assert not (out / "mergekit_architecture.json").exists()


def test_scrambled_mixtral_checkpoint_is_matched_back_expert_by_expert(tmp_path):
    """The stored-name spec drives the streamed tools unchanged: a copy scrambled by one random
    element of the group (every expert's units, heads, stream), written shard by shard, has the
    original's logits, and streamed weight matching recovers every stored tensor bit for bit."""
    from paramsym.alignment.streamed import match_streamed
    from paramsym.census.permspec import random_perms
    from paramsym.census.rewrite import permute_checkpoint
    from paramsym.census.stored import read_checkpoint
    from paramsym.models.checks import LazyTensors

    src = _save_sharded(tiny_model("mixtral", seed=6, causal_lm=True), tmp_path / "a")
    spec = _export(src, tmp_path / "spec")
    permute_checkpoint(src, spec, random_perms(spec, torch.Generator().manual_seed(6)), tmp_path / "b")
    a, b = LazyTensors(read_checkpoint(src)), LazyTensors(read_checkpoint(tmp_path / "b"))
    assert all(not torch.equal(a[n], b[n]) for n in a if ".experts." in n)
    inputs = {"input_ids": torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(6))}
    cls = transformers.AutoModelForCausalLM
    assert _rel(_reload_logits(tmp_path / "b", cls, inputs), _reload_logits(src, cls, inputs)) <= 1e-5
    perms, info = match_streamed(a, b, spec)
    assert info["distance_after"] == 0.0
    permute_checkpoint(tmp_path / "b", spec, perms, tmp_path / "back")
    back = LazyTensors(read_checkpoint(tmp_path / "back"))
    assert all(torch.equal(back[n], a[n]) for n in a)
