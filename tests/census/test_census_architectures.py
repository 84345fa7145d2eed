"""Every current decoder architecture of issue 34 item 2 has a census, reported per entry.

Mixtral (per-expert FFN units in 3-D expert banks), Gemma2 (pre- and post-norms, soft-capping),
OLMo (LayerNorm without parameters) and OLMo2 (post-norm, q/k norms over the whole projection):
what the census claims is checked here against hand-applied transformations on the models' own
forward passes (independent of the census's candidates), and what it refuses is shown to be
right to refuse. The seed and checkpoint tests over every architecture are in
``test_census_precision.py`` and ``test_census_stored_names.py``.
"""


import pytest
import torch
from output_change import relative_output_change

from paramsym.census import census
from paramsym.census.precision import Float64Throughout
from paramsym.census.zoo import MORE, TINY, tiny_model, tiny_names

transformers = pytest.importorskip("transformers")

#: issue 34 item 2's list → the zoo names (Falcon both ways; BERT-family encoders)
ITEM2 = {"Llama": ["llama"], "Mistral": ["mistral"], "Mixtral": ["mixtral"], "Qwen2": ["qwen2"], "Qwen3": ["qwen3"],
         "Gemma": ["gemma"], "Gemma2": ["gemma2"], "Phi-3": ["phi3"], "GPT-2": ["gpt2"], "GPT-J": ["gptj"],
         "GPT-NeoX": ["gpt_neox"], "GPT-BigCode": ["gpt_bigcode"], "Starcoder2": ["starcoder2"],
         "Falcon": ["falcon", "falcon_old"], "OPT": ["opt"], "OLMo": ["olmo"], "OLMo2": ["olmo2"], "Cohere": ["cohere"],
         "StableLM": ["stablelm"], "BERT-family encoders": ["bert", "roberta", "distilbert"]}
ENCODERS = {"bert", "roberta", "distilbert"}


def test_every_item2_architecture_is_in_the_zoo():
    names = [n for v in ITEM2.values() for n in v]
    assert sorted(names) == sorted(tiny_names()) == sorted(TINY + MORE)


def _params(model):
    return {k: v.detach() for k, v in model.named_parameters()}


def test_mixtral_units_per_expert_router_untouched_and_every_expert_exercised():
    model = tiny_model("mixtral", seed=0, causal_lm=True).double()
    cfg = model.config
    E, L, h = cfg.num_local_experts, cfg.num_hidden_layers, cfg.intermediate_size
    r = census(model, layout="derived")
    assert r.all_verified
    units = [e for e in r.entries if e.kind in ("hidden_permutation", "rescaling")]
    assert sorted((e.module, e.kind) for e in units) == sorted(
        (f"model.layers.{i}.mlp.experts.{x}", k) for i in range(L) for x in range(E) for k in ("hidden_permutation",
                                                                                               "rescaling"))
    assert all(e.dimension == h for e in units if e.kind == "rescaling")
    flips = [e.module for e in r.entries if e.kind == "sign_flip"]  # (ℝ∖{0})^h per expert: the signs too
    assert sorted(flips) == sorted(f"model.layers.{i}.mlp.experts.{x}" for i in range(L) for x in range(E))
    from paramsym.census.finders import DEFAULT_FINDERS, CensusContext
    from paramsym.census.spaces import derive_spaces
    from paramsym.census.walk import _output, default_inputs

    sp = derive_spaces(model, default_inputs(model, torch.Generator().manual_seed(0)), _output)
    cands = [c for f in DEFAULT_FINDERS for c in f.find(CensusContext(model, sp.layout, _params(model), sp))]
    routers = {n for n, _ in model.named_parameters() if n.endswith("mlp.gate.weight")}
    assert len(routers) == L and all(not (set(c.moved) & routers) for c in cands if c.kind != "residual_permutation")
    assert any(set(c.moved) & routers for c in cands)  # the stream permutation moves the router's input columns
    # by hand: expert x's units permuted (w1 = gate rows, w3 = up rows, down columns) or its up rows
    # rescaled (down columns ÷) leave the logits; its gate rows rescaled do not — so the batch routes
    # tokens to every expert and the census's checks of each expert are not vacuous
    p = _params(model)
    pre = "model.layers.0.mlp.experts."
    gu, dn = p[pre + "gate_up_proj"], p[pre + "down_proj"]
    g = torch.Generator().manual_seed(5)
    for x in range(E):
        perm = torch.randperm(h, generator=g)
        c = torch.exp(torch.randn(h, generator=g, dtype=torch.float64))
        gu2, dn2 = gu.clone(), dn.clone()
        gu2[x, :h], gu2[x, h:], dn2[x] = gu[x, :h][perm], gu[x, h:][perm], dn[x][:, perm]
        assert relative_output_change(model, {**p, pre + "gate_up_proj": gu2, pre + "down_proj": dn2}) < 1e-12
        gu2, dn2 = gu.clone(), dn.clone()
        gu2[x, h:], dn2[x] = gu[x, h:] * c[:, None], dn[x] / c[None, :]
        assert relative_output_change(model, {**p, pre + "gate_up_proj": gu2, pre + "down_proj": dn2}) < 1e-12
        gu2 = gu.clone()
        gu2[x, :h] = gu[x, :h] * c[:, None]
        assert relative_output_change(model, {**p, pre + "gate_up_proj": gu2, pre + "down_proj": dn2}) > 1e-3
    refused = {(x["module"], x["kind"]) for x in r.refused}
    assert refused == {(f"model.layers.{i}.post_attention_layernorm", "norm_scale") for i in range(L)}


def test_olmo2_post_norm_is_reported_per_entry():
    """OLMo2 (norms on the attention/FFN outputs; q/k norms over the whole projection): no whole-model
    refusal; heads, units, value/output and the stream permutation verified; query/key, the post-norm
    scales and the residual rotation refused with their reasons — each refusal shown right by hand."""
    model = tiny_model("olmo2", seed=0, causal_lm=True).double()
    L = model.config.num_hidden_layers
    r = census(model, layout="derived")
    assert r.all_verified
    kinds = [e.kind for e in r.entries]
    for k, n in (("head_permutation", L), ("hidden_permutation", L), ("rescaling", L),
                 ("attention.value_output.gl", L), ("residual_permutation", 1)):
        assert kinds.count(k) == n, k
    refused = {(x["module"], x["kind"]) for x in r.refused}
    assert refused == {(f"model.layers.{i}.self_attn", "attention.query_key") for i in range(L)} | {
        (f"model.layers.{i}.post_{w}_layernorm", "norm_scale") for i in range(L) for w in ("attention", "feedforward")}
    rot = r.residual_rotation
    assert rot["verified"] is False and "post-norm" in rot["note"]
    base = census(tiny_model("olmo2", seed=0), layout="derived")  # the base model: its final norm is the output
    assert base.all_verified and {x["module"] for x in base.refused if x["kind"] == "norm_scale"} == {
        f"layers.{i}.post_{w}_layernorm" for i in range(L) for w in ("attention", "feedforward")}
    p = _params(model)
    pre = "model.layers.0."
    d = model.config.hidden_size // model.config.num_attention_heads
    # a post-norm's scale is not absorbed by what follows (the norm's output is the residual's update)
    c = torch.exp(torch.randn(p[pre + "post_attention_layernorm.weight"].shape, generator=torch.Generator().manual_seed(1),
                              dtype=torch.float64))
    assert relative_output_change(model, {**p, pre + "post_attention_layernorm.weight":
                                          p[pre + "post_attention_layernorm.weight"] * c}) > 1e-3
    # heads: key/value head 0 ↔ 1 with their query heads; q_norm/k_norm scales must move with the rows
    Hkv, G = model.config.num_key_value_heads, model.config.num_attention_heads // model.config.num_key_value_heads
    perm_kv = torch.tensor([1, 0])
    q_rows = torch.cat([torch.arange(g * G * d, (g + 1) * G * d) for g in perm_kv])
    kv_rows = torch.cat([torch.arange(g * d, (g + 1) * d) for g in perm_kv])
    a = pre + "self_attn."
    new = {**p, a + "q_proj.weight": p[a + "q_proj.weight"][q_rows], a + "k_proj.weight": p[a + "k_proj.weight"][kv_rows],
           a + "v_proj.weight": p[a + "v_proj.weight"][kv_rows], a + "o_proj.weight": p[a + "o_proj.weight"][:, q_rows]}
    assert Hkv == 2 and relative_output_change(model, new) > 1e-3  # without the q/k norm scales: not a symmetry
    new |= {a + "q_norm.weight": p[a + "q_norm.weight"][q_rows], a + "k_norm.weight": p[a + "k_norm.weight"][kv_rows]}
    with Float64Throughout():  # OLMo2's RMSNorm computes in float32: the exact check is in float64 throughout
        assert relative_output_change(model, new) < 1e-12


def test_olmo_parameter_free_norms_carry_the_stream():
    model = tiny_model("olmo", seed=0, causal_lm=True).double()
    assert not any(n.endswith("norm.weight") for n, _ in model.named_parameters())  # no norm parameters at all
    r = census(model, layout="derived")
    assert r.all_verified and [e.kind for e in r.entries].count("residual_permutation") == 1
    assert not any(e.kind == "norm_scale" for e in r.entries)
    # the residual rotation holds on the canonical form (each LayerNorm made a parameter-free RMS norm,
    # the writers centred): verified, a group of the whole width
    rot = r.residual_rotation
    assert rot["verified"] and rot["group"] == f"O({model.config.hidden_size})" and rot["motion"] > 0.5
    # the stream permutation by hand: embedding columns, readers' input columns, writers' output rows
    p = _params(model)
    perm = torch.randperm(model.config.hidden_size, generator=torch.Generator().manual_seed(3))
    new = {}
    for n, t in p.items():
        if n in ("model.embed_tokens.weight", "lm_head.weight") or n.endswith(("q_proj.weight", "k_proj.weight",
                                                                              "v_proj.weight", "gate_proj.weight",
                                                                              "up_proj.weight")):
            new[n] = t[:, perm]
        elif n.endswith(("o_proj.weight", "down_proj.weight")):
            new[n] = t[perm]
        else:
            new[n] = t
    with Float64Throughout():  # OLMo's LayerNorm computes in float32
        assert relative_output_change(model, new) < 1e-12
    new["model.layers.1.mlp.down_proj.weight"] = p["model.layers.1.mlp.down_proj.weight"]  # one writer left out
    assert relative_output_change(model, new) > 1e-3


def test_gemma2_soft_capping_and_post_norms():
    model = tiny_model("gemma2", seed=0, causal_lm=True).double()
    cfg = model.config
    assert cfg.attn_logit_softcapping and cfg.final_logit_softcapping  # soft-capping is on in the tiny config
    r = census(model, layout="derived")
    assert r.all_verified
    norms = sorted(e.module for e in r.entries if e.kind == "norm_scale")
    assert norms == sorted(f"model.layers.{i}.{w}" for i in range(cfg.num_hidden_layers)
                           for w in ("input_layernorm", "pre_feedforward_layernorm"))
    refused = {x["module"] for x in r.refused if x["kind"] == "norm_scale"}
    assert refused == {f"model.layers.{i}.post_{w}_layernorm" for i in range(cfg.num_hidden_layers)
                       for w in ("attention", "feedforward")}
    assert any(e.kind == "attention.query_key.rotary_commutant" for e in r.entries)  # the capping acts after q·k


def test_parameter_free_norms_are_recognised_whatever_their_eps_and_the_identity_is_not():
    from paramsym.census.tracing import _free_norm

    x = 0.3 * torch.randn(2, 5, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64) + 0.7
    for eps in (1e-6, 1e-5, 1e-4):
        assert _free_norm(x, torch.nn.functional.layer_norm(x, (64,), eps=eps), 64)
        assert _free_norm(x, x / x.pow(2).mean(-1, keepdim=True).add(eps).sqrt(), 64)  # RMS normalisation
    assert not _free_norm(x, x, 64)  # dropout in eval
    assert not _free_norm(x, torch.tanh(x), 64) and not _free_norm(x, 2 * torch.nn.functional.layer_norm(x, (64,)), 64)
