"""Tiny Hugging Face models built from configs offline (hidden 32–64, 2 layers, a few heads).

One small config per architecture of issue 18, with eager attention, random weights drawn
under ``torch.random.fork_rng`` (the global RNG is untouched). Used by the tests, the
benchmarks and ``paramsym census --preset tiny-<name>``. :func:`tiny_vit` builds a tiny Vision
Transformer classifier (image inputs; not among the token models of :func:`tiny_names`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..errors import ConfigError

__all__ = ["MORE", "QK_REFUSED", "TINY", "tiny_model", "tiny_names", "tiny_vit"]


def _cfgs() -> dict[str, Callable[[], object]]:
    import transformers as t

    common = dict(vocab_size=96, num_hidden_layers=2)
    ids = dict(bos_token_id=0, eos_token_id=1, pad_token_id=1)  # special ids inside the tiny vocabulary
    return {
        "llama": lambda: t.LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                                       head_dim=16, **common),
        "mistral": lambda: t.MistralConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                           intermediate_size=96, head_dim=16, sliding_window=None, **common),
        "qwen2": lambda: t.Qwen2Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                                       **common),
        "gemma": lambda: t.GemmaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=1, intermediate_size=96,
                                       head_dim=16, **common),
        "phi3": lambda: t.Phi3Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, intermediate_size=96,
                                     pad_token_id=0, **common),
        "gpt2": lambda: t.GPT2Config(n_embd=48, n_head=4, n_layer=2, vocab_size=96, n_positions=64),
        "gpt_neox": lambda: t.GPTNeoXConfig(hidden_size=64, num_attention_heads=4, intermediate_size=128, rotary_pct=0.5,
                                            **common),
        "bert": lambda: t.BertConfig(hidden_size=48, num_attention_heads=4, intermediate_size=96,
                                     max_position_embeddings=64, **common),
        "roberta": lambda: t.RobertaConfig(hidden_size=48, num_attention_heads=4, intermediate_size=96,
                                           max_position_embeddings=64, pad_token_id=1, **common),
        "distilbert": lambda: t.DistilBertConfig(dim=48, n_heads=4, hidden_dim=96, n_layers=2, vocab_size=96,
                                                 max_position_embeddings=64),
        "opt": lambda: t.OPTConfig(hidden_size=48, num_attention_heads=4, ffn_dim=96, word_embed_proj_dim=48,
                                   max_position_embeddings=64, pad_token_id=1, **common),
        "falcon": lambda: t.FalconConfig(hidden_size=64, num_attention_heads=4, num_kv_heads=2,
                                         new_decoder_architecture=True, **common),
        "stablelm": lambda: t.StableLmConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                             intermediate_size=96, partial_rotary_factor=0.25, **common),
        # issue 34: biased attention computing its softmax in float32 inside float64 runs
        "starcoder2": lambda: t.Starcoder2Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                                 intermediate_size=96, **common),
        "falcon_old": lambda: t.FalconConfig(hidden_size=64, num_attention_heads=4, new_decoder_architecture=False,
                                             multi_query=False, parallel_attn=True, bias=True, alibi=False, **common),
        "gpt_bigcode": lambda: t.GPTBigCodeConfig(n_embd=48, n_head=4, n_layer=2, vocab_size=96, n_positions=64,
                                                  bos_token_id=0, eos_token_id=0),
        # issue 34: query/key refused per layer (interleaved rotary; q/k norms), the rest of the census kept
        "gptj": lambda: t.GPTJConfig(n_embd=64, n_head=4, n_layer=2, vocab_size=96, n_positions=64, rotary_dim=8,
                                     bos_token_id=0, eos_token_id=0),
        "qwen3": lambda: t.Qwen3Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                                       head_dim=16, **common),
        "cohere": lambda: t.CohereConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                         intermediate_size=96, bos_token_id=0, eos_token_id=1, pad_token_id=0, **common),
        # issue 34 item 2: mixture of experts, pre+post norms with soft-capping, parameter-free and post norms
        "mixtral": lambda: t.MixtralConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                           intermediate_size=32, head_dim=16, num_local_experts=3, num_experts_per_tok=2,
                                           sliding_window=None, **ids, **common),
        "gemma2": lambda: t.Gemma2Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                         intermediate_size=96, head_dim=16, **ids, **common),
        "olmo": lambda: t.OlmoConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                                     **ids, **common),
        "olmo2": lambda: t.Olmo2Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                       intermediate_size=96, **ids, **common),
    }


#: the architectures with a tiny config
TINY = ["llama", "mistral", "qwen2", "gemma", "phi3", "gpt2", "gpt_neox", "bert", "roberta", "distilbert", "opt", "falcon",
        "stablelm"]
#: more architectures (issue 34): Starcoder2, old-architecture Falcon (one norm shared by the
#: parallel attention and FFN, full multi-head attention, biases), GPT-BigCode (multi-query),
#: GPT-J (parallel blocks, interleaved rotary), Qwen3 (q/k norms), Cohere (parallel blocks,
#: LayerNorm without bias, interleaved rotary, tied head); Mixtral (3 experts, top-2: FFN units per
#: expert in a 3-D bank, a router), Gemma2 (pre- and post-norms around attention and FFN, logit
#: soft-capping), OLMo (LayerNorm without parameters), OLMo2 (post-norm: norms on the attention and
#: FFN outputs; q/k norms over the whole projection)
MORE = ["starcoder2", "falcon_old", "gpt_bigcode", "gptj", "qwen3", "cohere", "mixtral", "gemma2", "olmo", "olmo2"]
#: of these, the ones whose query/key symmetry is refused per layer (``census(...).refused`` says why):
#: GPT-J (rotary embeddings the tracer cannot place: interleaved, from a position table), Qwen3
#: (q/k norms before the softmax), Cohere (interleaved rotary), OLMo2 (q/k norms over the whole projection)
QK_REFUSED = ["gptj", "qwen3", "cohere", "olmo2"]


def tiny_names() -> list[str]:
    """The architectures :func:`tiny_model` builds."""
    return list(TINY) + list(MORE)


def tiny_model(name: str, seed: int = 0, causal_lm: bool = False, std: float = 0.2, cls: str | None = None) -> nn.Module:
    """A tiny random model of architecture ``name`` (``AutoModel``, or ``AutoModelForCausalLM``
    with ``causal_lm=True``, or the ``transformers`` class named ``cls``, e.g.
    ``"BertForMaskedLM"``), eager attention, in eval mode. Weights are redrawn ``N(0, std²)``
    (norm scales ``1 + N(0, std²)``, biases ``N(0, std²)``) so that no symmetry hides behind
    zero biases or unit norm scales.

    Raises:
        ConfigError: an unknown name (the known ones are listed), or a ``cls`` that ``transformers`` lacks.
    """
    cfgs = _cfgs()
    if name not in cfgs:
        raise ConfigError(f"tiny_model: unknown architecture {name!r}; known: {tiny_names()}.")
    import transformers

    cfg = cfgs[name]()
    if cls is not None and not hasattr(transformers, cls):
        raise ConfigError(f"tiny_model: transformers has no class {cls!r}; pass a model class name such as "
                          "'BertForMaskedLM', or cls=None.")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        if cls is not None:
            model = getattr(transformers, cls)._from_config(cfg, attn_implementation="eager")
        else:
            auto = transformers.AutoModelForCausalLM if causal_lm else transformers.AutoModel
            extra = {"experts_implementation": "eager"} if name == "mixtral" else {}  # the per-expert loop (float64)
            model = auto.from_config(cfg, attn_implementation="eager", **extra)
        _redraw(model, std)
    return model.eval()


def _redraw(model: nn.Module, std: float) -> None:
    """Every parameter redrawn from the global RNG: ``1 + N(0, std²)`` where it is all ones (norm
    scales), ``N(0, std²)`` elsewhere."""
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1 and bool((p == 1).all()):
                p.copy_(1 + std * torch.randn_like(p))
            else:
                p.copy_(std * torch.randn_like(p))


def tiny_vit(seed: int = 0, patch: int = 2, hidden: int = 16, layers: int = 2, std: float = 0.2,
             pooler: bool = False) -> nn.Module:
    """A tiny random Vision Transformer classifier (HF ``ViTForImageClassification``, pre-norm) for
    ``8 × 8`` one-channel images (scikit-learn's digits), ``patch × patch`` patches, 2 heads, FFN
    width ``1.5·hidden``, 10 classes, eager attention, in eval mode; weights redrawn as
    :func:`tiny_model`'s. With ``pooler``: the base ``ViTModel`` with its pooler instead. Not among
    :func:`tiny_names` (its inputs are ``pixel_values``, not tokens).

    Raises:
        ConfigError: ``patch`` does not divide 8.
    """
    if patch not in (1, 2, 4, 8):
        raise ConfigError(f"tiny_vit: patch must divide the image side 8 (1, 2, 4 or 8); received {patch!r}.")
    import transformers

    cfg = transformers.ViTConfig(image_size=8, patch_size=patch, num_channels=1, hidden_size=hidden,
                                 num_hidden_layers=layers, num_attention_heads=2, intermediate_size=3 * hidden // 2,
                                 num_labels=10, attn_implementation="eager")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = transformers.ViTModel(cfg, add_pooling_layer=True) if pooler else \
            transformers.ViTForImageClassification(cfg)
        _redraw(model, std)
    return model.eval()
