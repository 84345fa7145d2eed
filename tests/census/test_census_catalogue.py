"""Census entries placed from the catalogue: key-bias translations, head and hidden-unit
permutations, MLP rescalings and GL, each verified on the weights; wrong claims refuted."""

import pytest
import torch
from torch import nn

from paramsym.actions.permutation import HeadPermutationAction
from paramsym.census import HeadPermutationFinder, KeyBiasFinder, census
from paramsym.census.base import View, catalogue_candidate
from paramsym.census.presets import build_preset, preset_inputs
from paramsym.census.walk import CensusContext

transformers = pytest.importorskip("transformers")


def _preset(name):
    model = build_preset(name)
    return census(model, preset_inputs(name, model, torch.Generator().manual_seed(0)), name=name)


def test_mlp_presets_rescaling_gl_and_permutations():
    r = _preset("mlp-relu")  # 16-32-24-8: ReLU then LeakyReLU(0.1)
    assert [(e.module, e.kind, e.dimension, e.discrete_order) for e in r.entries] == [
        ("0→2", "rescaling", 32, None), ("0→2", "hidden_permutation", 0, "32!"),
        ("2→4", "rescaling", 24, None), ("2→4", "hidden_permutation", 0, "24!")]
    assert r.all_verified and max(e.verified_error for e in r.entries) < 1e-13 and min(e.motion for e in r.entries) > 0.01
    assert r.total_dimension == 56 and r.parameters == 16 * 32 + 32 + 32 * 24 + 24 + 24 * 8 + 8
    lin = _preset("mlp-linear")  # 16-12-10-8, no activations: GL(12) × GL(10)
    assert [(e.kind, e.dimension) for e in lin.entries] == [("hidden_basis", 144), ("hidden_basis", 100)]
    assert lin.all_verified and lin.total_dimension == 244


def test_tanh_mlp_has_permutations_only_and_wrong_gl_claim_is_refuted():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
    x = torch.randn(32, 4)
    r = census(net, x)
    assert [(e.kind, e.dimension) for e in r.entries] == [("hidden_permutation", 0)] and r.all_verified
    # a finder claiming GL(6) across the tanh: the verification refutes it
    from paramsym.actions.linear import HiddenBasisAction

    class WrongGL:
        name = "wrong"

        def find(self, ctx: CensusContext):
            view = View({n: [View.whole(n, ctx.params)] for n in ("0.weight", "0.bias", "2.weight")})
            return [catalogue_candidate("0→2", view, lambda b: HiddenBasisAction(b, "0.weight", "2.weight"), ctx.params)]

    bad = census(net, x, finders=[WrongGL()])
    assert not bad.all_verified and bad.entries[0].verified_error > 1e-3 and bad.total_dimension == 0


def test_key_bias_translation_where_keys_have_a_bias_and_no_rotary():
    cfgs = {"bert": transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                            intermediate_size=64, vocab_size=50),
            "gpt2": transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=50, bos_token_id=0, eos_token_id=0),
            "neox": transformers.GPTNeoXConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                               intermediate_size=64, vocab_size=50, rotary_pct=0.25),
            "llama": transformers.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                              num_key_value_heads=2, intermediate_size=48, vocab_size=50),
            "llama-bias": transformers.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                   num_key_value_heads=2, intermediate_size=48, vocab_size=50,
                                                   attention_bias=True, initializer_range=0.2)}
    expected = {"bert": 2 * 32, "gpt2": 2 * 32, "neox": 2 * 2 * 12, "llama": 0, "llama-bias": 0}
    for name, cfg in cfgs.items():
        torch.manual_seed(0)
        model = transformers.AutoModel.from_config(cfg, attn_implementation="eager")
        with torch.no_grad():  # HF initialises biases to 0: make them generic
            for n, p in model.named_parameters():
                if n.endswith("bias"):
                    p.normal_(0, 0.1)
        r = census(model)
        assert r.all_verified, (name, r.to_json()["unverified"])
        assert r.dimension_of("key_bias_translation") == expected[name], name
        value = {"bert": 2 * 32, "gpt2": 2 * 32, "neox": 2 * 32, "llama": 0, "llama-bias": 2 * 2 * 8}[name]  # GQA: H_kv·d
        assert r.dimension_of("value_bias_shift") == value, name
        assert r.dimension_of("attention.") == r.to_json()["attention_dimension"]
        if name == "llama-bias":  # rotary after the key bias (Qwen-like): claiming the shift anyway is refuted
            wrong = census(model, finders=[KeyBiasFinder(ignore_rotary=True)])
            assert len(wrong.entries) == 2 and not any(e.verified for e in wrong.entries)
            assert min(e.verified_error for e in wrong.entries) > 1e-3  # tolerance 1e-6 (float32 softmax)


def test_mha_bias_census_and_the_affine_algebra():
    """nn.MultiheadAttention(8, 2) with biases: 32 + 32 + 8 (key bias) + 8 (value shift) = 80
    counted, every entry verified — the dimension the affine solver finds on this block."""
    r = _preset("mha-bias")
    assert [(e.kind, e.dimension) for e in r.entries] == [
        ("attention.query_key.gl", 32), ("attention.value_output.gl", 32), ("key_bias_translation", 8),
        ("value_bias_shift", 8), ("head_permutation", 0)]
    assert r.all_verified and r.total_dimension == 80
    mha = nn.MultiheadAttention(8, 2, batch_first=True, add_zero_attn=True)
    x = torch.randn(2, 5, 8)
    z = census(mha, (x, x, x))
    assert not {"key_bias_translation", "value_bias_shift"} & {e.kind for e in z.entries}  # zero key/value break them


def test_head_permutation_moves_whole_heads_and_a_partial_claim_is_refuted():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=4, vocab_size=50, bos_token_id=0, eos_token_id=0)
    model = transformers.AutoModel.from_config(cfg, attn_implementation="eager")
    r = census(model, finders=[HeadPermutationFinder()])
    assert [(e.kind, e.discrete_order) for e in r.entries] == [("head_permutation", "4!")] and r.all_verified
    assert r.entries[0].motion > 0.1

    class QKVOnly:  # permutes the heads' q/k/v rows but not the output columns: not a symmetry
        name = "wrong"

        def find(self, ctx):
            lay = ctx.layout.layers[0].attention
            rows = {j: [View.weight(p), View.bias(p, column=True)] for j, p in (("q", lay.q), ("k", lay.k), ("v", lay.v))}
            layout = {j: (1, 8 * 33) for j in rows}
            return [catalogue_candidate(lay.module, View(rows), lambda b: HeadPermutationAction(b, 4, layout), ctx.params)]

    bad = census(model, finders=[QKVOnly()])
    assert not bad.entries[0].verified and bad.entries[0].verified_error > 1e-3


def _embedded_fields(ctx):
    """Tangent directions of the continuous census entries of an nn.MultiheadAttention, embedded
    in the flat parameter vector (query/key, value/output, key-bias translation)."""
    from paramsym.actions.attention import QueryKeyAction, ValueOutputAction
    from paramsym.actions.translation import KeyBiasTranslation
    from paramsym.census.catalogue_finders import attention_layouts
    from paramsym.params import ParameterBlock

    params = {k: v.double() for k, v in ctx.params.items()}
    zeros = {k: torch.zeros_like(v) for k, v in params.items()}
    flat = lambda d: torch.cat([d[k].reshape(-1) for k in params])  # noqa: E731
    lay = attention_layouts(ctx)[0]
    rows = []
    for cls in (QueryKeyAction, ValueOutputAction):
        block = cls.block_for(params, lay)
        act = cls(block, lay).double()
        fields = act.fields_all(block.gather(params)[None])[0]
        rows += [flat(block.scatter(f, zeros)) for f in fields]
    view = View({"key_bias": [View.bias(lay.k)]})
    vb = ParameterBlock.from_params(view.read(params), ["key_bias"])
    kb = KeyBiasTranslation(vb, "key_bias").double()
    for f in kb.fields_all(vb.gather(view.read(params))[None])[0]:
        rows.append(flat(view.write(zeros, vb.scatter(f, view.read(zeros)))))
    return params, lay, torch.stack(rows)


def test_counted_dimensions_are_independent_and_match_the_affine_algebra():
    """The census sum is direct: the 72 tangent directions (query/key 32, value/output 32, key
    bias 8) have rank 72 at the preset's weights; with the 8 value shifts (δb_v = c, δb_o = −W_o c,
    built here by hand, independently of ValueBiasShift) the rank is 80, the dimension the affine
    solver finds on this block and the census counts."""
    model = build_preset("mha-bias")
    ctx = CensusContext(model, None, {k: v.detach() for k, v in model.named_parameters()})
    params, lay, T = _embedded_fields(ctx)
    sv = torch.linalg.svdvals(T)
    assert T.shape[0] == 72 and int((sv > 1e-10 * sv[0]).sum()) == 72
    names = list(params)
    off = dict(zip(names, torch.tensor([0] + [params[k].numel() for k in names]).cumsum(0).tolist()))
    E = 8
    vbias = torch.zeros(E, T.shape[1], dtype=torch.float64)
    for i in range(E):
        vbias[i, off["attn.in_proj_bias"] + 2 * E + i] = 1.0
        vbias[i, off["attn.out_proj.bias"] : off["attn.out_proj.bias"] + E] = -params["attn.out_proj.weight"][:, i]
    sv2 = torch.linalg.svdvals(torch.cat([T, vbias]))
    assert int((sv2 > 1e-10 * sv2[0]).sum()) == 80


@pytest.mark.slow
def test_affine_solver_finds_80_on_the_biased_attention_block():
    """≈ 8–15 s: the affine solver on ``attention-d8h2-bias`` (no dimension given) finds 80 = 32 + 32 + 8 + 8."""
    from paramsym.exact.affine import AffineSolverConfig, solve_affine
    from paramsym.exact.presets import AFFINE_PRESETS
    from paramsym.exact.presets import build_preset as affine_preset

    target, ansatz = affine_preset("attention-d8h2-bias", 0)
    res = solve_affine(target, ansatz, AffineSolverConfig(samples=AFFINE_PRESETS["attention-d8h2-bias"].fields["samples"]),
                       generator=torch.Generator().manual_seed(1))
    assert res.dimension == 80 and res.gap > 1e6


def test_view_of_ordered_pieces_reads_a_view_and_writes_as_the_gather_does():
    """An ordered piece (a whole ``nn.Linear`` weight as stored) is read without a copy and written
    as a slice; the values agree with the same positions gathered and scattered."""
    from paramsym.census.base import Piece
    from paramsym.models.adapters import Projection

    g = torch.Generator().manual_seed(0)
    params = {"up.weight": torch.randn(6, 4, generator=g, dtype=torch.float64),
              "up.bias": torch.randn(6, generator=g, dtype=torch.float64),
              "down.weight": torch.randn(4, 6, generator=g, dtype=torch.float64)}
    up, down = Projection("up.weight", "up.bias", "out_in", (6, 4)), Projection("down.weight", None, "out_in", (4, 6))
    fast = View({"V": [View.weight(up), View.bias(up, column=True)], "U": [View.weight(down)]})
    assert all(p.positions is None for ps in fast.pieces.values() for p in ps)  # no int64 positions held
    rows = up.row_positions(torch.arange(6))  # the positions written out independently
    assert torch.equal(rows, torch.arange(24).reshape(6, 4))
    slow = View({"V": [Piece("up.weight", rows), Piece("up.bias", torch.arange(6)[:, None])],
                 "U": [Piece("down.weight", torch.arange(24).reshape(4, 6))]})
    assert fast.moved() == slow.moved() == {"up.weight": 24, "up.bias": 6, "down.weight": 24}
    a, b = fast.read(params), slow.read(params)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert torch.equal(a["V"], torch.cat([params["up.weight"], params["up.bias"][:, None]], dim=1))
    assert fast.read(params)["U"].data_ptr() == params["down.weight"].data_ptr()  # a view, not a copy
    new = {k: v + torch.randn(v.shape, generator=g, dtype=v.dtype) for k, v in a.items()}
    wa, wb = fast.write(params, new), slow.write(params, new)
    assert all(torch.equal(wa[k], wb[k]) for k in params)
    assert torch.equal(wa["down.weight"], new["U"]) and not torch.equal(wa["up.weight"], params["up.weight"])
    assert torch.equal(wa["up.bias"], new["V"][:, 4])
    assert torch.equal(params["down.weight"], b["U"])  # the input is not written into
