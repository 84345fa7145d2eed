"""``paramsym group ...``: inspect a finite group and decompose a representation of it.

::

    paramsym group D4                      # classes, character table, real irreps, R[G]
    paramsym group "perm:[[1,0,2],[1,2,0]]" --rep perm
    paramsym group Q8 --rep copies:3 --subgroups --json
"""

from __future__ import annotations

import json
import sys

__all__ = ["register", "describe"]

_GROUP_HELP = (
    "a name (C6, Z5, D4 = order 8, S3, S4, A4, A5, Q8, V4, C2xC3, D4xC2, ...), generators as "
    "0-based permutations perm:[[1,2,0],[1,0,2]], as matrices mat:[[[0,-1],[1,0]]], or a JSON file "
    "{\"permutations\": [...]} / {\"matrices\": [...]}"
)
_REP_HELP = ("representation to decompose: regular (default), perm, trivial, copies:C (C x regular), or a "
             ".json/.safetensors file with 'matrices' or 'generators'")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "group", help="finite group: classes, character table, real irreps, decompositions",
        description="Describe a finite group and decompose one of its real representations.",
    )
    p.add_argument("group", help=_GROUP_HELP)
    p.add_argument("--rep", default="regular", help=_REP_HELP)
    p.add_argument("--subgroups", action="store_true", help="also list subgroups up to conjugacy")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--max-memory", default=None,
                   help="memory budget for dense representation matrices, e.g. 8GiB (default 2GiB)")
    p.add_argument("--quiet", action="store_true", help="no progress bars on stderr")
    p.set_defaults(func=_run)


def _fmt(z: complex) -> str:
    re_, im = round(z.real, 4) + 0.0, round(z.imag, 4) + 0.0
    if im == 0:
        return f"{re_:g}"
    return f"{re_:g}{im:+g}i" if re_ else f"{im:g}i"


def describe(group, rep_spec: str = "regular", subgroups: bool = False, *,
             max_memory: int | None = None, progress: bool = False) -> dict:
    """A JSON-able description: classes, character table, real irreps, a decomposition.

    ``max_memory`` (bytes) bounds the dense representation (:mod:`paramsym.groups.memory`);
    ``progress`` shows progress bars on stderr (TTY only).
    """
    from .characters import character_table
    from .decompose import decompose
    from .irreps import real_irreps

    classes = group.conjugacy_classes()
    table = character_table(group)
    from .reps import Representation

    rep = Representation.parse(group, rep_spec, max_memory=max_memory)  # budget first: refuse before long work
    irr = real_irreps(group, progress=progress)
    dec = decompose(rep, progress=progress)
    out = {
        "group": group.name,
        "order": group.order,
        "generators": [group.label(s) for s in group.generators],
        "classes": [[group.label(x) for x in c] for c in classes],
        "character_table": [[_fmt(v) for v in row] for row in table.values],
        "fs_indicators": table.fs_indicators.tolist(),
        "real_irreps": [{"name": r.name, "dim": r.dim, "type": r.type, "fs_indicator": r.fs_indicator}
                        for r in irr],
        "num_subgroups": len(group.subgroups()),
        "num_subgroup_classes": len(group.subgroup_classes()),
        "representation": {"spec": rep_spec, "dim": rep.dim, "decomposition": dec.summary(),
                           "multiplicities": dec.multiplicities,
                           "orthogonality_error": dec.orthogonality_error,
                           "equivariance_error": dec.equivariance_error},
    }
    if subgroups:
        out["subgroup_classes"] = [
            {"order": len(cls[0]), "conjugates": len(cls),
             "representative": [group.label(x) for x in sorted(cls[0])]}
            for cls in group.subgroup_classes()
        ]
    return out


def _run(args) -> int:
    from .finite import FiniteGroup
    from .memory import parse_memory

    budget = None if args.max_memory is None else parse_memory(args.max_memory)
    group = FiniteGroup.parse(args.group, argument="GROUP")
    info = describe(group, args.rep, args.subgroups, max_memory=budget, progress=not args.quiet)
    if args.json:
        json.dump(info, sys.stdout, indent=1)
        print()
        return 0
    print(f"{info['group']}: order {info['order']}, generators {', '.join(info['generators'])}; "
          f"{len(info['classes'])} conjugacy classes; {info['num_subgroups']} subgroups in "
          f"{info['num_subgroup_classes']} conjugacy classes")
    heads = ["{" + ", ".join(c[:3]) + (", ..." if len(c) > 3 else "") + "}" for c in info["classes"]]
    print("classes:", "  ".join(heads))
    width = max(len(v) for row in info["character_table"] for v in row) + 1
    print("complex character table (rows: characters, FS indicator last):")
    for row, nu in zip(info["character_table"], info["fs_indicators"]):
        print("  " + "".join(v.rjust(width) for v in row) + f"   [{nu:+d}]")
    print("real irreducibles:", ", ".join(f"{r['name']} (dim {r['dim']}, {r['type']})" for r in info["real_irreps"]))
    r = info["representation"]
    print(f"{r['spec']} (dim {r['dim']}) = {r['decomposition']}   "
          f"[orthogonality {r['orthogonality_error']:.1e}, equivariance {r['equivariance_error']:.1e}]")
    for s in info.get("subgroup_classes", []):
        print(f"  subgroup of order {s['order']:3d} x{s['conjugates']} conjugates: "
              + "{" + ", ".join(s["representative"]) + "}")
    return 0
