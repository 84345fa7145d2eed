"""The ``paramsym attention count|clusterings|classify`` computations as typed configurations.

Each command is a configuration dataclass (with ``quick()`` and ``validate()``) and one function
``<command>_outputs(cfg, *, progress) -> (result, text)``: ``result`` is what ``--json`` prints
(JSON data), ``text`` what the command prints otherwise. :mod:`paramsym.attention.cli` maps the
flags onto the configuration (:func:`paramsym.options.config_from_flags`, by
:func:`count_config` etc.) and prints; the run kinds ``attention-count``,
``attention-clusterings`` and ``attention-classify``
(:mod:`paramsym.kinds.math`) run the same function into a run directory
(``paramsym attention count ... --out DIR``). The component table is
:class:`~paramsym.attention.report.AttentionTableConfig` (:func:`table_outputs`).

Pure math: nothing here imports torch at module level (``classify`` loads weights with it).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..groups.memory import MemoryBudget

__all__ = ["ClassifyConfig", "ClusteringsConfig", "CountConfig", "classify_config", "classify_outputs",
           "clusterings_config", "clusterings_outputs", "count_config", "count_outputs", "table_config",
           "table_outputs", "table_text"]


def _budget(raw: Any, flag: str) -> MemoryBudget:
    return MemoryBudget(raw, flag)


def _int(minimum: int, maximum: int | None = None):
    from ..options import int_option

    return lambda raw, flag: int_option(raw, flag, minimum, maximum)


def _seed(raw: Any, flag: str) -> int:
    from ..options import seed_option

    return seed_option(raw, flag)


def _check_spec(cfg: Any, name: str) -> None:
    value = getattr(cfg, name)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} must be a nonempty spec string; received {value!r}.")


def _check_budget(cfg: Any) -> None:
    if cfg.max_memory is not None:
        MemoryBudget(cfg.max_memory, "max_memory")


def _check_specs(cfg: Any) -> None:
    _check_spec(cfg, "group")
    _check_spec(cfg, "rep")
    _check_budget(cfg)


def _check_int(cfg: Any, name: str, minimum: int) -> None:
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}; received {value!r}.")


# ------------------------------------------------------------------------------ count
@dataclass(frozen=True)
class CountConfig:
    """``paramsym attention count``: ``c_(G,d)(V)`` and the Theorem 9 bound for ``V = R^C ⊗ ρ``.

    Attributes:
        group: group spec (``--group``: a name, ``perm:[...]``, a file).
        rep: representation ``ρ`` on tokens (``--rep``).
        copies: ``C >= 1``.
        heads: ``|H| >= 1`` (divides ``dim V``).
        max_memory: budget for dense representation matrices (``None``: 2 GiB).
    """

    group: str = "D4"
    rep: str = "regular"
    copies: int = 1
    heads: int = 8
    max_memory: MemoryBudget | None = None

    @classmethod
    def quick(cls) -> CountConfig:
        """C4 on one copy of its regular representation with 2 heads (milliseconds)."""
        return cls(group="C4", heads=2)

    def validate(self) -> CountConfig:
        """Raises :class:`ConfigError` naming the first bad field."""
        _check_specs(self)
        _check_int(self, "heads", 1)
        _check_int(self, "copies", 1)
        return self


#: the flags of ``attention count`` → config fields, in the order they are checked
COUNT_FLAGS = {"heads": _int(1), "copies": _int(1), "max_memory": _budget, "group": None, "rep": None}


def count_config(args: argparse.Namespace) -> CountConfig:
    """The configuration of ``paramsym attention count`` from its parsed flags."""
    from ..options import config_from_flags

    return config_from_flags(CountConfig(), args, COUNT_FLAGS).validate()


def count_outputs(cfg: CountConfig, *, progress: bool = False) -> tuple[dict[str, Any], str]:
    """``(ComponentCount.to_dict(), text)`` of ``cfg``."""
    from ..groups.finite import FiniteGroup
    from ..groups.reps import Representation
    from .components import component_count, format_scientific

    cfg.validate()
    G = FiniteGroup.parse(cfg.group)
    rep = Representation.parse(G, cfg.rep, max_memory=cfg.max_memory, progress=progress)
    res = component_count(rep, cfg.heads, copies=cfg.copies, rep_name=cfg.rep, progress=progress,
                          max_memory=cfg.max_memory)
    content = " ⊕ ".join(f"{m if m > 1 else ''}{n}" for n, _, m in res.irreps)
    cf = "" if res.closed_form is None else f"   (D4 closed form: {res.closed_form})"
    b = res.bound
    text = "\n".join([
        f"group {res.group}, V = R^{res.copies} ⊗ {cfg.rep} (dim {res.dim_v}), {res.heads} heads, "
        f"head dimension d = {res.d}",
        f"V = {content}",
        f"c_(G,d)(V) = {res.c}{cf}",
        f"Theorem 9 bound c^{2 * res.heads}/{res.heads}! = {format_scientific(b)}   (exact: "
        f"{b.numerator}{'' if b.denominator == 1 else '/' + str(b.denominator)})",
    ]) + "\n"
    return res.to_dict(), text


# ------------------------------------------------------------------------------ table
def _copies(raw: Any, flag: str) -> list[int]:
    from ..errors import ShapeError
    from .components import parse_range

    try:
        copies = parse_range(raw)
    except ShapeError as exc:
        raise ConfigError(f"{flag}: {exc}") from None
    if min(copies) < 1:
        raise ConfigError(f"{flag} {raw!r}: every number of copies must be >= 1.")
    return copies


#: the flags of ``attention table`` → config fields
TABLE_FLAGS = {"heads": _int(1), "copies": _copies, "group": None, "rep": None, "max_memory": _budget}


def table_config(args: argparse.Namespace):
    """The :class:`~paramsym.attention.report.AttentionTableConfig` of ``paramsym attention table``."""
    from ..options import config_from_flags
    from .report import AttentionTableConfig

    cfg = config_from_flags(AttentionTableConfig(), args, TABLE_FLAGS)
    cfg.validate()
    return cfg


def table_text(summary: dict[str, Any]) -> str:
    """What ``paramsym attention table`` prints for the summary of :func:`~paramsym.attention.report.table`."""
    from .report import rows_markdown

    return (f"c_(G,d)(R^C ⊗ {summary['rep']}) for G = {summary['group']}, {summary['heads']} heads, "
            f"d = dim V / {summary['heads']}\n\n" + rows_markdown(summary["rows"]) + "\n")


def table_outputs(cfg, *, progress: bool = False) -> tuple[dict[str, Any], str]:
    """``(summary, text)`` of the component table of ``cfg`` (:func:`~paramsym.attention.report.table`)."""
    from .report import table

    summary = table(cfg, progress=progress)
    return summary, table_text(summary)


# ------------------------------------------------------------------------------ clusterings
@dataclass(frozen=True)
class ClusteringsConfig:
    """``paramsym attention clusterings``: the partial G-clusterings of a set of heads.

    Attributes:
        group: group spec.
        heads: number of heads ``>= 1``.
        up_to: ``isomorphism`` (labelled heads, the paper's count) or ``relabelling``.
        count_only: count without listing.
        limit: list at most this many (the count is always exact).
        max_memory: budget of the exact counts (``None``: 2 GiB).
    """

    group: str = "C6"
    heads: int = 3
    up_to: str = "isomorphism"
    count_only: bool = False
    limit: int = 10000
    max_memory: MemoryBudget | None = None

    @classmethod
    def quick(cls) -> ClusteringsConfig:
        """C2 on 2 heads (milliseconds)."""
        return cls(group="C2", heads=2)

    def validate(self) -> ClusteringsConfig:
        """Raises :class:`ConfigError` naming the first bad field."""
        _check_spec(self, "group")
        _check_int(self, "heads", 1)
        _check_int(self, "limit", 0)
        if self.up_to not in ("isomorphism", "relabelling"):
            raise ConfigError(f"up_to must be isomorphism or relabelling; received {self.up_to!r}.")
        _check_budget(self)
        return self


CLUSTERINGS_FLAGS = {"heads": _int(1), "limit": _int(0), "group": None, "up_to": None, "count_only": None,
                     "max_memory": _budget}


def clusterings_config(args: argparse.Namespace) -> ClusteringsConfig:
    """The configuration of ``paramsym attention clusterings`` from its parsed flags."""
    from ..options import config_from_flags

    return config_from_flags(ClusteringsConfig(), args, CLUSTERINGS_FLAGS).validate()


def clusterings_outputs(cfg: ClusteringsConfig, *, progress: bool = False) -> tuple[dict[str, Any], str]:
    """``(result, text)``: the count, and the first ``limit`` clusterings in enumeration order
    (up to isomorphism, unless ``count_only``)."""
    import itertools

    from ..groups.finite import FiniteGroup
    from .clusterings import count_partial_clusterings, enumerate_partial_clusterings

    cfg.validate()
    G = FiniteGroup.parse(cfg.group)
    n = count_partial_clusterings(G, cfg.heads, up_to=cfg.up_to, max_memory=cfg.max_memory)
    listing = None
    if not cfg.count_only and cfg.up_to == "isomorphism":
        # the first `limit` clusterings in enumeration order (lazily; the count is exact anyway)
        listing = list(itertools.islice(enumerate_partial_clusterings(G, cfg.heads, limit=max(n, 1)),
                                        min(cfg.limit, n)))
    truncated = listing is not None and len(listing) < n
    out: dict[str, Any] = {"group": G.name, "heads": cfg.heads, "up_to": cfg.up_to, "count": n}
    if listing is not None:
        out["clusterings"] = [c.to_dict() for c in listing]
        out["listed"] = len(listing)
        out["truncated"] = truncated
    what = "up to isomorphism" if cfg.up_to == "isomorphism" else "up to relabelling of heads"
    lines = [f"{n} partial {G.name}-clusterings of {cfg.heads} heads ({what})"]
    if listing is not None:
        for i, c in enumerate(listing):
            lines += [f"\n[{i}]", "  " + c.describe().replace("\n", "\n  ")]
        if truncated:
            lines.append(f"\n(listed the first {len(listing)} of {n}; raise --limit to list more)")
    return out, "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ classify
@dataclass(frozen=True)
class ClassifyConfig:
    """``paramsym attention classify``: recover the partial G-clustering of a layer, or say what fails.

    Attributes:
        weights: a safetensors file (RMHSA ``M``, ``R`` or ``nn.MultiheadAttention`` weights).
        group: group spec.
        rep: representation on tokens.
        copies: take the representation ``C >= 1`` times.
        num_heads: heads of MultiheadAttention weights (``None``: from the file's metadata).
        tol: relative tolerance ``> 0`` (``None``: by the stored dtype).
        bias_tol: largest query-bias entry treated as zero (``>= 0``).
        seed: seed of the numerical equivariance check.
        max_memory: budget for dense representation matrices (``None``: 2 GiB).
    """

    weights: str = "layer.safetensors"
    group: str = "D4"
    rep: str = "regular"
    copies: int = 1
    num_heads: int | None = None
    tol: float | None = None
    bias_tol: float = 0.0
    seed: int = 0
    max_memory: MemoryBudget | None = None

    @classmethod
    def quick(cls) -> ClassifyConfig:
        """The smallest group (C2) on its regular representation; ``weights`` must still name a
        layer (``paramsym attention build --group C2 --heads 2 --index 0 --out DIR`` writes
        ``DIR/layer.safetensors``)."""
        return cls(group="C2")

    def validate(self) -> ClassifyConfig:
        """Raises :class:`ConfigError` naming the first bad field."""
        import math

        _check_specs(self)
        if not isinstance(self.weights, str) or not self.weights:
            raise ConfigError(f"weights must be a file path; received {self.weights!r}.")
        _check_int(self, "copies", 1)
        if self.num_heads is not None:
            _check_int(self, "num_heads", 1)
        for name, low in (("tol", None), ("bias_tol", 0.0)):
            v = getattr(self, name)
            if v is None and name == "tol":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (
                    v <= 0 if low is None else v < low):
                raise ConfigError(f"{name} must be a finite number {'> 0' if low is None else '>= 0'}; received {v!r}.")
        return self


def _positive(raw: Any, flag: str) -> float:
    from ..options import float_option

    return float_option(raw, flag, minimum=0.0, exclusive=True)


def _nonnegative(raw: Any, flag: str) -> float:
    from ..options import float_option

    return float_option(raw, flag, minimum=0.0)


CLASSIFY_FLAGS = {"copies": _int(1), "num_heads": _int(1), "tol": _positive, "bias_tol": _nonnegative,
                  "seed": _seed, "weights": None, "group": None, "rep": None, "max_memory": _budget}


def classify_config(args: argparse.Namespace) -> ClassifyConfig:
    """The configuration of ``paramsym attention classify`` from its parsed flags."""
    from ..options import config_from_flags

    return config_from_flags(ClassifyConfig(), args, CLASSIFY_FLAGS).validate()


def _rep_name(spec: str, copies: int) -> str:
    return spec if copies == 1 else f"{copies} x {spec}"


def classify_outputs(cfg: ClassifyConfig, *, progress: bool = False) -> tuple[dict[str, Any], str]:
    """``(result, text)``: the recovered clustering (or the failing condition), the offset's
    defect and a numerical equivariance check on 3 tokens."""
    import numpy as np
    import torch

    from ..groups.finite import FiniteGroup
    from ..groups.reps import Representation
    from ..runs.rundir import _jsonable  # tensors and non-finite floats
    from .equivariance import equivariance_errors
    from .loading import load_weights
    from .structure import default_rtol, recover_clustering

    cfg.validate()
    G = FiniteGroup.parse(cfg.group)
    rep = Representation.parse(G, cfg.rep, cfg.copies, max_memory=cfg.max_memory, progress=progress)
    w = load_weights(cfg.weights, num_heads=cfg.num_heads, bias_tol=cfg.bias_tol)
    rtol = cfg.tol if cfg.tol is not None else default_rtol(w.stored_dtype or w.M.dtype)
    rec = recover_clustering(w.M, w.R, rep, rtol=rtol)
    gen = torch.Generator().manual_seed(cfg.seed)
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
        "weights": cfg.weights,
        "source": w.source,
        "notes": w.notes,
        "group": G.name,
        "rep": _rep_name(cfg.rep, cfg.copies),
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
    lines = [f"{cfg.weights}: {w.source}, {result['heads']} heads on R^{result['dim']}; G = {G.name}, "
             f"rep {result['rep']}"]
    lines += [f"  note: {note}" for note in w.notes]
    lines.append(rec.summary())
    if offset_defect is not None and offset_defect > tol:
        lines.append(f"NOT equivariant: the constant output offset is not G-fixed (relative defect {offset_defect:.3g})")
    lines.append(f"numerical check (L = 3 tokens): max relative equivariance error {errs.max():.3g} "
                 f"(worst element {G.label(worst)})")
    return json.loads(json.dumps(_jsonable(result))), "\n".join(lines) + "\n"
