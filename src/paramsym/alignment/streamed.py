"""Weight matching of two checkpoints read one tensor at a time (issue 34).

The permutation stage of :func:`paramsym.alignment.checkpoints.align_to` (Git Re-Basin weight
matching, :mod:`paramsym.alignment.matching`) holds both models in float64 and an index tensor per
member. :func:`match_streamed` runs the same block coordinate descent on the weight distance
``d = ‖θ_A − π·θ_B‖`` with the tensors read on demand (e.g. :class:`paramsym.models.checks.LazyTensors`
over two checkpoints): for a permutation ID ``p`` of size ``n`` with every other ID's current
permutation fixed, ``‖π·θ_B‖`` does not depend on ``π_p``, so the step maximises
``Σ_i S[i, π_p(i)]`` with

    S = Σ_{tensors T carrying p on axis a}  A_T^{(a)} · (B'_T^{(a)})ᵀ      (n × n)

where ``X^{(a)}`` is ``T``'s slice carrying ``p``, moved to the front and reshaped to ``n`` units
(unit ``i`` = the ``b = size/n`` consecutive entries ``[i·b, (i+1)·b)`` of the slice), and ``B'``
is B with the current permutations of every other ID applied — each tensor read, permuted and
dropped while ``S`` accumulates. The assignment is solved exactly
(:func:`~paramsym.alignment.matching.assign`, the one step of both implementations). The spec is
data (``{"perms": {ID: n}, "axes": {name: [entry per axis]}}``, an entry ``None``, an ID or
sub-blocks ``[[ID or None, size], ...]`` or per-slice entries ``{"per_slice_of_axis": s,
"entries": [...]}``: the census's export format, read here without importing the census).

Order: in each sweep the IDs are visited widest first (most tensors: the residual stream, whose
``S`` includes the embeddings and norms that no other ID moves, so a scrambled copy's stream is
recovered before the units that read it), ties in a seeded random order; sweeps until one
changes nothing. Products in ``dtype`` (float32 by default: ``S`` only ranks assignments; its
entries are sums of ``~10⁶⁻⁸`` products with relative rounding ``≲ 2⁻²⁴ √k``), accumulated in
float64. Memory: two tensors and their permuted copies, plus ``S``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from ..errors import ArchitectureMismatchError, ConfigError
from .checkpoints import _part, _parts
from .matching import assign

__all__ = ["match_streamed", "permute_tensor", "streamed_distance"]


def _shape(m: Mapping[str, Tensor], name: str) -> tuple[int, ...]:
    return tuple(m.shape(name)) if hasattr(m, "shape") else tuple(m[name].shape)


def permute_tensor(t: Tensor, entries: list, perms: Mapping[str, Tensor], skip: str | None = None) -> Tensor:
    """``t`` with ``perms`` applied on every axis its spec ``entries`` name (``skip``: an ID left
    alone); new unit ``i`` of a slice is its old unit ``perm[i]`` (a per-slice entry: slice by slice)."""
    for ax, entry in enumerate(entries):
        if isinstance(entry, dict):
            s = int(entry["per_slice_of_axis"])
            t = torch.stack([permute_tensor(t.select(s, k), [None] * (ax - (ax > s)) + [e], perms, skip)
                             for k, e in enumerate(entry["entries"])], dim=s)
            continue
        idx = None
        for _, start, size, pid in _parts(entry, tuple(t.shape), ax):
            if pid is None or pid == skip or pid not in perms:
                continue
            p = perms[pid]
            b = size // p.numel()
            if idx is None:
                idx = torch.arange(t.shape[ax])
            idx[start:start + size] = start + (p[:, None] * b + torch.arange(b)[None, :]).reshape(-1)
        if idx is not None:
            t = t.index_select(ax, idx)
    return t


def streamed_distance(a: Mapping[str, Tensor], b: Mapping[str, Tensor], spec: Mapping[str, Any],
                      perms: Mapping[str, Tensor] | None = None) -> float:
    """``‖θ_A − π·θ_B‖`` over every tensor of ``a``, one tensor at a time, in float64."""
    axes = dict(spec["axes"])
    total = 0.0
    for name in a:
        tb = b[name].double()
        if perms and name in axes:
            tb = permute_tensor(tb, axes[name], perms)
        total += float((a[name].double() - tb).pow(2).sum())
    return total ** 0.5


def match_streamed(a: Mapping[str, Tensor], b: Mapping[str, Tensor], spec: Mapping[str, Any], *,
                   generator: torch.Generator | None = None, max_sweeps: int = 100,
                   dtype: torch.dtype = torch.float32) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Align ``b`` to ``a`` over the permutation group of ``spec`` (module docstring).

    Returns:
        ``({ID: perm}, info)``: apply with :func:`paramsym.census.rewrite.permute_checkpoint` (or
        :func:`permute_tensor`); ``info`` holds ``sweeps``, ``changed`` (IDs changed per sweep),
        ``distance_before`` / ``distance_after`` and ``seconds``.

    Raises:
        ArchitectureMismatchError: ``a`` and ``b`` hold different tensor names or shapes.
        ConfigError: the spec names a tensor ``a`` lacks, or a slice no multiple of its ID's size.
    """
    t0 = time.perf_counter()
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise ArchitectureMismatchError(f"A and B store different tensors ({only[:3]}); alignment needs two checkpoints "
                                        "of the same architecture.")
    wrong = [n for n in a if _shape(a, n) != _shape(b, n)]
    if wrong:
        raise ArchitectureMismatchError(f"A and B store {wrong[0]!r} with shapes {_shape(a, wrong[0])} and "
                                        f"{_shape(b, wrong[0])}; alignment needs two checkpoints of the same size.")
    sizes = {k: int(v) for k, v in dict(spec["perms"]).items()}
    axes = dict(spec["axes"])
    carriers: dict[str, list[tuple[str, int, tuple[int, int] | None, int, int]]] = {p: [] for p in sizes}
    for name, entries in axes.items():
        if name not in a:
            raise ConfigError(f"the permutation spec names {name!r}, which the checkpoints do not store.")
        shape = _shape(a, name)
        for ax, entry in enumerate(entries):
            for slc, start, size, pid in _parts(entry, shape, ax):
                if pid is None:
                    continue
                if pid not in sizes or size % sizes[pid]:
                    raise ConfigError(f"axis {ax} of {name!r}: a slice of {size} carries {pid!r} (size "
                                      f"{sizes.get(pid)}); expected a multiple of the ID's size.")
                carriers[pid].append((name, ax, slc, start, size))
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    perms = {p: torch.arange(n) for p, n in sizes.items()}
    info: dict[str, Any] = {"perms": len(sizes), "distance_before": streamed_distance(a, b, spec), "changed": []}
    for sweep in range(1, max_sweeps + 1):
        info["sweeps"] = sweep
        shuffled = [list(sizes)[k] for k in torch.randperm(len(sizes), generator=gen).tolist()]
        changed = []
        for pid in sorted(shuffled, key=lambda p: -len(carriers[p])):
            n = sizes[pid]
            S = torch.zeros(n, n, dtype=torch.float64)
            for name, ax, slc, start, size in carriers[pid]:
                ta = _part(a[name].to(dtype), ax, slc, start, size).reshape(n, -1)
                tb = _part(permute_tensor(b[name].to(dtype), axes[name], perms, skip=pid), ax, slc, start, size)
                tb = tb.reshape(n, -1)
                S += (ta @ tb.T).double()
            new = assign(S.numpy(), perms[pid])
            if new is not None:
                perms[pid] = new
                changed.append(pid)
        info["changed"].append(len(changed))
        if not changed:
            break
    info["distance_after"] = streamed_distance(a, b, spec, perms)
    info["seconds"] = time.perf_counter() - t0
    return perms, info
