"""Benchmark: learned discovery on the real all-MiniLM-L6-v2 ([Discovery] §6.3), side by side.

Part ``speed`` — steps per second of the hybrid ``Trainer.step`` on the ``minilm-ffn-unit`` block
(one FFN unit's incoming weights + bias and 16 compensators' outgoing weights, p = 6,529,
q = 16 × 384 = 6,144) with three targets of the same block and output size, interleaved rounds:

* ``cached``: :class:`paramsym.targets.FFNBoundaryTarget` — the boundary output in closed form
  from the FFN input cached once, on compact copies of the units' weights (what the preset trains on);
* ``boundary``: :class:`paramsym.targets.BoundaryTarget` on the same block — the same function,
  cached FFN input, but the block scattered into the full weight matrices at every call;
* ``rerun``: :class:`paramsym.targets.Target` of the whole model's last hidden state — the model
  is rerun (eager attention) at every evaluation, as a new user would write it.

The first two are checked to agree (float64) before timing; the third is a different function of
the same block (the whole model's output), the cost a user pays without cached block inputs.

Part ``memory`` — peak resident memory (``ru_maxrss``, each case in a fresh subprocess) of
``discover`` on the whole FFN block of layer 3 (both weight matrices and biases, p = 1,181,568):
it refuses with :class:`~paramsym.errors.TooLargeError` and the estimate (the action network
alone would need gigabytes) instead of dying; and of the chunked output-scale estimate on the same
block (512 float64 points; unchunked it would allocate 512 · p · 8 B = 4.8 GB at once), which
finishes within its budget.

Run: ``HF_HUB_OFFLINE=1 OMP_NUM_THREADS=2 .venv/bin/python benchmarks/transformer_discovery.py [--part speed|memory] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch

LAYER = 3


def _problem():
    from paramsym.discovery.transformer import minilm_ffn_unit

    return minilm_ffn_unit()


def speed(rounds: int, steps: int) -> None:
    from paramsym.discovery.config import DiscoverConfig
    from paramsym.discovery.objectives import Scales
    from paramsym.discovery.problem import DiscoveryProblem
    from paramsym.discovery.train import Trainer
    from paramsym.targets import BoundaryTarget, Target

    pb = _problem()
    t = pb.target
    pre, j, B = f"encoder.layer.{pb.info['layer']}", pb.info["unit"], pb.info["compensators"]
    mask = torch.zeros(t.model.get_parameter(f"{pre}.output.dense.weight").shape, dtype=torch.bool)
    mask[:, B] = True
    full = [f"{pre}.intermediate.dense.weight[{j}]", f"{pre}.intermediate.dense.bias[{j}]", (f"{pre}.output.dense.weight", mask)]
    boundary = BoundaryTarget(t.model, full, t.batch, in_layer=f"{pre}.intermediate.dense", out_layer=f"{pre}.output.dense",
                              units=[j, *B], activation=torch.nn.functional.gelu, name="boundary")
    rerun = Target(t.model, full, t.batch, name="rerun")
    th = t.theta0.double() + 1e-3 * torch.randn(t.p, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    agree = float((t.to(torch.float64)(th) - boundary.to(torch.float64)(th)).abs().max())
    print(f"p = {t.p}, q = {t.q} (rerun q = {rerun.q}); cached vs boundary max |ΔF| (float64) = {agree:.2e}")
    cfg = DiscoverConfig.for_preset("minilm-ffn-unit")
    sc = Scales(s_F=0.05, s_theta=float(t.theta0.norm()), beta=0.01)
    trainers = {}
    for name, tg in (("cached", t), ("boundary", boundary), ("rerun", rerun)):
        trainers[name] = Trainer(DiscoveryProblem(name=name, description=name, target=tg, perturb_std=pb.perturb_std), cfg, sc)
        trainers[name].step(0)  # warm-up
    times: dict[str, list[float]] = {n: [] for n in trainers}
    for r in range(rounds):
        for name, tr in trainers.items():
            t0 = time.perf_counter()
            for s in range(steps):
                tr.step(1 + r * steps + s)
            times[name].append((time.perf_counter() - t0) / steps)
    med = {n: statistics.median(v) for n, v in times.items()}
    print(f"{'target':>10} | {'s/step':>8} | {'steps/s':>8} | speed-up of cached")
    for n in trainers:
        print(f"{n:>10} | {med[n]:8.3f} | {1 / med[n]:8.2f} | {med[n] / med['cached']:6.1f}×")


def _child(case: str) -> None:
    from paramsym.discovery.problem import DiscoveryProblem
    from paramsym.discovery.run import discover
    from paramsym.discovery.transformer import prefix_ids
    from paramsym.errors import TooLargeError
    from paramsym.models.loading import load_minilm
    from paramsym.targets import Target

    model, tok = load_minilm()
    pre = f"encoder.layer.{LAYER}"
    block = [f"{pre}.intermediate.dense.weight", f"{pre}.intermediate.dense.bias", f"{pre}.output.dense.weight",
             f"{pre}.output.dense.bias"]
    target = Target(model, block, {"input_ids": prefix_ids(tok, 16)}, name="minilm-ffn-block")
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    out: dict = {"case": case, "p": target.p, "q": target.q}
    try:
        if case == "discover":
            discover(target, 1e-3, out=os.environ.get("BENCH_OUT"), progress=False)
            out["result"] = "finished"
        else:
            budget = float(case.split("-")[1]) * 2**30
            pb = DiscoveryProblem(name="ffn-block", description="", target=target, perturb_std=1e-3)
            sc = pb.scales(0.3, torch.Generator().manual_seed(0), memory_bytes=budget)
            out["result"] = f"finished: s_F = {sc.s_F:.4g}, s_θ = {sc.s_theta:.4g}"
    except TooLargeError as exc:
        out["result"] = f"TooLargeError: {exc}"
    out["seconds"] = time.perf_counter() - t0
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    out["rss_before_gib"] = base / 2**20
    print(json.dumps(out))


def memory() -> None:
    p = 2 * 1536 * 384 + 1536 + 384
    print(f"whole FFN block of layer {LAYER}: p = {p}; an unchunked scale estimate draws 512 × p float64 = "
          f"{512 * p * 8 / 1e9:.2f} GB at once")
    for case in ("discover", "scales-2", "scales-0.5"):
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "BENCH_OUT": f"/tmp/bench-transformer-{os.getpid()}"}
        res = subprocess.run([sys.executable, __file__, "--child", case], capture_output=True, text=True, env=env)
        line = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
        if not line:
            print(f"{case}: child failed (rc {res.returncode}): {res.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(line[-1])
        print(f"{case:>11}: peak RSS {r['peak_rss_gib']:.2f} GiB (after loading the model {r['rss_before_gib']:.2f} GiB), "
              f"{r['seconds']:.1f} s — {r['result']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["speed", "memory", "all"], default="all")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3, help="steps per round")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    if args.child:
        _child(args.child)
        return
    if args.part in ("speed", "all"):
        speed(args.rounds, args.steps)
    if args.part in ("memory", "all"):
        memory()


if __name__ == "__main__":
    main()
