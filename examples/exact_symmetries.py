"""Exact symmetries of a block: the affine solver and the catalogue (guide: docs/guide/exact-symmetries.md).

1. ``paramsym.exact.solve_affine`` finds every affine field ``v(θ) = Aθ + b`` with
   ``⟨∇F_k(θ), Aθ + b⟩ = 0`` on a block of a LeakyReLU network (3, 4, 2) — the known answer is one
   positive rescaling per hidden unit (dimension 4), and they commute.
2. The catalogue (``paramsym.actions.catalogue.catalogue()``) lists the exact actions paramsym
   knows; the rescaling one is checked on the same block with the test-kit.

    python examples/exact_symmetries.py [--smoke]

The last line of the output is a JSON summary.
"""

from __future__ import annotations

import argparse
import json

import torch
from torch import nn

from paramsym.actions.catalogue import RescalingAction, catalogue
from paramsym.exact import solve_affine
from paramsym.groups.algebra import commutativity, generated_algebra
from paramsym.targets import Target
from paramsym.testing import check_action


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="fewer test-kit samples (CI)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    gen = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.LeakyReLU(0.1), nn.Linear(4, 2)).double()
    x = torch.randn(64, 3, generator=gen, dtype=torch.float64)
    # the block: first layer's weight and bias, second layer's weight (whole tensors), p = 24
    target = Target(model, ["0.weight", "0.bias", "2.weight"], x)

    res = solve_affine(target, generator=gen)
    A, b = res.generators()                                    # (d, p, p), (d, p)
    theta = target.theta0.double()
    moved = res.flow(0, 0.5, theta)                            # exp(0.5 Â_0) [θ; 1]
    F64 = target.to(torch.float64)
    flow_change = float((F64(moved) - F64(theta)).norm() / F64(theta).norm())
    flow_motion = float((moved - theta).norm() / theta.norm())
    print(f"affine solver: status {res.status}, dimension {res.dimension}, gap {res.gap:.3g}, "
          f"max held-out residual {float(res.residuals.max()):.3g}")

    print("\ncatalogue of exact actions:")
    for kind, cls, text in catalogue():
        print(f"  {kind:22s} {cls.__name__:24s} {text.splitlines()[0][:70]}")

    action = RescalingAction(target.block, "0.weight", "2.weight", activation=nn.LeakyReLU(0.1))
    check = check_action(action, target, samples=32 if args.smoke else 256)
    print("\n" + check.summary())

    print(json.dumps({
        "status": res.status,
        "dimension": res.dimension,
        "generators_shape": list(A.shape),
        "max_residual": float(res.residuals.max()),
        "commutativity": float(commutativity(res.augmented())),
        "algebra_dimension": int(generated_algebra(res.augmented()).shape[0]),
        "flow_output_change": flow_change,
        "flow_motion": flow_motion,
        "catalogue_kinds": [kind for kind, _, _ in catalogue()],
        "rescaling_passed": check.passed,
        "rescaling_output_err_p95": check.value("output"),
    }))


if __name__ == "__main__":
    main()
