"""``paramsym align A B --census-groups`` over the whole group (issue 18, item 5): permutations,
the residual rotation of folded RMSNorm models, per-head GL(d_k)/GL(d_v).

The scrambling elements are applied with code independent of the alignment: permutations through
the census's spec (:func:`paramsym.census.permspec.apply_spec`), the rotation through the census's
model transformation (:func:`paramsym.census.rotation.rotate_residual`), GL through the catalogue
actions. References: the real forward pass of the models (loaded back with ``from_pretrained``).
"""

import json
import pathlib
import pickle

import pytest
import torch

from paramsym.actions.attention import QueryKeyAction, ValueOutputAction
from paramsym.alignment.align import align_parameters, apply_attention
from paramsym.alignment.arch import hf_architecture
from paramsym.alignment.checkpoints import align_checkpoints
from paramsym.alignment.matching import match_head_gl, match_rotation, rotate_axes
from paramsym.census.permspec import apply_spec, random_perms
from paramsym.census.rotation import random_orthogonal, rotate_residual
from paramsym.census.walk import _output, default_inputs
from paramsym.census.zoo import TINY, tiny_model
from paramsym.cli import main
from paramsym.kinds.census_plan import census_plan
from paramsym.models.adapters import adapt

transformers = pytest.importorskip("transformers")

CAUSAL = {"llama", "mistral", "qwen2", "gemma", "phi3", "gpt2", "gpt_neox", "opt", "falcon", "stablelm", "qwen3", "cohere"}
RMS = {"llama", "mistral", "qwen2", "gemma", "phi3"}  # RMSNorm LMs: the residual rotation applies
ROTARY = {"llama", "mistral", "qwen2", "gemma", "phi3", "gpt_neox", "falcon", "stablelm"}  # query/key: rotary commutant


def _params(model):
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def _load_into(model, params):
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(params[k])
    return model


def _gl(d, n, gen, dtype):
    """Block-diagonal, well-conditioned (cond ≲ 3) random elements of GL(d)^n."""
    return torch.block_diag(*[torch.eye(d, dtype=dtype) + 0.25 * torch.randn(d, d, generator=gen, dtype=dtype) / d ** 0.5
                              for _ in range(n)])


def _rotary_commutant(layout, gen, dtype):
    """Block-diagonal random elements of the rotary commutant, one per key/value head (the test's own
    construction from HF's ``rotate_half`` pairing ``(p, p + r/2)``): per rotated pair a rotation by a
    uniform angle scaled by ``exp(U(−½, ½))`` — the 2×2 block ``[[a, −b], [b, a]]`` — and a random
    GL element on the pass-through dimensions of partial rotary."""
    d, half = layout.head_dim, layout.rotary_dim // 2
    heads = []
    for _ in range(layout.num_kv_heads):
        m = torch.zeros(d, d, dtype=dtype)
        for p in range(half):
            ang = 2 * torch.pi * torch.rand((), generator=gen, dtype=dtype)
            r = torch.exp(torch.rand((), generator=gen, dtype=dtype) - 0.5)
            m[p, p] = m[p + half, p + half] = r * torch.cos(ang)
            m[p + half, p], m[p, p + half] = r * torch.sin(ang), -r * torch.sin(ang)
        n = d - layout.rotary_dim
        if n:
            m[layout.rotary_dim:, layout.rotary_dim:] = _gl(n, 1, gen, dtype)
        heads.append(m)
    return torch.block_diag(*heads)


def _apply_gl(params, layout, gen):
    """A random per-key/value-head GL element through the catalogue actions: GL(d_v) on value/output,
    GL(d_k) on query/key without rotary, a rotary-commutant element with it."""
    out = dict(params)
    acts = [(ValueOutputAction, _gl(layout.head_dim, layout.num_kv_heads, gen, torch.float64))]
    if layout.qk_refused:  # the census refused this layer's query/key symmetry (issue 34)
        pass
    elif not layout.rotary_dim:
        acts.append((QueryKeyAction, _gl(layout.head_dim, layout.num_kv_heads, gen, torch.float64)))
    else:
        acts.append((QueryKeyAction, _rotary_commutant(layout, gen, torch.float64)))
    for cls, g in acts:
        block = cls.block_for(out, layout)
        out = block.scatter(cls(block, layout).act(g.to(out[layout.v.weight].dtype), block.gather(out)), out)
    return out


def _scramble(name, dtype, seed=11, noise=0.0):
    """(A folded where the rotation applies, B = g·(A + noise), the plan): ``g`` a random element
    of the whole group, B as a model."""
    causal = name in CAUSAL
    model = tiny_model(name, causal_lm=causal).to(dtype)
    plan = census_plan(model, symmetries=["permutation", "rotation", "attention"] if name in RMS else None)
    gen = torch.Generator().manual_seed(seed)
    rot = plan["rotation"]
    a_model = rot.fold(model) if rot else model
    spec = rot.spec if rot else plan["spec"]
    theta = _params(a_model)
    if noise:
        theta = {k: v + noise * v.std() * torch.randn(v.shape, generator=gen, dtype=v.dtype) if v.dim() == 2 else v
                 for k, v in theta.items()}
    theta = apply_spec(theta, spec, random_perms(spec, gen))
    b_model = _load_into(tiny_model(name, causal_lm=causal).to(dtype), theta) if not rot else \
        _load_into(rot.fold(tiny_model(name, causal_lm=causal).to(dtype)), theta)
    if rot:
        inputs = default_inputs(b_model, torch.Generator().manual_seed(0))
        b_model, _ = rotate_residual(b_model, inputs, _output, gen, M=random_orthogonal(b_model.config.hidden_size, gen))
    theta = _params(b_model)
    for layout in plan["attention"]:
        theta = _apply_gl(theta, layout, gen)
    return a_model, _load_into(b_model, theta), plan


def _rel(x, y):
    return float((x - y).norm() / y.norm())


#: the default run's guard: an RMSNorm LM with rotation (llama), fused q|k|v and gate|up (phi3), a
#: Conv1D model with fused c_attn in both precisions (gpt2), a post-LN encoder (bert); the other nine
#: architectures run with -m slow (tests/census/test_census_spaces.py scrambles all 13 by permutations)
DEFAULT_ARCHS = ("llama", "phi3", "gpt2", "bert")


@pytest.mark.parametrize("name,dtype", [pytest.param(n, torch.float32, marks=() if n in DEFAULT_ARCHS
                                                     else pytest.mark.slow) for n in TINY]
                         + [("gpt2", torch.float64)])
def test_scramble_by_the_whole_group_is_undone(tmp_path, name, dtype):
    """A random element of permutations × residual rotation (RMSNorm LMs) × per-head GL(d_v) ×
    per-head GL(d_k) (the rotary commutant under rotary embeddings) applied to a tiny model; B
    computes A's function; aligned back, the weights are recovered to ≤ 1e-5 relative and the
    written directories compute A's function."""
    a_model, b_model, plan = _scramble(name, dtype)
    a = _params(a_model)
    moved = {k: _rel(v, a[k]) for k, v in _params(b_model).items() if a[k].norm() > 0}
    assert max(moved.values()) > 0.1  # scrambled
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    inputs = default_inputs(a_model, torch.Generator().manual_seed(0))
    if name in CAUSAL:  # the scramble is a symmetry (the real forward pass, rotate_half pairing included); an
        with torch.no_grad():  # encoder without a head outputs the residual stream, permuted by P_res
            assert _rel(_output(b_model(**inputs)), _output(a_model(**inputs))) <= tol
    rotary = sum(1 for layout in plan["attention"] if layout.rotary_dim)
    assert bool(rotary) == (name in ROTARY)
    info = align_checkpoints(a_model, b_model, plan["spec"], tmp_path / "out", attention=plan["attention"],
                             rotation=plan["rotation"])
    assert info["kept"] == "attention" and ("rotation" in info["distance"]) == (name in RMS)
    assert info["attention_query_key"] == {"gl": len(plan["attention"]) - rotary, "rotary_commutant": rotary}
    cls = transformers.AutoModelForCausalLM if name in CAUSAL else transformers.AutoModel
    got = cls.from_pretrained(tmp_path / "out" / "aligned_b", attn_implementation="eager", torch_dtype=dtype).eval()
    merged = cls.from_pretrained(tmp_path / "out" / "merged", attn_implementation="eager", torch_dtype=dtype).eval()
    for k, v in got.named_parameters():
        assert float((v - a[k]).norm()) <= tol * max(float(a[k].norm()), 1e-12), (k, _rel(v, a[k]))
    with torch.no_grad():
        ref, out, mid = _output(a_model(**inputs)), _output(got(**inputs)), _output(merged(**inputs))
    assert _rel(out, ref) <= tol and _rel(mid, ref) <= tol
    assert info["distance_after"] <= tol * info["distance_before"]


@pytest.mark.parametrize("name", ["qwen3", "cohere"])
def test_query_key_refused_layers_are_aligned_by_the_rest_of_the_group(tmp_path, name):
    """Qwen3 (q/k norms) and Cohere (interleaved rotary): their query/key symmetry is refused per
    layer (issue 34); a scramble by permutations × per-head GL(d_v) is undone all the same, query/key
    left alone by the alignment."""
    a_model, b_model, plan = _scramble(name, torch.float32)
    assert all(layout.qk_refused for layout in plan["attention"])
    a = _params(a_model)
    assert max(_rel(v, a[k]) for k, v in _params(b_model).items() if a[k].norm() > 0) > 0.1
    inputs = default_inputs(a_model, torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert _rel(_output(b_model(**inputs)), _output(a_model(**inputs))) <= 1e-5
    info = align_checkpoints(a_model, b_model, plan["spec"], tmp_path / "out", attention=plan["attention"],
                             rotation=plan["rotation"])
    assert info["attention_query_key"] == {"gl": 0, "rotary_commutant": 0, "refused": len(plan["attention"])}
    got = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out" / "aligned_b", attn_implementation="eager").eval()
    for k, v in got.named_parameters():
        assert float((v - a[k]).norm()) <= 1e-5 * max(float(a[k].norm()), 1e-12), (k, _rel(v, a[k]))


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_continuous_groups_lower_the_distance_of_independently_perturbed_models(tmp_path, name):
    """A and B = g·(A + noise) (independent 30% perturbations of every matrix): the rotation and GL
    stages lower the weight distance below permutation-only, and the aligned B computes B's function."""
    a_model, b_model, plan = _scramble(name, torch.float32, noise=0.3)
    info = align_checkpoints(a_model, b_model, plan["spec"], tmp_path / "out", attention=plan["attention"],
                             rotation=plan["rotation"])
    d = info["distance"]
    assert d["before"] > d["permutation"] and d["attention"] < 0.9 * d["permutation"], d
    if name in RMS:
        assert d["rotation"] < d["permutation"], d
    got = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out" / "aligned_b",
                                                            attn_implementation="eager").eval()
    inputs = default_inputs(a_model, torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert _rel(_output(got(**inputs)), _output(b_model(**inputs))) <= 1e-5


def _assert_commutes_with_rotations(gqk, layout):
    """Every key/value head block of ``gqk`` commutes with the rotary rotations ``R(t)``: pair
    ``(p, p + r/2)`` turned by ``t·freq_p`` (HF's ``rotate_half``), the other dimensions fixed."""
    d, half = layout.head_dim, layout.rotary_dim // 2
    for t in (1.0, 7.0):
        R = torch.eye(d, dtype=torch.float64)
        for p in range(half):
            c, s = torch.cos(torch.tensor(t * layout.rotary_freqs[p])), torch.sin(torch.tensor(t * layout.rotary_freqs[p]))
            R[p, p] = R[p + half, p + half] = c
            R[p + half, p], R[p, p + half] = s, -s
        for h in range(layout.num_kv_heads):
            m = gqk[h * d:(h + 1) * d, h * d:(h + 1) * d]
            assert torch.allclose(m @ R, R @ m, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["llama", "gpt_neox"])
def test_planted_rotary_commutant_is_recovered_and_commutes_with_every_rotation(name):
    """Full rotary with grouped-query heads (llama: 4 query heads on 2 key/value heads) and partial
    rotary (gpt_neox: 8 of 16 dimensions rotated): a planted rotary-commutant element on query/key
    is undone by :func:`match_head_gl` (recovered element × planted = I to 1e-10, float64); every
    head block commutes with the rotations ``R(t)`` of the model's own frequencies; value/output
    (not scrambled) stays at the identity; the function is unchanged."""
    model = tiny_model(name, causal_lm=True).double()
    layouts = [layer.attention for layer in adapt(model).layers]
    a = _params(model)
    gen = torch.Generator().manual_seed(5)
    b, planted = dict(a), []
    for layout in layouts:
        assert layout.rotary_dim == (layout.head_dim if name == "llama" else layout.head_dim // 2)
        g = _rotary_commutant(layout, gen, torch.float64)
        planted.append(g)
        b = apply_attention(b, layout, g, torch.eye(g.shape[0], dtype=torch.float64))
    q = layouts[0].q.weight
    assert _rel(b[q], a[q]) > 0.3  # moved
    for layout, g in zip(layouts, planted):
        gqk, gvo = match_head_gl(a, b, layout)
        assert torch.allclose(gqk @ g, torch.eye(g.shape[0], dtype=torch.float64), rtol=0, atol=1e-10)
        assert torch.allclose(gvo, torch.eye(g.shape[0], dtype=torch.float64), rtol=0, atol=1e-10)
        _assert_commutes_with_rotations(gqk, layout)
        b = apply_attention(b, layout, gqk, gvo)
    assert max(_rel(b[k], a[k]) for k in a if a[k].norm() > 0) <= 1e-10
    inputs = default_inputs(model, torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = _output(model(**inputs))
        assert _rel(_output(_load_into(tiny_model(name, causal_lm=True).double(), b)(**inputs)), ref) <= 1e-10


def test_shared_and_zero_frequencies_couple_pairs():
    """Pairs of equal frequency span ``GL(m, ℂ)`` (the complex solver with ``m = 2``) and a
    zero-frequency pair joins the non-rotated block: a planted element of that larger commutant
    (``exp`` of a random combination of the census's basis) is recovered to 1e-10 and the match
    commutes with the rotations of those frequencies."""
    import dataclasses

    from paramsym.actions.attention import rotary_commutant_basis

    model = tiny_model("llama", causal_lm=True).double()
    a = _params(model)
    lay = adapt(model).layers[0].attention
    f = list(lay.rotary_freqs)
    f[1], f[2] = f[0], 0.0  # pairs 0 and 1 share a frequency; pair 2 is not rotated
    lay = dataclasses.replace(lay, rotary_freqs=tuple(f))
    basis = rotary_commutant_basis(lay.head_dim, lay.rotary_dim, lay.rotary_freqs)
    assert basis.shape[0] == 2 * 2 ** 2 + 5 * 2 + 2 ** 2  # one class of 2 pairs, 5 single pairs, 2 passive dims
    gen = torch.Generator().manual_seed(9)
    g = torch.block_diag(*[torch.linalg.matrix_exp(torch.einsum("k,kij->ij", 0.4 * torch.randn(basis.shape[0], generator=gen,
                                                                                                 dtype=torch.float64), basis))
                           for _ in range(lay.num_kv_heads)])
    b = apply_attention(a, lay, g, torch.eye(g.shape[0], dtype=torch.float64))
    assert _rel(b[lay.k.weight], a[lay.k.weight]) > 0.1
    gqk, _ = match_head_gl(a, b, lay)
    assert torch.allclose(gqk @ g, torch.eye(g.shape[0], dtype=torch.float64), rtol=0, atol=1e-10)
    _assert_commutes_with_rotations(gqk, lay)
    half = lay.rotary_dim // 2  # pairs 0, 1 coupled; the zero-frequency pair's dims by full GL; nothing across
    assert float(gqk[0, 1].abs()) > 1e-3 and float((gqk[2, 2 + half] + gqk[2 + half, 2]).abs()) > 1e-3  # not [[a, −b], [b, a]]
    assert float(gqk[2, 3].abs()) == 0.0


def test_census_groups_cli_reports_the_rotary_commutant(tmp_path, capsys):
    """The CLI on two Llama checkpoints says which query/key group it aligned, in its text and in
    alignment.json, and the attention stage lowers the distance of two independent inits."""
    tiny_model("llama", causal_lm=True).save_pretrained(tmp_path / "A")
    tiny_model("llama", seed=1, causal_lm=True).save_pretrained(tmp_path / "B")
    capsys.readouterr()
    assert main(["align", str(tmp_path / "A"), str(tmp_path / "B"), "--census-groups", "--out", str(tmp_path / "o")]) == 0
    assert "rotary commutant on 2" in capsys.readouterr().out
    info = json.loads((tmp_path / "o" / "alignment.json").read_text())
    assert info["attention_query_key"] == {"gl": 0, "rotary_commutant": 2}
    assert info["distance"]["attention"] < info["distance"]["permutation"]


def test_adapter_path_aligns_rotary_heads():
    """``paramsym align`` without ``--census-groups`` (the adapter's architecture): a Llama's
    rotary layers are attention layers too; a planted rotary-commutant × GL(d_v) element is undone."""
    model = tiny_model("llama", causal_lm=True).double()
    arch = hf_architecture(model)
    assert len(arch.attention) == model.config.num_hidden_layers and all(la.rotary_dim for la in arch.attention)
    a = _params(model)
    gen = torch.Generator().manual_seed(8)
    b = a
    for layout in arch.attention:
        b = _apply_gl(b, layout, gen)
    assert _rel(b[arch.attention[0].k.weight], a[arch.attention[0].k.weight]) > 0.3
    full = align_parameters(arch, a, b, ["attention"])[0]["full"]
    assert max(_rel(full[k], a[k]) for k in a if a[k].norm() > 0) <= 1e-10


def test_rotate_axes_equals_the_census_rotation():
    """The alignment's rotation along the traced stream axes is the census's model transformation."""
    model = tiny_model("llama", causal_lm=True).double()
    rot = census_plan(model, symmetries=["permutation", "rotation"])["rotation"]
    folded = rot.fold(model)
    gen = torch.Generator().manual_seed(3)
    M = random_orthogonal(64, gen)
    ref, _ = rotate_residual(folded, default_inputs(folded, gen), _output, gen, M=M)
    got = rotate_axes(_params(folded), rot.axes, M)
    assert set(rot.axes) >= {"model.embed_tokens.weight", "lm_head.weight"}
    for k, v in _params(ref).items():
        assert torch.allclose(got[k], v, rtol=0, atol=1e-12), k
    assert torch.allclose(match_rotation(_params(ref), _params(folded), rot.axes), M, atol=1e-10)


def test_rotation_is_refused_for_parameter_free_layernorms_as_for_gpt2():
    """OLMo's parameter-free LayerNorms become RMS norms in the canonical form (as GPT-2's do), so a
    rotated OLMo is no checkpoint of its class: refused by name, not aligned into a wrong file."""
    from paramsym.errors import SymmetryNotApplicableError

    for name in ("olmo", "gpt2"):
        with pytest.raises(SymmetryNotApplicableError, match="LayerNorms"):
            census_plan(tiny_model(name, causal_lm=True), symmetries=["permutation", "rotation"])


def test_census_groups_cli_symmetries_and_bad_inputs(tmp_path, capsys):
    """--symmetries picks the groups; a group the model lacks, an --out that exists and a
    pickle-only checkpoint are refused by name with nothing written."""
    tiny_model("gpt2", causal_lm=True).save_pretrained(tmp_path / "A")
    tiny_model("gpt2", seed=1, causal_lm=True).save_pretrained(tmp_path / "B")
    base = ["align", str(tmp_path / "A"), str(tmp_path / "B"), "--census-groups", "--json"]
    assert main(base + ["--symmetries", "permutation", "--out", str(tmp_path / "p")]) == 0
    assert main(base + ["--out", str(tmp_path / "full")]) == 0
    p = json.loads((tmp_path / "p" / "alignment.json").read_text())
    full = json.loads((tmp_path / "full" / "alignment.json").read_text())
    assert p["kept"] == "permutation" and full["kept"] == "attention"
    assert full["distance"]["attention"] < full["distance"]["permutation"] == pytest.approx(p["distance_after"])
    capsys.readouterr()
    out = tmp_path / "rot"
    assert main(base + ["--symmetries", "permutation,rotation", "--out", str(out)]) == 2
    assert "SymmetryNotApplicableError" in capsys.readouterr().err and not out.exists()
    assert main(base + ["--symmetries", "attention", "--out", str(out)]) == 2
    assert "ConfigError" in capsys.readouterr().err and not out.exists()
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("keep")
    assert main(base + ["--out", str(tmp_path / "taken")]) == 2
    assert "RunDirError" in capsys.readouterr().err  # --out must be new or empty, as for every run
    assert [f.name for f in (tmp_path / "taken").iterdir()] == ["keep.txt"]
    pk = tmp_path / "pickle"
    pk.mkdir()
    (pk / "config.json").write_text((tmp_path / "B" / "config.json").read_text())
    ran = tmp_path / "unpickled"
    (pk / "pytorch_model.bin").write_bytes(pickle.dumps(_Touch(ran)))
    pickle.loads((pk / "pytorch_model.bin").read_bytes())  # the payload is live ...
    assert ran.exists()
    ran.unlink()
    assert main(["align", str(tmp_path / "A"), str(pk), "--census-groups", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "PickleWeightsError" in err and "pytorch_model.bin" in err and not out.exists()
    assert not ran.exists()  # ... and alignment never unpickled it


class _Touch:
    """Unpickling creates ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (self.path,))


def _permute_gpt2_heads(params, layer, perm, H, d):
    """GPT-2 layer ``layer`` with its heads reordered by hand (the test's own code): head blocks of
    the query, key and value thirds of ``c_attn`` (columns, bias) and the rows of ``attn.c_proj``."""
    out = dict(params)
    D = H * d
    idx = torch.cat([perm[h] * d + torch.arange(d) for h in range(H)])  # new head h = old head perm[h]
    cols = torch.cat([part * D + idx for part in range(3)])
    pre = f"transformer.h.{layer}.attn."
    out[pre + "c_attn.weight"] = params[pre + "c_attn.weight"][:, cols]
    out[pre + "c_attn.bias"] = params[pre + "c_attn.bias"][cols]
    out[pre + "c_proj.weight"] = params[pre + "c_proj.weight"][idx, :]
    return out


def test_census_groups_cli_aligns_gpt2_fused_heads(tmp_path):
    """GPT-2's heads live in the fused ``c_attn`` (sub-blocks of the census's spec): B = A with the
    heads of both layers reordered (nothing else) is aligned back through the CLI exactly."""
    a_model = tiny_model("gpt2", causal_lm=True)
    H, d = a_model.config.n_head, a_model.config.n_embd // a_model.config.n_head
    a = _params(a_model)
    gen = torch.Generator().manual_seed(4)
    b = a
    for layer in range(a_model.config.n_layer):
        b = _permute_gpt2_heads(b, layer, torch.randperm(H, generator=gen).roll(1), H, d)  # roll: never the identity
    b_model = _load_into(tiny_model("gpt2", causal_lm=True), b)
    inputs = default_inputs(a_model, torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert _rel(_output(b_model(**inputs)), _output(a_model(**inputs))) <= 1e-5  # the same function
    assert _rel(b["transformer.h.0.attn.c_attn.weight"], a["transformer.h.0.attn.c_attn.weight"]) > 0.5  # moved
    a_model.save_pretrained(tmp_path / "A")
    b_model.save_pretrained(tmp_path / "B")
    out = tmp_path / "out"
    assert main(["align", str(tmp_path / "A"), str(tmp_path / "B"), "--census-groups", "--symmetries", "permutation",
                 "--out", str(out), "--json"]) == 0
    info = json.loads((out / "alignment.json").read_text())
    assert {f"P_heads_{i}" for i in range(a_model.config.n_layer)} <= set(info["perms"])
    got = transformers.AutoModelForCausalLM.from_pretrained(out / "aligned_b", attn_implementation="eager").eval()
    for k, v in got.named_parameters():
        assert torch.equal(v, a[k]), k
