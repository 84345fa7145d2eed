"""Reference networks of the discovery paper ([Discovery] §6.1–6.3), built reproducibly from a seed.

* :func:`reference_mlp` — bias-free (by default) fully connected network ``fc1 … fcL`` with one
  activation between layers; ``reference_mlp([2, 4, 2], "relu")`` is the paper's ReLU (2,4,2).
* :func:`teacher_student` — a student of a fixed random teacher trained on Gaussian inputs
  (the tanh and GELU (4,16,16,2) targets, 3,000 steps).

Layer weights use PyTorch's ``(out, in)`` layout: ``fc1.weight`` is ``V`` (H × n), ``fc2.weight``
is ``U`` (m × H) in the paper's ``U σ(V X)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .mlp import mlp

__all__ = ["reference_mlp", "teacher_student", "attention_layer"]


def reference_mlp(widths: Sequence[int], act: str = "relu", *, bias: bool = False,
                  generator: torch.Generator | None = None) -> nn.Sequential:
    """The paper's reference network: float32, ``N(0, 1/fan_in)`` weights, bias-free by default
    (:func:`paramsym.models.mlp.mlp` with ``init="normal"``; layers ``fc1 … fcL``)."""
    return mlp(widths, act, init="normal", bias=bias, generator=generator, dtype=torch.float32)


def teacher_student(
    widths: Sequence[int],
    act: str,
    *,
    steps: int = 3000,
    lr: float = 1e-3,
    batch: int = 128,
    seed: int = 0,
) -> tuple[nn.Sequential, nn.Sequential, list[float]]:
    """Train a student MLP against a fixed random teacher on Gaussian inputs (MSE, Adam).

    Returns:
        ``(teacher, student, losses)``; deterministic for a given seed.
    """
    gen = torch.Generator().manual_seed(seed)
    teacher = reference_mlp(widths, act, generator=gen)
    student = reference_mlp(widths, act, generator=gen)
    opt = torch.optim.Adam(student.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        x = torch.randn(batch, widths[0], generator=gen)
        with torch.no_grad():
            y = teacher(x)
        loss = (student(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    for p in student.parameters():
        p.requires_grad_(False)
    return teacher, student, losses


def attention_layer(d: int = 8, heads: int = 2, *, bias: bool = False,
                    generator: torch.Generator | None = None,
                    dtype: torch.dtype = torch.float64) -> nn.MultiheadAttention:
    """One ``nn.MultiheadAttention(d, heads, batch_first=True)`` layer with ``N(0, 1/d)`` weights
    (and ``N(0, 1/d)`` biases when ``bias``) from an explicit generator; parameters
    ``in_proj_weight`` (3d × d: query, key, value rows), ``out_proj.weight`` and, with biases,
    ``in_proj_bias`` and ``out_proj.bias``."""
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    layer = nn.MultiheadAttention(d, heads, bias=bias, batch_first=True, dtype=dtype)
    with torch.no_grad():
        for _, prm in layer.named_parameters():
            prm.copy_(torch.randn(prm.shape, generator=gen, dtype=dtype) / d ** 0.5)
    return layer
