"""Reference networks of the discovery paper (spec §9), built reproducibly from a seed.

* :class:`MLP` — bias-free (by default) fully connected network ``fc1 … fcL`` with one
  activation between layers; ``MLP([2, 4, 2], "relu")`` is the paper's ReLU (2,4,2).
* :func:`teacher_student` — a student of a fixed random teacher trained on Gaussian inputs
  (the tanh and GELU (4,16,16,2) targets, 3,000 steps).

Layer weights use PyTorch's ``(out, in)`` layout: ``fc1.weight`` is ``V`` (H × n), ``fc2.weight``
is ``U`` (m × H) in the paper's ``U σ(V X)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from ..errors import ConfigError

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "gelu": nn.functional.gelu,
    "silu": nn.functional.silu,
    "identity": lambda x: x,
    "leaky_relu": nn.functional.leaky_relu,
}


def activation(name: str) -> Callable[[Tensor], Tensor]:
    """The elementwise activation called ``name`` (see :data:`ACTIVATIONS`)."""
    if name not in ACTIVATIONS:
        raise ConfigError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}.")
    return ACTIVATIONS[name]


class MLP(nn.Module):
    """``fc_L ∘ σ ∘ … ∘ σ ∘ fc_1`` with widths ``widths`` (input first).

    Args:
        widths: layer widths, e.g. ``[2, 8, 8, 1]``.
        act: activation name (see :data:`ACTIVATIONS`).
        bias: whether the linear layers have biases.
        generator: ``torch.Generator`` for the Gaussian initialisation ``N(0, 1/fan_in)``.
    """

    def __init__(self, widths: Sequence[int], act: str = "relu", *, bias: bool = False, generator: torch.Generator | None = None):
        super().__init__()
        if len(widths) < 2:
            raise ConfigError(f"an MLP needs at least two widths; received {list(widths)}.")
        self.widths = list(widths)
        self.act_name = act
        self.act = activation(act)
        for i in range(len(widths) - 1):
            layer = nn.Linear(widths[i], widths[i + 1], bias=bias)
            with torch.no_grad():
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / widths[i] ** 0.5)
                if bias:
                    layer.bias.zero_()
            self.add_module(f"fc{i + 1}", layer)

    @property
    def layers(self) -> list[nn.Linear]:
        return [getattr(self, f"fc{i + 1}") for i in range(len(self.widths) - 1)]

    def forward(self, x: Tensor) -> Tensor:
        layers = self.layers
        for layer in layers[:-1]:
            x = self.act(layer(x))
        return layers[-1](x)


def teacher_student(
    widths: Sequence[int],
    act: str,
    *,
    steps: int = 3000,
    lr: float = 1e-3,
    batch: int = 128,
    seed: int = 0,
) -> tuple[MLP, MLP, list[float]]:
    """Train a student MLP against a fixed random teacher on Gaussian inputs (MSE, Adam).

    Returns:
        ``(teacher, student, losses)``; deterministic for a given seed.
    """
    gen = torch.Generator().manual_seed(seed)
    teacher = MLP(widths, act, generator=gen)
    student = MLP(widths, act, generator=gen)
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
