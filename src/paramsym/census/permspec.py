"""The model's permutation group as data: a Git-Re-Basin-style ``PermutationSpec``.

``{"perms": {ID: n}, "axes": {tensor: [ID or null per axis]}}``. A permutation ``π`` of size
``n`` acts on an axis of length ``m``:

* ``m = n``: ``T' = T[..., π, ...]`` (index ``j`` of the new tensor is index ``π[j]`` of the old);
* ``m = n·b``: the axis is ``n`` contiguous blocks of ``b`` entries and the blocks are permuted
  (``T'[..., j·b + c, ...] = T[..., π[j]·b + c, ...]``): attention heads (``b = d``, or
  ``b = G·d`` for the query rows of a grouped-query layer, or ``b = (G + 2)·d`` for a fused
  per-head ``[q | k | v]`` tensor).

IDs: ``P_res`` (the residual stream, size ``D``), ``P_ffn_<i>`` (layer ``i``'s FFN hidden units),
``P_heads_<i>`` (layer ``i``'s key/value heads with their query heads). A group the
convention cannot express (heads of a fused ``[Q | K | V]`` tensor, FFN units of a fused
``[gate | up]`` tensor) is left out of the spec entirely (listed in ``omitted``), never half
written. :func:`spec_from_spaces` builds the spec; :func:`apply_spec` applies permutations
through the spec alone; :func:`verify_spec` checks random elements on the model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ..errors import ShapeError
from ..models.adapters import Projection

if TYPE_CHECKING:  # annotation only: spaces imports the finders, which import this module
    from .spaces import Spaces

__all__ = ["PermutationSpec", "spec_from_spaces", "apply_spec", "random_perms", "verify_spec"]

Params = dict[str, Tensor]


@dataclass
class PermutationSpec:
    """Permutation IDs with their sizes and, per tensor, the ID acting on each axis."""

    perms: dict[str, int]
    axes: dict[str, list[str | None]]
    omitted: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"perms": dict(self.perms), "axes": {k: list(v) for k, v in self.axes.items()}}

    def log10_order(self) -> float:
        """``log10 ∏ n_p!`` — the order of the product of the spec's symmetric groups."""
        return sum(math.lgamma(n + 1) for n in self.perms.values()) / math.log(10)


def _rows_axis(p: Projection) -> int:
    return 0 if p.layout == "out_in" else 1


def _cols_axis(p: Projection) -> int:
    return 1 if p.layout == "out_in" else 0


def _contiguous(groups: list[list[int]], length: int) -> bool:
    """Group g's stored indices are exactly ``[g·b, (g+1)·b)`` in the same pattern for every g."""
    n = len(groups)
    if n == 0 or length % n:
        return False
    b = length // n
    pat = None
    for g, idx in enumerate(groups):
        if sorted(idx) != list(range(g * b, (g + 1) * b)):
            return False
        rel = [i - g * b for i in idx]
        if pat is None:
            pat = rel
        elif rel != pat:
            return False
    return True


def spec_from_spaces(spaces: Spaces, params: Mapping[str, Tensor]) -> PermutationSpec:
    """The permutation spec of a model from its derived spaces (module docstring).

    Raises:
        ShapeError: two groups claim the same axis of a tensor.
    """
    axes: dict[str, list[str | None]] = {n: [None] * p.dim() for n, p in params.items()}
    perms: dict[str, int] = {}
    omitted: list[str] = []

    def put(name: str, axis: int, pid: str) -> None:
        cur = axes[name][axis]
        if cur is not None and cur != pid:
            raise ShapeError(f"permutation spec: axis {axis} of {name!r} is claimed by {cur} and {pid}.")
        axes[name][axis] = pid

    def register(pid: str, size: int, rows: dict, what: str, fused: str) -> None:
        """Group ``pid`` (S_size) on every ``(tensor, axis)`` of ``rows`` when each of its units is a
        contiguous block of that axis; otherwise record it as omitted (``what`` sits in ``fused``)."""
        if all(_contiguous(grp, params[n].shape[a]) for (n, a), grp in rows.items()):
            for (n, a) in rows:
                put(n, a, pid)
            perms[pid] = size
        else:
            omitted.append(f"{pid} (S_{size}): {what} are not contiguous blocks of one tensor axis ({fused})")

    D = spaces.hidden_size
    for name, axis in spaces.stream:
        put(name, axis, "P_res")
    perms["P_res"] = D
    for layer in spaces.layout.layers:
        i = layer.index
        # FFN hidden units: unit u = row u of up (gate), column u of down
        ffn = layer.ffn
        h = ffn.hidden
        rows: dict[tuple[str, int], list[list[int]]] = {}
        for proj in [ffn.up] + ([ffn.gate] if ffn.gate else []):
            feats = list(proj.features) if proj.features is not None else list(range(proj.stored_out))
            for name, ax in ((proj.weight, _rows_axis(proj)),) + (((proj.bias, 0),) if proj.bias else ()):
                grp = rows.setdefault((name, ax), [[] for _ in range(h)])
                for u in range(h):
                    grp[u].append(feats[u])
        rows[(ffn.down.weight, _cols_axis(ffn.down))] = [[u] for u in range(h)]
        register(f"P_ffn_{i}", h, {k: [sorted(g) for g in grp] for k, grp in rows.items()},
                 f"the FFN units of {ffn.module}", "a fused [gate | up] tensor")
        # heads: key/value head g with its query heads
        att = layer.attention
        Hkv, G, d = att.num_kv_heads, att.group_size, att.head_dim
        if Hkv < 2:
            continue
        rows = {}
        for proj, per in ((att.q, G * d), (att.k, d), (att.v, d)):
            feats = list(proj.features) if proj.features is not None else list(range(proj.stored_out))
            for name, ax in ((proj.weight, _rows_axis(proj)),) + (((proj.bias, 0),) if proj.bias else ()):
                grp = rows.setdefault((name, ax), [[] for _ in range(Hkv)])
                for g in range(Hkv):
                    grp[g] += feats[g * per:(g + 1) * per]
        rows[(att.o.weight, _cols_axis(att.o))] = [list(range(g * G * d, (g + 1) * G * d)) for g in range(Hkv)]
        register(f"P_heads_{i}", Hkv, rows, f"the heads of {att.module}", "a fused [Q | K | V] tensor")
    return PermutationSpec(perms, axes, omitted)


def random_perms(spec: PermutationSpec | Mapping[str, Any], generator: torch.Generator) -> dict[str, Tensor]:
    """One uniformly random permutation per ID (``randperm``), each not the identity where n ≥ 2."""
    sizes = spec.perms if isinstance(spec, PermutationSpec) else spec["perms"]
    out = {}
    for pid, n in sizes.items():
        p = torch.randperm(int(n), generator=generator)
        while n >= 2 and torch.equal(p, torch.arange(n)):
            p = torch.randperm(int(n), generator=generator)
        out[pid] = p
    return out


def apply_spec(params: Mapping[str, Tensor], spec: PermutationSpec | Mapping[str, Any],
               perms: Mapping[str, Tensor]) -> Params:
    """Apply ``perms`` through the spec alone (module docstring for the block convention).

    Raises:
        ShapeError: an axis whose length is not a multiple of its permutation's size.
    """
    axes = spec.axes if isinstance(spec, PermutationSpec) else spec["axes"]
    out = dict(params)
    for name, ids in axes.items():
        t = out[name]
        for ax, pid in enumerate(ids):
            if pid is None or pid not in perms:
                continue
            p = perms[pid]
            m, n = t.shape[ax], p.numel()
            if m % n:
                raise ShapeError(f"permutation spec: axis {ax} of {name!r} has length {m}, not a multiple of {pid}'s size {n}.")
            b = m // n
            idx = (p[:, None] * b + torch.arange(b)[None, :]).reshape(-1)
            t = t.index_select(ax, idx)
        out[name] = t
    return out


def verify_spec(model: nn.Module, spec: PermutationSpec, params: Mapping[str, Tensor], inputs: Mapping[str, Any],
                output: Callable[[Any], Tensor], generator: torch.Generator, draws: int = 2,
                output_perm: str | None = None) -> dict[str, Any]:
    """Relative output change under random elements applied through the spec: each permutation
    alone, and ``draws`` joint elements of the whole group. Returns ``{"errors": {ID: err,
    "joint": err}, "max_error": ..., "min_motion": ...}`` (motion: ‖g·θ − θ‖/‖θ‖ over the moved tensors).
    ``output_perm``: the ID whose permutation also acts on the output's last axis (a base model's
    ``last_hidden_state`` lies in the residual stream): then ``F(g·θ) = F(θ)[..., π]`` is checked."""
    with torch.no_grad():
        base = output(functional_call(model, dict(params), (), dict(inputs)))
        errs, motions = {}, []

        def check(perms: dict[str, Tensor]) -> float:
            new = apply_spec(params, spec, perms)
            moved = [n for n, ids in spec.axes.items() if any(i in perms for i in ids if i)]
            num = sum(float((new[n] - params[n]).pow(2).sum()) for n in moved)
            den = sum(float(params[n].pow(2).sum()) for n in moved)
            motions.append((num / den) ** 0.5 if den else 0.0)
            out = output(functional_call(model, new, (), dict(inputs)))
            ref = base[..., perms[output_perm]] if output_perm in perms else base
            return float((out - ref).norm() / base.norm())

        for pid in spec.perms:
            errs[pid] = check({pid: random_perms({"perms": {pid: spec.perms[pid]}}, generator)[pid]})
        errs["joint"] = max(check(random_perms(spec, generator)) for _ in range(draws))
    return {"errors": errs, "max_error": max(errs.values()), "min_motion": min(motions) if motions else 0.0}
