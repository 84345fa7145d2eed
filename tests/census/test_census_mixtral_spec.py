"""Mixtral's permutation spec names the stored per-expert tensors (issue 34 items 2 and 4).

transformers (≥ 5) stores every expert's ``block_sparse_moe.experts.<e>.w1/w2/w3.weight`` and
fuses them into the 3-D banks ``mlp.experts.gate_up_proj`` / ``down_proj`` on loading. The
exported spec must name what the checkpoint stores: one unit permutation per expert per layer on
``w1``/``w3`` rows and ``w2`` columns, the stream on every tensor touching it (the router's columns
included). Checked by applying the file to the stored tensors with the tests' own applier
(``_apply_file``: independent of the exporter), writing them, reloading with ``from_pretrained``.
"""

import json
import re
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
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


def _save_stacked(model, path):
    """The loaded model's own 3-D banks (``mlp.experts.gate_up_proj`` (E, 2h, D), ``down_proj``
    (E, D, h)), written in two shards with an index — a converter-free writer's layout, which
    transformers loads as it is."""
    src = _save_sharded(model, path.parent / f"{path.name}_per_expert")
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    names = sorted(state)
    half = {n: ("model-00001-of-00002.safetensors" if k < len(names) // 2 else "model-00002-of-00002.safetensors")
            for k, n in enumerate(names)}
    path.mkdir()
    for f in src.iterdir():
        if f.suffix == ".json" and f.name != "model.safetensors.index.json":
            shutil.copy(f, path / f.name)
    for shard in sorted(set(half.values())):
        save_file({n: state[n] for n in names if half[n] == shard}, str(path / shard), metadata={"format": "pt"})
    (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": half}))
    return path, state


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mixtral_stacked_banks_get_one_group_per_expert_on_per_slice_axes(tmp_path, seed):
    """A checkpoint storing the stacked banks: the spec names them and states each expert's units
    on slice e of the bank (per-slice entries: ``gate_up_proj`` axis 1 ``[gate | up]`` sub-blocks,
    ``down_proj`` axis 2). Applied by the tests' own applier to the stored tensors, reloaded with
    ``from_pretrained``: logits unchanged, every expert's slice moved; a per-slice entry left
    off, or two experts' entries swapped, changes them."""
    src, stacked = _save_stacked(tiny_model("mixtral", seed=seed, causal_lm=True), tmp_path / "stacked")
    assert any(n.endswith("experts.gate_up_proj") for n in _stored(src))  # the stacked layout is what is stored
    spec = _export(src, tmp_path / "spec", "--seed", str(seed))
    assert set(spec["axes"]) <= set(stacked)
    assert {k: v for k, v in spec["perms"].items() if k.startswith("P_ffn")} == {
        f"P_ffn_e{e}_{i}": H for i in range(L) for e in range(E)}
    for i in range(L):
        m = f"model.layers.{i}.mlp"
        assert spec["axes"][f"{m}.gate.weight"] == [None, "P_res"]
        assert spec["axes"][f"{m}.experts.gate_up_proj"] == [None, {"per_slice_of_axis": 0, "entries": [
            [[f"P_ffn_e{e}_{i}", H], [f"P_ffn_e{e}_{i}", H]] for e in range(E)]}, "P_res"]
        assert spec["axes"][f"{m}.experts.down_proj"] == [None, "P_res", {"per_slice_of_axis": 0, "entries": [
            f"P_ffn_e{e}_{i}" for e in range(E)]}]
    inputs = {"input_ids": torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(seed))}
    cls = transformers.AutoModelForCausalLM
    base = _reload_logits(src, cls, inputs)
    new, _ = _apply_file(stacked, spec, np.random.default_rng(seed))
    for n in (n for n in stacked if n.endswith(("gate_up_proj", "down_proj"))):
        assert all(not torch.equal(new[n][e], stacked[n][e]) for e in range(E)), n  # every expert's slice moved
    _rewrite(src, tmp_path / "permuted", new)
    assert _rel(_reload_logits(tmp_path / "permuted", cls, inputs), base) <= 1e-5  # float32 summation order only
    e = seed % E
    down = f"model.layers.{seed % L}.mlp.experts.down_proj"
    cut = json.loads(json.dumps(spec))
    cut["axes"][down][2]["entries"][e] = None  # expert e's down columns left out (its gate/up rows still moved)
    swapped = json.loads(json.dumps(spec))
    ids = swapped["axes"][down][2]["entries"]
    ids[e], ids[(e + 1) % E] = ids[(e + 1) % E], ids[e]  # two experts' permutations exchanged
    for k, wrong in enumerate((cut, swapped)):
        new, _ = _apply_file(stacked, wrong, np.random.default_rng(seed))
        _rewrite(src, tmp_path / f"wrong{k}", new)
        assert _rel(_reload_logits(tmp_path / f"wrong{k}", cls, inputs), base) > 1e-3, (k, down)


def test_mixtral_stacked_spec_without_weights_and_streamed_matching(tmp_path):
    """The stacked layout's spec from the headers alone equals the weighted one (four layers: the
    per-slice entries renumbered per layer), and streamed weight matching over it recovers a
    copy scrambled by one element of the group bit for bit."""
    from paramsym.alignment.streamed import match_streamed
    from paramsym.census.permspec import random_perms
    from paramsym.census.rewrite import permute_checkpoint
    from paramsym.census.stored import read_checkpoint
    from paramsym.models.checks import LazyTensors

    cfg = tiny_model("mixtral", causal_lm=True).config
    cfg.num_hidden_layers = 4
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        deep = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    src, _ = _save_stacked(deep, tmp_path / "a")
    spec = _export(src, tmp_path / "spec")
    assert spec == _export(src, tmp_path / "spec_meta", "--without-weights") and f"P_ffn_e{E - 1}_3" in spec["perms"]
    permute_checkpoint(src, spec, random_perms(spec, torch.Generator().manual_seed(7)), tmp_path / "b")
    a, b = LazyTensors(read_checkpoint(src)), LazyTensors(read_checkpoint(tmp_path / "b"))
    banks = [n for n in a if n.endswith(("gate_up_proj", "down_proj"))]
    assert len(banks) == 8 and all(not torch.equal(a[n][e], b[n][e]) for n in banks for e in range(E))
    inputs = {"input_ids": torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(7))}
    cls = transformers.AutoModelForCausalLM
    assert _rel(_reload_logits(tmp_path / "b", cls, inputs), _reload_logits(src, cls, inputs)) <= 1e-5
    perms, info = match_streamed(a, b, spec)
    assert info["distance_before"] > 0 and info["distance_after"] == 0.0
    permute_checkpoint(tmp_path / "b", spec, perms, tmp_path / "back")
    back = LazyTensors(read_checkpoint(tmp_path / "back"))
    assert all(torch.equal(back[n], a[n]) for n in a)


def test_mixtral_stacked_mergekit_0_0_is_a_named_refusal(tmp_path, capsys):
    """MergeKit 0.0's spaces state one space per tensor axis: a per-expert group on a slice of a
    stacked bank is refused by name, nothing written."""
    src, _ = _save_stacked(tiny_model("mixtral", causal_lm=True), tmp_path / "stacked")
    capsys.readouterr()
    out = tmp_path / "arch"
    assert main(["census", "--model", str(src), "--export", "mergekit-0.0", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "per slice of axis 0" in err and "experts.gate_up_proj" in err and "permutation-spec" in err
    assert len(err.splitlines()) == 1 and not (out / "mergekit_architecture.json").exists()


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


def test_mixtral_in_memory_alignment_recovers_a_per_expert_scramble():
    """The in-memory weight matching (``spec_groups`` reads the per-slice entries as unit groups of
    each expert's slice) undoes a random element of the group applied through the spec."""
    from paramsym.alignment.checkpoints import align_to, spec_groups
    from paramsym.census.export import spec_for_model
    from paramsym.census.permspec import apply_spec, random_perms

    model = tiny_model("mixtral", seed=8, causal_lm=True)
    spec = spec_for_model(model, seed=8, sub_blocks=True)
    a = {k: v.detach() for k, v in model.named_parameters()}
    groups = {g.name: g for g in spec_groups(spec, a)}
    bank = "model.layers.1.mlp.experts.down_proj"
    member = next(m for m in groups["P_ffn_e2_1"].members if m.name == bank)
    assert member.positions.shape == (H, a[bank].shape[1])  # expert 2's 32 columns, each a unit
    assert bool((member.positions // (a[bank].shape[1] * H) == 2).all())  # all in expert 2's slice
    b = apply_spec(a, spec, random_perms(spec, torch.Generator().manual_seed(8)))
    assert all(not torch.equal(a[n], b[n]) for n in a if "experts" in n)
    out, info = align_to(a, b, spec, seed=8)
    assert all(torch.equal(out[n], a[n]) for n in a) and info["distance_after"] == 0.0


@pytest.mark.parametrize("entry, says", [
    ({"per_slice_of_axis": 0, "entries": ["P"]}, "lists 1 per-slice entries for the 2 slices"),
    ({"per_slice_of_axis": 1, "entries": ["P", "P"]}, "per slice of axis 1; expected another axis"),
    ({"per_slice_of_axis": 0, "entries": ["P", "P"], "x": 1}, "expected {\"per_slice_of_axis\""),
    ({"per_slice_of_axis": 0, "entries": [{"per_slice_of_axis": 0, "entries": ["P", "P"]}, None]}, "one plain entry"),
])
def test_malformed_per_slice_entries_are_named_errors(tmp_path, entry, says):
    """A per-slice entry of the wrong length, of its own axis, with stray keys or nested: one
    named ShapeError from the applier and from ``permute_checkpoint`` (nothing written)."""
    from paramsym.census.permspec import apply_spec
    from paramsym.census.rewrite import permute_checkpoint
    from paramsym.errors import ShapeError

    spec = {"perms": {"P": 3}, "axes": {"w": [None, entry]}}
    t = torch.arange(12.0).reshape(2, 6)
    with pytest.raises(ShapeError, match=re.escape(says)):
        apply_spec({"w": t}, spec, {"P": torch.tensor([2, 0, 1])})
    (tmp_path / "src").mkdir()
    save_file({"w": t}, str(tmp_path / "src" / "model.safetensors"))
    with pytest.raises(ShapeError, match=re.escape(says)):
        permute_checkpoint(tmp_path / "src", spec, {"P": torch.tensor([2, 0, 1])}, tmp_path / "out")
    assert not (tmp_path / "out").exists()
