"""Quick start: learn a symmetry of your own small network (guide: docs/guide/discovery.md).

The model is a bias-free ReLU network (2, 4, 2) on 16 fixed inputs; the block is both weight
matrices (p = 16). ``paramsym.discovery.discover`` trains Lie-algebra generators and an action
network with the infinitesimal (JVP) losses, runs the finite-action verdict and writes a run
directory (config.json, metrics.json, action.safetensors, report.md, figures). The trained
action is then reloaded with ``load_action(run_dir, target=...)`` and checked again with the
test-kit.

    python examples/quickstart_discover.py [--smoke] [--out DIR]

``--smoke`` trains 40 steps with a small network (a pipeline check: the learned action does not
yet fit the tolerances); without it, the ``relu242`` preset's tuned recipe is used. The last line
of the output is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from torch import nn

from paramsym.discovery import DiscoverConfig, discover, load_action
from paramsym.discovery.config import with_overrides
from paramsym.targets import Target
from paramsym.testing import check_action

#: a tiny budget for CI: short training, a small action network, a small verdict grid
SMOKE = {"train.steps": 40, "action.width": 16, "verdict.samples": 32, "verdict.rhos": [0.5],
         "verdict.factors": [1, 2], "verdict.curve_points": 2, "verdict.curve_times": 5}


def make_target() -> Target:
    gen = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 4, bias=False), nn.ReLU(), nn.Linear(4, 2, bias=False))
    with torch.no_grad():
        for prm in model.parameters():
            prm.copy_(torch.randn(prm.shape, generator=gen))
    X = torch.randn(16, 2, generator=gen)
    F = Target(model, ["0.weight", "2.weight"], X)  # F_X(θ) = vec(model(X)), θ = (W1, W2), p = 16
    return F


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny budget (CI)")
    parser.add_argument("--out", default=None, help="run directory (missing or empty; default runs/discover-...)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    F = make_target()
    # μ = θ0 + 0.1 N(0, I): where the symmetry is learned; cfg: the relu242 preset's tuned recipe
    cfg = DiscoverConfig.for_preset("relu242")
    result = discover(F, 0.1, cfg=with_overrides(cfg, SMOKE) if args.smoke else cfg,
                      out=args.out, progress=not args.smoke)
    declared = result.metrics["verdict"]["declared"]
    print(f"run directory: {result.run.path}")
    print(f"declared cell: output error p95 {declared['output_err_p95']:.3g}, "
          f"motion median {declared['motion_median']:.3g}, fits: {declared['fits']}")

    # reload the trained action from the run directory (the block is checked against block.json)
    again = load_action(result.run.path, target=F)
    gen = torch.Generator().manual_seed(1)
    g = again.group.matrices(again.group.sample(8, 0.5, generator=gen))
    theta = F.theta0.expand(8, -1)
    with torch.no_grad():
        diff = float((again.act_many(g, theta) - result.action.act_many(g, theta)).abs().max())

    # the same verdict metrics through the public test-kit
    check = check_action(again, F, samples=32 if args.smoke else 256)
    print(check.summary())

    run = Path(result.run.path)
    print(json.dumps({
        "run_dir": str(run),
        "p": result.metrics["p"],
        "fits": bool(declared["fits"]),
        "output_err_p95": declared["output_err_p95"],
        "motion_median": declared["motion_median"],
        "reload_max_diff": diff,
        "kit_passed": check.passed,
        "files": sorted(p.name for p in run.iterdir()),
    }))


if __name__ == "__main__":
    main()
