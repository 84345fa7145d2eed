"""The conditioning levers of the learned transformer recipe, one at a time (issue 17).

Each row trains the direct-map action (hybrid objective) on one FFN unit of the real
all-MiniLM-L6-v2 (layer 3, the unit of largest feature RMS on the 16-token prefix, β by the
per-unit rule) with the ``minilm-ffn-unit`` recipe, changing one lever, and evaluates it by the
paper's protocol (:func:`paramsym.actions.ffn_unit.evaluate_action`: 32 elements at ρ = 0.5,
float32 installation). Rows: the recipe as shipped, then each lever reverted:

* ``output_scale=mu``: s_F over the anchored μ (the paper's) instead of the Jacobian-gain scale;
* ``theta_scale=mu`` / ``entry``: the network reads θ in units of μ's σ / of the move's per-entry RMS;
* ``k=16``: N compensators instead of 2N;
* ``lr=3e-4`` / ``lr=3e-3``: the learning rate (the recipe: 1e-3, cosine decay to 5 %), and
  ``lr-constant``: no decay (the learning-rate schedule lever).

Usage (about 5 CPU minutes per row at 500 steps)::

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/transformer_levers.py [--steps 500] [--seed 0] [--rows recipe,k16]

Prints one line per row: ratio random, ratio uncompensated, median entry motion, stored composition
(median, p95) and the training CPU seconds. Development measurements: docs/discovery.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

ROWS = {
    "recipe": ([], 32),
    "output_scale=mu": (["objective.output_scale=mu"], 32),
    "theta_scale=mu": (["action.theta_scale=mu"], 32),
    "theta_scale=entry": (["action.theta_scale=entry"], 32),
    "k16": ([], 16),
    "lr=3e-4": (["train.lr=3e-4"], 32),
    "lr=3e-3": (["train.lr=3e-3"], 32),
    "lr-constant": (["train.lr_final_factor=1.0"], 32),
}


def main() -> None:
    from paramsym.experiments.transformer_discovery import (
        TransformerDiscoveryConfig,
        train_learned,
        unit_beta,
        unit_problem,
        whole_model_evaluation,
    )
    from paramsym.runs import RunDir

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layer", type=int, default=3)
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated among {list(ROWS)}")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"layer {args.layer}, rule unit, hybrid, {args.steps} steps, seed {args.seed}")
    print(f"{'row':20s} {'ratio rand':>10s} {'ratio unc':>10s} {'motion':>9s} {'comp med':>9s} {'comp p95':>9s} "
          f"{'train CPU s':>11s}")
    for name in args.rows.split(","):
        overrides, k = ROWS[name]
        cfg = TransformerDiscoveryConfig(compensators=k, overrides=overrides)
        problem = unit_problem(cfg, args.layer, None)
        beta = unit_beta(problem, cfg)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.process_time()
            action, info = train_learned(problem, "hybrid", out=RunDir(Path(tmp) / "run"), seed=args.seed,
                                         steps=args.steps, overrides=[*overrides, f"objective.beta={beta!r}"],
                                         progress=False)
            cpu = time.process_time() - t0
        ev = whole_model_evaluation(problem, action, samples=cfg.samples, rho=cfg.rho, seed=cfg.eval_seed)
        print(f"{name:20s} {ev['ratio_random']:10.1f} {ev['ratio_uncompensated']:10.1f} "
              f"{100 * ev['motion_median']:8.3f}% {100 * ev['composition_error']:8.3f}% "
              f"{100 * ev['composition_error_p95']:8.3f}% {cpu:11.0f}", flush=True)


if __name__ == "__main__":
    main()
