"""Spec export of real-size checkpoints beside one forward pass (issue 34).

Writes random **bf16, sharded** checkpoints of real shapes (``--shapes tinyllama`` = TinyLlama-1.1B's
config: 22 layers, hidden 2048, FFN 5632, 32 query / 4 key-value heads, vocabulary 32000;
``llama2-7b`` = Llama-2-7B's: 32 layers, hidden 4096, FFN 11008, 32 heads) into ``--dir`` (one
shard at a time: the model is never held whole; weights ``N(0, 0.02²)``, norm scales
``1 + N(0, 0.02²)``), then measures, each in a fresh process (``os.wait4``: wall time of the
child, its CPU time and peak RSS, imports included):

* ``spec``: ``paramsym census --model DIR --export permutation-spec --without-weights`` (headers,
  a 2-layer copy traced at the real widths in ``--spec-dtype``, the spec extended and named as stored);
* ``headers``: :func:`paramsym.census.stored.read_checkpoint` alone;
* ``forward``: the floor — ``from_pretrained`` (bf16, eager) and one forward pass on 2 × 8 tokens;
* ``stream``: the **weighted** census verified one decoder layer at a time
  (:func:`paramsym.census.streaming.streaming_census`, float64, 2 × 8 tokens);
* ``scramble``: one random element of the exported spec's group (``spec`` must run first: its
  file is read) written shard by shard (:func:`paramsym.census.rewrite.permute_checkpoint`) to
  ``DIR/<shape>.scrambled``; then the streamed float64 logits of both checkpoints on the same
  tokens (:func:`paramsym.census.streaming.streamed_output`) — the scrambled copy is the same function;
* ``align``: the scrambled copy aligned back to the original by weight matching over the spec's
  group with both read one tensor at a time (:func:`paramsym.alignment.streamed.match_streamed`),
  written shard by shard to ``DIR/<shape>.aligned``, and every stored tensor compared with the
  original's (largest relative difference);
* ``align-cli``: the same through the command line, spec included —
  ``paramsym align DIR DIR.scrambled --stream --merge 0.5 --out DIR.stream-run`` (the spec traced
  from the headers and config in ``--spec-dtype``, the matching, ``aligned_b/`` and ``merged/``
  written shard by shard; :mod:`paramsym.kinds.align_stream`), then ``aligned_b/`` compared with
  the original tensor by tensor (largest relative difference; the run's own ``seconds`` and peak
  estimate printed beside the measured wall time and peak RSS).

It prints the table and the ratios against ``forward`` (wall and peak RSS) per shape, and the
time of the spec per parameter from the smallest to the largest shape. The in-memory weighted
census / export are not run here (they hold float64 copies of the whole model: ~16 bytes per
parameter measured in the issue); their memory estimate (``loading_estimate``) is printed for the
``--max-memory`` check.

    OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/scale.py --dir /tmp/scale [--shapes tinyllama,llama2-7b]

``--per-layer`` measures instead the streamed census's cost of **one decoder layer** per parameter
at each shape's widths, on 2-layer checkpoints (``DIR/<shape>.2layers``; a 2-layer model at
Llama-2-7B's widths is 0.67 B parameters, 1.3 GB), beside an older tree's (``--baseline-src``),
and prints the ratio of CPU time per parameter of the widest shape to the narrowest:

    git archive <commit> src | tar -x -C /tmp/base
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/scale.py --dir /tmp/scale --per-layer \\
        --shapes tinyllama,llama2-7b --baseline-src /tmp/base/src
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SHAPES = {
    "smoke": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                  vocab_size=1000, max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False),
    "tinyllama": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048, rms_norm_eps=1e-5,
                      tie_word_embeddings=False),
    "llama2-7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096, rms_norm_eps=1e-5,
                      tie_word_embeddings=False),
}
SHARD_BYTES = 1 << 30


def write_checkpoint(shape: str, directory: Path, seed: int = 0, layers: int | None = None) -> int:
    """Write the random sharded bf16 checkpoint (``layers``: that many decoder layers at the shape's
    widths instead of its own depth); returns its parameter count. Nothing is held whole: the names
    and shapes come from a model on the meta device, each shard is filled and saved alone."""
    import torch
    import transformers
    from safetensors.torch import save_file

    widths = dict(SHAPES[shape], **({"num_hidden_layers": int(layers)} if layers else {}))
    cfg = transformers.LlamaConfig(**widths, architectures=["LlamaForCausalLM"], torch_dtype="bfloat16")
    with torch.device("meta"):
        meta = transformers.LlamaForCausalLM(cfg)
    shapes = [(n, tuple(t.shape)) for n, t in meta.state_dict().items()]
    gen = torch.Generator().manual_seed(seed)
    directory.mkdir(parents=True, exist_ok=False)
    cfg.save_pretrained(directory)
    shards: list[list[tuple[str, tuple[int, ...]]]] = [[]]
    size = 0
    for n, s in shapes:
        b = 2 * int(torch.Size(s).numel())
        if shards[-1] and size + b > SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append((n, s))
        size += b
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        tensors = {}
        for n, s in shard:
            t = 0.02 * torch.randn(s, generator=gen)
            tensors[n] = (t + 1 if len(s) == 1 else t).to(torch.bfloat16)
            weight_map[n] = fname
            total += t.numel()
        save_file(tensors, str(directory / fname), metadata={"format": "pt"})
        del tensors
    (directory / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 2 * total}, "weight_map": weight_map}, indent=1))
    return total


def _child(what: str, directory: str, dtype: str) -> None:
    if what == "write":
        shape, _, layers = dtype.partition(":")  # dtype carries the shape name (and a depth) here
        write_checkpoint(shape, Path(directory), layers=int(layers) if layers else None)
        return
    if what == "layer":
        print("RESULT " + json.dumps(_layer_cost(directory)))
        return
    t0 = time.perf_counter()
    out: dict = {}
    if what == "spec":
        from paramsym.cli import main

        run = Path(directory).parent / f"{Path(directory).name}.spec"
        if run.exists():
            shutil.rmtree(run)
        rc = main(["census", "--model", directory, "--export", "permutation-spec", "--without-weights", "--json",
                   "--dtype", dtype, "--out", str(run)])
        data = json.loads((run / "permutation_spec.json").read_text())
        out = {"rc": rc, "perms": len(data["perms"]), "tensors": len(data["axes"])}
    elif what == "headers":
        from paramsym.census.stored import loading_estimate, read_checkpoint

        stored = read_checkpoint(directory)
        out = {"tensors": len(stored), "weighted_estimate_GiB": round(loading_estimate(stored) / 2**30, 1)}
    elif what == "stream":
        from paramsym.census.streaming import streaming_census

        res, rep = streaming_census(directory)
        out = {"entries": len(res.entries), "all_verified": res.all_verified, "total_dimension": res.total_dimension,
               "estimate_GiB": round(rep["estimate_bytes"] / 2**30, 2),
               "max_error_over_tolerance": max(e.verified_error / e.tolerance for e in res.entries)}
    elif what in ("scramble", "align"):
        import torch

        from paramsym.census.permspec import random_perms
        from paramsym.census.rewrite import permute_checkpoint
        from paramsym.census.streaming import streamed_output

        spec = json.loads((Path(f"{directory}.spec") / "permutation_spec.json").read_text())  # the spec run's file
        scrambled = Path(f"{directory}.scrambled")
        if what == "scramble":
            if scrambled.exists():
                shutil.rmtree(scrambled)
            permute_checkpoint(directory, spec, random_perms(spec, torch.Generator().manual_seed(1)), scrambled)
            vocab = json.loads((Path(directory) / "config.json").read_text())["vocab_size"]
            ids = torch.randint(0, vocab, (2, 8), generator=torch.Generator().manual_seed(0))
            a, b = streamed_output(directory, ids), streamed_output(scrambled, ids)
            out = {"logits_change": float((a - b).norm() / a.norm())}
        else:
            from paramsym.alignment.streamed import match_streamed
            from paramsym.census.stored import read_checkpoint
            from paramsym.models.checks import LazyTensors

            A, B = LazyTensors(read_checkpoint(directory)), LazyTensors(read_checkpoint(scrambled))
            perms, info = match_streamed(A, B, spec)
            aligned = Path(f"{directory}.aligned")
            if aligned.exists():
                shutil.rmtree(aligned)
            permute_checkpoint(scrambled, spec, perms, aligned)
            C = LazyTensors(read_checkpoint(aligned))
            worst = max(float((C[n].double() - A[n].double()).norm() / A[n].double().norm()) for n in A)
            out = {"sweeps": info["sweeps"], "distance_before": info["distance_before"],
                   "distance_after": info["distance_after"], "max_relative_weight_error": worst}
    elif what == "align-cli":
        from paramsym.census.stored import read_checkpoint
        from paramsym.cli import main
        from paramsym.models.checks import LazyTensors

        run = Path(f"{directory}.stream-run")
        if run.exists():
            shutil.rmtree(run)
        rc = main(["align", directory, f"{directory}.scrambled", "--stream", "--merge", "0.5", "--out", str(run),
                   "--quiet", "--json", "--set", f"dtype={dtype}"])
        rec = json.loads((run / "metrics.json").read_text())
        A, C = LazyTensors(read_checkpoint(directory)), LazyTensors(read_checkpoint(run / "aligned_b"))
        worst = max(float((C[n].double() - A[n].double()).norm() / A[n].double().norm()) for n in A)
        out = {"rc": rc, "sweeps": rec["sweeps"], "distance_before": rec["distance_before"],
               "distance_after": rec["distance_after"], "max_relative_weight_error": worst,
               "run_seconds": rec["seconds"], "estimate": rec["estimate"]}
    else:
        import torch
        import transformers

        model = transformers.AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager",
                                                                  dtype=torch.bfloat16).eval()
        ids = torch.randint(0, model.config.vocab_size, (2, 8), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            logits = model(input_ids=ids).logits
        out = {"finite": bool(torch.isfinite(logits).all())}
    out["seconds"] = time.perf_counter() - t0
    print("RESULT " + json.dumps(out))


def _cpu() -> float:
    import resource

    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


class _LayerDone(Exception):
    """Raised when layer 1 is about to be read: layer 0 is measured (:func:`_layer_cost`)."""


def _layer_cost(directory: str) -> dict:
    """The weighted streamed census of ``directory`` run up to its decoder layer 1, with the CPU
    time (user + system) and wall time of layer 0 taken apart: from the read of layer 0 to the read
    of layer 1 (its tensors read and converted, the finders' candidates built, each verified on the
    layer's update, the next hidden state) — the cost that repeats per layer, without the one-off
    parts (imports, headers, the traced 2-layer template, the embeddings). Layer 0's entries are
    reported (verified, error / tolerance). Runs whatever ``paramsym`` is first on the path
    (``--baseline-src``: an older tree, e.g. ``main``'s)."""
    import paramsym.census.streaming as st
    import paramsym.census.walk as walk

    marks: list[tuple[float, float]] = []
    entries: list = []
    load, verify = st._load_layer, walk.verify_candidate

    def timed(plan, layers, i):
        marks.append((_cpu(), time.perf_counter()))
        if i == 1:
            raise _LayerDone
        return load(plan, layers, i)

    def verified(*args, **kwargs):
        entries.append(verify(*args, **kwargs))
        return entries[-1]

    st._load_layer, walk.verify_candidate = timed, verified
    try:
        st.streaming_census(directory)
    except _LayerDone:
        pass
    (c0, w0), (c1, w1) = marks[0], marks[1]
    plan = st.plan_stream(directory)
    return {"layer_cpu": c1 - c0, "layer_wall": w1 - w0, "layer_params": plan.layer_params[0],
            "entries": len(entries), "all_verified": all(e.verified for e in entries),
            "max_error_over_tolerance": max(e.verified_error / e.tolerance for e in entries), "src": st.__file__}


def measure(what: str, directory: Path, dtype: str = "float64", src: str | None = None) -> dict:
    """Run one measurement in a fresh process; its wall time, CPU time and peak RSS (``os.wait4``).
    ``src``: a source tree put first on the child's ``PYTHONPATH`` (the code measured)."""
    t0 = time.perf_counter()
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.Popen([sys.executable, __file__, "--child", what, str(directory), dtype], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    stdout = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    line = next((ln for ln in stdout.splitlines() if ln.startswith("RESULT ")), None)
    res = json.loads(line[7:]) if line else {"error": f"exit {proc.returncode}"}
    return {"what": what, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_MiB": usage.ru_maxrss / 1024, **res}


def per_layer(directory: Path, shapes: list[str], baseline: str | None, rounds: int = 1) -> int:
    """The streamed census's cost per decoder layer (:func:`_layer_cost`) at each shape's widths,
    on 2-layer checkpoints (``DIR/<shape>.2layers``, written if absent), this tree's code and
    ``baseline``'s measured side by side, interleaved ``rounds`` times (the least CPU time kept).
    Prints CPU nanoseconds per layer parameter and the ratio of the widest shape to the narrowest —
    1 when the cost per parameter does not grow with the width."""
    codes = [("after", str(Path(__file__).resolve().parents[1] / "src"))] + ([("before", baseline)] if baseline else [])
    for shape in shapes:
        d = directory / f"{shape}.2layers"
        if not d.exists():
            subprocess.run([sys.executable, __file__, "--child", "write", str(d), f"{shape}:2"], check=True)
    best: dict[tuple[str, str], dict] = {}
    for _ in range(max(int(rounds), 1)):
        for shape in shapes:
            for code, src in codes:
                r = measure("layer", directory / f"{shape}.2layers", src=src)
                if "layer_cpu" not in r:
                    raise SystemExit(f"{shape} ({code}, {src}): the child failed: {r}")
                print(f"{shape:10s} {code:6s} layer 0: CPU {r['layer_cpu']:7.1f} s  wall {r['layer_wall']:7.1f} s  "
                      f"{r['layer_params']:,} parameters  entries {r['entries']} verified {r['all_verified']}  "
                      f"peak RSS {r['rss_MiB']:.0f} MiB", flush=True)
                if (shape, code) not in best or r["layer_cpu"] < best[shape, code]["layer_cpu"]:
                    best[shape, code] = r
    print("\n| shape | layer parameters | code | layer CPU s | layer wall s | CPU ns / parameter | max error / tolerance "
          "| peak RSS MiB (run to layer 1) |\n|---|---:|---|---:|---:|---:|---:|---:|")
    for (shape, code), r in best.items():
        print(f"| {shape} | {r['layer_params']:,} | {code} | {r['layer_cpu']:.1f} | {r['layer_wall']:.1f} | "
              f"{1e9 * r['layer_cpu'] / r['layer_params']:.0f} | {r['max_error_over_tolerance']:.1e} | {r['rss_MiB']:.0f} |")
    lo, hi = shapes[0], shapes[-1]
    for code, _ in codes:
        if lo != hi:
            a, b = best[lo, code], best[hi, code]
            print(f"{code}: CPU per parameter {hi} / {lo}: "
                  f"{(b['layer_cpu'] / b['layer_params']) / (a['layer_cpu'] / a['layer_params']):.2f}")
    if baseline:
        for shape in shapes:
            print(f"{shape}: layer CPU after / before: "
                  f"{best[shape, 'after']['layer_cpu'] / best[shape, 'before']['layer_cpu']:.2f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", help="where the checkpoints are written (DIR/<shape>; reused if present)")
    ap.add_argument("--shapes", default="tinyllama", help=f"comma-separated among {sorted(SHAPES)}")
    ap.add_argument("--what", default="headers,spec,forward", help="measurements, comma-separated, among headers, "
                    "spec, forward, stream, scramble (after spec), align (after scramble), align-cli (after scramble: "
                    "`paramsym align --stream --merge 0.5`, spec traced in --spec-dtype); forward of a 7B checkpoint "
                    "needs ~14 GB: leave it out on a shared 24 GB machine")
    ap.add_argument("--spec-dtype", default="float64", choices=["float64", "float32"],
                    help="dtype of the traced 2-layer copy (--dtype of the census)")
    ap.add_argument("--per-layer", action="store_true", help="measure the streamed census's cost of one decoder "
                    "layer per parameter on 2-layer checkpoints at each shape's widths (DIR/<shape>.2layers), instead "
                    "of the whole-model measurements")
    ap.add_argument("--baseline-src", help="with --per-layer: a source tree measured beside this one (e.g. "
                    "`git archive main src | tar -x -C /tmp/base`, then /tmp/base/src)")
    ap.add_argument("--rounds", type=int, default=1, help="with --per-layer: interleaved repetitions (the least CPU "
                    "time of each is kept: the machine's other load only adds)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    if not args.dir:
        ap.error("--dir DIR is required")
    if args.per_layer:
        return per_layer(Path(args.dir), args.shapes.split(","), args.baseline_src, args.rounds)
    rows = []
    for shape in args.shapes.split(","):
        d = Path(args.dir) / shape
        if not d.exists():  # written by a child: a forked child's peak RSS counts its parent's pages before exec
            t0 = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--child", "write", str(d), shape], check=True)
            n = json.loads((d / "model.safetensors.index.json").read_text())["metadata"]["total_size"] // 2
            print(f"wrote {d}: {n:,} parameters, bf16, {len(list(d.glob('*.safetensors')))} shards, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
        n = json.loads((d / "model.safetensors.index.json").read_text())["metadata"]["total_size"] // 2
        for what in args.what.split(","):
            r = measure(what, d, args.spec_dtype)
            r["params"] = n
            rows.append((shape, r))
            extra = {k: v for k, v in r.items() if k not in ("what", "wall", "cpu", "rss_MiB", "params", "seconds")}
            print(f"{shape:10s} {what:8s} wall {r['wall']:8.1f} s  cpu {r['cpu']:8.1f} s  peak RSS {r['rss_MiB']:.0f} MiB  "
                  f"{extra}", flush=True)
    print("\n| shape | parameters | what | wall s | CPU s | peak RSS MiB |\n|---|---:|---|---:|---:|---:|")
    for shape, r in rows:
        print(f"| {shape} | {r['params']:,} | {r['what']} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['rss_MiB']:.0f} |")
    for shape in dict.fromkeys(s for s, _ in rows):
        got = {r["what"]: r for s, r in rows if s == shape}
        for what in ("spec", "stream", "scramble", "align", "align-cli"):
            if what in got and "forward" in got:
                print(f"{shape}: {what} / forward: wall {got[what]['wall'] / got['forward']['wall']:.2f}, peak RSS "
                      f"{got[what]['rss_MiB'] / got['forward']['rss_MiB']:.2f}")
    specs = [(s, r) for s, r in rows if r["what"] == "spec"]
    if len(specs) > 1:
        (s0, a), (s1, b) = specs[0], specs[-1]
        print(f"spec time per parameter {s1} / {s0}: {(b['wall'] / b['params']) / (a['wall'] / a['params']):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
