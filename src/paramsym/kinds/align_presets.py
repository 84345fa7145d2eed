"""Alignment presets on real offline data: two models trained from different seeds, cached.

* ``digits-mlp`` — :func:`paramsym.models.mlp.mlp` ``[64, w, w, 10]`` (ReLU, biases, ``w = 32``,
  PyTorch's default initialisation from ``torch.Generator().manual_seed(seed)``), trained on
  :func:`paramsym.models.datasets.digits` ``(seed=0)`` (standardised, 80/20) with Adam (lr 1e-3),
  batch 64 (shuffled by a generator seeded ``seed``), 30 epochs, cross-entropy; seeds 0 and 1.
* ``modadd-transformer`` — a 2-layer GPT-2 (``GPT2Config``: ``n_embd = 64``, 4 heads of 16,
  ``n_inner = 256``, GELU, no dropout, tied embeddings, eager attention) on
  :func:`paramsym.models.datasets.modular_addition` ``(p = 23, seed = 0, train_fraction = 0.8)``:
  inputs ``(a, b, =)``, logits of the last position restricted to the ``p`` classes; full-batch
  AdamW (lr 1e-3, weight decay 1.0) for 3,000 steps from initialisations drawn from a generator
  seeded ``seed`` (weights N(0, 0.02²), biases 0, LayerNorm 1/0); seeds 0 and 1. Both models
  generalise (test accuracy 1.0 measured here; with 1,500 steps, weight decay 0.1 and half the
  pairs for training they only memorised).

* ``vit-digits`` and ``lm-stdlib`` — the transformer pairs of :mod:`paramsym.kinds.align_pairs`
  (configurations, budgets and training there; :func:`load_preset` delegates to it).

Models are trained on first use and cached as safetensors (written atomically) under
``cache_dir`` (default ``~/.cache/paramsym``; the command line's ``$PARAMSYM_CACHE``; sub-folder ``align``); the
file name carries every training setting, and a cached model is reused only by the one reuse rule
(:func:`paramsym.runs.reuse.cached_tensors`: its recorded config hash and code version equal
today's; otherwise it is trained again, the old file moved aside).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from ..alignment.align import AlignmentResult, align
from ..alignment.arch import Architecture, hf_architecture, mlp_architecture
from ..errors import ConfigError
from ..models.datasets import Split, digits, modular_addition
from ..models.mlp import mlp

__all__ = ["PRESETS", "DigitsConfig", "ModAddConfig", "cache_root", "load_preset", "run_preset"]


#: the presets :func:`load_preset` builds (their listing, with summaries, is the torch-free
#: :data:`paramsym.kinds.align.ALIGN_PRESETS`, which imports nothing from here;
#: tests/e2e/test_registry.py checks the two name the same presets)
PRESETS = ("digits-mlp", "modadd-transformer", "vit-digits", "lm-stdlib")


@dataclass(frozen=True)
class DigitsConfig:
    width: int = 32
    epochs: int = 30
    lr: float = 1e-3
    batch: int = 64
    data_seed: int = 0

    def tag(self) -> str:
        return f"digits-mlp-w{self.width}-e{self.epochs}-lr{self.lr:g}-b{self.batch}-d{self.data_seed}"


@dataclass(frozen=True)
class ModAddConfig:
    p: int = 23
    n_embd: int = 64
    n_head: int = 4
    n_layer: int = 2
    steps: int = 3000
    lr: float = 1e-3
    weight_decay: float = 1.0
    train_fraction: float = 0.8
    data_seed: int = 0

    def tag(self) -> str:
        return (f"modadd-gpt2-p{self.p}-e{self.n_embd}-h{self.n_head}-l{self.n_layer}-s{self.steps}-lr{self.lr:g}"
                f"-wd{self.weight_decay:g}-f{self.train_fraction:g}-d{self.data_seed}")


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir`` or ``~/.cache/paramsym``, plus ``align`` (the command line reads ``$PARAMSYM_CACHE``)."""
    base = cache_dir or Path.home() / ".cache" / "paramsym"
    return Path(base) / "align"


# -- digits MLP -------------------------------------------------------------------------------
def train_digits_mlp(cfg: DigitsConfig, seed: int, data: Split) -> dict[str, Tensor]:
    """Train ``mlp([64, w, w, 10], "relu")`` from ``seed`` (module docstring); returns its parameters."""
    gen = torch.Generator().manual_seed(seed)
    model = mlp([data.x_train.shape[1], cfg.width, cfg.width, data.num_classes], "relu", generator=gen,
                dtype=torch.float32)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    n = data.x_train.shape[0]
    for _ in range(cfg.epochs):
        order = torch.randperm(n, generator=gen)
        for i in range(0, n, cfg.batch):
            idx = order[i:i + cfg.batch]
            loss = nn.functional.cross_entropy(model(data.x_train[idx]), data.y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


# -- modular-addition GPT-2 -------------------------------------------------------------------
def gpt2_model(cfg: ModAddConfig) -> nn.Module:
    """The (untrained) 2-layer GPT-2 of the preset (float32, eager attention, eval mode)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    conf = GPT2Config(vocab_size=cfg.p + 1, n_positions=3, n_embd=cfg.n_embd, n_layer=cfg.n_layer, n_head=cfg.n_head,
                      n_inner=4 * cfg.n_embd, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      bos_token_id=cfg.p, eos_token_id=cfg.p, attn_implementation="eager")
    return GPT2LMHeadModel(conf).eval()


def _init_gpt2(model: nn.Module, gen: torch.Generator) -> None:
    from .align_pairs import init_weights

    init_weights(model, gen)


def train_modadd(cfg: ModAddConfig, seed: int, data: Split) -> dict[str, Tensor]:
    """Train the preset GPT-2 from ``seed`` (module docstring); returns its parameters."""
    model = gpt2_model(cfg)
    _init_gpt2(model, torch.Generator().manual_seed(seed))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    for _ in range(cfg.steps):
        logits = model(data.x_train).logits[:, -1, : cfg.p]
        loss = nn.functional.cross_entropy(logits, data.y_train)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.named_parameters()}


# -- presets ----------------------------------------------------------------------------------
def _cached(path: Path, train, meta: dict, reuse: str = "rerun") -> dict[str, Tensor]:
    """A trained model of a preset, from the cache by the one reuse rule
    (:func:`paramsym.runs.reuse.cached_tensors`: equal config hash and code version, else trained
    again, the stale file moved aside) — read back from the file also when trained now: a fresh
    and a cached run then align the very same tensors (the in-memory ones gave last-bit
    differences in the distances), so a resumed run's metrics equal an uninterrupted one's."""
    from ..runs.reuse import cached_tensors

    return cached_tensors(path, meta, train, reuse)


def load_preset(name: str, *, cache_dir: str | os.PathLike | None = None, width: int | None = None,
                seeds: tuple[int, int] = (0, 1), modadd: ModAddConfig | None = None, pair=None
                ) -> tuple[Architecture, dict[str, Tensor], dict[str, Tensor], Split, dict]:
    """``(arch, θ_A, θ_B, data, info)`` of a preset, training and caching the models on first use.

    ``modadd``: another ``modadd-transformer`` training configuration (e.g. fewer steps for the
    ``--quick`` budget of ``paramsym reproduce align-modadd-transformer``; its tag names the cache file).
    ``pair``: the training configuration of ``vit-digits`` / ``lm-stdlib``
    (:mod:`paramsym.kinds.align_pairs`; ``None``: the preset's full budget, ``width`` applied).

    Raises:
        ConfigError: an unknown preset name.
    """
    root = cache_root(cache_dir)
    if name == "digits-mlp":
        cfg = DigitsConfig() if width is None else DigitsConfig(width=int(width))
        data = digits(cfg.data_seed)
        ps = [_cached(root / f"{cfg.tag()}-seed{s}.safetensors", lambda s=s: train_digits_mlp(cfg, s, data),
                      asdict(cfg) | {"seed": s}) for s in seeds]
        arch = mlp_architecture(ps[0], "relu")
        return arch, ps[0], ps[1], data, {"preset": name, "config": asdict(cfg), "seeds": list(seeds),
                                          "cache": str(root)}
    if name == "modadd-transformer":
        cfg = modadd or (ModAddConfig() if width is None else ModAddConfig(n_embd=int(width)))
        data = modular_addition(cfg.p, cfg.data_seed, cfg.train_fraction)
        ps = [_cached(root / f"{cfg.tag()}-seed{s}.safetensors", lambda s=s: train_modadd(cfg, s, data),
                      asdict(cfg) | {"seed": s}) for s in seeds]
        model = gpt2_model(cfg).double()
        arch = hf_architecture(model, n_classes=cfg.p)
        return arch, ps[0], ps[1], data, {"preset": name, "config": asdict(cfg), "seeds": list(seeds),
                                          "cache": str(root)}
    if name in ("vit-digits", "lm-stdlib"):
        from .align_pairs import StdlibLMConfig, ViTDigitsConfig, load_pair_preset, with_width

        if pair is None:
            pair = with_width(ViTDigitsConfig() if name == "vit-digits" else StdlibLMConfig(), width)
        return load_pair_preset(name, root, pair, seeds)
    raise ConfigError(f"unknown alignment preset {name!r}; choose one of {', '.join(PRESETS)}.")


def run_preset(name: str, *, symmetries: list[str] | None = None, cache_dir: str | os.PathLike | None = None,
               width: int | None = None, points: int = 25, seed: int = 0) -> tuple[AlignmentResult, Architecture, dict]:
    """Align the preset's two models (:func:`paramsym.alignment.align.align`)."""
    arch, a, b, data, info = load_preset(name, cache_dir=cache_dir, width=width)
    result = align(arch, a, b, data, symmetries=symmetries, points=points,
                   generator=torch.Generator().manual_seed(seed))
    return result, arch, info
