"""Gemma's ``(1 + w)`` norm scale and the gated-FFN rescaling (issue 18).

References are hand-written transformations of the HF weights checked on the real forward pass
(float64; HF's RMSNorm and Gemma's scale multiply compute in float32, so invariance holds to
~1e-7 and a violation shows as > 1e-3), independent of the census code.
"""

import pytest
import torch
from output_change import relative_output_change

from paramsym.census import census
from paramsym.census.zoo import tiny_model

transformers = pytest.importorskip("transformers")

GATED = ["llama", "mistral", "qwen2", "gemma", "phi3"]


def _up_gate_down(model, i):
    """(up rows, gate rows, down) of layer i's MLP as (tensor name, row slice) — from the HF module layout."""
    mlp = model.model.layers[i].mlp
    pre = f"model.layers.{i}.mlp"
    if hasattr(mlp, "gate_up_proj"):  # Phi-3: gate_up_proj rows [gate | up] (HF chunks gate first)
        h = mlp.down_proj.in_features
        return (f"{pre}.gate_up_proj.weight", slice(h, 2 * h)), (f"{pre}.gate_up_proj.weight", slice(0, h)), f"{pre}.down_proj.weight"
    return (f"{pre}.up_proj.weight", slice(None)), (f"{pre}.gate_proj.weight", slice(None)), f"{pre}.down_proj.weight"


@pytest.mark.parametrize("name", GATED)
def test_gated_ffn_rescaling_is_listed_verified_and_only_on_up(name):
    model = tiny_model(name, causal_lm=True).double()
    r = census(model, layout="derived")
    h = model.config.intermediate_size
    resc = [e for e in r.entries if e.kind == "rescaling"]
    assert [(e.dimension, e.verified) for e in resc] == [(h, True), (h, True)]
    assert all(e.motion > 1e-3 for e in resc)
    # by hand: up row j × c_j, down column j ÷ c_j is invisible; the same on the gate rows is not
    p = {k: v.detach().clone() for k, v in model.named_parameters()}
    c = 0.5 + torch.rand(h, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (up, us), (gate, gs), down = _up_gate_down(model, 0)
    good = dict(p)
    good[up] = p[up].clone()
    good[up][us] = p[up][us] * c[:, None]
    good[down] = p[down] / c[None, :]
    bad = dict(p)
    bad[gate] = p[gate].clone()
    bad[gate][gs] = p[gate][gs] * c[:, None]
    bad[down] = p[down] / c[None, :]
    assert relative_output_change(model, good) <= 1e-6 and relative_output_change(model, bad) > 1e-3


def test_gemma_norm_scale_acts_on_one_plus_w():
    model = tiny_model("gemma", causal_lm=True).double()
    r = census(model, layout="derived")
    ns = [e for e in r.entries if e.kind == "norm_scale"]
    assert len(ns) == 4 and all(e.verified and e.dimension == 64 and e.motion > 1e-3 for e in ns)
    assert "1 + w" in ns[0].note
    # by hand: γ = 1 + w scaled by d, q/k/v input columns ÷ d — invisible; w scaled by d (the plain-w rule) is not
    p = {k: v.detach().clone() for k, v in model.named_parameters()}
    d = 0.5 + torch.rand(64, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    pre = "model.layers.0"
    cols = {f"{pre}.self_attn.{x}_proj.weight": p[f"{pre}.self_attn.{x}_proj.weight"] / d[None, :] for x in "qkv"}
    w = p[f"{pre}.input_layernorm.weight"]
    right = dict(p, **cols, **{f"{pre}.input_layernorm.weight": d * (1 + w) - 1})
    wrong = dict(p, **cols, **{f"{pre}.input_layernorm.weight": d * w})
    assert relative_output_change(model, right) <= 1e-5 and relative_output_change(model, wrong) > 1e-3
