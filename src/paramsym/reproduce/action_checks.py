"""The verdict of ``check_action`` on each exact catalogue action, on small float64 modules (docs/actions.md).

For every case: a small module with biases of order one (weights drawn from a fixed
``torch.Generator``), a :class:`~paramsym.targets.Target` on the named block and a fixed input
batch, and :func:`paramsym.testing.check_action` with 64 samples per cell, ρ = 0.5. Reported:
the worst output error for one and two factors (units of s_F), the worst composition and inverse
errors, and the median motion (units of s_θ). Exact actions give float64 rounding on every error
and a motion well above zero (the action moves the parameters).

Run as ``python -m paramsym.reproduce.action_checks`` to print the JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["CASES", "action_checks"]

_DT = None  # torch.float64, set lazily (no torch import at module top level)


def _gen(seed: int):
    import torch

    return torch.Generator().manual_seed(seed)


def _init_(module, seed: int, bias_mean: float = 0.5):
    """Redraw every parameter from ``N(0, 1/fan_in)`` (matrices) or ``N(bias_mean, 0.25)`` (vectors), seeded."""
    import torch

    g = _gen(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) / p.shape[-1] ** 0.5)
            else:
                p.copy_(bias_mean + 0.5 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return module


def _mlp(act, sizes=(3, 5, 2)):
    import torch
    from torch import nn

    layers: list = []
    for i in range(len(sizes) - 1):
        layers += [nn.Linear(sizes[i], sizes[i + 1]), act]
    return _init_(nn.Sequential(*layers[:-1]).to(torch.float64), 0)


def _x(*shape):
    import torch

    return torch.randn(*shape, generator=_gen(1), dtype=torch.float64)


def _rescaling(act_name: str):
    def build():
        from torch import nn

        from ..actions.catalogue import RescalingAction
        from ..targets import Target

        act = nn.ReLU() if act_name == "relu" else nn.LeakyReLU(0.1)
        net = _mlp(act)
        F = Target(net, ["0.weight", "0.bias", "2.weight"], _x(16, 3))
        return RescalingAction(F.block, "0.weight", "2.weight", activation=net[1]), F

    return build


def _hidden_basis():
    from torch import nn

    from ..actions.catalogue import HiddenBasisAction
    from ..targets import Target

    net = _mlp(nn.Identity(), sizes=(3, 4, 2))
    F = Target(net, ["0.weight", "0.bias", "2.weight"], _x(16, 3))
    return HiddenBasisAction(F.block, "0.weight", "2.weight"), F


def _chain():
    from torch import nn

    from ..actions.catalogue import LinearChainAction
    from ..targets import Target

    net = _mlp(nn.Identity(), sizes=(3, 4, 3, 2))
    F = Target(net, ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight"], _x(16, 3))
    return LinearChainAction(F.block, ["0.weight", "2.weight", "4.weight"]), F


def _key_bias():
    import torch
    from torch import nn

    from ..actions.catalogue import KeyBiasTranslation
    from ..targets import Target

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 4)

        def forward(self, x):  # batch_first=False keeps torch off its fused path (no vmap rule)
            x = x.transpose(0, 1)
            return self.attn(x, x, x, need_weights=True)[0].transpose(0, 1)

    model = _init_(SelfAttention().to(torch.float64), 0)
    F = Target(model, ["attn.in_proj_bias[8:16]"], _x(3, 5, 8))
    whole = Target(model, [n for n, _ in model.named_parameters()], _x(3, 5, 8))
    from ..testing import estimate_scales

    s_F = estimate_scales(whole, whole.theta0[None], generator=_gen(7))[0]  # the bias alone does not move F
    return KeyBiasTranslation.for_mha(F.block, model.attn, "attn"), F, {"s_F": s_F, "s_theta": float(F.theta0.norm())}


def _norm_scale():
    import torch
    from torch import nn

    from ..actions.catalogue import NormScaleAction
    from ..targets import Target

    class NormThenLinear(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(6)
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            return self.fc(self.norm(x))

    model = _init_(NormThenLinear().to(torch.float64), 0, bias_mean=1.0)
    F = Target(model, ["norm.weight", "norm.bias", "fc.weight"], _x(16, 6))
    return NormScaleAction.for_modules(F.block, model.norm, "norm", ["fc.weight"]), F


def _hidden_permutation():
    from torch import nn

    from ..actions.catalogue import HiddenPermutationAction
    from ..targets import Target

    net = _mlp(nn.Tanh())
    F = Target(net, ["0.weight", "0.bias", "2.weight"], _x(16, 3))
    return HiddenPermutationAction(F.block, "0.weight", "2.weight"), F


#: label → builder returning ``(action, target)`` or ``(action, target, check_action kwargs)``
CASES: dict[str, Callable[[], tuple]] = {
    "rescaling, ReLU MLP 3-5-2 with biases": _rescaling("relu"),
    "rescaling, LeakyReLU(0.1) MLP 3-5-2": _rescaling("leaky"),
    "hidden basis GL(4), Linear→Linear": _hidden_basis,
    "chain GL(4)×GL(3), 3 Linear": _chain,
    "key bias, nn.MultiheadAttention E=8, H=4": _key_bias,
    "norm scale, LayerNorm(6)→Linear": _norm_scale,
    "hidden permutation, tanh MLP h=5 (order 120)": _hidden_permutation,
}


def action_checks(samples: int = 64) -> dict[str, Any]:
    """``{label: {output, output2, composition, inverse, motion, passed, discrete}}`` for every case."""
    from ..testing import check_action

    out: dict[str, Any] = {}
    for label, build in CASES.items():
        built = build()
        action, target, kw = (*built, {})[:3]
        check = check_action(action, target, samples=samples, factors=(1, 2), seed=0, **kw)
        out[label] = {"output": check.value("output"), "output2": check.value("output", 2),
                      "composition": check.value("composition"), "inverse": check.value("inverse"),
                      "motion": check.value("motion"), "passed": bool(check.passed),
                      "discrete": action.order is not None}
    return out


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(action_checks(), indent=1))
