"""Reading groups, representations and attention weights named on the command line.

- Groups: a name (``C6``, ``D4``, ``S3``, ``Q8``, ``C2xC3``, ...), generators as permutations
  (``perm:[[1,2,0],[1,0,2]]``, 0-based images), or a JSON file ``{"permutations": [...]}`` /
  ``{"matrices": [...]}`` of generators.
- Representations on tokens (``--rep``): ``regular``, ``trivial``, ``copies:C`` (``R^C ⊗ R[G]``,
  block diagonal ``I_C ⊗ ρ_reg(g)``), ``perm`` (the defining permutation action of a permutation
  group), or a ``.json``/``.safetensors`` file holding ``matrices`` (one ``(d, d)`` matrix per
  element, in the group's element order) or ``generators`` (images of ``G.generators``, extended
  to all elements by :func:`paramsym.groups.reps.from_generators` and checked).
- Weights: a safetensors file with RMHSA matrices ``M`` and ``R`` (``(H, d, d)`` each) or
  ``nn.MultiheadAttention`` weights (``in_proj_weight``, ``out_proj.weight``, optional biases,
  ``num_heads`` in the metadata).

Only this module and :mod:`~paramsym.attention.cli` read files; the library functions take
objects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import GroupError, InputFileError, RepresentationError

if TYPE_CHECKING:  # torch is imported only when weights are read
    import torch

__all__ = ["parse_group", "parse_rep", "LoadedWeights", "load_weights"]


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputFileError(f"cannot read JSON file {str(path)!r}: {exc}") from exc


def parse_group(spec: str):
    """A :class:`~paramsym.groups.finite.FiniteGroup` from a name, ``perm:[...]`` or a JSON file."""
    from ..groups import finite

    spec = str(spec).strip()
    if spec.startswith("perm:"):
        try:
            gens = json.loads(spec[5:])
        except json.JSONDecodeError as exc:
            raise GroupError(
                f"--group {spec!r}: after 'perm:' give a JSON list of permutations, e.g. "
                "perm:[[1,2,0],[1,0,2]] (0-based images)."
            ) from exc
        return finite.from_permutations(gens)
    if spec.endswith(".json"):
        data = _read_json(Path(spec))
        if "permutations" in data:
            return finite.from_permutations(data["permutations"])
        if "matrices" in data:
            return finite.from_matrices([np.asarray(m, dtype=np.float64) for m in data["matrices"]])
        raise GroupError(
            f"group file {spec!r} must hold 'permutations' or 'matrices' (generators); found keys "
            f"{sorted(data)}."
        )
    return finite.group_by_name(spec)


def _matrices_from_file(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        raise InputFileError(f"representation file {str(path)!r} does not exist.")
    if path.suffix == ".json":
        data = _read_json(path)
        return {k: np.asarray(v, dtype=np.float64) for k, v in data.items() if k in ("matrices", "generators")}
    if path.suffix == ".safetensors":
        from safetensors.numpy import load_file

        data = load_file(str(path))
        return {k: np.asarray(v, dtype=np.float64) for k, v in data.items() if k in ("matrices", "generators")}
    raise InputFileError(
        f"representation file {str(path)!r}: expected a .json or .safetensors file."
    )


def parse_rep(group, spec: str = "regular", copies: int = 1, *, max_memory: int | None = None,
              progress: bool = False):
    """A :class:`~paramsym.groups.reps.Representation` of ``group`` from a ``--rep`` spec, taken
    ``copies`` times (``R^copies ⊗ ρ``), validated as an orthogonal homomorphism.

    Every dense array is checked against the memory budget ``max_memory`` (bytes; default
    :data:`paramsym.groups.memory.DEFAULT_MAX_MEMORY`) before it is allocated
    (:class:`~paramsym.errors.TooLargeError` names the estimate). With ``progress``, a note on
    stderr announces representations above 256 MiB.
    """
    from ..groups import reps
    from ..groups.memory import dense_bytes, format_bytes
    from ..groups.progress import warn

    def announce(dim: int, what: str) -> None:
        reps.check_dense(group.order, dim, what, max_memory, hint)
        nbytes = dense_bytes(group.order, dim, dim)
        warn(f"building a {format_bytes(nbytes)} representation of {group.name} ({group.order} "
             f"matrices {dim}x{dim}); this may take a while.", enabled=progress and nbytes > 2**28)

    mm = {"max_memory": max_memory}
    hint = ("Use a smaller group, or a smaller representation (--rep perm or trivial) of a group "
            "whose irreducibles can be computed.")

    spec = str(spec).strip()
    copies = int(copies)
    if copies < 1:
        raise RepresentationError(f"--copies must be at least 1, received {copies}.")
    if spec == "regular":
        announce(group.order, f"the regular representation of {group.name}")
        rep = reps.regular(group, **mm)
    elif spec == "trivial":
        rep = reps.trivial(group, **mm)
    elif spec.startswith("copies:"):
        try:
            c = int(spec.split(":", 1)[1])
        except ValueError as exc:
            raise RepresentationError(f"--rep {spec!r}: write copies:C with an integer C.") from exc
        if c < 1:
            raise RepresentationError(f"--rep {spec!r}: copies:C needs C >= 1.")
        announce(c * group.order, f"{c} copies of the regular representation of {group.name}")
        rep = reps.copies(reps.regular(group, **mm), c, **mm) if c > 1 else reps.regular(group, **mm)
    elif spec == "perm":
        if getattr(group, "permutations", None) is None:
            raise RepresentationError(
                f"--rep perm: the group {group.name} was not given by permutations; use regular, "
                "copies:C or a file of matrices."
            )
        rep = reps.permutation(group, group.permutations, **mm)
    else:
        data = _matrices_from_file(Path(spec))
        if "matrices" in data:
            mats = data["matrices"]
            if mats.ndim != 3 or mats.shape[0] != group.order:
                raise RepresentationError(
                    f"{spec}: 'matrices' must have shape ({group.order}, d, d), one per element of "
                    f"{group.name}; received {mats.shape}."
                )
            rep = reps.Representation(group, mats)
        elif "generators" in data:
            gens = data["generators"]
            if gens.ndim != 3 or gens.shape[0] != len(group.generators):
                raise RepresentationError(
                    f"{spec}: 'generators' must have shape ({len(group.generators)}, d, d), the "
                    f"images of {group.name}'s generators {[group.label(g) for g in group.generators]}; "
                    f"received {gens.shape}."
                )
            rep = reps.from_generators(group, list(gens), max_memory=max_memory)
        else:
            raise RepresentationError(
                f"representation file {spec!r} must hold 'matrices' or 'generators'."
            )
    if copies > 1:
        rep = reps.copies(rep, copies, **mm)
    # regular/trivial/copies are exact by construction; matrices from files and permutations
    # were checked when their Representation was built (a second O(|G| d^3) check is skipped)
    return rep


@dataclass
class LoadedWeights:
    """RMHSA parameters read from a file (see :func:`load_weights`)."""

    M: torch.Tensor
    R: torch.Tensor
    offset: torch.Tensor | None
    source: str  # "rmhsa" or "multihead_attention"
    notes: list[str] = field(default_factory=list)
    stored_dtype: torch.dtype | None = None  # dtype of the tensors in the file


def load_weights(path: str | Path, *, num_heads: int | None = None, bias_tol: float = 0.0) -> LoadedWeights:
    """Read ``M``/``R`` or ``nn.MultiheadAttention`` weights from a safetensors file.

    For MultiheadAttention weights the number of heads comes from ``num_heads`` or the file's
    metadata key ``num_heads``; the ``1/√d_h`` scaling is folded into ``M`` and the biases are
    handled by :func:`~paramsym.attention.rmhsa.from_multihead_attention`.
    """
    from safetensors import SafetensorError, safe_open

    from .rmhsa import check_qk_ov, from_multihead_attention

    path = Path(path)
    if not path.exists():
        raise InputFileError(f"weights file {str(path)!r} does not exist.")
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    except (SafetensorError, OSError) as exc:
        raise InputFileError(f"cannot read {str(path)!r} as safetensors: {exc}") from exc
    if "M" in tensors and "R" in tensors:
        M, R = check_qk_ov(tensors["M"], tensors["R"])
        offset = tensors.get("offset")
        return LoadedWeights(
            M, R, offset, "rmhsa", [f"read RMHSA matrices M, R {tuple(M.shape)}"], M.dtype
        )
    if "in_proj_weight" in tensors or "q_proj_weight" in tensors:
        heads = num_heads
        if heads is None and "num_heads" in meta:
            try:
                heads = int(meta["num_heads"])
            except ValueError as exc:
                raise InputFileError(f"{path}: metadata num_heads={meta['num_heads']!r} is not an integer.") from exc
        if heads is None:
            raise InputFileError(
                f"{path}: MultiheadAttention weights need the number of heads; store it as "
                "safetensors metadata {'num_heads': 'H'} or pass --num-heads H."
            )
        conv = from_multihead_attention(tensors, heads, bias_tol=bias_tol)
        stored = tensors["in_proj_weight" if "in_proj_weight" in tensors else "q_proj_weight"].dtype
        notes = conv.notes + [f"weights stored as {stored}, converted to float64"]
        return LoadedWeights(conv.M, conv.R, conv.offset, "multihead_attention", notes, stored)
    raise InputFileError(
        f"{path}: expected tensors 'M' and 'R' (RMHSA) or 'in_proj_weight' and 'out_proj.weight' "
        f"(nn.MultiheadAttention); found {sorted(tensors)}."
    )
