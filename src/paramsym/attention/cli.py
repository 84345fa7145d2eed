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

    # numeric options are read as text and validated by the command (named one-line errors)
    c = sub.add_parser("count", help="c_{G,d}(V) and the Theorem 9 bound for V = R^C ⊗ rho")
    c.add_argument("--group", required=True, help=_GROUP_HELP)
    c.add_argument("--copies", default="1", help="number of copies C >= 1 of rho (default 1)")
    c.add_argument("--heads", required=True, help="number of heads |H| >= 1 (divides dim V)")
    c.add_argument("--rep", default="regular", help=_REP_HELP)
    c.add_argument("--json", action="store_true", help="print JSON (keys include c and bound)")
    _budget_options(c)
    c.set_defaults(func=_cmd_count)

    t = sub.add_parser("table", help="table of c and the bound over a range of copies C")
    t.add_argument("--group", required=True, help=_GROUP_HELP)
    t.add_argument("--copies", default="1..12", help="copies >= 1, e.g. 1..12 or 1..10,96")
    t.add_argument("--heads", default="8", help="number of heads >= 1 (default 8)")
    t.add_argument("--rep", default="regular", help=_REP_HELP)
    t.add_argument("--format", choices=["markdown", "json"], default="markdown")
    t.add_argument("--json", action="store_true", help="same as --format json")
    t.add_argument("--out", default=None, help="also write a run directory here (with a figure)")
    _budget_options(t)
    t.set_defaults(func=_cmd_table)

    k = sub.add_parser("clusterings", help="partial G-clusterings of a set of heads")
    k.add_argument("--group", required=True, help=_GROUP_HELP)
    k.add_argument("--heads", required=True, help="number of heads >= 1")
    k.add_argument(
        "--up-to",
        choices=["isomorphism", "relabelling"],
        default="isomorphism",
        help="isomorphism (labelled heads, the paper's count) or relabelling of heads too",
    )
    k.add_argument("--count-only", action="store_true", help="count without listing")
    k.add_argument("--limit", default="10000",
                   help="list at most this many clusterings (>= 0; the count is always exact)")
    k.add_argument("--json", action="store_true", help="print JSON (keys count, clusterings)")
    k.add_argument("--max-memory", default=None,
                   help="memory budget of the exact counts, e.g. 8GiB (default 2GiB); a larger estimate stops "
                   "with TooLargeError before any work")
    k.set_defaults(func=_cmd_clusterings)

    f = sub.add_parser("classify", help="recover the partial G-clustering of a layer, or say what fails")
    f.add_argument("weights", help="safetensors: RMHSA 'M','R' or nn.MultiheadAttention weights")
    f.add_argument("--group", required=True, help=_GROUP_HELP)
    f.add_argument("--rep", default="regular", help=_REP_HELP)
    f.add_argument("--copies", default="1", help="take the representation C >= 1 times")
    f.add_argument("--num-heads", default=None, help="heads (>= 1) of MultiheadAttention weights (else metadata)")
    f.add_argument("--tol", default=None, help="relative tolerance > 0 (default by stored dtype: 1e-9 float64, 1e-5 float32, 1e-2 16-bit)")
    f.add_argument("--bias-tol", default="0", help="largest query-bias entry treated as zero (>= 0)")
    f.add_argument("--seed", default="0", help="seed (>= 0) of the numerical equivariance check")
    f.add_argument("--json", action="store_true")
    _budget_options(f)
    f.set_defaults(func=_cmd_classify)

    b = sub.add_parser("build", help="write a random equivariant RMHSA for a clustering (safetensors)")
    b.add_argument("--group", required=True, help=_GROUP_HELP)
    b.add_argument("--heads", required=True, help="number of heads >= 1")
    b.add_argument("--index", required=True, help="clustering index (>= 0) as listed by `clusterings`")
    b.add_argument("--rep", default="regular", help=_REP_HELP)
    b.add_argument("--copies", default="1", help="take the representation C >= 1 times")
    b.add_argument("--seed", default="0", help="seed (>= 0)")
    b.add_argument("--perturb", default="0", help="add this much noise (finite) to M of head 0")
    b.add_argument("--out", required=True, help="output .safetensors file (must not exist unless --overwrite)")
    b.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    _budget_options(b)
    b.set_defaults(func=_cmd_build)


def _budget_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-memory", default=None,
                   help="memory budget for dense representation matrices, e.g. 8GiB (default 2GiB)")
    p.add_argument("--quiet", action="store_true", help="no progress bars or notes on stderr")


# ------------------------------------------------------------------------------ validation
def _int_option(args: argparse.Namespace, name: str, minimum: int, maximum: int | None = None) -> int:
    """``args.<name>`` as an integer in ``[minimum, maximum]`` (:func:`paramsym.options.int_option`;
    ``--seed``: :func:`paramsym.options.seed_option`), else a named one-line :class:`ConfigError`."""
    from ..options import int_option, seed_option

    flag = "--" + name.replace("_", "-")
    if name == "seed":
        return seed_option(getattr(args, name), flag)
    return int_option(getattr(args, name), flag, minimum, maximum)


def _float_option(args: argparse.Namespace, name: str, *, positive: bool = False,
                  nonnegative: bool = False) -> float:
    """``args.<name>`` as a finite float (``> 0`` or ``>= 0`` if asked), else :class:`ConfigError`
    (:func:`paramsym.options.float_option`)."""
    from ..options import float_option

    flag = "--" + name.replace("_", "-")
    if positive or nonnegative:
        return float_option(getattr(args, name), flag, minimum=0.0, exclusive=positive)
    return float_option(getattr(args, name), flag)


def _max_memory(args: argparse.Namespace) -> int | None:
    from ..groups.memory import parse_memory

    raw = getattr(args, "max_memory", None)
    return None if raw is None else parse_memory(raw)


def _progress(args: argparse.Namespace) -> bool:
    return not getattr(args, "quiet", False)


def _json_default(obj):
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2, default=_json_default))


def _rep_name(spec: str, copies: int) -> str:
    return spec if copies == 1 else f"{copies} x {spec}"


# ------------------------------------------------------------------------------ count / table
def _cmd_count(args: argparse.Namespace) -> int:
    from ..groups.finite import FiniteGroup
    from ..groups.reps import Representation
    from .components import component_count, format_scientific

    heads = _int_option(args, "heads", 1)
    copies = _int_option(args, "copies", 1)
    budget = _max_memory(args)
    G = FiniteGroup.parse(args.group)
    rep = Representation.parse(G, args.rep, max_memory=budget, progress=_progress(args))
    res = component_count(rep, heads, copies=copies, rep_name=args.rep, progress=_progress(args), max_memory=budget)
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
    from ..errors import ConfigError, ShapeError
    from .components import parse_range
    from .report import AttentionTableConfig, rows_markdown, run, table

    heads = _int_option(args, "heads", 1)
    try:
        copies = parse_range(args.copies)
    except ShapeError as exc:
        raise ConfigError(f"--copies: {exc}") from None
    if min(copies) < 1:
        raise ConfigError(f"--copies {args.copies!r}: every number of copies must be >= 1.")
    cfg = AttentionTableConfig(group=args.group, rep=args.rep, copies=copies, heads=heads,
                               max_memory=_max_memory(args))
    if args.out:
        try:
            summary = run(cfg, args.out, progress=_progress(args))
        except OSError as exc:
            raise _output_error(args.out, exc, "run directory") from None
        print(f"wrote run directory {args.out}", file=sys.stderr)
    else:
        summary = table(cfg, progress=_progress(args))
    if args.format == "json" or args.json:
        _print_json(summary)
    else:
        print(f"c_(G,d)(R^C ⊗ {args.rep}) for G = {summary['group']}, {heads} heads, d = dim V / {heads}\n")
        print(rows_markdown(summary["rows"]))
    return 0


def _output_error(path: str, exc: OSError, what: str):
    from ..errors import OutputFileError

    reason = exc.strerror or type(exc).__name__
    return OutputFileError(
        f"cannot write the {what} {path!r}: {reason}. Choose a path in a directory you can "
        "write to (or fix its permissions)."
    )


# ------------------------------------------------------------------------------ clusterings
def _cmd_clusterings(args: argparse.Namespace) -> int:
    import itertools

    from ..groups.finite import FiniteGroup
    from .clusterings import count_partial_clusterings, enumerate_partial_clusterings

    heads = _int_option(args, "heads", 1)
    limit = _int_option(args, "limit", 0)
    G = FiniteGroup.parse(args.group)
    n = count_partial_clusterings(G, heads, up_to=args.up_to, max_memory=_max_memory(args))
    listing = None
    if not args.count_only and args.up_to == "isomorphism":
        # the first `limit` clusterings in enumeration order (lazily; the count is exact anyway)
        listing = list(itertools.islice(enumerate_partial_clusterings(G, heads, limit=max(n, 1)), min(limit, n)))
    truncated = listing is not None and len(listing) < n
    if args.json:
        out = {"group": G.name, "heads": heads, "up_to": args.up_to, "count": n}
        if listing is not None:
            out["clusterings"] = [c.to_dict() for c in listing]
            out["listed"] = len(listing)
            out["truncated"] = truncated
        _print_json(out)
        return 0
    what = "up to isomorphism" if args.up_to == "isomorphism" else "up to relabelling of heads"
    print(f"{n} partial {G.name}-clusterings of {heads} heads ({what})")
    if listing is not None:
        for i, c in enumerate(listing):
            print(f"\n[{i}]")
            print("  " + c.describe().replace("\n", "\n  "))
        if truncated:
            print(f"\n(listed the first {len(listing)} of {n}; raise --limit to list more)")
    return 0


# ------------------------------------------------------------------------------ classify
def _cmd_classify(args: argparse.Namespace) -> int:
    import numpy as np
    import torch

    from ..groups.finite import FiniteGroup
    from ..groups.reps import Representation
    from .equivariance import equivariance_errors
    from .loading import load_weights
    from .structure import default_rtol, recover_clustering

    copies = _int_option(args, "copies", 1)
    num_heads = None if args.num_heads is None else _int_option(args, "num_heads", 1)
    tol = None if args.tol is None else _float_option(args, "tol", positive=True)
    bias_tol = _float_option(args, "bias_tol", nonnegative=True)
    seed = _int_option(args, "seed", 0, 2**64 - 1)
    G = FiniteGroup.parse(args.group)
    rep = Representation.parse(G, args.rep, copies, max_memory=_max_memory(args), progress=_progress(args))
    w = load_weights(args.weights, num_heads=num_heads, bias_tol=bias_tol)
    rtol = tol if tol is not None else default_rtol(w.stored_dtype or w.M.dtype)
    rec = recover_clustering(w.M, w.R, rep, rtol=rtol)
    gen = torch.Generator().manual_seed(seed)
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
        "rep": _rep_name(args.rep, copies),
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
        from ..runs import _jsonable  # tensors and non-finite floats (torch is loaded here anyway)

        _print_json(_jsonable(result))
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
def _check_out_file(path: str, overwrite: bool) -> None:
    """Refuse an ``--out`` that is a directory, or an existing file without ``--overwrite``,
    before any work is done."""
    import os

    from ..errors import OutputFileError

    if os.path.isdir(path):
        raise OutputFileError(f"--out {path!r} is a directory; give a file path such as {os.path.join(path, 'layer.safetensors')!r}.")
    if os.path.lexists(path) and not overwrite:
        raise OutputFileError(f"--out {path!r} already exists; choose a new path or pass --overwrite to replace it.")
    parent = os.path.dirname(os.path.abspath(path))
    probe = parent
    while not os.path.exists(probe):  # the nearest existing ancestor must be a writable directory
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise OutputFileError(f"--out {path!r}: {probe!r} is a file, not a directory; choose another path.")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise OutputFileError(f"--out {path!r}: the directory {probe!r} is not writable; choose a path in a directory you can write to.")


def _cmd_build(args: argparse.Namespace) -> int:
    import itertools

    import torch

    from ..errors import ShapeError
    from ..groups.finite import FiniteGroup
    from ..groups.reps import Representation
    from ..runs import save_tensors
    from .clusterings import count_partial_clusterings, enumerate_partial_clusterings
    from .structure import build_equivariant_rmhsa

    heads = _int_option(args, "heads", 1)
    index = _int_option(args, "index", 0)
    copies = _int_option(args, "copies", 1)
    seed = _int_option(args, "seed", 0, 2**64 - 1)
    perturb = _float_option(args, "perturb")
    _check_out_file(args.out, args.overwrite)
    G = FiniteGroup.parse(args.group)
    rep = Representation.parse(G, args.rep, copies, max_memory=_max_memory(args), progress=_progress(args))
    total = count_partial_clusterings(G, heads, max_memory=_max_memory(args))
    if not 0 <= index < total:
        raise ShapeError(f"--index {index}: there are {total} clusterings, indices 0..{total - 1}.")
    clustering = next(itertools.islice(enumerate_partial_clusterings(G, heads, limit=max(total, 1)), index, None))
    gen = torch.Generator().manual_seed(seed)
    M, R = build_equivariant_rmhsa(clustering, rep, generator=gen)
    if perturb:
        M = M.clone()
        M[0] += perturb * torch.randn(M.shape[1:], generator=gen, dtype=M.dtype)
    meta = {
        "group": G.name,
        "rep": _rep_name(args.rep, copies),
        "clustering": json.dumps(clustering.to_dict()),
        "perturb": str(perturb),
    }
    try:
        save_tensors(args.out, {"M": M, "R": R}, metadata=meta)
    except OSError as exc:
        raise _output_error(args.out, exc, "output file") from None
    print(f"wrote {args.out}: {heads} heads on R^{M.shape[-1]} for clustering [{index}]")
    print("  " + clustering.describe().replace("\n", "\n  "))
    return 0
