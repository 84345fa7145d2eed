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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import ArchitectureMismatchError, OutputFileError
from .arch import Member, UnitGroup, check_same_architecture
from .matching import distance, match_permutations, permute

__all__ = ["spec_groups", "align_to", "align_checkpoints"]


def spec_groups(spec, params: Mapping[str, Tensor]) -> list[UnitGroup]:
    """One :class:`UnitGroup` per permutation ID of ``spec`` (module docstring)."""
    groups = []
    for pid, n in spec.perms.items():
        members = []
        for name, ids in spec.axes.items():
            for ax, q in enumerate(ids):
                if q != pid:
                    continue
                t = params[name]
                m = t.shape[ax]
                idx = torch.arange(t.numel()).reshape(t.shape).movedim(ax, 0).reshape(n, m // n, -1)
                members.append(Member(name, idx.reshape(n, -1), "in"))
        kind = "residual_permutation" if pid == "P_res" else ("head_permutation" if "heads" in pid else "hidden_permutation")
        groups.append(UnitGroup(pid, kind, int(n), tuple(members)))
    return groups


def align_to(a: Mapping[str, Tensor], b: Mapping[str, Tensor], spec, *, seed: int = 0,
             max_sweeps: int = 100) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Align ``b`` to ``a`` over the permutation group ``spec`` (any object with ``perms`` and
    ``axes`` — :class:`paramsym.census.permspec.PermutationSpec`, built by
    :func:`paramsym.census.export.spec_for_model`).

    Returns:
        ``(aligned B parameters, info)``; ``info`` holds the group sizes, the weight distance
        ``‖θ_A − θ_B‖`` before and after, and the sweeps of weight matching.

    Raises:
        ArchitectureMismatchError: B's tensors differ from A's in names or shapes.
    """
    a = {k: v.detach() for k, v in a.items()}
    b = {k: v.detach() for k, v in b.items()}
    check_same_architecture(a, b)
    groups = spec_groups(spec, a)
    a64 = {k: v.double() for k, v in a.items()}
    b64 = {k: v.double() for k, v in b.items()}
    perms, sweeps = match_permutations(a64, b64, groups, generator=torch.Generator().manual_seed(seed),
                                       max_sweeps=max_sweeps)
    out = dict(b)
    for g in groups:
        out = permute(out, g, perms[g.name])
    info = {"perms": dict(spec.perms), "sweeps": sweeps, "distance_before": distance(a64, b64) ** 0.5,
            "distance_after": distance(a64, {k: v.double() for k, v in out.items()}) ** 0.5}
    return out, info


def _save(model: nn.Module, params: Mapping[str, Tensor], path: Path) -> None:
    m = copy.deepcopy(model)
    with torch.no_grad():
        own = dict(m.named_parameters())
        for k, v in params.items():
            own[k].copy_(v)
    m.save_pretrained(path)


def align_checkpoints(model_a: nn.Module, model_b: nn.Module, spec, out: str | os.PathLike, *,
                      seed: int = 0) -> dict[str, Any]:
    """Align loaded checkpoint B to A over ``spec``; write ``out/aligned_b``, ``out/merged``
    (``save_pretrained`` directories) and ``out/alignment.json``.

    Raises:
        OutputFileError: ``out`` exists and is not empty (nothing is written).
        ArchitectureMismatchError: different model classes, or different tensor names/shapes.
    """
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise OutputFileError(f"--out {str(out)!r} exists and is not empty; alignment writes into a new directory.")
    if type(model_a) is not type(model_b):
        raise ArchitectureMismatchError(f"A is a {type(model_a).__name__} and B a {type(model_b).__name__}; alignment needs "
                                        "two checkpoints of the same architecture.")
    a = {k: v.detach() for k, v in model_a.named_parameters()}
    aligned, info = align_to(a, dict(model_b.named_parameters()), spec, seed=seed)
    merged = {k: (a[k] + aligned[k]) / 2 for k in a}
    out.mkdir(parents=True, exist_ok=True)
    _save(model_b, aligned, out / "aligned_b")
    _save(model_a, merged, out / "merged")
    info |= {"aligned_b": str(out / "aligned_b"), "merged": str(out / "merged")}
    (out / "alignment.json").write_text(json.dumps(info, indent=1) + "\n")
    return info
