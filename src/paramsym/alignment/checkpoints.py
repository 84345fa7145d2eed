"""Align two Hugging Face checkpoints of any architecture the census traces, through its exported groups.

The census (:func:`paramsym.census.spaces.derive_spaces`) finds the model's permutation group —
the residual stream ``P_res``, each layer's FFN units and key/value heads — as a
:class:`~paramsym.census.permspec.PermutationSpec`. :func:`spec_groups` turns every permutation
ID of the spec into a :class:`~paramsym.alignment.arch.UnitGroup` (unit ``i`` of an ID of size
``n`` on an axis of length ``n·b`` = the block ``[i·b, (i+1)·b)`` of that axis, in every tensor
carrying the ID), and Git Re-Basin weight matching
(:func:`~paramsym.alignment.matching.match_permutations`, the one implementation) aligns B to A
over all of them at once, the residual stream included.

:func:`align_checkpoints` takes A and B (loaded safetensors-only by the CLI through
:func:`paramsym.models.loading.load_model`) and the spec (the census traces it:
:func:`paramsym.census.export.spec_for_model`; the areas stay independent), refuses two
checkpoints of different architectures or sizes
(:class:`~paramsym.errors.ArchitectureMismatchError`), aligns, and writes
``aligned_b/`` (B permuted: the same function as B) and ``merged/`` (the midpoint
``(θ_A + θ_B^aligned) / 2``) as ``save_pretrained`` directories, plus ``alignment.json``.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import ArchitectureMismatchError, OutputFileError
from .arch import Member, UnitGroup, check_same_architecture
from .matching import distance
from .orthogonal import match_group

__all__ = ["StreamRotation", "spec_groups", "align_to", "align_checkpoints", "save_pretrained_params"]


def _parts(entry, shape: tuple[int, ...], ax: int) -> list[tuple[tuple[int, int] | None, int, int, str | None]]:
    """``(slice, start, size, ID)`` parts of a permutation-spec axis entry on axis ``ax`` of a tensor
    of ``shape``: ``None``, a plain ID (the whole axis), a fused axis's sub-blocks ``[[ID or None,
    size], ...]``, or per-slice entries ``{"per_slice_of_axis": s, "entries": [entry per slice]}``
    (``slice`` = ``(s, k)``: the part lies in slice ``k`` along axis ``s``; ``None``: in every
    slice) — the census's format, read here as data so the areas stay independent."""
    if isinstance(entry, dict):
        s = int(entry["per_slice_of_axis"])
        return [((s, k), *p[1:]) for k, e in enumerate(entry["entries"]) for p in _parts(e, shape, ax)]
    if entry is None or isinstance(entry, str):
        return [(None, 0, shape[ax], entry)]
    out, start = [], 0
    for bid, size in entry:
        out.append((None, start, int(size), bid))
        start += int(size)
    return out


def _part(t: Tensor, ax: int, slc: tuple[int, int] | None, start: int, size: int) -> Tensor:
    """The part of ``t`` that :func:`_parts` names, its axis ``ax`` moved to the front."""
    if slc is not None:
        t, ax = t.select(slc[0], slc[1]), ax - (ax > slc[0])
    return t.narrow(ax, start, size).movedim(ax, 0)


def spec_groups(spec, params: Mapping[str, Tensor]) -> list[UnitGroup]:
    """One :class:`UnitGroup` per permutation ID of ``spec`` (module docstring)."""
    groups = []
    for pid, n in spec.perms.items():
        members = []
        for name, ids in spec.axes.items():
            for ax, q in enumerate(ids):
                t = params[name]
                for slc, start, size, bid in _parts(q, tuple(t.shape), ax):
                    if bid != pid:
                        continue
                    idx = _part(torch.arange(t.numel()).reshape(t.shape), ax, slc, start, size)
                    members.append(Member(name, idx.reshape(n, size // n, -1).reshape(n, -1), "in"))
        kind = "residual_permutation" if pid == "P_res" else ("head_permutation" if "heads" in pid else "hidden_permutation")
        groups.append(UnitGroup(pid, kind, int(n), tuple(members)))
    return groups


@dataclass(frozen=True)
class StreamRotation:
    """The orthogonal group ``O(D)`` of an RMSNorm model's residual stream, as the census offers it.

    Attributes:
        fold: ``fold(model) → model``: an equivalent copy with every norm scale folded into the
            linear maps reading it (norm weights at their identity value, tied embeddings untied)
            — :func:`paramsym.census.rotation.rotate_residual` with ``M = I``. On the folded
            model ``E ↦ E Mᵀ``, ``W_read ↦ W_read Mᵀ``, ``W_write ↦ M W_write``,
            ``b_write ↦ M b_write`` leaves the outputs unchanged for every orthogonal ``M``.
        axes: tensor → its axis carrying the stream, on the folded model (embeddings, readers,
            writers and their biases; not the norms, whose folded scales ``M`` must not move).
        spec: the permutation spec of the folded model (its tensor names: the LM head untied).
    """

    fold: Callable[[nn.Module], nn.Module]
    axes: Mapping[str, int]
    spec: Any


def align_to(a: Mapping[str, Tensor], b: Mapping[str, Tensor], spec, *, seed: int = 0,
             max_sweeps: int = 100, attention: Sequence[Any] = (), rotation_axes: Mapping[str, int] | None = None,
             max_condition: float = 1e2, max_rounds: int = 10,
             rtol: float = 1e-6) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Align ``b`` to ``a`` over the permutation group ``spec`` (any object with ``perms`` and
    ``axes`` — :class:`paramsym.census.permspec.PermutationSpec`, built by
    :func:`paramsym.census.export.spec_for_model`), then over the continuous groups given.

    The descent is :func:`paramsym.alignment.orthogonal.match_group` (stages ``permutation``:
    weight matching over every ID of ``spec`` at once; ``rotation`` with ``rotation_axes``: the
    folded RMSNorm model's stream axes, :class:`StreamRotation`, Procrustes started on the tensors
    whose axes carry no ID but ``P_res``; ``attention`` with the traced attention layouts: per
    key/value head GL on query/key — the rotary commutant under rotary — and value/output of
    condition ≤ ``max_condition``), rounds stopping when one lowers ``d`` by less than ``rtol``
    times its value before alignment.

    All arithmetic in float64; the aligned tensors are returned in B's dtypes.

    Returns:
        ``(aligned B parameters, info)``; ``info`` holds the group sizes, ``distance`` (``d`` per
        stage: ``before``, ``permutation``, ``rotation``, ``attention``), ``distance_before`` /
        ``distance_after``, the sweeps of weight matching and the rounds of each stage, ``kept``
        (the stage whose result is returned).

    Raises:
        ArchitectureMismatchError: B's tensors differ from A's in names or shapes.
    """
    a = {k: v.detach() for k, v in a.items()}
    b = {k: v.detach() for k, v in b.items()}
    check_same_architecture(a, b)
    groups = spec_groups(spec, a)
    a64 = {k: v.double() for k, v in a.items()}
    axes = dict(rotation_axes or {})
    fixed = {n: ax for n, ax in axes.items() if all(i in (None, "P_res") for i in spec.axes.get(n, ()))}
    cur, info, _ = match_group(a, b, groups, attention=attention, axes=axes, fixed=fixed,
                               generator=torch.Generator().manual_seed(seed), max_sweeps=max_sweeps,
                               max_condition=max_condition, max_rounds=max_rounds, rtol=rtol)
    info = {"perms": dict(spec.perms)} | info
    dist = info.pop("distance")
    if attention:
        info["attention_query_key_layers"] = len(attention)
        kept_qk = [layout for layout in attention if not layout.qk_refused]
        info["attention_query_key"] = {"gl": sum(1 for layout in kept_qk if not layout.rotary_dim),
                                       "rotary_commutant": sum(1 for layout in kept_qk if layout.rotary_dim),
                                       **({"refused": len(attention) - len(kept_qk)} if len(kept_qk) < len(attention)
                                          else {})}
    out = {k: cur[k].to(b[k].dtype) for k in b}
    info |= {"distance": dist, "distance_before": dist["before"],
             "distance_after": distance(a64, {k: v.double() for k, v in out.items()}) ** 0.5}
    return out, info


def save_pretrained_params(model: nn.Module, params: Mapping[str, Tensor], path: str | os.PathLike) -> None:
    """A copy of ``model`` holding ``params`` (converted to its dtypes), written by ``save_pretrained`` to ``path``."""
    m = copy.deepcopy(model)
    with torch.no_grad():
        own = dict(m.named_parameters())
        for k, v in params.items():
            own[k].copy_(v)
    m.save_pretrained(path)


def align_checkpoints(model_a: nn.Module, model_b: nn.Module, spec, out: str | os.PathLike, *,
                      seed: int = 0, attention: Sequence[Any] = (), rotation: StreamRotation | None = None,
                      max_condition: float = 1e2) -> dict[str, Any]:
    """Align loaded checkpoint B to A over ``spec`` (and the continuous groups given, see
    :func:`align_to`); write ``out/aligned_b``, ``out/merged`` (``save_pretrained`` directories)
    and ``out/alignment.json``.

    With ``rotation``, both models are first replaced by their folded copies
    (:attr:`StreamRotation.fold`: the same functions, norm scales folded, embeddings untied), so
    ``aligned_b`` is B folded and aligned, and ``merged`` the midpoint of folded A and it.

    Raises:
        OutputFileError: ``out`` already holds ``aligned_b``, ``merged`` or ``alignment.json``
            (nothing is written; the command's ``--out`` must be new or empty).
        ArchitectureMismatchError: different model classes, or different tensor names/shapes.
    """
    out = Path(out)
    taken = [name for name in ("aligned_b", "merged", "alignment.json") if (out / name).exists()]
    if taken:
        raise OutputFileError(f"--out {str(out)!r} already holds {', '.join(taken)}; alignment never overwrites: choose "
                              "a new directory.")
    if type(model_a) is not type(model_b):
        raise ArchitectureMismatchError(f"A is a {type(model_a).__name__} and B a {type(model_b).__name__}; alignment needs "
                                        "two checkpoints of the same architecture.")
    check_same_architecture(model_a.state_dict(), model_b.state_dict())  # tied tensors listed: a folded B is untied
    axes = None
    if rotation is not None:
        model_a, model_b, spec, axes = rotation.fold(model_a), rotation.fold(model_b), rotation.spec, rotation.axes
    a = {k: v.detach() for k, v in model_a.named_parameters()}
    aligned, info = align_to(a, dict(model_b.named_parameters()), spec, seed=seed, attention=attention,
                             rotation_axes=axes, max_condition=max_condition)
    merged = {k: (a[k] + aligned[k]) / 2 for k in a}
    out.mkdir(parents=True, exist_ok=True)
    save_pretrained_params(model_b, aligned, out / "aligned_b")
    save_pretrained_params(model_a, merged, out / "merged")
    info |= {"folded": rotation is not None, "aligned_b": str(out / "aligned_b"), "merged": str(out / "merged")}
    (out / "alignment.json").write_text(json.dumps(info, indent=1) + "\n")
    return info
