"""Small fully connected networks with reproducible initialisation from an explicit generator.

:func:`mlp` builds ``fc1 → act → fc2 → … → fcL`` as an ``nn.Sequential`` whose parameters are
named ``fc1.weight``, ``fc1.bias``, …, so that "the first layer" is ``["fc1.weight",
"fc1.bias"]`` (:func:`layer_names`).

Initialisations:

* ``"torch"`` — PyTorch's ``nn.Linear`` default, ``U(−1/√fan_in, 1/√fan_in)`` for weights and
  biases, drawn from the given generator;
* ``"xavier"`` — Glorot uniform ``U(−a, a)``, ``a = √(6/(fan_in + fan_out))``, zero biases;
* ``"normal"`` — Gaussian ``N(0, 1/fan_in)`` weights, zero biases (the discovery paper's
  reference networks and random teachers).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

import torch
from torch import nn

from ..errors import ConfigError

__all__ = ["activation_module", "mlp", "layer_names", "parameter_count"]


_ACTIVATIONS = {
    "gelu": nn.GELU, "tanh": nn.Tanh, "relu": nn.ReLU, "silu": nn.SiLU, "softplus": nn.Softplus,
    "sigmoid": nn.Sigmoid, "identity": nn.Identity, "leaky_relu": nn.LeakyReLU,
}


def activation_module(name: str) -> nn.Module:
    """The elementwise activation module called ``name`` (one of ``_ACTIVATIONS``)."""
    if name not in _ACTIVATIONS:
        raise ConfigError(f"unknown activation {name!r}; choose one of {sorted(_ACTIVATIONS)}.")
    return _ACTIVATIONS[name]()


def mlp(
    widths: Sequence[int],
    activation: str = "gelu",
    *,
    init: str = "torch",
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    bias: bool = True,
) -> nn.Sequential:
    """``fc1 → σ → … → fcL`` with ``widths = [in, hidden…, out]``.

    Args:
        widths: at least two widths, e.g. ``[2, 96, 96, 96, 1]`` (19,009 parameters).
        activation: ``"gelu"``, ``"tanh"``, ``"relu"``, ``"silu"`` or ``"softplus"``.
        init: ``"torch"``, ``"xavier"`` or ``"normal"`` (see module doc).
        generator: source of randomness (a fresh ``torch.Generator`` seeded 0 if ``None``).
        dtype: parameter dtype.
        bias: include biases.
    """
    widths = [int(w) for w in widths]
    if len(widths) < 2 or any(w < 1 for w in widths):
        raise ConfigError(f"mlp widths must be ≥ 2 positive integers, received {widths}.")
    activation_module(activation)  # validates the name
    if init not in ("torch", "xavier", "normal"):
        raise ConfigError(f"init must be 'torch', 'xavier' or 'normal', received {init!r}.")
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    layers: OrderedDict[str, nn.Module] = OrderedDict()
    n = len(widths) - 1
    for i in range(n):
        fan_in, fan_out = widths[i], widths[i + 1]
        lin = nn.Linear(fan_in, fan_out, bias=bias, dtype=dtype)
        with torch.no_grad():
            if init == "torch":
                bound = 1.0 / math.sqrt(fan_in)
                lin.weight.copy_((torch.rand(lin.weight.shape, generator=gen, dtype=dtype) * 2 - 1) * bound)
                if bias:
                    lin.bias.copy_((torch.rand(lin.bias.shape, generator=gen, dtype=dtype) * 2 - 1) * bound)
            elif init == "normal":
                lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen, dtype=dtype) / math.sqrt(fan_in))
                if bias:
                    lin.bias.zero_()
            else:
                a = math.sqrt(6.0 / (fan_in + fan_out))
                lin.weight.copy_((torch.rand(lin.weight.shape, generator=gen, dtype=dtype) * 2 - 1) * a)
                if bias:
                    lin.bias.zero_()
        layers[f"fc{i + 1}"] = lin
        if i < n - 1:
            layers[f"act{i + 1}"] = activation_module(activation)
    return nn.Sequential(layers)


def layer_names(model: nn.Module, layers: Sequence[int]) -> list[str]:
    """Parameter names of the 1-based linear layers ``layers`` (e.g. ``[1]`` → first layer)."""
    wanted = {f"fc{k}." for k in layers}
    names = [n for n, _ in model.named_parameters() if any(n.startswith(w) for w in wanted)]
    if not names:
        raise ConfigError(f"no parameters for layers {list(layers)}; the model has {[n for n, _ in model.named_parameters()]}.")
    return names


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
