"""``paramsym affine``: the exact affine symmetry algebra of a named block.

::

    paramsym affine --preset NAME [--json] [--tol T] [--rule gap|threshold] [--samples N]
                    [--seed S] [--threads N] [--max-memory 2GiB] [--quiet]
    paramsym affine --list

``--json`` prints :meth:`paramsym.exact.affine.AffineAlgebra.summary` plus the preset's
``expected`` dimension and the algebra analysis (``commutativity``, ``closure_residual``):
at least ``dimension``, ``gap``, ``singular_values``. Presets: :mod:`paramsym.exact.presets`.
"""

from __future__ import annotations

import argparse
import json

__all__ = ["register"]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "affine", help="exact affine symmetry algebra of a block (null space of the invariance system)",
        description="Solve ⟨∇F_k(θ_j), Aθ_j + b⟩ = 0 for all affine fields v(θ) = Aθ + b of a named "
        "block, choose the dimension from the singular-value gap, verify at held-out points.")
    p.add_argument("--preset", default=None, help="preset name (see --list)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--tol", type=float, default=1e-6, help="rank tolerance: σ ≤ tol·σ_max is null (default 1e-6)")
    p.add_argument("--rule", choices=["gap", "threshold"], default="gap", help="dimension rule (default gap)")
    p.add_argument("--samples", type=int, default=None, help="sample points (default: automatic)")
    p.add_argument("--seed", type=int, default=0, help="seed of the block and the sample points")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--max-memory", default="2GiB",
                   help="memory budget of the solver and the algebra checks, e.g. 8GiB (default 2GiB); "
                   "a larger estimate stops with TooLargeError before allocating")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--list", action="store_true", help="list presets and exit")
    p.set_defaults(func=cmd_affine)


def cmd_affine(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..exact.presets import AFFINE_PRESETS

    if args.list:
        for n, pr in AFFINE_PRESETS.items():
            print(f"{n:20s} expected {pr.expected:3d}  {pr.help}")
        return 0
    if not args.preset:
        raise ConfigError(f"--preset is required; valid presets: {sorted(AFFINE_PRESETS)} (or --list).")
    if args.threads < 1:
        raise ConfigError(f"--threads must be ≥ 1, received {args.threads}.")
    from ..exact.spectrum import check_tolerance

    check_tolerance(args.tol, "--tol")
    from ..groups.memory import parse_memory

    budget = parse_memory(args.max_memory)
    import torch

    from ..exact.affine import solve_affine
    from ..exact.presets import build_preset
    from ..groups.algebra import structure_constants
    from ..groups.brackets import commutativity

    torch.set_num_threads(args.threads)
    target, ansatz = build_preset(args.preset, args.seed)
    res = solve_affine(target, ansatz, samples=args.samples or AFFINE_PRESETS[args.preset].samples, tol=args.tol, rule=args.rule,
                       generator=torch.Generator().manual_seed((args.seed + 1) % 2**64),
                       progress=not args.quiet and not args.json, max_memory=budget)
    out = res.summary()
    out["preset"], out["expected"] = args.preset, AFFINE_PRESETS[args.preset].expected
    if res.dimension:
        aug = res.augmented()
        out["commutativity"] = commutativity(aug, max_memory=budget)  # O(d s²) memory, not O(d² s²)
        d_, s_ = aug.shape[0], aug.shape[-1]
        if d_ * d_ * s_**3 <= 5e10:  # structure constants cost O(d² s³); skip beyond a few seconds
            out["closure_residual"] = structure_constants(aug)[1]
        else:
            out["closure_residual"] = None
            out["closure_skipped"] = (f"{d_} generators of size {s_}: the closure check would cost about "
                                      f"{d_ * d_ * s_**3:.1e} flops; run paramsym.groups.algebra.structure_constants "
                                      "from Python if you need it")
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    rel = out["relative_singular_values"]
    d = res.dimension
    print(f"{args.preset}: {target!r}, {res.n_unknowns} unknowns, {res.n_samples} sample points, "
          f"{res.method} ({res.seconds:.1f} s)")
    print(f"status {res.status}: dimension {d} (expected {out['expected']}), gap σ_(d+1)/σ_(d) = {res.gap:.3g}, "
          f"rule {args.rule}, tol {args.tol:g}")
    lo = max(0, len(rel) - d - 3)
    print("smallest relative singular values σ/σ_max: " + " ".join(f"{x:.2e}" for x in rel[lo:]))
    print("dimension vs tol: " + "  ".join(f"{t:.0e}:{n}" for t, n in res.decision.table))
    if d:
        print(f"held-out relative invariance residual: max {out['max_residual']:.2e}; "
              f"commutativity {out['commutativity']:.2e}; closure residual {out['closure_residual']:.2e}")
    return 0
