"""`paramsym.discovery.discover` on a user's own nn.Module writes a complete, reportable run."""

from __future__ import annotations

from pathlib import Path

import torch

from paramsym.config import apply_overrides
from paramsym.discovery import discover
from paramsym.discovery.config import DiscoverConfig
from paramsym.experiments.registry import regenerate
from paramsym.runs import RunDir
from paramsym.targets import Target


def test_discover_custom_module(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1, 2, bias=False), torch.nn.Sigmoid(), torch.nn.Linear(2, 1, bias=False))
    F = Target(model, ["0.weight", "2.weight"], torch.randn(1, 1))
    cfg = apply_overrides(DiscoverConfig(), ["train.steps=40", "action.width=16", "verdict.samples=32",
                                             "verdict.rhos=[0.5]", "verdict.factors=[1,2]",
                                             "verdict.curve_points=2", "verdict.curve_times=5"])
    res = discover(F, 0.1, cfg=cfg, out=tmp_path / "run", progress=False)
    assert res.metrics["preset"] == "Sequential" and res.metrics["p"] == 4
    assert {"output_err_p95", "motion_median"} <= set(res.metrics["verdict"]["declared"])
    # the returned action is the trained one: it reproduces the stored weights' motion
    g = res.action.group.matrices(res.action.group.sample(4, 0.5, generator=torch.Generator().manual_seed(0)))
    theta = F.theta0.expand(4, -1)
    assert (res.action.act_many(g, theta) - theta).norm(dim=-1).min() > 0
    assert regenerate(RunDir(res.run.path)).exists()
