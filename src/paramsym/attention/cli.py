"""``paramsym attention ...``: count components, list clusterings, classify and build layers.

Sub-commands::

    paramsym attention count --group D4 --copies 96 --heads 8 [--rep regular] [--json]
    paramsym attention table --group D4 --copies 1..12 [--heads 8] [--format markdown|json]
    paramsym attention clusterings --group C6 --heads 3 [--up-to relabelling] [--count-only] [--json]
    paramsym attention classify WEIGHTS --group D4 [--rep regular|copies:C|FILE] [--json]
    paramsym attention build --group D4 --heads 3 --index K --out DIR [--rep ...] [--perturb EPS]

The computations and their typed configurations are :mod:`paramsym.attention.commands`; this
module maps the flags onto them and prints. ``count``, ``table``, ``clusterings``,
``classify`` and ``build`` are run kinds: the command line (:mod:`paramsym.cli.pure`) adds ``--out DIR`` /
``--resume DIR`` to them, which write a run directory; ``build`` (:mod:`paramsym.attention.build`)
needs one, and writes its layer there as ``layer.safetensors``.
"""

from __future__ import annotations

import argparse
import json

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


def register(subparsers) -> dict[str, argparse.ArgumentParser]:
    """Add ``paramsym attention`` and its sub-commands to ``subparsers``; return the sub-command
    parsers by name (the command line adds ``--out``/``--resume`` to those that are run kinds).

    The arguments a sub-command needs (``--group``, ``--heads``, ``WEIGHTS``) are checked by the
    command (:func:`require`, argparse's message) rather than by argparse, so that ``--resume DIR``
    can stand without them.
    """
    p = subparsers.add_parser(
        "attention",
        help="equivariant attention: component counts, partial G-clusterings, classify a layer",
        description="Equivariant multi-head self-attention (structure theorem, Theorem 9).",
    )
    p.set_defaults(func=lambda args: (p.print_help(), 1)[1])
    sub = p.add_subparsers(dest="attention_command", metavar="SUBCOMMAND")

    # numeric options are read as text and validated by the command (named one-line errors); options
    # without a value given stay None (the configuration's default applies: paramsym.options.config_from_flags)
    c = sub.add_parser("count", help="c_{G,d}(V) and the Theorem 9 bound for V = R^C ⊗ rho")
    c.add_argument("--group", default=None, help=_GROUP_HELP + " (required)")
    c.add_argument("--copies", default=None, help="number of copies C >= 1 of rho (default 1)")
    c.add_argument("--heads", default=None, help="number of heads |H| >= 1 (divides dim V) (required)")
    c.add_argument("--rep", default=None, help=_REP_HELP)
    c.add_argument("--json", action="store_true", help="print JSON (keys include c and bound)")
    _budget_options(c)
    c.set_defaults(func=_cmd_count, required=("--group", "--heads"), parser=c)

    t = sub.add_parser("table", help="table of c and the bound over a range of copies C")
    t.add_argument("--group", default=None, help=_GROUP_HELP + " (required)")
    t.add_argument("--copies", default=None, help="copies >= 1, e.g. 1..12 or 1..10,96 (default 1..12)")
    t.add_argument("--heads", default=None, help="number of heads >= 1 (default 8)")
    t.add_argument("--rep", default=None, help=_REP_HELP)
    t.add_argument("--format", choices=["markdown", "json"], default="markdown")
    t.add_argument("--json", action="store_true", help="same as --format json")
    _budget_options(t)
    t.set_defaults(func=_cmd_table, required=("--group",), parser=t)

    k = sub.add_parser("clusterings", help="partial G-clusterings of a set of heads")
    k.add_argument("--group", default=None, help=_GROUP_HELP + " (required)")
    k.add_argument("--heads", default=None, help="number of heads >= 1 (required)")
    k.add_argument(
        "--up-to",
        choices=["isomorphism", "relabelling"],
        default=None,
        help="isomorphism (labelled heads, the paper's count; default) or relabelling of heads too",
    )
    k.add_argument("--count-only", action="store_true", help="count without listing")
    k.add_argument("--limit", default=None,
                   help="list at most this many clusterings (>= 0; default 10000; the count is always exact)")
    k.add_argument("--json", action="store_true", help="print JSON (keys count, clusterings)")
    k.add_argument("--max-memory", default=None,
                   help="memory budget of the exact counts, e.g. 8GiB (default 2GiB); a larger estimate stops "
                   "with TooLargeError before any work")
    k.add_argument("--quiet", action="store_true", help="no progress bars or notes on stderr")
    k.set_defaults(func=_cmd_clusterings, required=("--group", "--heads"), parser=k)

    f = sub.add_parser("classify", help="recover the partial G-clustering of a layer, or say what fails")
    f.add_argument("weights", nargs="?", default=None,
                   help="safetensors: RMHSA 'M','R' or nn.MultiheadAttention weights (required)")
    f.add_argument("--group", default=None, help=_GROUP_HELP + " (required)")
    f.add_argument("--rep", default=None, help=_REP_HELP)
    f.add_argument("--copies", default=None, help="take the representation C >= 1 times (default 1)")
    f.add_argument("--num-heads", default=None, help="heads (>= 1) of MultiheadAttention weights (else metadata)")
    f.add_argument("--tol", default=None, help="relative tolerance > 0 (default by stored dtype: 1e-9 float64, 1e-5 float32, 1e-2 16-bit)")
    f.add_argument("--bias-tol", default=None, help="largest query-bias entry treated as zero (>= 0; default 0)")
    f.add_argument("--seed", default=None, help="seed (>= 0) of the numerical equivariance check (default 0)")
    f.add_argument("--json", action="store_true")
    _budget_options(f)
    f.set_defaults(func=_cmd_classify, required=("weights", "--group"), parser=f)

    b = sub.add_parser("build", help="write a random equivariant RMHSA for a clustering (DIR/layer.safetensors)")
    b.add_argument("--group", default=None, help=_GROUP_HELP + " (required)")
    b.add_argument("--heads", default=None, help="number of heads >= 1 (required)")
    b.add_argument("--index", default=None, help="clustering index (>= 0) as listed by `clusterings` (required)")
    b.add_argument("--rep", default=None, help=_REP_HELP)
    b.add_argument("--copies", default=None, help="take the representation C >= 1 times (default 1)")
    b.add_argument("--seed", default=None, help="seed (>= 0; default 0)")
    b.add_argument("--perturb", default=None, help="add this much noise (finite) to M of head 0 (default 0)")
    b.add_argument("--json", action="store_true", help="print JSON (the layer's group, heads, dim, clustering, sha256)")
    _budget_options(b)
    b.set_defaults(func=_cmd_build, required=("--group", "--heads", "--index"), parser=b)
    return {"count": c, "table": t, "clusterings": k, "classify": f, "build": b}


def require(args: argparse.Namespace) -> None:
    """Stop with argparse's usage error (one line, exit status 2) when an argument the command
    needs (``args.required``: option strings or positional names) was not given."""
    missing = [name for name in getattr(args, "required", ()) if getattr(args, name.lstrip("-").replace("-", "_")) is None]
    if missing:
        args.parser.error(f"the following arguments are required: {', '.join(missing)}")


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


# ------------------------------------------------------------------------------ count / table / clusterings / classify
def _print_outputs(args: argparse.Namespace, config, outputs, *, as_json: bool) -> int:
    """Run one computation of :mod:`paramsym.attention.commands`: check the required arguments,
    build the configuration with ``config(args)``, run ``outputs(cfg, progress=...)`` and print
    its JSON result (``as_json``) or its text; return exit status 0."""
    require(args)
    result, text = outputs(config(args), progress=_progress(args))
    if as_json:
        _print_json(result)
    else:
        print(text, end="")
    return 0


def _cmd_count(args: argparse.Namespace) -> int:
    from .commands import count_config, count_outputs

    return _print_outputs(args, count_config, count_outputs, as_json=args.json)


def _cmd_table(args: argparse.Namespace) -> int:
    from .commands import table_config, table_outputs

    return _print_outputs(args, table_config, table_outputs, as_json=args.format == "json" or args.json)


def _cmd_clusterings(args: argparse.Namespace) -> int:
    from .commands import clusterings_config, clusterings_outputs

    return _print_outputs(args, clusterings_config, clusterings_outputs, as_json=args.json)


def _cmd_classify(args: argparse.Namespace) -> int:
    from .commands import classify_config, classify_outputs

    return _print_outputs(args, classify_config, classify_outputs, as_json=args.json)


# ------------------------------------------------------------------------------ build
def _cmd_build(args: argparse.Namespace) -> int:
    """``attention build`` without ``--out``: the layer is a run directory's file, so ``--out DIR`` is required."""
    from ..errors import ConfigError

    raise ConfigError("attention build writes a run directory: pass --out DIR (the layer is written to "
                      "DIR/layer.safetensors), or --resume DIR.")
