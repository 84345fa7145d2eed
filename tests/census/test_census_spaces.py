"""Census without an adapter (issue 18): spaces traced from the model, the residual stream,
exports verified through the file alone, the orthogonal residual group of RMSNorm models.

References are independent of the code under test: head counts and widths from the configs,
the exported files applied by a separate implementation (:func:`_apply_file`, written here with
reshapes rather than index arithmetic), outputs of the real forward pass.
"""

import json
import math
import pathlib
import pickle

import pytest
import torch
from torch import nn

from paramsym.census import census
from paramsym.census.rotation import rotate_residual
from paramsym.census.spaces import derive_spaces
from paramsym.census.walk import _output, default_inputs
from paramsym.census.zoo import TINY, tiny_model
from paramsym.cli import main
from paramsym.errors import SymmetryNotApplicableError, TraceError
from paramsym.models.adapters import adapt

transformers = pytest.importorskip("transformers")

#: model types whose HF modules sum RMSNorm (and softmax) in float32 even for float64 inputs
FLOAT32_INSIDE = {"llama", "mistral", "qwen2", "gemma", "phi3"}
CAUSAL = {"llama", "mistral", "qwen2", "gemma", "phi3", "gpt2", "gpt_neox", "opt", "falcon", "stablelm"}


def _inputs(model):
    return default_inputs(model, torch.Generator().manual_seed(0))


@pytest.mark.parametrize("name", ["bert", "gpt2", "gpt_neox", "llama"])
def test_traced_layout_equals_the_adapter(name):
    model = tiny_model(name).double()
    sp = derive_spaces(model, _inputs(model), _output)
    ref = adapt(model)
    assert len(sp.layout.layers) == len(ref.layers) == 2
    for a, b in zip(sp.layout.layers, ref.layers):
        for p in ("q", "k", "v", "o"):
            assert getattr(a.attention, p) == getattr(b.attention, p), (name, p)
        assert (a.attention.num_heads, a.attention.num_kv_heads, a.attention.head_dim, a.attention.rotary_dim) == (
            b.attention.num_heads, b.attention.num_kv_heads, b.attention.head_dim, b.attention.rotary_dim)
        assert a.attention.rotary_freqs == pytest.approx(b.attention.rotary_freqs)
        assert (a.ffn.up, a.ffn.gate, a.ffn.down) == (b.ffn.up, b.ffn.gate, b.ffn.down)
        assert (a.norm_attention, a.norm_ffn) == (b.norm_attention, b.norm_ffn)


@pytest.mark.parametrize("name", TINY)
def test_census_of_every_tiny_architecture_is_verified(name):
    model = tiny_model(name)
    cfg = model.config
    r = census(model, layout="derived")
    assert r.all_verified, [(e.module, e.kind, e.verified_error) for e in r.entries if not e.verified]
    assert all(e.motion > 1e-3 for e in r.entries)
    assert not r.unrecognised, r.unrecognised
    H = next(getattr(cfg, k) for k in ("num_attention_heads", "n_head", "n_heads"))
    D = next(getattr(cfg, k) for k in ("hidden_size", "n_embd", "dim"))
    kv = getattr(cfg, "num_key_value_heads", None) or getattr(cfg, "num_kv_heads", None) or H
    d = getattr(cfg, "head_dim", None) or D // H
    vo = [e for e in r.entries if e.kind == "attention.value_output.gl"]
    assert [e.dimension for e in vo] == [kv * d * d] * 2  # GL(d_v) per key/value head, per layer
    res = [e for e in r.entries if e.kind == "residual_permutation"]
    assert len(res) == 1 and res[0].discrete_order == f"{D}!"
    assert res[0].log10_order == pytest.approx(math.lgamma(D + 1) / math.log(10))
    assert res[0].verified_error <= (1e-5 if name in FLOAT32_INSIDE else 1e-12)
    assert len([e for e in r.entries if e.kind == "hidden_permutation"]) == 2


def test_adapter_census_gains_the_residual_stream_and_keeps_the_rest():
    model = tiny_model("gpt2")
    auto, adapter = census(model), census(model, layout="adapter")
    assert [(e.module, e.kind, e.dimension) for e in adapter.entries] == [
        (e.module, e.kind, e.dimension) for e in auto.entries if e.kind != "residual_permutation"]
    assert [e.kind for e in auto.entries].count("residual_permutation") == 1
    assert "residual_permutation" not in [e.kind for e in adapter.entries]


def _take(t, ax, n, perm):
    """Permute ``n`` equal contiguous blocks of axis ``ax`` of ``t`` by ``perm`` (reshape, take, merge)."""
    shape = list(t.shape)
    return t.movedim(ax, 0).reshape(n, shape[ax] // n, -1)[perm].reshape(
        [shape[ax]] + [s for i, s in enumerate(shape) if i != ax]).movedim(0, ax)


def _apply_entry(t, ax, entry, spec, perms):
    """Axis ``ax`` of ``t`` permuted by one axis entry of the file (independent of the exporter)."""
    if entry is None:
        return t
    if isinstance(entry, dict):  # per slice of another axis: unbind there, each slice by its own entry, stack
        s = entry["per_slice_of_axis"]
        assert set(entry) == {"per_slice_of_axis", "entries"} and len(entry["entries"]) == t.shape[s] and s != ax
        return torch.stack([_apply_entry(x, ax - (ax > s), e, spec, perms)
                            for x, e in zip(torch.unbind(t, dim=s), entry["entries"])], dim=s)
    if isinstance(entry, list):
        parts = torch.split(t, [int(size) for _, size in entry], dim=ax)
        return torch.cat([p if q is None else _take(p, ax, int(spec["perms"][q]), perms[q])
                          for p, (q, _) in zip(parts, entry)], dim=ax)
    return _take(t, ax, int(spec["perms"][entry]), perms[entry])


def _apply_file(state, spec, rng):
    """Apply one random permutation per ID through the file's data only (independent code:
    split the axis into (n, m/n), take, merge; a sub-block entry [[ID or null, size], ...] is
    torch.split into its slices, each permuted alone, and concatenated back; a per-slice entry
    {"per_slice_of_axis": s, "entries": [...]} unbinds axis s and applies entry k to slice k)."""
    perms = {k: torch.from_numpy(rng.permutation(int(n))) for k, n in spec["perms"].items()}
    out = {}
    for name, t in state.items():
        for ax, entry in enumerate(spec["axes"].get(name, [None] * t.dim())):
            t = _apply_entry(t, ax, entry, spec, perms)
        out[name] = t
    return out, perms


def _export(tmp_path, name, fmt, causal=True):
    model = tiny_model(name, causal_lm=causal and name in CAUSAL)
    src = tmp_path / name
    model.save_pretrained(src)
    out = tmp_path / f"{name}.{fmt}"
    rc = main(["census", "--model", str(src), "--export", fmt, "--out", str(out)])
    return model.double(), out / ("permutation_spec.json" if fmt == "permutation-spec" else "mergekit_architecture.json"), rc


@pytest.mark.parametrize("name", TINY)
def test_permutation_spec_export_verified_through_the_file_alone(tmp_path, name):
    import numpy as np

    model, out, rc = _export(tmp_path, name, "permutation-spec")
    assert rc == 0
    spec = json.loads(out.read_text())
    assert set(spec) == {"perms", "axes"}
    state = {k: v.detach() for k, v in model.named_parameters()}
    # the file names the stored tensors: GPT-NeoX checkpoints store the LM head as embed_out.weight
    stored = {"embed_out.weight": "lm_head.weight"} if name == "gpt_neox" else {}
    spec["axes"] = {stored.get(k, k): v for k, v in spec["axes"].items()}
    assert set(spec["axes"]) == set(state)
    D = model.get_input_embeddings().embedding_dim
    assert spec["perms"]["P_res"] == D
    # every layer's FFN units and (with >= 2 key/value heads) heads are in the file, fused tensors included
    cfg = model.config
    kv = getattr(cfg, "num_key_value_heads", None) or getattr(cfg, "num_kv_heads", None) or next(
        getattr(cfg, k) for k in ("num_attention_heads", "n_head", "n_heads"))
    L = next(getattr(cfg, k) for k in ("num_hidden_layers", "n_layer", "n_layers"))
    assert {f"P_ffn_{i}" for i in range(L)} | ({f"P_heads_{i}" for i in range(L)} if kv >= 2 else set()) | {"P_res"} == set(
        spec["perms"])
    assert all(spec["perms"][f"P_heads_{i}"] == kv for i in range(L) if kv >= 2)
    inputs = _inputs(model)
    with torch.no_grad():
        base = _output(model(**inputs))
    for seed in range(2):
        new, perms = _apply_file(state, spec, np.random.default_rng(seed))
        moved = sum(float((new[k] - state[k]).norm()) for k in state)
        assert moved > 0
        with torch.no_grad():
            got = _output(torch.func.functional_call(model, new, (), inputs))
        # a base model's last_hidden_state lies in the stream: permuted with it; LM logits are invariant
        ref = base if name in CAUSAL else base[..., perms["P_res"]]
        err = float((got - ref).norm() / base.norm())
        assert err <= (1e-5 if name in FLOAT32_INSIDE else 1e-10), err


@pytest.mark.parametrize("name", ["llama", "qwen2", "bert", "gpt_neox", "falcon"])
def test_mergekit_export_fields_and_residual_space_through_the_file(tmp_path, name):
    model, out, rc = _export(tmp_path, name, "mergekit-0.0")
    assert rc == 0
    arch = json.loads(out.read_text())
    assert {"model_type", "architectures", "pre_weights", "num_layers_config_key", "layer_templates", "post_weights"} <= set(arch)
    L = getattr(model.config, arch["num_layers_config_key"])
    state = {k: v.detach() for k, v in model.named_parameters()}
    stored = {"embed_out.weight": "lm_head.weight"} if name == "gpt_neox" else {}  # the file names stored tensors
    for e in arch["pre_weights"] + arch["post_weights"]:
        e["name"] = stored.get(e["name"], e["name"])
    names = [e["name"] for e in arch["pre_weights"] + arch["post_weights"]] + [
        w["name"].replace("${layer_index}", str(i)) for i in range(L) for w in arch["layer_templates"]["weights"]]
    assert sorted(names) == sorted(state)
    # permute running_residual alone, reading only the file: (out, in) weights, vectors, embeddings
    D = model.get_input_embeddings().embedding_dim
    p = torch.randperm(D, generator=torch.Generator().manual_seed(3))
    new = dict(state)
    for e in arch["pre_weights"] + arch["post_weights"] + [
            dict(w, name=w["name"].replace("${layer_index}", str(i))) for i in range(L) for w in arch["layer_templates"]["weights"]]:
        t = new[e["name"]]
        if e.get("is_vector") and e.get("input_space") == "running_residual":
            t = t[p]
        elif t.dim() == 2 and e.get("input_space") == "running_residual":
            t = t[:, p]
        if t.dim() == 2 and e.get("output_space") == "running_residual":
            t = t[:, p] if "input_space" not in e and e in arch["pre_weights"] + arch["post_weights"] else t[p]
        new[e["name"]] = t
    inputs = _inputs(model)
    with torch.no_grad():
        base = _output(model(**inputs))
        got = _output(torch.func.functional_call(model, new, (), inputs))
    ref = base if name in CAUSAL else base[..., p]
    assert float((got - ref).norm() / base.norm()) <= (1e-5 if name in FLOAT32_INSIDE else 1e-10)


@pytest.mark.parametrize("name", ["llama", "gemma", "phi3"])
def test_residual_rotation_returns_an_equivalent_model(name):
    model = tiny_model(name, causal_lm=True).double()
    inputs = _inputs(model)
    new, M = rotate_residual(model, inputs, _output, torch.Generator().manual_seed(1))
    D = model.get_input_embeddings().embedding_dim
    assert M.shape == (D, D) and torch.allclose(M @ M.T, torch.eye(D, dtype=M.dtype), atol=1e-12)
    with torch.no_grad():
        a, b = _output(model(**inputs)), _output(new(**inputs))
    # the models' RMSNorm sums in float32 inside a float64 run: ~3e-7 measured, 1e-5 allowed
    assert float((a - b).norm() / a.norm()) <= 1e-5
    e0, e1 = model.get_input_embeddings().weight, new.get_input_embeddings().weight
    assert float((e1 - e0).norm() / e0.norm()) > 0.5  # the weights really moved
    assert torch.allclose(e1, e0 @ M.T, atol=1e-12)


def test_residual_rotation_refuses_post_norm_and_base_models():
    bert = tiny_model("bert", cls="BertForMaskedLM").double()
    with pytest.raises(SymmetryNotApplicableError, match="post-norm"):
        rotate_residual(bert, _inputs(bert), _output, torch.Generator().manual_seed(0))
    base = tiny_model("llama").double()
    with pytest.raises(SymmetryNotApplicableError, match="LM head"):
        rotate_residual(base, _inputs(base), _output, torch.Generator().manual_seed(0))


class _Odd(nn.Module):
    """An FFN replacement the tracer cannot follow: a 3-d weight."""

    def __init__(self, D):
        super().__init__()
        self.w = nn.Parameter(torch.randn(D, D, 2) * 0.1)

    def forward(self, x):
        return torch.tanh(torch.einsum("btd,dek->bte", x, self.w))


def test_tracer_names_the_module_it_cannot_follow():
    model = tiny_model("llama").double()
    model.layers[0].mlp = _Odd(64).double()
    with pytest.raises(TraceError, match=r"layers\.0\.mlp.*_Odd") as exc:
        census(model, layout="derived")
    assert "o_proj" in str(exc.value)  # what was still found


def test_export_refuses_an_existing_path_and_pickle_weights(tmp_path, capsys):
    model = tiny_model("opt")
    src = tmp_path / "m"
    model.save_pretrained(src)
    out = tmp_path / "exists"  # a run directory that is not empty: refused, its files kept
    out.mkdir()
    (out / "permutation_spec.json").write_text("keep")
    assert main(["census", "--model", str(src), "--export", "permutation-spec", "--out", str(out)]) == 2
    assert "RunDirError" in capsys.readouterr().err and (out / "permutation_spec.json").read_text() == "keep"
    old = tmp_path / "spec.json"  # the old --out FILE form: told where the file goes now, nothing written
    assert main(["census", "--model", str(src), "--export", "permutation-spec", "--out", str(old)]) == 2
    err = capsys.readouterr().err
    assert "ConfigError" in err and "run directory" in err and "DIR/permutation_spec.json" in err and not old.exists()
    pk = tmp_path / "pickle"
    pk.mkdir()
    (pk / "config.json").write_text((src / "config.json").read_text())
    ran = tmp_path / "unpickled"
    (pk / "pytorch_model.bin").write_bytes(pickle.dumps(_Touch(ran)))
    pickle.loads((pk / "pytorch_model.bin").read_bytes())  # the payload is live ...
    assert ran.exists()
    ran.unlink()
    target = tmp_path / "never"
    assert main(["census", "--model", str(pk), "--export", "permutation-spec", "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert "PickleWeightsError" in err and "pytorch_model.bin" in err
    assert not target.exists() and not ran.exists()  # ... and the census never unpickled it


class _Touch:
    """Unpickling creates ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (self.path,))


@pytest.mark.parametrize("name", TINY)
def test_scramble_and_align_back_through_the_census_groups(tmp_path, name):
    """A random element of the whole exported permutation group applied to a checkpoint is undone
    by ``paramsym align A B --census-groups``: weights recovered, outputs identical, and both
    written directories load with from_pretrained."""
    from paramsym.census.export import spec_for_model
    from paramsym.census.permspec import apply_spec, random_perms

    causal = name in CAUSAL
    model = tiny_model(name, causal_lm=causal)
    spec = spec_for_model(model)
    a = {k: v.detach() for k, v in model.named_parameters()}
    b = apply_spec(a, spec, random_perms(spec, torch.Generator().manual_seed(11)))
    assert sum(float((b[k] - a[k]).norm()) for k in a) > 1.0  # scrambled
    scrambled = tiny_model(name, causal_lm=causal)
    with torch.no_grad():
        for k, p in scrambled.named_parameters():
            p.copy_(b[k])
    model.save_pretrained(tmp_path / "A")
    scrambled.save_pretrained(tmp_path / "B")
    assert main(["align", str(tmp_path / "A"), str(tmp_path / "B"), "--census-groups", "--out", str(tmp_path / "out")]) == 0
    cls = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
    got = cls.from_pretrained(tmp_path / "out" / "aligned_b", attn_implementation="eager").eval()
    merged = cls.from_pretrained(tmp_path / "out" / "merged", attn_implementation="eager").eval()
    for k, v in got.named_parameters():
        assert float((v - a[k]).norm()) <= 1e-5 * max(float(a[k].norm()), 1e-12), k
    inputs = _inputs(model)
    with torch.no_grad():
        ref, out, mid = _output(model(**inputs)), _output(got(**inputs)), _output(merged(**inputs))
    assert torch.equal(out, ref) and torch.equal(mid, ref)  # aligned exactly: the midpoint is A itself
    info = json.loads((tmp_path / "out" / "alignment.json").read_text())
    assert info["distance_after"] == 0.0 < info["distance_before"]


def test_align_refuses_different_architectures_and_sizes(tmp_path, capsys):
    tiny_model("opt").save_pretrained(tmp_path / "opt")
    tiny_model("bert").save_pretrained(tmp_path / "bert")
    cfg = transformers.OPTConfig(hidden_size=32, num_attention_heads=4, ffn_dim=64, word_embed_proj_dim=32,
                                 num_hidden_layers=2, vocab_size=96, max_position_embeddings=64, pad_token_id=1)
    transformers.AutoModel.from_config(cfg).save_pretrained(tmp_path / "opt32")
    for other in ("bert", "opt32"):
        out = tmp_path / f"out-{other}"
        assert main(["align", str(tmp_path / "opt"), str(tmp_path / other), "--census-groups", "--out", str(out)]) == 2
        assert "ArchitectureMismatchError" in capsys.readouterr().err and not out.exists()


def test_census_reports_the_whole_group():
    r = census(tiny_model("llama", causal_lm=True)).to_json()["group"]
    lf = lambda n: math.lgamma(n + 1) / math.log(10)  # noqa: E731
    # S_64 × (S_96 × {±1}^96 × S_2)² (GQA: 2 kv heads; gated units flip sign)
    assert r["log10_discrete_order"] == pytest.approx(lf(64) + 2 * lf(96) + 2 * 96 * math.log10(2) + 2 * lf(2))
    assert r["discrete_factors"] == {"head_permutation": 2, "hidden_permutation": 2, "residual_permutation": 1,
                                     "sign_flip": 2}
    rot = r["residual_rotation"]
    assert rot["dimension"] == 64 * 63 // 2 and rot["verified"] and rot["verified_error"] <= 1e-5
    base = census(tiny_model("llama")).to_json()["group"]["residual_rotation"]
    assert base["verified"] is False and "LM head" in base["note"]
    gpt2 = census(tiny_model("gpt2")).to_json()["group"]["residual_rotation"]  # a base model: the final LN is the output
    assert gpt2["verified"] is False and "LM head" in gpt2["note"]


@pytest.mark.parametrize("name", ["bert", "qwen2", "falcon"])
def test_tracing_in_float32(name):
    r = census(tiny_model(name), dtype=torch.float32)
    res = [e for e in r.entries if e.kind == "residual_permutation"]
    assert r.all_verified and len(res) == 1 and res[0].verified_error <= 1e-5 and res[0].motion > 0.1
