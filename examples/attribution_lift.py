"""Which parameters can carry a rotation symmetry? Jacobian lifting (guide: docs/guide/attribution.md).

A small MLP f: R² → R. The orbit tangent of SO(2) acting on the inputs, ``η(x) = −Df(x)·(Ωx)``, is
lifted through the Jacobian of f on a polar probe grid: ``c* = J⁺η`` with residual
``‖J c* − η‖ / ‖η‖``. Known answer: with the first layer trainable, rotating the inputs is the same
as rotating the first layer's weights (W ↦ W R), so η lies in the image of J (residual at rounding
level: *liftable*); with the first layer frozen it does not (*not liftable*). The Reynolds projection
``P_E f`` and the defect ``δ = f − P_E f`` come with it.

    python examples/attribution_lift.py [--smoke]

The last line of the output is a JSON summary.
"""

from __future__ import annotations

import argparse
import json

import torch
from torch import nn

from paramsym.attribution import LIFT_TOL, attribute, polar_grid, so2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a smaller probe grid (CI)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    gen = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
    with torch.no_grad():
        for prm in model.parameters():
            prm.copy_(torch.randn(prm.shape, generator=gen))
    probes = polar_grid(10, 24) if args.smoke else polar_grid(15, 32)  # [N, 2] ≫ p = 105 parameters
    group = so2()                                                        # rotations of the input plane

    # rtol: truncation of the pseudo-inverse (keep σ_k ≥ rtol·σ_1; thin SVD below 1e-6): small = test image membership
    full = attribute(model, probes, group, rtol=1e-10)
    frozen = attribute(model, probes, group, rtol=1e-10,
                       trainable=["2.weight", "2.bias", "4.weight", "4.bias"])   # first layer frozen
    print("first layer trainable:\n" + full.verdict())
    print("first layer frozen:\n" + frozen.verdict())
    print(f"‖δ‖ (distance of f from its Reynolds projection on the probes): {full.delta_norm:.3g}")

    print(json.dumps({
        "lift_tol": LIFT_TOL,
        "trainable_residual": full.c.residual,
        "trainable_liftable": full.c.liftable(),
        "frozen_residual": frozen.c.residual,
        "frozen_liftable": frozen.c.liftable(),
        "rank": full.c.rank,
        "delta_norm": full.delta_norm,
        "probes": int(probes.shape[0]),
    }))


if __name__ == "__main__":
    main()
