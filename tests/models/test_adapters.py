"""Architecture adapters on real HF modules built from config objects, saved with
``save_pretrained`` and loaded back with ``from_pretrained`` (nothing is downloaded).

Each layout is checked against an independent recomputation: the per-head query/key/value
vectors read through the adapter's positions equal the ones the HF module computes (captured
with hooks), for BERT (out × in), GPT-2 (Conv1D in × out, fused c_attn), GPT-NeoX (fused,
per-head interleaved) and Llama (GQA).
"""

import pytest
import torch
from tiny_hf import saved_tiny_models
from torch import nn

from paramsym.errors import InputFileError, UnknownArchitectureError
from paramsym.models import adapters as A
from paramsym.models.loading import load_model

transformers = pytest.importorskip("transformers")

TINY = {
    "bert": lambda: transformers.BertConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                            intermediate_size=32, vocab_size=40, max_position_embeddings=32),
    "gpt2": lambda: transformers.GPT2Config(n_embd=16, n_layer=2, n_head=2, vocab_size=40, n_positions=32),
    "gpt_neox": lambda: transformers.GPTNeoXConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                   intermediate_size=48, vocab_size=40, rotary_pct=0.25),
    "llama": lambda: transformers.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                              num_key_value_heads=2, intermediate_size=48, vocab_size=40),
}

saved = saved_tiny_models(TINY)  # (model_type, save_pretrained directory)


def _weight(model, proj: A.Projection) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The canonical (out × in) weight and bias of a projection, read through its positions."""
    params = dict(model.named_parameters())
    rows = torch.arange(proj.out_features)
    W = params[proj.weight].reshape(-1)[proj.row_positions(rows)]
    b = None if proj.bias is None else params[proj.bias].reshape(-1)[proj.bias_positions(rows)]
    return W, b


def test_from_pretrained_round_trip_and_layout(saved):
    mt, path = saved
    model = load_model(path)
    assert model.config._attn_implementation == "eager"
    layout = A.adapt(model)
    assert layout.model_type == mt and len(layout.layers) == 2
    att = layout.layers[0].attention
    cfg = model.config
    assert att.num_heads * att.head_dim == (att.q.out_features)
    assert att.num_kv_heads == getattr(cfg, "num_key_value_heads", att.num_heads)
    if mt == "gpt_neox":
        assert att.rotary_dim == att.head_dim // 4 and len(att.rotary_freqs) == att.rotary_dim // 2
    elif mt == "llama":
        assert att.rotary_dim == att.head_dim and att.num_kv_heads == 2
    else:
        assert att.rotary_dim == 0
    assert (layout.layers[0].ffn.gate is not None) == (mt == "llama")


def test_projections_reproduce_the_modules_q_k_v(saved):
    """x → W x + b through the adapter's positions equals the module's own q/k/v (before rotary)."""
    mt, path = saved
    model = load_model(path).double()
    att = A.adapt(model).layers[1].attention
    mod = dict(model.named_modules())[att.module]
    captured = {}
    x = torch.randn(1, 5, model.config.hidden_size, dtype=torch.float64)
    names = {"bert": ("self.query", "self.key", "self.value"), "gpt2": ("c_attn",) * 3,
             "gpt_neox": ("query_key_value",) * 3, "llama": ("q_proj", "k_proj", "v_proj")}[mt]
    handles = []
    for which, sub in zip("qkv", names):
        lin = dict(mod.named_modules())[sub]
        handles.append(lin.register_forward_hook(lambda m, i, o, which=which: captured.__setitem__(which, (i[0], o))))
    try:
        with torch.no_grad():
            model(inputs_embeds=x)
    finally:
        for h in handles:
            h.remove()
    for which in "qkv":
        proj = getattr(att, which)
        W, b = _weight(model, proj)
        inp, out = captured[which]
        ref = out if proj.features is None else out[..., list(proj.features)]
        mine = inp @ W.T + (0 if b is None else b)
        torch.testing.assert_close(mine, ref, rtol=1e-12, atol=1e-12)


def test_unknown_model_type_lists_known_and_register(saved):
    _, path = saved
    model = load_model(path)
    model.config.model_type = "mystery"
    with pytest.raises(UnknownArchitectureError, match=r"known: \['bert', 'gpt2', 'gpt_neox', 'llama'.*register_adapter"):
        A.adapt(model)
    A.register_adapter("mystery", lambda m: "custom")
    try:
        assert A.adapt(model) == "custom"
    finally:
        A._ADAPTERS.pop("mystery")
    with pytest.raises(UnknownArchitectureError, match="no config.model_type"):
        A.adapt(nn.Linear(2, 2))


def test_missing_path_is_named(tmp_path):
    with pytest.raises(InputFileError, match="does not exist"):
        load_model(tmp_path / "nope")
    with pytest.raises(InputFileError, match="no config.json"):
        load_model(tmp_path)  # exists but holds no model


def test_require_eager_switches_sdpa():
    model = transformers.AutoModel.from_config(TINY["bert"](), attn_implementation="sdpa")
    assert A.require_eager(model).config._attn_implementation == "eager"


def test_mha_layout():
    mha = nn.MultiheadAttention(8, 2)
    lay = A.mha_layout("", mha)
    assert (lay.num_heads, lay.head_dim, lay.q.features[:2], lay.k.features[0]) == (2, 4, (0, 1), 8)
    with pytest.raises(UnknownArchitectureError, match="add_bias_kv"):
        A.mha_layout("att", nn.MultiheadAttention(8, 2, add_bias_kv=True))


def test_forward_mode_ad_through_loaded_model(saved):
    """A Target on a model loaded by load_model (eager attention) has JVPs, equal to the
    reverse-mode Jacobian times the tangent (GPT-NeoX's eager softmax runs in float32, so a
    finite difference would only agree to ~1e-2 there, and the two modes to ~3e-7)."""
    from torch.func import jacrev, jvp

    from paramsym.targets import Target

    _, path = saved
    model = load_model(path).double()
    att = A.adapt(model).layers[0].attention
    ids = torch.randint(0, 40, (1, 5), generator=torch.Generator().manual_seed(0))
    # GPT-2's query and key rows live in one fused tensor: name it once (duplicates are refused)
    target = Target(model, list(dict.fromkeys([att.q.weight, att.k.weight])), {"input_ids": ids})
    theta = target.theta0
    v = torch.randn(theta.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    _, tangent = jvp(target, (theta,), (v,))
    torch.testing.assert_close(tangent, jacrev(target)(theta) @ v, rtol=1e-5, atol=1e-7)  # float32 softmax (NeoX)
    assert tangent.abs().max() > 1e-6
