"""``paramsym group ...``: inspect a finite group and decompose a representation of it.

::

    paramsym group D4                      # classes, character table, real irreps, R[G]
    paramsym group "perm:[[1,0,2],[1,2,0]]" --rep perm
    paramsym group Q8 --rep copies:3 --subgroups --json

The command is a typed configuration, :class:`DescribeConfig` (flags mapped by
:func:`paramsym.options.config_from_flags`), and one computation, :func:`describe_outputs`
(``--json`` data and the printed text); the run kind ``group``
(:mod:`paramsym.kinds.math`, ``paramsym group ... --out DIR``) runs the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .memory import MemoryBudget

__all__ = ["DescribeConfig", "describe", "describe_config", "describe_outputs", "describe_text", "register"]

_GROUP_HELP = (
    "a name (C6, Z5, D4 = order 8, S3, S4, A4, A5, Q8, V4, C2xC3, D4xC2, ...), generators as "
    "0-based permutations perm:[[1,2,0],[1,0,2]], as matrices mat:[[[0,-1],[1,0]]], or a JSON file "
    "{\"permutations\": [...]} / {\"matrices\": [...]}"
)
_REP_HELP = ("representation to decompose: regular (default), perm, trivial, copies:C (C x regular), or a "
             ".json/.safetensors file with 'matrices' or 'generators'")


@dataclass(frozen=True)
class DescribeConfig:
    """``paramsym group``: describe a finite group and decompose one of its real representations.

    Attributes:
        group: the group spec (``GROUP``: a name, ``perm:[...]``, ``mat:[...]``, a JSON file).
        rep: the representation to decompose (``--rep``).
        subgroups: also list subgroups up to conjugacy.
        max_memory: budget for dense representation matrices (``None``: 2 GiB).
    """

    group: str = "D4"
    rep: str = "regular"
    subgroups: bool = False
    max_memory: MemoryBudget | None = None

    @classmethod
    def quick(cls) -> DescribeConfig:
        """S3 and its regular representation (milliseconds)."""
        return cls(group="S3")

    def validate(self) -> DescribeConfig:
        """Raises :class:`ConfigError` naming the first bad field."""
        for name in ("group", "rep"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ConfigError(f"{name} must be a nonempty spec string; received {getattr(self, name)!r}.")
        if self.max_memory is not None:
            MemoryBudget(self.max_memory, "max_memory")
        return self


#: the flags of ``paramsym group`` → config fields (``GROUP`` is the positional argument)
DESCRIBE_FLAGS = {"max_memory": lambda raw, flag: MemoryBudget(raw, flag), "group": None, "rep": None,
                  "subgroups": None}


def describe_config(args: argparse.Namespace) -> DescribeConfig:
    """The configuration of ``paramsym group`` from its parsed arguments."""
    from ..options import config_from_flags

    return config_from_flags(DescribeConfig(), args, DESCRIBE_FLAGS).validate()


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``paramsym group`` to ``subparsers``; return its parser (the command line adds
    ``--out``/``--resume``). ``GROUP`` is checked by the command, with argparse's message, so that
    ``--resume DIR`` can stand without it."""
    p = subparsers.add_parser(
        "group", help="finite group: classes, character table, real irreps, decompositions",
        description="Describe a finite group and decompose one of its real representations.",
    )
    p.add_argument("group", nargs="?", default=None, help=_GROUP_HELP)
    p.add_argument("--rep", default=None, help=_REP_HELP + " (default: regular)")
    p.add_argument("--subgroups", action="store_true", help="also list subgroups up to conjugacy")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--max-memory", default=None,
                   help="memory budget for dense representation matrices, e.g. 8GiB (default 2GiB)")
    p.add_argument("--quiet", action="store_true", help="no progress bars on stderr")
    p.set_defaults(func=_run, parser=p, required=("group",))
    return p


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


def describe_text(info: dict[str, Any]) -> str:
    """What ``paramsym group`` prints for the description :func:`describe` returns."""
    lines = [f"{info['group']}: order {info['order']}, generators {', '.join(info['generators'])}; "
             f"{len(info['classes'])} conjugacy classes; {info['num_subgroups']} subgroups in "
             f"{info['num_subgroup_classes']} conjugacy classes"]
    heads = ["{" + ", ".join(c[:3]) + (", ..." if len(c) > 3 else "") + "}" for c in info["classes"]]
    lines.append("classes: " + "  ".join(heads))
    width = max(len(v) for row in info["character_table"] for v in row) + 1
    lines.append("complex character table (rows: characters, FS indicator last):")
    for row, nu in zip(info["character_table"], info["fs_indicators"]):
        lines.append("  " + "".join(v.rjust(width) for v in row) + f"   [{nu:+d}]")
    lines.append("real irreducibles: " + ", ".join(f"{r['name']} (dim {r['dim']}, {r['type']})"
                                                   for r in info["real_irreps"]))
    r = info["representation"]
    lines.append(f"{r['spec']} (dim {r['dim']}) = {r['decomposition']}   "
                 f"[orthogonality {r['orthogonality_error']:.1e}, equivariance {r['equivariance_error']:.1e}]")
    for s in info.get("subgroup_classes", []):
        lines.append(f"  subgroup of order {s['order']:3d} x{s['conjugates']} conjugates: "
                     + "{" + ", ".join(s["representative"]) + "}")
    return "\n".join(lines) + "\n"


def describe_outputs(cfg: DescribeConfig, *, progress: bool = False) -> tuple[dict[str, Any], str]:
    """``(description, text)`` of ``cfg`` (:func:`describe`, :func:`describe_text`)."""
    from .finite import FiniteGroup

    cfg.validate()
    group = FiniteGroup.parse(cfg.group, argument="GROUP")
    info = describe(group, cfg.rep, cfg.subgroups, max_memory=cfg.max_memory, progress=progress)
    return info, describe_text(info)


def _run(args) -> int:
    if args.group is None:  # argparse's own message and exit status (the command line's --resume needs no GROUP)
        args.parser.error("the following arguments are required: group")
    info, text = describe_outputs(describe_config(args), progress=not args.quiet)
    if args.json:
        json.dump(info, sys.stdout, indent=1)
        print()
        return 0
    print(text, end="")
    return 0
