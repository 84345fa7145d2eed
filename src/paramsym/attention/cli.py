"""``paramsym attention ...``: count components, list clusterings, classify and build layers.

Sub-commands::

    paramsym attention count --group D4 --copies 96 --heads 8 [--rep regular] [--json]
    paramsym attention table --group D4 --copies 1..12 [--heads 8] [--format markdown|json] [--out DIR]
    paramsym attention clusterings --group C6 --heads 3 [--up-to relabelling] [--count-only] [--json]
    paramsym attention classify WEIGHTS --group D4 [--rep regular|copies:C|FILE] [--json]
    paramsym attention build --group D4 --heads 3 --index K --out FILE [--rep ...] [--perturb EPS]
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]

_REP_HELP = (
    "representation on tokens: regular, trivial, copies:C (R^C ⊗ R[G]), perm (defining "
    "permutation action), or a .json/.safetensors file with 'matrices' (one per element) or "
    "'generators' (default: regular)"
)
_GROUP_HELP = (
    "finite group: a name (C6, D4, S3, Q8, A4, C2xC3, ...), generators as permutations "
    "perm:[[1,2,0],[1,0,2]], or a JSON file {\"permutations\": [...]} / {\"matrices\": [...]}"
)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "attention",
        help="equivariant attention: component counts, partial G-clusterings, classify a layer",
        description="Equivariant multi-head self-attention (structure theorem, Theorem 9).",
    )
    p.set_defaults(func=lambda args: (p.print_help(), 1)[1])
    sub = p.add_subparsers(dest="attention_command", metavar="SUBCOMMAND")

    c = sub.add_parser("count", help="c_{G,d}(V) and the Theorem 9 bound for V = R^C ⊗ rho")
    c.add_argument("--group", required=True, help=_GROUP_HELP)
    c.add_argument("--copies", type=int, default=1, help="number of copies C of rho (default 1)")
    c.add_argument("--heads", type=int, required=True, help="number of heads |H| (divides dim V)")
    c.add_argument("--rep", default="regular", help=_REP_HELP)
    c.add_argument("--json", action="store_true", help="print JSON (keys include c and bound)")
    c.set_defaults(func=_cmd_count)

    t = sub.add_parser("table", help="table of c and the bound over a range of copies C")
    t.add_argument("--group", required=True, help=_GROUP_HELP)
    t.add_argument("--copies", default="1..12", help="copies, e.g. 1..12 or 1..10,96")
    t.add_argument("--heads", type=int, default=8, help="number of heads (default 8)")
    t.add_argument("--rep", default="regular", help=_REP_HELP)
    t.add_argument("--format", choices=["markdown", "json"], default="markdown")
    t.add_argument("--json", action="store_true", help="same as --format json")
    t.add_argument("--out", default=None, help="also write a run directory here (with a figure)")
    t.set_defaults(func=_cmd_table)

    k = sub.add_parser("clusterings", help="partial G-clusterings of a set of heads")
    k.add_argument("--group", required=True, help=_GROUP_HELP)
    k.add_argument("--heads", type=int, required=True, help="number of heads")
    k.add_argument(
        "--up-to",
        choices=["isomorphism", "relabelling"],
        default="isomorphism",
        help="isomorphism (labelled heads, the paper's count) or relabelling of heads too",
    )
    k.add_argument("--count-only", action="store_true", help="count without listing")
    k.add_argument("--limit", type=int, default=10_000, help="most clusterings to list")
    k.add_argument("--json", action="store_true", help="print JSON (keys count, clusterings)")
    k.set_defaults(func=_cmd_clusterings)

    f = sub.add_parser("classify", help="recover the partial G-clustering of a layer, or say what fails")
    f.add_argument("weights", help="safetensors: RMHSA 'M','R' or nn.MultiheadAttention weights")
    f.add_argument("--group", required=True, help=_GROUP_HELP)
    f.add_argument("--rep", default="regular", help=_REP_HELP)
    f.add_argument("--copies", type=int, default=1, help="take the representation C times")
    f.add_argument("--num-heads", type=int, default=None, help="heads of MultiheadAttention weights (else metadata)")
    f.add_argument("--tol", type=float, default=None, help="relative tolerance (default by stored dtype: 1e-9 float64, 1e-5 float32, 1e-2 16-bit)")
    f.add_argument("--bias-tol", type=float, default=0.0, help="largest query-bias entry treated as zero")
    f.add_argument("--seed", type=int, default=0, help="seed of the numerical equivariance check")
    f.add_argument("--json", action="store_true")
    f.set_defaults(func=_cmd_classify)

    b = sub.add_parser("build", help="write a random equivariant RMHSA for a clustering (safetensors)")
    b.add_argument("--group", required=True, help=_GROUP_HELP)
    b.add_argument("--heads", type=int, required=True)
    b.add_argument("--index", type=int, required=True, help="clustering index as listed by `clusterings`")
    b.add_argument("--rep", default="regular", help=_REP_HELP)
    b.add_argument("--copies", type=int, default=1)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--perturb", type=float, default=0.0, help="add this much noise to M of head 0")
    b.add_argument("--out", required=True, help="output .safetensors file")
    b.set_defaults(func=_cmd_build)


def _print_json(obj) -> None:
    from ..runs import _jsonable

    print(json.dumps(_jsonable(obj), indent=2))


def _rep_name(spec: str, copies: int) -> str:
    return spec if copies == 1 else f"{copies} x {spec}"


# ------------------------------------------------------------------------------ count / table
def _cmd_count(args: argparse.Namespace) -> int:
    from .components import component_count, format_scientific
    from .loading import parse_group, parse_rep

    G = parse_group(args.group)
    rep = parse_rep(G, args.rep)
    res = component_count(rep, args.heads, copies=args.copies, rep_name=args.rep)
    if args.json:
        _print_json(res.to_dict())
        return 0
    content = " ⊕ ".join(f"{m if m > 1 else ''}{n}" for n, _, m in res.irreps)
    print(
        f"group {res.group}, V = R^{res.copies} ⊗ {args.rep} (dim {res.dim_v}), {res.heads} heads, "
        f"head dimension d = {res.d}"
    )
    print(f"V = {content}")
    cf = "" if res.closed_form is None else f"   (D4 closed form: {res.closed_form})"
    print(f"c_(G,d)(V) = {res.c}{cf}")
    b = res.bound
    print(
        f"Theorem 9 bound c^{2 * res.heads}/{res.heads}! = {format_scientific(b)}   (exact: "
        f"{b.numerator}{'' if b.denominator == 1 else '/' + str(b.denominator)})"
    )
    return 0


def _cmd_table(args: argparse.Namespace) -> int:
    from .components import component_table, parse_range, table_markdown
    from .loading import parse_group, parse_rep

    G = parse_group(args.group)
    rep = parse_rep(G, args.rep)
    copies = parse_range(args.copies)
    rows = component_table(rep, copies, args.heads, rep_name=args.rep)
    if args.out:
        from .report import write_table_run

        path = write_table_run(args.out, args, rows)
        print(f"wrote run directory {path}", file=sys.stderr)
    if args.format == "json" or args.json:
        _print_json({"group": G.name, "rep": args.rep, "heads": args.heads, "rows": [r.to_dict() for r in rows]})
    else:
        print(f"c_(G,d)(R^C ⊗ {args.rep}) for G = {G.name}, {args.heads} heads, d = dim V / {args.heads}\n")
        print(table_markdown(rows))
    return 0


# ------------------------------------------------------------------------------ clusterings
def _cmd_clusterings(args: argparse.Namespace) -> int:
    from .clusterings import count_partial_clusterings, enumerate_partial_clusterings
    from .loading import parse_group

    G = parse_group(args.group)
    n = count_partial_clusterings(G, args.heads, up_to=args.up_to)
    listing = None
    if not args.count_only and args.up_to == "isomorphism":
        listing = list(enumerate_partial_clusterings(G, args.heads, limit=args.limit))
    if args.json:
        out = {"group": G.name, "heads": args.heads, "up_to": args.up_to, "count": n}
        if listing is not None:
            out["clusterings"] = [c.to_dict() for c in listing]
        _print_json(out)
        return 0
    what = "up to isomorphism" if args.up_to == "isomorphism" else "up to relabelling of heads"
    print(f"{n} partial {G.name}-clusterings of {args.heads} heads ({what})")
    if listing is not None:
        for i, c in enumerate(listing):
            print(f"\n[{i}]")
            print("  " + c.describe().replace("\n", "\n  "))
    return 0


# ------------------------------------------------------------------------------ classify
def _cmd_classify(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from .equivariance import equivariance_errors
    from .loading import load_weights, parse_group, parse_rep
    from .structure import default_rtol, recover_clustering

    G = parse_group(args.group)
    rep = parse_rep(G, args.rep, args.copies)
    w = load_weights(args.weights, num_heads=args.num_heads, bias_tol=args.bias_tol)
    rtol = args.tol if args.tol is not None else default_rtol(w.stored_dtype or w.M.dtype)
    rec = recover_clustering(w.M, w.R, rep, rtol=rtol)
    gen = torch.Generator().manual_seed(args.seed)
    errs = equivariance_errors(w.M, w.R, rep, n_tokens=3, n_samples=4, generator=gen, offset=w.offset)
    worst = int(np.argmax(errs))
    offset_defect = None
    if w.offset is not None:
        c = w.offset.double().numpy()
        mats = np.asarray(rep.matrices)
        offset_defect = float(np.abs(mats @ c - c).max() / max(np.abs(c).max(), 1e-300))
    tol = rec.details["rtol"]
    verdict = rec.equivariant and (offset_defect is None or offset_defect <= tol)
    result = {
        "weights": args.weights,
        "source": w.source,
        "notes": w.notes,
        "group": G.name,
        "rep": _rep_name(args.rep, args.copies),
        "heads": int(w.M.shape[0]),
        "dim": int(w.M.shape[-1]),
        "equivariant": verdict,
        "recovery": rec.to_dict(),
        "offset_defect": offset_defect,
        "numerical_check": {
            "tokens": 3,
            "max_relative_error": float(errs.max()),
            "worst_element": G.label(worst),
        },
    }
    if args.json:
        _print_json(result)
        return 0
    print(f"{args.weights}: {w.source}, {result['heads']} heads on R^{result['dim']}; G = {G.name}, rep {result['rep']}")
    for note in w.notes:
        print(f"  note: {note}")
    print(rec.summary())
    if offset_defect is not None and offset_defect > tol:
        print(f"NOT equivariant: the constant output offset is not G-fixed (relative defect {offset_defect:.3g})")
    print(
        f"numerical check (L = 3 tokens): max relative equivariance error {errs.max():.3g} "
        f"(worst element {G.label(worst)})"
    )
    return 0


# ------------------------------------------------------------------------------ build
def _cmd_build(args: argparse.Namespace) -> int:
    import itertools

    import torch

    from ..errors import ShapeError
    from ..runs import save_tensors
    from .clusterings import count_partial_clusterings, enumerate_partial_clusterings
    from .loading import parse_group, parse_rep
    from .structure import build_equivariant_rmhsa

    G = parse_group(args.group)
    rep = parse_rep(G, args.rep, args.copies)
    total = count_partial_clusterings(G, args.heads)
    if not 0 <= args.index < total:
        raise ShapeError(f"--index {args.index}: there are {total} clusterings, indices 0..{total - 1}.")
    clustering = next(itertools.islice(enumerate_partial_clusterings(G, args.heads, limit=max(total, 1)), args.index, None))
    gen = torch.Generator().manual_seed(args.seed)
    M, R = build_equivariant_rmhsa(clustering, rep, generator=gen)
    if args.perturb:
        M = M.clone()
        M[0] += args.perturb * torch.randn(M.shape[1:], generator=gen, dtype=M.dtype)
    meta = {
        "group": G.name,
        "rep": _rep_name(args.rep, args.copies),
        "clustering": json.dumps(clustering.to_dict()),
        "perturb": str(args.perturb),
    }
    save_tensors(args.out, {"M": M, "R": R}, metadata=meta)
    print(f"wrote {args.out}: {args.heads} heads on R^{M.shape[-1]} for clustering [{args.index}]")
    print("  " + clustering.describe().replace("\n", "\n  "))
    return 0
