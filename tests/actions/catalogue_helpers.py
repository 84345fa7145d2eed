"""Shared helpers of the catalogue tests: float64 real modules and the verdict on discrete actions."""

from __future__ import annotations

import torch
from torch import nn

from paramsym import verdict as V
from paramsym.actions.base import float64_copy
from paramsym.attention.rmhsa import rmhsa
from paramsym.targets import Target
from paramsym.testing import estimate_scales

DT = torch.float64


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class RMHSA(nn.Module):
    """A real module around :func:`paramsym.attention.rmhsa.rmhsa` with parameters ``M, R`` (H, d, d)."""

    def __init__(self, M: torch.Tensor, R: torch.Tensor):
        super().__init__()
        self.M = nn.Parameter(M.clone())
        self.R = nn.Parameter(R.clone())

    def forward(self, x):
        return rmhsa(x, self.M, self.R)


def rmhsa_with_cluster(H: int = 3, d: int = 4, cluster=(0, 1)) -> RMHSA:
    g = gen(3)
    M = torch.randn(H, d, d, generator=g, dtype=DT)
    for h in cluster[1:]:
        M[h] = M[cluster[0]]
    return RMHSA(M, torch.randn(H, d, d, generator=g, dtype=DT))


def module_scale(model: nn.Module, batch, output=None) -> float:
    """``s_F`` of the whole module: the output's variation under 5% perturbations of all its parameters
    (the unit of output error for blocks the output does not depend on, e.g. a key bias)."""
    whole = Target(model, [n for n, _ in model.named_parameters()], batch, output).to(DT)
    return estimate_scales(whole, whole.theta0[None], generator=gen(7))[0]


def discrete_verdict(action, target: Target, n: int = 64, seed: int = 0) -> dict[str, float]:
    """The verdict's per-sample metrics (:mod:`paramsym.verdict`, one definition each) on ``n``
    random permutations ``g1, g2`` at points near θ0 (``g⁻¹ = gᵀ``): worst output, composition and
    inverse errors and the median motion over the non-identity draws."""
    t64 = target.to(DT)
    act = float64_copy(action)
    g = gen(seed)
    theta = t64.theta0 + 0.05 * t64.theta0.norm() / t64.p**0.5 * torch.randn(n, t64.p, generator=g, dtype=DT)
    s_F, s_theta = estimate_scales(t64, theta, generator=gen(seed + 1))
    g1, g2 = act.random_elements(n, g), act.random_elements(n, g)
    moving = ~(g1 == torch.eye(g1.shape[-1], dtype=DT)).all(-1).all(-1)
    with torch.no_grad():
        return {
            "output": float(V.output_errors(act, t64, theta, g1, s_F).max()),
            "composition": float(V.composition_errors(act, theta, g1, g2).max()),
            "inverse": float(V.inverse_errors(act, theta, g1, g1.transpose(-1, -2)).max()),
            "motion": V.median(V.motions(act, theta, g1, s_theta)[moving]),
            "min_motion": float(V.motions(act, theta, g1, s_theta)[moving].min()),
        }
