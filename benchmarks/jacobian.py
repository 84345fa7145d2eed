"""Jacobian benchmarks for paramsym.attribution (not collected by pytest).

Three parts (run all by default, or pick with ``--part``):

* ``speed`` — the dense Jacobian by ``vmap`` + ``jacrev`` (:func:`dense_jacobian`) against the
  baseline of one ``torch.autograd.grad`` call per output entry, on the annulus MLP
  (2→96→96→96→1, 19,009 parameters, 408 probe points), interleaved rounds: max |difference|
  (float64, must be ≤ 1e-10), median times and the speed-up.
* ``memory`` — peak resident memory of the dense path (``dense_jacobian`` + truncated pinv), the
  matrix-free Gram path (the same truncated pinv from ``J Jᵀ`` by VJP/JVP pairs) and the
  matrix-free LSMR path (over JVP/VJP) against the parameter count of wide MLPs
  (2→W→W→1 on 64 probe points), each measured in a fresh subprocess (``ru_maxrss`` minus the
  same process's RSS after imports and model construction). The dense path is skipped
  where ``J`` alone would exceed ``--dense-limit-gb``. Also prints the agreement of the
  matrix-free directions with the dense one where both run.
* ``minilm`` — the matrix-free lift on the real all-MiniLM-L6-v2 encoder (22.7 M parameters):
  f = mean-pooled sentence embedding of two sentences as a function of their input token
  embeddings; G = SO(2) rotating embedding coordinates (0, 1) of every token; η lifted by LSMR
  (``--minilm-iters`` iterations); peak memory and residual printed.

* ``lift`` — quick timings (best of a few calls) of the lift and Jacobian paths on small MLPs:
  the dense Jacobian, the wide (``J Jᵀ``) and tall (``Jᵀ J``) dense lifts, the matrix-free Gram
  matrix and the matrix-free Gram/LSMR lifts, and a whole :class:`SymmetryProblem` lift. Used
  to compare before/after refactors (run both trees interleaved; ratios within noise).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/jacobian.py [--part speed|memory|minilm]``.
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


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --------------------------------------------------------------------------------------------
# speed: vmap + jacrev vs autograd.grad loop
# --------------------------------------------------------------------------------------------


def part_speed(rounds: int) -> None:
    from paramsym.attribution import dense_jacobian, function_from_module
    from paramsym.experiments.attribution.annulus.run import AnnulusConfig, build_model, probe_grid

    model = build_model(AnnulusConfig())
    x = probe_grid(24, 3.5)
    fn, params = function_from_module(model)

    def loop():
        m = model.double()
        ps = list(m.parameters())
        y = m(x).reshape(-1)
        rows = []
        for k in range(y.numel()):
            g = torch.autograd.grad(y[k], ps, retain_graph=True)
            rows.append(torch.cat([t.reshape(-1) for t in g]))
        return torch.stack(rows)

    def vm():
        return dense_jacobian(fn, params, x)

    J1, J0 = vm(), loop()
    diff = float((J1 - J0).abs().max())
    t_vm, t_loop = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        vm()
        t_vm.append(time.perf_counter() - t)
        t = time.perf_counter()
        loop()
        t_loop.append(time.perf_counter() - t)
    a, b = statistics.median(t_vm), statistics.median(t_loop)
    print(f"[speed] J shape {tuple(J1.shape)} float64; max |vmap+jacrev − autograd loop| = {diff:.2e} "
          f"({'OK' if diff <= 1e-10 else 'FAIL'} ≤ 1e-10)")
    print(f"[speed] median over {rounds} interleaved rounds: vmap+jacrev {a * 1e3:.1f} ms, "
          f"autograd.grad loop {b * 1e3:.1f} ms, speed-up {b / a:.1f}× (aim ≥ 5×)")


# --------------------------------------------------------------------------------------------
# memory: dense vs matrix-free against parameter count (one subprocess per measurement)
# --------------------------------------------------------------------------------------------


def _child_memory(width: int, path: str) -> None:
    import paramsym.attribution as A
    from paramsym.models.mlp import mlp

    torch.set_num_threads(1)
    model = mlp([2, width, width, 1], "tanh", generator=torch.Generator().manual_seed(0))
    x = A.polar_grid(4, 16, 2.0)
    fn, params = A.function_from_module(model)
    del model
    eta = A.orbit_tangent(fn, params, x, A.so2()).reshape(-1)
    base = _rss_mb()
    t = time.perf_counter()
    if path == "dense":
        J = A.dense_jacobian(fn, params, x)
        r = A.lift(J, eta, gauge="none")
        info = {}
    elif path == "mf-gram":
        r = A.lift_matrix_free(A.JacobianOperator(fn, params, x), eta, method="gram", gauge="none", chunk_size=8)
        info = r.info
    else:
        r = A.lift_matrix_free(A.JacobianOperator(fn, params, x), eta, method="lsmr", gauge="none", maxiter=500)
        info = r.info
    out = {
        "width": width,
        "p": sum(v.numel() for v in params.values()),
        "path": path,
        "seconds": time.perf_counter() - t,
        "peak_mb": _peak_mb(),
        "base_mb": base,
        "residual": r.residual,
        "direction": r.direction[:: max(1, r.direction.numel() // 4096)].tolist(),
        **{k: v for k, v in info.items() if isinstance(v, (int, float))},
    }
    print("RESULT " + json.dumps(out))


def _spawn(width: int, path: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, __file__, "--child", path, "--width", str(width)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    for line in res.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"child {path} width {width} failed:\n{res.stderr[-2000:]}")


def part_memory(widths: list[int], dense_limit_gb: float) -> None:
    import numpy as np

    print(f"[memory] {'width':>6s} {'params':>11s} {'path':>8s} {'peak MB':>9s} {'extra MB':>9s} "
          f"{'dense J MB':>10s} {'s':>7s} {'residual':>9s} {'vs dense':>9s}")
    for w in widths:
        p = 3 * w + w * w + w + w + 1
        jbytes = 64 * p * 8 / 2**20
        runs = {}
        if jbytes / 1024 <= dense_limit_gb:
            runs["dense"] = _spawn(w, "dense")
        runs["mf-gram"] = _spawn(w, "mf-gram")
        runs["mf-lsmr"] = _spawn(w, "mf-lsmr")
        ref = np.asarray(runs["dense"]["direction"]) if "dense" in runs else None
        if ref is None:
            print(f"[memory] {w:6d} {p:11,d} {'dense':>8s} {'skipped':>9s} {'':>9s} {jbytes:10.0f}")
        for name, r in runs.items():
            agree = ""
            if ref is not None and name != "dense":
                agree = f"{np.linalg.norm(np.asarray(r['direction']) - ref) / np.linalg.norm(ref):.1e}"
            print(f"[memory] {w:6d} {r['p']:11,d} {name:>8s} {r['peak_mb']:9.0f} "
                  f"{r['peak_mb'] - r['base_mb']:9.0f} {jbytes:10.0f} {r['seconds']:7.1f} {r['residual']:9.2e} "
                  f"{agree:>9s}")
    print("[memory] extra MB = peak RSS − RSS before the Jacobian work (same process). dense and "
          "mf-gram are the same truncated pinv (τ = 1e-3), so 'vs dense' is their numerical "
          "agreement; mf-lsmr is LSMR with λ = τσ₁ (a Tikhonov filter, see lift.py), so it differs "
          "from the truncated pinv by the filter near σ ≈ τσ₁ — not an error.")


# --------------------------------------------------------------------------------------------
# lift: quick timings of the lift and Jacobian paths
# --------------------------------------------------------------------------------------------


def part_lift(repeat: int) -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _timing import timed

    import paramsym.attribution as A
    from paramsym.models.mlp import mlp

    model = mlp([2, 64, 64, 1], "tanh", generator=torch.Generator().manual_seed(0))
    x = A.polar_grid(6, 16, 2.0)
    fn, params = A.function_from_module(model)
    eta = A.orbit_tangent(fn, params, x, A.so2()).reshape(-1)
    small = mlp([2, 16, 16, 1], "tanh", generator=torch.Generator().manual_seed(1))
    fs, ps = A.function_from_module(small)
    xt = A.polar_grid(30, 64, 2.0)
    Jt = A.dense_jacobian(fs, ps, xt)
    et = A.orbit_tangent(fs, ps, xt, A.so2()).reshape(-1)
    J = A.dense_jacobian(fn, params, x)
    op = A.JacobianOperator(fn, params, x)
    prob = A.SymmetryProblem(fn, params, x, A.so2())
    cases = {
        f"dense_jacobian {tuple(J.shape)}": lambda: A.dense_jacobian(fn, params, x),
        "dense lift, wide (J Jᵀ)": lambda: A.lift(J, eta),
        f"dense lift, tall (Jᵀ J) {tuple(Jt.shape)}": lambda: A.DenseLift(Jt, solver="tall").solve(et),
        "matrix-free gram()": lambda: op.gram(),
        "matrix-free lift, gram + column gauge": lambda: A.lift_matrix_free(op, eta, method="gram", gauge="column"),
        "matrix-free lift, lsmr (200 its)": lambda: A.lift_matrix_free(op, eta, method="lsmr", maxiter=200),
        "SymmetryProblem.lifts()": lambda: prob.lifts(),
    }
    for name, fn_ in cases.items():
        t, _ = timed(fn_, repeat)
        print(f"[lift] {name:48s} {t * 1e3:9.2f} ms (best of {repeat})")


# --------------------------------------------------------------------------------------------
# the real all-MiniLM-L6-v2 encoder
# --------------------------------------------------------------------------------------------


def part_minilm(iters: int) -> None:
    from paramsym.attribution import (
        JacobianOperator,
        function_from_module,
        lie_group,
        lift_matrix_free,
        orbit_tangent,
    )

    torch.set_num_threads(1)
    from paramsym.models.loading import load_minilm

    model, tok = load_minilm(quiet=True)
    enc = tok(["a rotation of the plane", "symmetry in parameter space"], return_tensors="pt", padding=True)
    mask = enc["attention_mask"]
    with torch.no_grad():
        emb = model.embeddings.word_embeddings(enc["input_ids"]).double()
    n, T, d = emb.shape
    x = emb.reshape(n, T * d)  # the group acts on flattened token embeddings

    def forward(apply, xf):
        out = apply(inputs_embeds=xf.reshape(-1, T, d), attention_mask=mask[: xf.shape[0]]).last_hidden_state
        m = mask[: xf.shape[0]].unsqueeze(-1).to(out.dtype)
        return (out * m).sum(1) / m.sum(1)

    fn, params = function_from_module(model, forward=forward)
    del model
    p = sum(v.numel() for v in params.values())
    # SO(2) generator on coordinates (0, 1) of every token; trivial on the 384-d output
    A = torch.zeros(T * d, T * d, dtype=torch.float64)
    for k in range(T):
        A[k * d, k * d + 1], A[k * d + 1, k * d] = 1.0, -1.0
    group = lie_group(A, torch.zeros(d, d, dtype=torch.float64), name="SO(2) on embedding plane (0,1)")
    base = _rss_mb()
    t = time.perf_counter()
    eta = orbit_tangent(fn, params, x, group).reshape(-1)
    op = JacobianOperator(fn, params, x)
    r = lift_matrix_free(op, eta, method="lsmr", maxiter=iters)
    print(f"[minilm] all-MiniLM-L6-v2: {p:,d} parameters, J is {op.shape[0]} × {op.shape[1]:,d} "
          f"(dense float64 would be {op.shape[0] * op.shape[1] * 8 / 2**30:.0f} GiB)")
    print(f"[minilm] LSMR {r.info.get('iterations')} iterations (istop {r.info.get('istop')}), damp {r.info.get('damp'):.3g} "
          f"(σ₁ ≈ {r.info.get('sigma_max_estimate', float('nan')):.3g}), residual ‖Jc − η‖/‖η‖ = {r.residual:.3g}, "
          f"‖η‖ = {r.target_norm:.3g}, {time.perf_counter() - t:.0f} s")
    print(f"[minilm] peak RSS {_peak_mb():.0f} MB (RSS before the lift {base:.0f} MB); limit 4096 MB: "
          f"{'OK' if _peak_mb() <= 4096 else 'EXCEEDED'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["speed", "memory", "lift", "minilm", "all"], default="all")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--widths", default="32,128,512,1024,3200")
    ap.add_argument("--dense-limit-gb", type=float, default=1.0)
    ap.add_argument("--minilm-iters", type=int, default=60)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--width", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child_memory(args.width, args.child)
        return
    torch.set_num_threads(1)
    if args.part in ("speed", "all"):
        part_speed(args.rounds)
    if args.part in ("memory", "all"):
        part_memory([int(w) for w in args.widths.split(",")], args.dense_limit_gb)
    if args.part in ("lift", "all"):
        part_lift(max(args.rounds, 2))
    if args.part in ("minilm", "all"):
        part_minilm(args.minilm_iters)


if __name__ == "__main__":
    main()
