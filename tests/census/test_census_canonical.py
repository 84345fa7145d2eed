"""The canonical form of pre-norm transformers (issue 35, item 1): norm scales/biases folded into the
readers, LayerNorm centring into the writers, LayerNorm → RMS norm; outputs unchanged; the residual
stream's O(D) then an exact symmetry; named refusals for base and tied-without-untie models. Every
architecture of the census zoo (pre-norm: logits kept, rotation exact; post-norm: refused by name) is
in ``test_census_canonical_zoo.py``.

References are independent of the code under test: the original HF model's own forward pass, and
(for GPT-2) a rotation applied by hand through the parameter names.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from paramsym.census import census
from paramsym.census.canonical import canonical_form
from paramsym.census.precision import rounding_tolerance
from paramsym.census.rotation import random_orthogonal
from paramsym.census.walk import _output, default_inputs
from paramsym.census.zoo import tiny_model
from paramsym.errors import NonFiniteError, SymmetryNotApplicableError

transformers = pytest.importorskip("transformers")

def _inputs(model):
    return default_inputs(model, torch.Generator().manual_seed(0))


def _rel(a, b):
    return float((a - b).detach().norm() / b.detach().norm())


def _tol(model, dtype):
    """Rounding of the logits, the census's one rule: each of the L + 1 norm–read–write blocks is a
    D-long inner product (error ~ √D·ε relative), with a margin of 10."""
    return rounding_tolerance(dtype, model.config.num_hidden_layers, model.get_input_embeddings().embedding_dim)


def test_layernorm_stream_is_centred_and_the_original_class_still_computes_it():
    """GPT-2: after the fold every embedding row and writer output sums to 0 (the stream lies in 𝟙⊥),
    so putting the canonical weights back into LayerNorm modules at unit gain changes nothing."""
    model = tiny_model("gpt2", causal_lm=True).double()
    inputs = _inputs(model)
    canon = canonical_form(model, inputs, _output, untie=True)
    p = dict(canon.named_parameters())
    assert p["transformer.wte.weight"].sum(1).abs().max() < 1e-12 and p["transformer.wpe.weight"].sum(1).abs().max() < 1e-12
    for i in range(model.config.n_layer):
        for w in (f"transformer.h.{i}.attn.c_proj", f"transformer.h.{i}.mlp.c_proj"):  # Conv1D: (in, out)
            assert p[f"{w}.weight"].sum(1).abs().max() < 1e-12 and abs(float(p[f"{w}.bias"].detach().sum())) < 1e-12
    for n, m in list(canon.named_modules()):
        if isinstance(m, nn.RMSNorm):
            parent, _, leaf = n.rpartition(".")
            setattr(canon.get_submodule(parent), leaf, nn.LayerNorm(m.weight.numel(), eps=m.eps, dtype=torch.float64))
    with torch.no_grad():
        assert _rel(canon(**inputs).logits, model(**inputs).logits) <= _tol(model, torch.float64)


def test_residual_rotation_is_exact_on_the_canonical_gpt2_only():
    """A Haar Q applied by hand (through GPT-2's parameter names) to the canonical model keeps the
    logits to rounding and moves the weights by O(1); the same Q on the original model does not."""
    model = tiny_model("gpt2", causal_lm=True).double()
    inputs = _inputs(model)
    canon = canonical_form(model, inputs, _output, untie=True)
    Q = random_orthogonal(model.config.n_embd, torch.Generator().manual_seed(3))

    def rotate(m):
        m = __import__("copy").deepcopy(m)
        if m.lm_head.weight is m.transformer.wte.weight:  # the original is tied: untie to rotate both sides
            m.lm_head.weight = nn.Parameter(m.lm_head.weight.detach().clone())
        p = dict(m.named_parameters())
        with torch.no_grad():
            for e in ("transformer.wte.weight", "transformer.wpe.weight", "lm_head.weight"):
                p[e].copy_(p[e] @ Q.T)
            for i in range(m.config.n_layer):
                h = f"transformer.h.{i}."
                for r in ("attn.c_attn", "mlp.c_fc"):  # readers, Conv1D (D, out): rows are the stream
                    p[h + r + ".weight"].copy_(Q @ p[h + r + ".weight"])
                for w in ("attn.c_proj", "mlp.c_proj"):  # writers, Conv1D (in, D)
                    p[h + w + ".weight"].copy_(p[h + w + ".weight"] @ Q.T)
                    p[h + w + ".bias"].copy_(Q @ p[h + w + ".bias"])
        return m

    with torch.no_grad():
        ref = model(**inputs).logits
        rot = rotate(canon)
        assert _rel(rot(**inputs).logits, ref) <= _tol(model, torch.float64)
        assert _rel(rotate(model)(**inputs).logits, ref) > 1e-2  # not a symmetry before the fold
    w0, w1 = canon.transformer.wte.weight, rot.transformer.wte.weight
    assert _rel(w1, w0) > 0.5  # Q really moved the parameters


@pytest.mark.parametrize("name", ["gpt2", "gpt_neox", "llama", "falcon", "mixtral", "olmo"])
def test_census_reports_the_residual_rotation_of_the_canonical_form(name):
    g = census(tiny_model(name, causal_lm=True)).to_json()["group"]["residual_rotation"]
    D = tiny_model(name).get_input_embeddings().embedding_dim
    assert g["group"] == f"O({D})" and g["dimension"] == D * (D - 1) // 2
    assert g["verified"] and g["verified_error"] <= _tol(tiny_model(name, causal_lm=True), torch.float32) and g["motion"] > 0.5


def test_untie_is_a_named_option():
    """A tied GPT-2 whose final norm has a scale ≠ 1 is refused without untie=True; with the final
    scale at 1 it stays tied (the head's bias takes the final norm's β) and keeps its logits."""
    model = tiny_model("gpt2", causal_lm=True).double()
    inputs = _inputs(model)
    with pytest.raises(SymmetryNotApplicableError, match="untie=True"):
        canonical_form(model, inputs, _output)
    with torch.no_grad():
        model.transformer.ln_f.weight.fill_(1.0)
    canon = canonical_form(model, inputs, _output)
    assert canon.lm_head.weight is canon.transformer.wte.weight and canon.lm_head.bias is not None
    with torch.no_grad():
        assert _rel(canon(**inputs).logits, model(**inputs).logits) <= _tol(model, torch.float64)
    untied = canonical_form(model, inputs, _output, untie=True)
    assert untied.lm_head.weight is not untied.transformer.wte.weight and not untied.config.tie_word_embeddings


def test_base_models_and_norms_the_tracer_cannot_place_are_refused():
    base = tiny_model("llama").double()
    with pytest.raises(SymmetryNotApplicableError, match="LM head"):
        canonical_form(base, _inputs(base), _output)
    # OLMo2 normalises the attention/FFN outputs (not their inputs): traced (issue 34), but its post-norms
    # feed no linear map, so their scales have nowhere to go — refused naming the norm
    cfg = transformers.Olmo2Config(hidden_size=64, num_attention_heads=4, intermediate_size=96, vocab_size=96,
                                   num_hidden_layers=2, pad_token_id=1, bos_token_id=0, eos_token_id=1)
    olmo = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").double().eval()
    with pytest.raises(SymmetryNotApplicableError, match="model.layers.0.post_attention_layernorm .*post-norm"):
        canonical_form(olmo, _inputs(olmo), _output, untie=True)


def test_census_canonical_cli(tmp_path, capsys):
    """``paramsym census --model DIR --canonical`` takes the census of the canonical form (loaded with
    its LM head) and reports O(D) verified; post-norm and non-HF models are refused by name."""
    import json

    from paramsym.cli import main

    tiny_model("gpt2", causal_lm=True).save_pretrained(tmp_path / "gpt2")
    tiny_model("bert", cls="BertForMaskedLM").save_pretrained(tmp_path / "bert")
    assert main(["census", "--model", str(tmp_path / "gpt2"), "--canonical", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    rot = r["group"]["residual_rotation"]
    assert rot["verified"] and rot["dimension"] == 48 * 47 // 2 and rot["motion"] > 0.5
    assert not any(e["module"].endswith("ln_f") and e["kind"] == "norm_scale" and not e["verified"] for e in r["symmetries"])
    assert main(["census", "--model", str(tmp_path / "bert"), "--canonical"]) == 2
    err = capsys.readouterr().err
    assert "SymmetryNotApplicableError" in err and "post-norm" in err and len(err.strip().splitlines()) == 1
    assert main(["census", "--preset", "mlp-relu", "--canonical"]) == 2
    assert "ConfigError" in capsys.readouterr().err


def test_the_default_output_is_the_logits():
    from paramsym.census import canonical_form as exported

    model = tiny_model("llama", causal_lm=True).double()
    inputs = _inputs(model)
    canon = exported(model, inputs, untie=True)
    with torch.no_grad():
        assert _rel(canon(**inputs).logits, model(**inputs).logits) <= _tol(model, torch.float32)


def test_nan_weights_are_refused_by_name():
    model = tiny_model("gpt2", causal_lm=True).double()
    with torch.no_grad():
        model.transformer.h[1].mlp.c_fc.weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteError, match="transformer.h.1.mlp.c_fc.weight"):
        canonical_form(model, _inputs(model), untie=True)
