"""Teleportation overhead: training wall time with teleports against without, side by side.

For each preset and optimizer, the same seeds are trained without and with teleports in
interleaved rounds (``paramsym.kinds.teleport_mlp``); printed: the median wall time of a run
without and with teleports, their ratio (with / without; the teleports' share of the run is the
column ``teleport/run``, measured inside the run), and the median steps to the target of both
(the ratio that pays for the overhead). The machine may be shared and noisy: read the ratios.

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/teleport.py [--presets regression-mlp,digits-mlp] [--seeds 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from paramsym.kinds.teleport_mlp import STEPS, TARGETS, _train
from paramsym.kinds.teleport_presets import OPTIMIZERS, steps_to


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--presets", default="regression-mlp,digits-mlp")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"{'preset':15s} {'opt':8s} {'without s':>9s} {'with s':>8s} {'with/without':>12s} {'teleport/run':>12s} "
          f"{'steps w/o':>9s} {'steps with':>10s}")
    for preset in args.presets.split(","):
        for opt in OPTIMIZERS[preset]:
            t_base, t_tele, frac, s_base, s_tele = [], [], [], [], []
            _train(preset, opt, 0, 5, True, None)  # warm-up (imports, first-call costs)
            for _ in range(args.rounds):
                for seed in range(args.seeds):
                    b = _train(preset, opt, seed, STEPS[preset], False, None)
                    t = _train(preset, opt, seed, STEPS[preset], True, None)
                    t_base.append(b["seconds"])
                    t_tele.append(t["seconds"])
                    frac.append(t["teleport_seconds"] / t["seconds"])
                    target = b["losses"][-1] if preset == "regression-mlp" else TARGETS[opt]
                    s_base.append(steps_to(b["losses"], target) or len(b["losses"]))
                    s_tele.append(steps_to(t["losses"], target) or len(t["losses"]))
            mb, mt = statistics.median(t_base), statistics.median(t_tele)
            print(f"{preset:15s} {opt:8s} {mb:9.3f} {mt:8.3f} {mt / mb:12.3f} {statistics.median(frac):12.3f} "
                  f"{statistics.median(s_base):9.0f} {statistics.median(s_tele):10.0f}")


if __name__ == "__main__":
    main()
