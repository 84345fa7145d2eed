"""Per-head attention actions on real modules, judged by the verdict in float64.

Every action: output error ≤ 1e-10 (relative to the output scale), composition/inverse exact,
and non-zero motion — on nn.MultiheadAttention (fused in_proj, with biases) and on HF BERT,
GPT-2 (Conv1D, fused c_attn), GPT-NeoX (fused interleaved qkv, partial rotary) and Llama
(GQA + RoPE) built from configs with a large initialisation so that attention is far from
uniform. Independent references: the rotary commutant is compared with the dense null space of
``X ↦ X R − R X`` over the rotation generators, and GL(d_k) on a rotary head must FAIL.
"""

import pytest
import torch
from torch import nn

from paramsym.actions.attention import (
    QueryKeyAction,
    ValueOutputAction,
    rotary_commutant_basis,
    rotary_commutant_dimension,
)
from paramsym.errors import ShapeError
from paramsym.models.adapters import adapt, mha_layout
from paramsym.targets import Target
from paramsym.testing import check_action

transformers = pytest.importorskip("transformers")
TOL = {"output": 1e-10}


def _hf(kind):
    cfg = {
        "bert": lambda: transformers.BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                                intermediate_size=16, vocab_size=40, initializer_range=0.3),
        "gpt2": lambda: transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=40, initializer_range=0.3),
        "gpt_neox": lambda: transformers.GPTNeoXConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                       intermediate_size=16, vocab_size=40, rotary_pct=0.25,
                                                       attention_bias=True, initializer_range=0.3),
        "llama": lambda: transformers.LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                                  num_key_value_heads=2, intermediate_size=16, vocab_size=40,
                                                  attention_bias=True, initializer_range=0.3),
    }[kind]()
    torch.manual_seed(1)
    model = transformers.AutoModel.from_config(cfg, attn_implementation="eager").double().eval()
    return model, adapt(model).layers[0].attention


@pytest.mark.parametrize("kind", ["bert", "gpt2", "gpt_neox", "llama"])
@pytest.mark.parametrize("cls", [QueryKeyAction, ValueOutputAction])
def test_hf_actions_pass_the_verdict(kind, cls):
    model, lay = _hf(kind)
    params = dict(model.named_parameters())
    kv = [lay.num_kv_heads - 1]
    block = cls.block_for(params, lay, kv)
    action = cls(block, lay, kv)
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(0))
    check = check_action(action, Target(model, block, {"input_ids": ids}), samples=20, factors=(1, 2), tolerances=TOL)
    assert check.passed, str(check)
    motion = [r.value for r in check.results if r.key.startswith("motion")]
    assert motion and min(motion) > 0.01


def test_mha_actions_pass_the_verdict():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).double()
    nn.init.normal_(mha.in_proj_bias)
    lay = mha_layout("", mha)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    params = dict(mha.named_parameters())
    for cls in (QueryKeyAction, ValueOutputAction):
        block = cls.block_for(params, lay, [1])
        target = Target(mha, block, (x, x, x), output=lambda out: out[0])
        check = check_action(cls(block, lay, [1]), target, samples=20, tolerances=TOL)
        assert check.passed, str(check)


def test_gl_on_a_rotary_head_is_not_a_symmetry():
    """A wrong claim: GL(d_k) on a Llama head (not in the rotary commutant) changes the output."""
    model, lay = _hf("llama")
    params = dict(model.named_parameters())
    block = QueryKeyAction.block_for(params, lay, [0])
    wrong = QueryKeyAction(block, lay, [0], algebra="gl")
    assert wrong.dimension == lay.head_dim ** 2 and QueryKeyAction(block, lay, [0]).dimension == lay.head_dim
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(0))
    check = check_action(wrong, Target(model, block, {"input_ids": ids}), samples=20, factors=(1,), tolerances=TOL)
    out = next(r.value for r in check.results if r.key.startswith("output"))
    assert not check.passed and out > 1e-3


def _dense_commutant_dim(d, r, freqs):
    """dim {X : X M = M X for every rotary generator M}, by a dense SVD (independent reference)."""
    half = r // 2
    mats = []
    for p in range(half):
        J = torch.zeros(d, d, dtype=torch.float64)
        J[p + half, p], J[p, p + half] = freqs[p], -freqs[p]
        mats.append(J)
    gen = sum(mats, torch.zeros(d, d, dtype=torch.float64))  # R(t) = exp(t·gen), t = position
    eye = torch.eye(d, dtype=torch.float64)
    # rotations R(t) = exp(t·Σ ω_p J_p); commuting with the generator ⇔ commuting with all R(t)
    L = torch.kron(gen, eye) - torch.kron(eye, gen.T.contiguous()) if mats else torch.zeros(d * d, d * d, dtype=torch.float64)
    s = torch.linalg.svdvals(L)
    return int((s <= 1e-9 * max(1.0, float(s.max()))).sum())


@pytest.mark.parametrize("d,r,freqs", [(8, 8, [1.0, 0.3, 0.1, 0.01]), (8, 4, [1.0, 0.1]), (6, 6, [1.0, 1.0, 0.5]),
                                       (4, 0, [])])
def test_rotary_commutant_matches_dense_reference(d, r, freqs):
    basis = rotary_commutant_basis(d, r, freqs)
    dim = rotary_commutant_dimension(d, r, freqs)
    assert basis.shape[0] == dim == _dense_commutant_dim(d, r, freqs)
    # every basis element commutes with the rotation generator Σ ω_p J_p (hence with every R(t))
    gen = torch.zeros(d, d, dtype=torch.float64)
    for p in range(r // 2):
        gen[p + r // 2, p], gen[p, p + r // 2] = freqs[p], -freqs[p]
    for X in basis:
        torch.testing.assert_close(X @ gen, gen @ X)
    if r == d and len(set(freqs)) == len(freqs):
        assert dim == d


def test_bad_heads_and_blocks_are_named():
    model, lay = _hf("bert")
    params = dict(model.named_parameters())
    with pytest.raises(ShapeError, match="kv_heads"):
        QueryKeyAction(QueryKeyAction.block_for(params, lay), lay, [5])
    with pytest.raises(ShapeError, match="block_for"):
        ValueOutputAction(QueryKeyAction.block_for(params, lay), lay)
