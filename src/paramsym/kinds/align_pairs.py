"""Two transformer pairs trained apart for alignment (issue 35): a ViT on digits, a byte-level LM on the stdlib.

Budgets are fixed here, before any result (the ``full`` configs are the presets; ``quick()`` the
test/``--quick`` budgets, whose models are not the documented ones):

* ``vit-digits`` — HF ``ViTForImageClassification`` (``image_size 8``, ``patch_size 2`` → 16
  patches + CLS, one channel, ``hidden 64``, 4 layers, 4 heads, ``intermediate 128``, GELU,
  pre-norm LayerNorm, CLS pooling, no dropout, eager attention) on
  :func:`paramsym.models.datasets.digits_images` ``(seed 0, 80/20)``; AdamW (lr 1e-3, weight
  decay 0.01), batch 64 shuffled by the seed's generator, 60 epochs (1,380 steps). Full budget:
  about 2 CPU-minutes per model (one thread; 2.0 CPU-s per epoch measured here).
* ``lm-stdlib`` — HF ``GPT2LMHeadModel`` (``vocab 256`` bytes, ``n_embd 128``, 4 layers, 4 heads,
  ``n_inner 512``, GELU, LayerNorm, **tied** embeddings, context 64, no dropout, eager attention)
  on :func:`paramsym.models.corpus.stdlib_corpus` (split by file, every 5th file a test file):
  AdamW (lr 1e-3, weight decay 0.1), 2,000 steps of 16 random windows (drawn by the seed's
  generator). Evaluation: 64 evenly spaced windows of the training stream and 64 of the test
  stream, next-token cross-entropy over every position. Full budget: about 3.5 CPU-minutes per
  model (one thread; 0.10 CPU-s per step measured here).

Both models of a pair start from weights drawn by ``torch.Generator().manual_seed(seed)``
(seeds 0 and 1; N(0, 0.02²) matrices and embeddings, zero biases, LayerNorm 1/0:
:func:`init_weights`) and are cached like the other presets, by the one reuse rule
(:func:`paramsym.runs.reuse.cached_tensors`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from torch import Tensor, nn

from ..alignment.arch import Architecture, hf_architecture
from ..models.datasets import Split

__all__ = ["PAIRS", "StdlibLMConfig", "ViTDigitsConfig", "init_weights", "load_pair_preset", "lm_model", "vit_model",
           "with_width"]

#: the presets of this module
PAIRS = ("vit-digits", "lm-stdlib")


@dataclass(frozen=True)
class ViTDigitsConfig:
    hidden: int = 64
    layers: int = 4
    heads: int = 4
    intermediate: int = 128
    patch: int = 2
    epochs: int = 60
    lr: float = 1e-3
    weight_decay: float = 0.01
    batch: int = 64
    data_seed: int = 0

    @classmethod
    def quick(cls) -> ViTDigitsConfig:
        """Tests and ``--quick``: 2 layers, 2 epochs (seconds; not the documented models)."""
        return cls(layers=2, epochs=2)

    def tag(self) -> str:
        return (f"vit-digits-h{self.hidden}-l{self.layers}-n{self.heads}-i{self.intermediate}-p{self.patch}-e{self.epochs}"
                f"-lr{self.lr:g}-wd{self.weight_decay:g}-b{self.batch}-d{self.data_seed}")


@dataclass(frozen=True)
class StdlibLMConfig:
    n_embd: int = 128
    n_layer: int = 4
    n_head: int = 4
    context: int = 64
    steps: int = 2000
    batch: int = 16
    lr: float = 1e-3
    weight_decay: float = 0.1
    test_every: int = 5
    eval_windows: int = 64

    @classmethod
    def quick(cls) -> StdlibLMConfig:
        """Tests and ``--quick``: the same model, 30 steps, 8 evaluation windows of 32 bytes."""
        return cls(steps=30, context=32, eval_windows=8)

    def tag(self) -> str:
        return (f"lm-stdlib-e{self.n_embd}-l{self.n_layer}-h{self.n_head}-c{self.context}-s{self.steps}-b{self.batch}"
                f"-lr{self.lr:g}-wd{self.weight_decay:g}-t{self.test_every}-w{self.eval_windows}")


def vit_model(cfg: ViTDigitsConfig) -> nn.Module:
    """The (untrained) ViT of the preset (float32, eager attention, eval mode)."""
    from transformers import ViTConfig, ViTForImageClassification

    conf = ViTConfig(image_size=8, patch_size=cfg.patch, num_channels=1, hidden_size=cfg.hidden,
                     num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=10,
                     attn_implementation="eager")
    return ViTForImageClassification(conf).eval()


def lm_model(cfg: StdlibLMConfig) -> nn.Module:
    """The (untrained) byte-level GPT-2 of the preset (float32, tied embeddings, eager attention, eval mode)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    conf = GPT2Config(vocab_size=256, n_positions=cfg.context, n_embd=cfg.n_embd, n_layer=cfg.n_layer,
                      n_head=cfg.n_head, n_inner=4 * cfg.n_embd, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      tie_word_embeddings=True, bos_token_id=10, eos_token_id=10, attn_implementation="eager")
    return GPT2LMHeadModel(conf).eval()


def init_weights(model: nn.Module, gen: torch.Generator) -> None:
    """Every LayerNorm weight 1 and bias 0, other biases 0, every other tensor N(0, 0.02²) drawn from
    ``gen`` in ``named_parameters`` order (the modular-addition preset's initialisation)."""
    norms = {f"{m}.{p}" if m else p for m, mod in model.named_modules() if isinstance(mod, nn.LayerNorm)
             for p, _ in mod.named_parameters(recurse=False)}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in norms:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)


def train_vit(cfg: ViTDigitsConfig, seed: int, data: Split) -> dict[str, Tensor]:
    """Train the preset ViT from ``seed`` (module docstring); returns its parameters."""
    gen = torch.Generator().manual_seed(seed)
    model = vit_model(cfg)
    init_weights(model, gen)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    n = data.x_train.shape[0]
    for _ in range(cfg.epochs):
        order = torch.randperm(n, generator=gen)
        for i in range(0, n, cfg.batch):
            idx = order[i:i + cfg.batch]
            loss = nn.functional.cross_entropy(model(data.x_train[idx]).logits, data.y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def train_lm(cfg: StdlibLMConfig, seed: int, tokens: Tensor) -> dict[str, Tensor]:
    """Train the preset LM from ``seed`` on random windows of the training stream; returns its parameters."""
    from ..models.corpus import lm_windows

    gen = torch.Generator().manual_seed(seed)
    model = lm_model(cfg)
    init_weights(model, gen)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    for _ in range(cfg.steps):
        x, y = lm_windows(tokens, cfg.context, cfg.batch, gen)
        logits = model(x).logits
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def load_pair_preset(name: str, root: Path, cfg: ViTDigitsConfig | StdlibLMConfig | None = None,
                     seeds: tuple[int, int] = (0, 1)) -> tuple[Architecture, dict[str, Tensor], dict[str, Tensor], Split, dict]:
    """``(arch, θ_A, θ_B, data, info)`` of ``vit-digits`` or ``lm-stdlib`` (models cached under ``root``).

    Raises:
        ConfigError: an unknown name, or a configuration of the other preset.
    """
    from ..errors import ConfigError
    from ..runs.reuse import cached_tensors

    info: dict = {"preset": name, "seeds": list(seeds), "cache": str(root)}
    if name == "vit-digits":
        from ..models.datasets import digits_images

        cfg = cfg if cfg is not None else ViTDigitsConfig()
        if not isinstance(cfg, ViTDigitsConfig):
            raise ConfigError(f"preset vit-digits takes a ViTDigitsConfig; received {type(cfg).__name__}.")
        data = digits_images(cfg.data_seed)
        train = train_vit
        model = vit_model(cfg)
        info["data"] = "digits images (8×8, seed 0, 80/20)"
    elif name == "lm-stdlib":
        from ..models.corpus import lm_windows, stdlib_corpus

        cfg = cfg if cfg is not None else StdlibLMConfig()
        if not isinstance(cfg, StdlibLMConfig):
            raise ConfigError(f"preset lm-stdlib takes a StdlibLMConfig; received {type(cfg).__name__}.")
        corpus = stdlib_corpus(cfg.test_every)
        data = Split(*lm_windows(corpus.train, cfg.context, cfg.eval_windows),
                     *lm_windows(corpus.test, cfg.context, cfg.eval_windows))
        train = lambda c, s, _d: train_lm(c, s, corpus.train)  # noqa: E731
        model = lm_model(cfg)
        info["data"] = corpus.describe()
    else:
        raise ConfigError(f"unknown transformer pair {name!r}; choose one of {', '.join(PAIRS)}.")
    meta = asdict(cfg) | ({"corpus": info["data"]["sha256"]} if name == "lm-stdlib" else {})
    ps = [cached_tensors(root / f"{cfg.tag()}-seed{s}.safetensors", meta | {"seed": s}, lambda s=s: train(cfg, s, data))
          for s in seeds]
    positions = "all" if name == "lm-stdlib" else "last"
    arch = hf_architecture(model.double(), n_classes=None if name == "lm-stdlib" else 10, positions=positions)
    return arch, ps[0], ps[1], data, info | {"config": asdict(cfg)}


def with_width(cfg: ViTDigitsConfig | StdlibLMConfig, width: int | None) -> ViTDigitsConfig | StdlibLMConfig:
    """``cfg`` with its residual width (``hidden`` / ``n_embd``) set to ``width`` (``None``: unchanged)."""
    if width is None:
        return cfg
    return replace(cfg, hidden=int(width)) if isinstance(cfg, ViTDigitsConfig) else replace(cfg, n_embd=int(width))
