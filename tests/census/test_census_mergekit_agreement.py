"""Agreement with MergeKit's hand-written architecture descriptions (issue 18, item 4).

These are facts of **older** MergeKit descriptions (read in public source, recorded here as data
in our own words), when its files still stated spaces; the files of the current wheel state
names and vocabulary axes only and are compared by ``paramsym.census.mergekit_compare``
(``tests/census/test_census_mergekit_files.py``, the generated table of ``docs/census.md``): per tensor of one layer (and the outer tensors),
the role of the space on its input / output axis (``R`` = the residual stream, ``QK`` = the
layer's query/key space split into heads, ``V`` = its value space split into heads, ``U`` = the
FFN units, ``own`` = a space of the layer that no other tensor shares as the residual, ``-`` =
no space stated). Architectures whose MergeKit description states no spaces at all (names only:
``gpt_neox``, ``bert``, ``qwen2`` as read) have nothing to compare beyond tensor names.
"""

import json

import pytest
import torch

from paramsym.census.export import spec_for_model
from paramsym.census.permspec import PermutationSpec, verify_spec
from paramsym.census.walk import default_inputs
from paramsym.census.zoo import tiny_model
from paramsym.cli import main
from paramsym.targets import model_output as _output

#: llama: every weight carries spaces; q/k split into heads as a key/query pair, v/o split into heads
MERGEKIT_LLAMA = {
    "model.embed_tokens.weight": ("-", "R"),
    "input_layernorm.weight": ("R",), "post_attention_layernorm.weight": ("R",),
    "self_attn.q_proj.weight": ("R", "QK"), "self_attn.k_proj.weight": ("R", "QK"),
    "self_attn.v_proj.weight": ("R", "V"), "self_attn.o_proj.weight": ("V", "R"),
    "mlp.up_proj.weight": ("R", "U"), "mlp.gate_proj.weight": ("R", "U"), "mlp.down_proj.weight": ("U", "R"),
    "model.norm.weight": ("R",), "lm_head.weight": ("R", "-"),
}
#: gpt2 (as read): the attention output projection (c_proj) writes a space of its own per layer,
#: and its bias lies in that space; the FFN output (mlp.c_proj) writes the residual stream
MERGEKIT_GPT2_ATTN_OUT = "own"

_ROLE = {"running_residual": "R"}


def _role(space: str | None) -> str:
    if space is None:
        return "-"
    if space in _ROLE:
        return _ROLE[space]
    return {"attn_qk": "QK", "attn_v": "V", "up": "U"}[space.rsplit("_", 2)[0] if "${" in space else space.rsplit("_", 1)[0]]


def test_llama_agrees_with_mergekit_tensor_by_tensor(tmp_path):
    model = tiny_model("llama", causal_lm=True)
    model.save_pretrained(tmp_path / "m")
    out = tmp_path / "llama"
    assert main(["census", "--model", str(tmp_path / "m"), "--export", "mergekit-0.0", "--out", str(out)]) == 0
    arch = json.loads((out / "mergekit_architecture.json").read_text())
    ours = {}
    for e in arch["pre_weights"] + arch["post_weights"] + arch["layer_templates"]["weights"]:
        key = e["name"].split("${layer_index}.")[-1]
        if e.get("is_vector"):
            ours[key] = (_role(e.get("input_space")),)
        else:
            ours[key] = (_role(e.get("input_space")), _role(e.get("output_space")))
    agree = {k for k in MERGEKIT_LLAMA if ours.get(k) == MERGEKIT_LLAMA[k]}
    assert agree == set(MERGEKIT_LLAMA), {k: (ours.get(k), MERGEKIT_LLAMA[k]) for k in MERGEKIT_LLAMA if k not in agree}
    heads = {e["name"].split("${layer_index}.")[-1]: (e.get("head_split"), e.get("is_kq", False))
             for e in arch["layer_templates"]["weights"] if "head_split" in e}
    assert heads == {"self_attn.q_proj.weight": ("output", True), "self_attn.k_proj.weight": ("output", True),
                     "self_attn.v_proj.weight": ("output", False), "self_attn.o_proj.weight": ("input", False)}


def test_gpt2_attention_output_space_disagreement_is_settled_numerically():
    """MergeKit gives GPT-2's attention c_proj output its own space; the census puts it in the
    residual stream. Permuting the stream everywhere MergeKit places it but leaving c_proj's output
    (and bias) alone changes the model's output by O(1); including them (the census) leaves it
    unchanged to rounding — the census is right."""
    model = tiny_model("gpt2", causal_lm=True).double()
    spec = spec_for_model(model)
    params = {k: v.detach() for k, v in model.named_parameters()}
    inputs = default_inputs(model, torch.Generator().manual_seed(0))
    only_res = PermutationSpec({"P_res": spec.perms["P_res"]}, {n: list(a) for n, a in spec.axes.items()})
    theirs = PermutationSpec(dict(only_res.perms), {n: list(a) for n, a in only_res.axes.items()})
    moved_out = [n for n in theirs.axes if ".attn.c_proj." in n]
    assert len(moved_out) == 4  # weight and bias of both layers
    for n in moved_out:
        theirs.axes[n] = [None if (n.endswith("bias") or ax == 1) and q == "P_res" else q for ax, q in enumerate(theirs.axes[n])]
    for n in only_res.axes:
        only_res.axes[n] = [q if q == "P_res" else None for q in only_res.axes[n]]
        theirs.axes[n] = [q if q == "P_res" else None for q in theirs.axes[n]]
    ours_err = verify_spec(model, only_res, params, inputs, _output, torch.Generator().manual_seed(1))["max_error"]
    theirs_err = verify_spec(model, theirs, params, inputs, _output, torch.Generator().manual_seed(1))["max_error"]
    assert ours_err < 1e-12 and theirs_err > 0.1, (ours_err, theirs_err)
    assert MERGEKIT_GPT2_ATTN_OUT == "own"


@pytest.mark.parametrize("name", ["gpt_neox", "bert", "qwen2"])
def test_names_only_descriptions_cover_the_same_tensors(name):
    """MergeKit lists these architectures' tensors without spaces; the census export lists the same
    parameters (every one the model has) and adds the verified spaces."""
    model = tiny_model(name, causal_lm=name != "bert")
    spec = spec_for_model(model)
    assert set(spec.axes) == {n for n, _ in model.named_parameters()}
    assert spec.perms["P_res"] == model.get_input_embeddings().embedding_dim
