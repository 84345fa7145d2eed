"""The fused training step of the LearnedAction equals the generic GroupAction computation."""

from __future__ import annotations

import pytest
import torch

from paramsym.config import apply_overrides
from paramsym.discovery import objectives as O
from paramsym.discovery.config import DiscoverConfig
from paramsym.discovery.problems import build_problem
from paramsym.discovery.train import Trainer

FIELDS = ("fields_mu", "moved", "fields", "direct", "two_step", "transported", "field_at_moved")


@pytest.mark.parametrize("preset, r", [("sigmoid-scalar", 1), ("linear2x2", 3)])
@pytest.mark.parametrize("inf, fin", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("shared", [0, 3])
def test_fused_quantities_equal_generic(preset: str, r: int, inf: bool, fin: bool, shared: int) -> None:
    """``shared``: the first rows of the regulariser points are rows of θ (the trainer's batch); the
    fused step takes their fields from θ's, the generic one evaluates them again."""
    torch.set_num_threads(1)
    pr = build_problem(preset)
    cfg = apply_overrides(DiscoverConfig.for_preset(preset), [f"group.generators={r}", "action.width=32"])
    tr = Trainer(pr, cfg, pr.scales(cfg.objective.beta, torch.Generator().manual_seed(0)))
    a = tr.action.double()
    gen = torch.Generator().manual_seed(1)
    th, mu = pr.sample(6, gen, torch.float64), pr.sample(5, gen, torch.float64)
    mu[:shared] = th[:shared]
    g1 = a.group.matrices(a.group.sample(6, 0.8, 3, generator=gen)).double()
    g2 = a.group.matrices(a.group.sample(6, 0.8, 3, generator=gen)).double()
    h = a.group.generators().double()[torch.randint(0, r, (6,), generator=gen)]
    fused = a.step_quantities(th, mu, g1, g2, h, infinitesimal=inf, finite=fin, shared=shared)
    generic = O.step_quantities(a, th, mu, g1, g2, h, infinitesimal=inf, finite=fin)
    for name in FIELDS:
        x, y = getattr(fused, name), getattr(generic, name)
        assert (x is None) == (y is None), name
        if x is not None:
            torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-14, msg=name)
    # the movement is real: a(g1, θ) differs from θ
    assert (fused.moved - th).norm(dim=-1).min() > 0
