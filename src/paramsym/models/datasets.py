"""Offline datasets for the presets: scikit-learn's bundled digits and modular addition.

Both are real, small and available without a network. Randomness comes from an explicit seed
(a fresh ``torch.Generator``), never from the global RNG.

* :func:`digits` — the 1,797 8×8 handwritten digits (64 features, 10 classes), split 80/20 by
  a seeded permutation and standardised with the *training* mean and standard deviation
  (``x ← (x − μ_train) / max(σ_train, 1e-8)``; constant pixels stay 0).
* :func:`digits_images` — the same images and split as :func:`digits` as one-channel 8×8
  images ``(N, 1, 8, 8)`` (pixel ``/ 16``, then ``(x − μ) / σ`` with the training half's scalar
  mean and standard deviation) for image models (the ``vit-digits`` alignment preset).
* :func:`modular_addition` — all ``p²`` sequences ``(a, b, =)`` with label ``(a + b) mod p``,
  tokens ``0 … p−1`` for numbers and ``p`` for ``=``, split by a seeded permutation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import ConfigError

__all__ = ["Split", "digits", "digits_images", "modular_addition"]


@dataclass(frozen=True)
class Split:
    """A train/test split: inputs ``x_*`` and integer class labels ``y_*``."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor

    @property
    def num_classes(self) -> int:
        """Number of classes (``max label + 1`` over both halves)."""
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def _permute(n: int, seed: int, train_fraction: float) -> tuple[Tensor, Tensor]:
    if not 0.0 < train_fraction < 1.0:
        raise ConfigError(f"train_fraction must lie in (0, 1); got {train_fraction!r}.")
    if not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be an integer ≥ 0; got {seed!r}.")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    cut = int(round(train_fraction * n))
    if cut < 1 or cut >= n:
        raise ConfigError(f"train_fraction {train_fraction} leaves an empty half of {n} examples.")
    return order[:cut], order[cut:]


def digits(seed: int = 0, train_fraction: float = 0.8, dtype: torch.dtype = torch.float32) -> Split:
    """scikit-learn's bundled digits, split and standardised (see module doc).

    Args:
        seed: seed of the split permutation.
        train_fraction: share of the 1,797 images in the training half.
        dtype: dtype of the inputs (labels are ``int64``).
    """
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.as_tensor(data.data, dtype=torch.float64)
    y = torch.as_tensor(data.target, dtype=torch.int64)
    train, test = _permute(len(y), seed, train_fraction)
    mean = x[train].mean(0)
    std = x[train].std(0).clamp_min(1e-8)
    x = (x - mean) / std
    return Split(x[train].to(dtype), y[train], x[test].to(dtype), y[test])


def digits_images(seed: int = 0, train_fraction: float = 0.8) -> Split:
    """scikit-learn's digits as float32 images ``(N, 1, 8, 8)``, split as :func:`digits` (module doc)."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.as_tensor(data.images, dtype=torch.float64)[:, None] / 16.0
    y = torch.as_tensor(data.target, dtype=torch.int64)
    train, test = _permute(len(y), seed, train_fraction)
    x = (x - x[train].mean()) / x[train].std()
    return Split(x[train].float(), y[train], x[test].float(), y[test])


def modular_addition(p: int = 23, seed: int = 0, train_fraction: float = 0.5) -> Split:
    """All sequences ``(a, b, =)`` with label ``(a + b) mod p``, split by a seeded permutation.

    Args:
        p: the modulus (vocabulary ``p + 1`` tokens, ``p`` classes), ≥ 2.
        seed: seed of the split permutation.
        train_fraction: share of the ``p²`` pairs in the training half.
    """
    if not isinstance(p, int) or p < 2:
        raise ConfigError(f"modular_addition: p must be an integer ≥ 2; got {p!r}.")
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    a, b = a.reshape(-1), b.reshape(-1)
    x = torch.stack([a, b, torch.full_like(a, p)], dim=1)
    y = (a + b) % p
    train, test = _permute(p * p, seed, train_fraction)
    return Split(x[train], y[train], x[test], y[test])
