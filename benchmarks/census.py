"""Census cost against its floor: one plain forward pass per verified entry.

The census verifies every entry with one forward pass on the transformed weights (plus one for
the reference output), so its floor is ``(entries + 1) × forward``. This prints, per preset and
verification dtype: wall time of the census, of one plain forward on the same batch, the number
of entries, and the ratio ``census / ((entries + 1) × forward)`` (the overhead of finding the
layouts and applying the group elements; aim ≤ 3). Run with one thread:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/census.py [--presets minilm,llama-tiny,...]

``--part traced`` (issue 18): wall time (of the measured work), CPU time and peak RSS (of the
whole child: imports and model load included), each case in a fresh process (``os.wait4``), of (a) the census with the traced residual stream (``layout="auto"``: the adapter
plus the tracer) in float32, and (b) the scramble-alignment — a random element of the whole
exported permutation group and a random per-head GL(d_k)/GL(d_v) element applied, then aligned
back by weight matching and per-head GL (:func:`paramsym.alignment.checkpoints.align_to`; the
plan traced by :func:`paramsym.kinds.census_plan.census_plan`) — on the real all-MiniLM-L6-v2 and on a
GPT-2-small-sized model from ``GPT2Config()`` (random init, 124M parameters):

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/census.py --part traced [--cases minilm,gpt2-small]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _timing import timed  # noqa: E402

from paramsym.census import census, default_inputs  # noqa: E402
from paramsym.census.presets import build_preset  # noqa: E402


def _model(case: str):
    if case == "minilm":
        from paramsym.models.loading import load_model

        return load_model("minilm", quiet=True)
    from transformers import AutoModel, GPT2Config

    torch.manual_seed(0)
    return AutoModel.from_config(GPT2Config(), attn_implementation="eager").eval()


def _one(case: str, what: str) -> None:
    """Run one case in this (fresh) process and print ``seconds`` and a summary."""
    import json
    import time

    model = _model(case)
    t0 = time.perf_counter()
    if what == "census":
        r = census(model, dtype=torch.float32, copy_model=False)
        summary = {"entries": len(r.entries), "all_verified": r.all_verified,
                   "residual": [e.verified_error for e in r.entries if e.kind == "residual_permutation"]}
    else:
        import resource

        from paramsym.actions.attention import QueryKeyAction, ValueOutputAction
        from paramsym.alignment.checkpoints import align_to
        from paramsym.census.permspec import apply_spec, random_perms
        from paramsym.kinds.census_plan import census_plan

        rss_model = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        plan = census_plan(model)  # permutation, attention (the rotation needs RMS norms: neither model has them)
        t_plan = time.perf_counter() - t0
        spec, gen = plan["spec"], torch.Generator().manual_seed(1)
        a = {k: v.detach() for k, v in model.named_parameters()}
        b = apply_spec(a, spec, random_perms(spec, gen))
        for layout in plan["attention"]:  # a random per-head GL element (cond ≲ 3) through the catalogue actions
            for cls in (ValueOutputAction,) + (() if layout.rotary_dim else (QueryKeyAction,)):
                d, n = layout.head_dim, layout.num_kv_heads
                g = torch.block_diag(*[torch.eye(d) + 0.25 * torch.randn(d, d, generator=gen) / d ** 0.5 for _ in range(n)])
                block = cls.block_for(b, layout)
                b = block.scatter(cls(block, layout).act(g.to(b[layout.v.weight].dtype), block.gather(b)), b)
        t1 = time.perf_counter()
        aligned, info = align_to(a, b, spec, attention=plan["attention"])
        rel = max(float((aligned[k] - a[k]).norm() / max(float(a[k].norm()), 1e-30)) for k in a)
        summary = {"trace_s": round(t_plan, 1), "align_s": round(time.perf_counter() - t1, 1),
                   "rss_after_load_MiB": round(rss_model), "params": sum(v.numel() for v in a.values()),
                   "groups": len(spec.perms), "kept": info["kept"], "rounds": info.get("attention_rounds"),
                   "distance": {k: float(f"{v:.3g}") for k, v in info["distance"].items()},
                   "max_rel_weight_error": float(f"{rel:.2g}")}
    print(json.dumps({"seconds": time.perf_counter() - t0, **summary}))


def traced(cases: list[str], whats: list[str]) -> None:
    import json
    import subprocess

    print(f"{'case':12s} {'what':10s} {'wall s':>8s} {'CPU s':>8s} {'peak RSS MiB':>12s}  summary")
    for case in cases:
        for what in whats:
            proc = subprocess.Popen([sys.executable, __file__, "--one", case, what], stdout=subprocess.PIPE, text=True)
            _, status, usage = os.wait4(proc.pid, 0)
            out = proc.stdout.read().strip().splitlines()
            res = json.loads(out[-1]) if out and status == 0 else {"seconds": float("nan"), "error": status}
            cpu = usage.ru_utime + usage.ru_stime  # the whole child: imports and model load included
            print(f"{case:12s} {what:10s} {res.pop('seconds'):8.1f} {cpu:8.1f} {usage.ru_maxrss / 1024:12.0f}  {res}",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--presets", default="minilm,llama-tiny,pythia-tiny")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--part", choices=["floor", "traced"], default="floor")
    ap.add_argument("--cases", default="minilm,gpt2-small")
    ap.add_argument("--what", default="census,scramble")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        torch.set_num_threads(1)
        return _one(*args.one)
    if args.part == "traced":
        return traced(args.cases.split(","), args.what.split(","))
    torch.set_num_threads(1)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(f"{'preset':12s} {'dtype':8s} {'entries':>7s} {'census s':>9s} {'forward ms':>10s} {'ratio':>6s}")
    for name in args.presets.split(","):
        model = build_preset(name)
        for dtype in (torch.float32, torch.float64):
            m = model.to(dtype)
            inputs = default_inputs(m, torch.Generator().manual_seed(0))
            with torch.no_grad():
                t_fwd, _ = timed(lambda m=m, inputs=inputs: m(**inputs), args.repeat + 1)
            t_cen, res = timed(lambda m=m, inputs=inputs, dtype=dtype: census(m, inputs, dtype=dtype, copy_model=False),
                               args.repeat)
            n = len(res.entries)
            print(f"{name:12s} {str(dtype)[6:]:8s} {n:7d} {t_cen:9.2f} {1e3 * t_fwd:10.1f} "
                  f"{t_cen / ((n + 1) * t_fwd):6.2f}", flush=True)


if __name__ == "__main__":
    main()
