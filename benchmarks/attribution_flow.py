"""Per-step cost of a resolved annulus flow step, this tree against a baseline source tree.

One resolved step = Jacobian (408 × 19,009), target, lift (``problem.lifts``), Euler update and
the trace's measurements (``run_flow``): the median interval between consecutive steps of one
flow (the flow's one-off set-up is excluded). The baseline is another checkout's ``src`` (e.g.
``git archive <rev> src | tar -x -C /tmp/base``); each side runs in its own process, alternated
``--repeats`` times, and the median seconds per step are compared::

    python benchmarks/attribution_flow.py --baseline /tmp/base/src [--steps 4] [--repeats 3]

``--monitor`` also times the annulus preset's per-step diagnostics
(:class:`paramsym.attribution.diagnostics.FlowMonitor`), which the baseline does not have.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "src"

CHILD = r"""
import json, sys, time, torch
torch.set_num_threads(1)
from paramsym.attribution import SymmetryProblem, function_from_module, so2, run_flow
from paramsym.experiments.attribution.annulus.run import AnnulusConfig, build_model, probe_grid
gauge, steps, monitor = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
cfg = AnnulusConfig(stage="init")
fn, params = function_from_module(build_model(cfg))
problem = SymmetryProblem(fn, params, probe_grid(24, 3.5), so2(), rtol=1e-3, gauge=gauge)
cb = None
if monitor:
    from paramsym.attribution.diagnostics import FlowMonitor
    cb = FlowMonitor(problem, "-b", steps * 0.005, every=5, steps=steps)
    cb.set_first_direction(problem.lifts(which=("b",)).b.direction)
stamps = []
def clock(k, theta, trace):
    if cb is not None:
        cb(k, theta, trace)
    stamps.append(time.perf_counter())
# the −b set-up (P f_0 and P P f_0: 64² evaluations) runs before step 0 and is not a step's cost
run_flow(problem, "-b", "resolved", steps=steps, dt=0.005, progress=False, callback=clock, predict_every=5)
diffs = sorted(b - a for a, b in zip(stamps, stamps[1:]))
print(json.dumps({"per_step": diffs[len(diffs) // 2]}))
"""


def one(src: Path, gauge: str, steps: int, monitor: bool) -> float:
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, gauge, str(steps), "1" if monitor else "0"],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["per_step"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, type=Path, help="the baseline checkout's src directory")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gauges", default="column,none")
    ap.add_argument("--monitor", action="store_true")
    args = ap.parse_args()
    for gauge in args.gauges.split(","):
        base, new = [], []
        for _ in range(args.repeats):  # alternate, so machine load hits both sides alike
            base.append(one(args.baseline, gauge, args.steps, False))
            new.append(one(HERE, gauge, args.steps, False))
        b, n = statistics.median(base), statistics.median(new)
        print(f"gauge={gauge}: baseline {b:.3f} s/step, this tree {n:.3f} s/step, ratio {n / b:.3f} "
              f"(runs: {[round(v, 3) for v in base]} vs {[round(v, 3) for v in new]})", flush=True)
    if args.monitor:
        m = statistics.median(one(HERE, "column", args.steps, True) for _ in range(args.repeats))
        print(f"with the annulus FlowMonitor (gauge=column): {m:.3f} s/step", flush=True)
    paper = statistics.median(one(HERE, "paper", args.steps, False) for _ in range(args.repeats))
    print(f"gauge=paper (this tree only): {paper:.3f} s/step", flush=True)


if __name__ == "__main__":
    main()
