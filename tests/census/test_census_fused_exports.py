"""Fused tensors in the exports (issue 18): GPT-2's ``c_attn``, Phi-3's ``qkv_proj`` and
``gate_up_proj`` as sub-block axis entries of the permutation spec, applied through the written
file by the independent applier of ``test_census_spaces``; and what MergeKit's format keeps.

The expected slices come from the configs (``D = H·d``; Phi-3: ``H·d``, ``H_kv·d``, ``H_kv·d``
and ``h``, ``h``), not from the code under test.
"""

import json

import numpy as np
import pytest
import torch
from output_change import relative_output_change
from test_census_spaces import (  # the independent applier (tests/census on sys.path)
    _apply_file,
    _take,
)

from paramsym.census.permspec import PermutationSpec, apply_spec, axis_blocks
from paramsym.census.walk import _output, default_inputs
from paramsym.census.zoo import tiny_model
from paramsym.cli import main
from paramsym.errors import ShapeError

transformers = pytest.importorskip("transformers")


def _phi3_gqa():
    cfg = transformers.Phi3Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                                  num_hidden_layers=2, vocab_size=96, pad_token_id=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        m = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
        with torch.no_grad():
            for p in m.parameters():
                p.copy_((1 if p.dim() == 1 else 0) + 0.2 * torch.randn_like(p))
    return m.eval()


def _write(tmp_path, model, fmt="permutation-spec"):
    src, out = tmp_path / "m", tmp_path / fmt
    model.save_pretrained(src)
    rc = main(["census", "--model", str(src), "--export", fmt, "--out", str(out)])
    assert rc == 0
    return json.loads((out / ("permutation_spec.json" if fmt == "permutation-spec" else "mergekit_architecture.json"))
                      .read_text())


@pytest.mark.parametrize("name", ["gpt2", "phi3", "phi3-gqa"])
def test_fused_axes_are_sub_blocks_and_verified_through_the_file(tmp_path, name):
    model = _phi3_gqa() if name == "phi3-gqa" else tiny_model(name, causal_lm=True)
    spec = _write(tmp_path, model)
    model = model.double()
    cfg = model.config
    if name == "gpt2":
        D = cfg.n_embd
        assert spec["axes"]["transformer.h.0.attn.c_attn.weight"] == ["P_res", [["P_heads_0", D]] * 3]
        assert spec["axes"]["transformer.h.0.attn.c_attn.bias"] == [[["P_heads_0", D]] * 3]
        assert spec["perms"]["P_heads_0"] == cfg.n_head
    else:
        H, Hkv, h = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size
        d = cfg.hidden_size // H
        assert spec["axes"]["model.layers.1.self_attn.qkv_proj.weight"] == [
            [["P_heads_1", H * d], ["P_heads_1", Hkv * d], ["P_heads_1", Hkv * d]], "P_res"]
        assert spec["axes"]["model.layers.1.mlp.gate_up_proj.weight"] == [[["P_ffn_1", h], ["P_ffn_1", h]], "P_res"]
        assert spec["perms"]["P_heads_1"] == Hkv and spec["perms"]["P_ffn_1"] == h
    state = {k: v.detach() for k, v in model.named_parameters()}
    tol = 1e-10 if name == "gpt2" else 1e-5  # Phi-3's RMSNorm and softmax sum in float32 inside float64 runs
    for seed in range(2):
        new, perms = _apply_file(state, spec, np.random.default_rng(seed))
        assert sum(float((new[k] - state[k]).norm()) for k in state) > 1.0
        assert relative_output_change(model, new) <= tol
    # the file can fail: the same head permutation on the query slice alone breaks the model
    fused = "transformer.h.0.attn.c_attn.weight" if name == "gpt2" else "model.layers.0.self_attn.qkv_proj.weight"
    entry = next(e for e in spec["axes"][fused] if isinstance(e, list))
    ax = spec["axes"][fused].index(entry)
    p = torch.from_numpy(np.random.default_rng(5).permutation(spec["perms"]["P_heads_0"]))
    q, rest = torch.split(state[fused], [entry[0][1], sum(s for _, s in entry[1:])], dim=ax)
    broken = dict(state, **{fused: torch.cat([_take(q, ax, len(p), p), rest], dim=ax)})
    assert relative_output_change(model, broken) > 1e-3


def test_single_id_axes_stay_valid_and_sub_block_sizes_are_checked():
    t = torch.arange(12.0).reshape(2, 6)
    p = torch.tensor([2, 0, 1])
    plain = apply_spec({"w": t}, {"perms": {"A": 3}, "axes": {"w": [None, "A"]}}, {"A": p})["w"]
    listed = apply_spec({"w": t}, {"perms": {"A": 3}, "axes": {"w": [None, [["A", 6]]]}}, {"A": p})["w"]
    assert torch.equal(plain, t[:, [4, 5, 0, 1, 2, 3]]) and torch.equal(listed, plain)
    two = apply_spec({"w": t}, PermutationSpec({"A": 3}, {"w": [None, [[None, 3], ["A", 3]]]}), {"A": p})["w"]
    assert torch.equal(two, t[:, [0, 1, 2, 5, 3, 4]])
    with pytest.raises(ShapeError, match="sum to 5"):
        axis_blocks([["A", 3], [None, 2]], 6, "axis 1 of 'w'")
    with pytest.raises(ShapeError, match=r"expected \[ID or null, size > 0\]"):
        axis_blocks([["A", 0], [None, 6]], 6)


def test_mergekit_export_keeps_the_residual_axis_of_fused_tensors(tmp_path):
    """MergeKit <= 0.0.6 (``mergekit-0.0``) names one space per axis: Phi-3's fused qkv_proj / gate_up_proj keep their
    residual input space; the head and FFN spaces of a fused axis are dropped from every tensor."""
    model = tiny_model("phi3", causal_lm=True)
    arch = _write(tmp_path, model, "mergekit-0.0")
    w = {e["name"].split("${layer_index}.")[-1]: e for e in arch["layer_templates"]["weights"]}
    assert w["self_attn.qkv_proj.weight"].get("input_space") == "running_residual"
    assert w["mlp.gate_up_proj.weight"].get("input_space") == "running_residual"
    assert "output_space" not in w["self_attn.qkv_proj.weight"] and "output_space" not in w["mlp.gate_up_proj.weight"]
    assert "input_space" not in w["mlp.down_proj.weight"] and w["mlp.down_proj.weight"]["output_space"] == "running_residual"


def test_export_api_refuses_an_existing_path_and_unknown_formats_before_writing(tmp_path):
    from paramsym.census.export import export
    from paramsym.census.spaces import derive_spaces
    from paramsym.errors import ConfigError, ExportPathExistsError

    model = tiny_model("gpt2", causal_lm=True).double()
    inputs = default_inputs(model, torch.Generator().manual_seed(0))
    with torch.no_grad():
        spaces = derive_spaces(model, inputs, _output)
    kept = tmp_path / "kept.json"
    kept.write_text("keep")
    with pytest.raises(ExportPathExistsError, match="already exists"):
        export(model, spaces, "permutation-spec", kept, inputs, _output)
    assert kept.read_text() == "keep"
    new = tmp_path / "new.json"
    with pytest.raises(ConfigError, match="--export must be one of"):
        export(model, spaces, "safetensors", new, inputs, _output)
    assert not new.exists()
    rep = export(model, spaces, "permutation-spec", new, inputs, _output)  # and the good path writes, verified
    assert new.exists() and rep["verification"]["max_error"] <= 1e-10 and rep["omitted"] == []


def test_mergekit_export_refuses_gpt2_naming_the_transposed_weights(tmp_path, capsys):
    """GPT-2 stores every linear map (in, out) (Conv1D); MergeKit <= 0.0.6's space fields have no axis
    order, so no space survives: the CLI refuses by name (exit 2, nothing written), and the
    permutation-spec it points to writes and verifies."""
    from cli_checks import run_cli

    model = tiny_model("gpt2", causal_lm=True)
    model.save_pretrained(tmp_path / "m")
    out = tmp_path / "gpt2"
    rc, _, err = run_cli(capsys, ["census", "--model", tmp_path / "m", "--export", "mergekit-0.0", "--out", out])
    line = next(ln for ln in err.splitlines() if "error:" in ln)
    assert rc == 2 and not out.exists() and "Traceback" not in err
    D = model.config.n_embd
    for needle in ("ConfigError", "--export mergekit-0.0", "GPT2LMHeadModel", "(in, out)", "Conv1D",
                   f"'transformer.h.0.attn.c_attn.weight' ({D}, {3 * D})", "--export permutation-spec",
                   "--export mergekit: MergeKit 0.1.x"):
        assert needle in line, (needle, line)
    assert _write(tmp_path / "spec", model)["perms"]["P_res"] == D
