"""The model's permutation group as data: a Git-Re-Basin-style ``PermutationSpec``.

``{"perms": {ID: n}, "axes": {tensor: [ID or null per axis]}}``. A permutation ``π`` of size
``n`` acts on an axis of length ``m``:

* ``m = n``: ``T' = T[..., π, ...]`` (index ``j`` of the new tensor is index ``π[j]`` of the old);
* ``m = n·b``: the axis is ``n`` contiguous blocks of ``b`` entries and the blocks are permuted
  (``T'[..., j·b + c, ...] = T[..., π[j]·b + c, ...]``): attention heads (``b = d``, or
  ``b = G·d`` for the query rows of a grouped-query layer, or ``b = (G + 2)·d`` for a fused
  per-head ``[q | k | v]`` tensor).

**Fused axes (sub-blocks).** An axis entry may instead be a list ``[[ID or null, size], ...]``
whose sizes sum to the axis length: the axis is cut into consecutive slices of those sizes and
each ID acts on its own slice by the block convention above (``null``: the slice is not
permuted). One ID may appear in several slices of one axis; it then permutes each of them the
same way. This is how a tensor that concatenates several spaces along one axis is written:

* GPT-2's ``c_attn`` (``Conv1D``, ``[Q | K | V]`` along axis 1, ``D = H·d`` each):
  ``[null-or-P_res, [["P_heads_0", D], ["P_heads_0", D], ["P_heads_0", D]]]``;
* Phi-3's ``qkv_proj`` (rows ``[Q (H·d) | K (H_kv·d) | V (H_kv·d)]``):
  ``[[["P_heads_0", H·d], ["P_heads_0", H_kv·d], ["P_heads_0", H_kv·d]], "P_res"]``
  (the query slice moves in blocks of ``G·d``, the key and value slices in blocks of ``d``);
* Phi-3's ``gate_up_proj`` (rows ``[gate (h) | up (h)]``): ``[[["P_ffn_0", h], ["P_ffn_0", h]], "P_res"]``.

An axis whose permutation is one block convention over the whole axis (GPT-NeoX's per-head
``[q_h | k_h | v_h]``, Falcon's per-group ``[q… | k | v]``) keeps the plain ``ID`` entry, so
specs without fused axes are unchanged and every single-ID axis stays valid. Readers:
:func:`axis_blocks` turns either entry into ``(start, size, ID)`` slices.

IDs: ``P_res`` (the residual stream, size ``D``), ``P_ffn_<i>`` (layer ``i``'s FFN hidden units),
``P_heads_<i>`` (layer ``i``'s key/value heads with their query heads). A group that even
sub-blocks cannot express (units that are not blocks of consecutive slices in the same pattern)
is left out of the spec entirely (listed in ``omitted``), never half written.

**Experts.** A mixture of experts (Mixtral) keeps each expert's FFN in a slice of a 3-D bank
``(E, 2h, D)`` / ``(E, D, h)``; a permutation of one expert's units acts on a slice along axis 0
and rows along axis 1, which no axis entry states, so on the loaded names those groups are
omitted. Given the checkpoint's per-expert tensors (``pieces``:
:func:`paramsym.census.stored.expert_pieces`), the spec names those stored 2-D tensors instead of
the banks and states one group per expert per layer, ``P_ffn_e<e>_<i>`` (S_h): the rows of that
expert's ``w1`` and ``w3`` (gate, up) and the columns of its ``w2`` (down); the stream axis of
each (``w1``/``w3`` columns, ``w2`` rows) carries ``P_res`` like the bank's did.
:func:`spec_from_spaces` builds the spec (``sub_blocks=False``: the single-ID form only, fused
groups omitted as before); :func:`apply_spec` applies permutations through the spec alone;
:func:`verify_spec` checks random elements on the model.
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
from .stored import Piece

if TYPE_CHECKING:  # annotation only: spaces imports the finders, which import this module
    from .spaces import Spaces

__all__ = ["AxisEntry", "PermutationSpec", "axis_blocks", "axis_ids", "spec_from_spaces", "apply_spec", "random_perms",
           "verify_spec"]

Params = dict[str, Tensor]
#: one axis of a tensor: ``None``, a permutation ID, or sub-blocks ``[[ID or None, size], ...]``
AxisEntry = str | None | list


@dataclass
class PermutationSpec:
    """Permutation IDs with their sizes and, per tensor, the ID acting on each axis."""

    perms: dict[str, int]
    axes: dict[str, list[AxisEntry]]
    omitted: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"perms": dict(self.perms),
                "axes": {k: [[list(b) for b in e] if isinstance(e, list) else e for e in v] for k, v in self.axes.items()}}

    def log10_order(self) -> float:
        """``log10 ∏ n_p!`` — the order of the product of the spec's symmetric groups."""
        return sum(math.lgamma(n + 1) for n in self.perms.values()) / math.log(10)


def _rows_axis(p: Projection) -> int:
    return 0 if p.layout == "out_in" else 1


def _cols_axis(p: Projection) -> int:
    return 1 if p.layout == "out_in" else 0


def axis_blocks(entry: AxisEntry, length: int, where: str = "") -> list[tuple[int, int, str | None]]:
    """The ``(start, size, ID or None)`` slices of an axis entry (module docstring): one slice for
    ``None`` or a plain ID, the listed slices for a sub-block entry.

    Raises:
        ShapeError: a malformed sub-block list, or sizes that do not sum to the axis length.
    """
    if entry is None or isinstance(entry, str):
        return [(0, length, entry)]
    out, start = [], 0
    for item in entry:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and (item[0] is None or isinstance(item[0], str))
                and isinstance(item[1], int) and item[1] > 0):
            raise ShapeError(f"permutation spec: {where or 'an axis'} has sub-block {item!r}; expected [ID or null, size > 0].")
        out.append((start, int(item[1]), item[0]))
        start += int(item[1])
    if start != length:
        raise ShapeError(f"permutation spec: the sub-blocks of {where or 'an axis'} sum to {start}, not its length {length}.")
    return out


def axis_ids(entry: AxisEntry) -> set[str]:
    """The permutation IDs an axis entry names (a plain ID, or those of its sub-blocks)."""
    if entry is None:
        return set()
    if isinstance(entry, str):
        return {entry}
    return {b[0] for b in entry if b[0] is not None}


def _segments(groups: list[list[int]], length: int) -> list[tuple[int, int]] | None:
    """Cut an axis into slices on which the units act by the block convention, or ``None``.

    ``groups[u]`` lists unit ``u``'s stored indices in role order. A slice starting at ``s`` holds
    ``n`` consecutive blocks of ``b`` entries, block ``j`` belonging to unit ``j``, and entry ``c``
    of every block playing the role of entry ``c`` of unit 0's block (same rank in the unit's
    list). Positions no unit owns are left to ``null`` slices.
    """
    n = len(groups)
    owner: dict[int, tuple[int, int]] = {}
    for u, idx in enumerate(groups):
        for r, i in enumerate(idx):
            if i in owner or not 0 <= i < length:
                return None
            owner[i] = (u, r)
    if n == 0 or len({len(g) for g in groups}) != 1:
        return None
    segs, s = [], 0
    while s < length:
        if s not in owner:
            s += 1
            continue
        u0, r0 = owner[s]
        if u0 != 0:
            return None
        b = 1
        while owner.get(s + b) == (0, r0 + b):
            b += 1
        if s + n * b > length:
            return None
        for j in range(n):
            for c in range(b):
                if owner.get(s + j * b + c) != (j, owner[s + c][1]):
                    return None
        segs.append((s, n * b))
        s += n * b
    return segs


def spec_from_spaces(spaces: Spaces, params: Mapping[str, Tensor], sub_blocks: bool = True,
                     pieces: Mapping[str, list[Piece]] | None = None) -> PermutationSpec:
    """The permutation spec of a model from its derived spaces (module docstring).

    Args:
        spaces: the traced spaces.
        params: the model's parameters (their shapes).
        sub_blocks: write fused axes as sub-block lists; ``False``: single-ID axes only (a group
            that needs sub-blocks is omitted, as readers of the single-ID form expect).
        pieces: expert banks stored per expert (module docstring): the spec names those stored
            tensors in place of the banks and states each expert's units.

    Raises:
        ShapeError: two groups claim the same slice of a tensor axis; a stream axis of a bank
            that its pieces cut.
    """
    pieces = dict(pieces or {})
    shapes = {n: tuple(p.shape) for n, p in params.items() if n not in pieces}
    for bank, ps in pieces.items():
        shapes.update({q.stored: (q.size, params[bank].shape[2]) for q in ps})

    def piece_rows(bank: str, e: int, rows: list[int]) -> list[tuple[str, int]]:
        """Rows ``rows`` of expert ``e``'s slice of ``bank`` as (stored tensor, row) pairs."""
        return [next((q.stored, r - q.start) for q in pieces[bank] if q.expert == e and q.start <= r < q.start + q.size)
                for r in rows]

    claims: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    perms: dict[str, int] = {}
    omitted: list[str] = []

    def put(name: str, axis: int, start: int, size: int, pid: str) -> None:
        have = claims.setdefault((name, axis), [])
        for s0, n0, p0 in have:
            if s0 < start + size and start < s0 + n0 and (s0, n0, p0) != (start, size, pid):
                raise ShapeError(f"permutation spec: axis {axis} of {name!r} is claimed by {p0} (slice {s0}:{s0 + n0}) and "
                                 f"{pid} (slice {start}:{start + size}).")
        if (start, size, pid) not in have:
            have.append((start, size, pid))

    def register(pid: str, size: int, rows: dict, what: str, fused: str) -> None:
        """Group ``pid`` (S_size) on every ``(tensor, axis)`` of ``rows`` when each axis cuts into
        slices of contiguous unit blocks (one slice covering the axis unless ``sub_blocks``);
        otherwise record it as omitted (``what`` sits in ``fused``)."""
        cuts = {(n, a): _segments(grp, shapes[n][a]) for (n, a), grp in rows.items()}
        whole = {k: c is not None and c == [(0, shapes[k[0]][k[1]])] for k, c in cuts.items()}
        if all(c is not None for c in cuts.values()) and (sub_blocks or all(whole.values())):
            for (n, a), segs in cuts.items():
                for s0, n0 in segs:
                    put(n, a, s0, n0, pid)
            perms[pid] = size
        else:
            why = "not consecutive blocks of one tensor axis" if not all(c is not None for c in cuts.values()) else \
                "sub-blocks of a fused axis (sub_blocks=False)"
            omitted.append(f"{pid} (S_{size}): {what} are {why} ({fused})")

    D = spaces.hidden_size
    for name, axis in spaces.stream:
        if name not in pieces:
            put(name, axis, 0, shapes[name][axis], "P_res")
            continue
        for q in pieces[name]:  # a bank's stream axis on each stored expert tensor (axis 0 of the bank: none)
            if axis == 0 or (axis == 1 and q.size != params[name].shape[1]):
                raise ShapeError(f"permutation spec: the stream axis {axis} of {name!r} is cut by its stored pieces "
                                 f"({q.stored!r}).")
            put(q.stored, axis - 1, 0, shapes[q.stored][axis - 1], "P_res")
    perms["P_res"] = D
    for layer in spaces.layout.layers:
        i = layer.index
        # FFN hidden units: unit u = row u of up (gate), column u of down
        ffn = layer.ffn
        h = ffn.hidden
        rows: dict[tuple[str, int], list[list[int]]] = {}
        if layer.experts and ffn.up.weight in pieces and ffn.down.weight in pieces:  # stored per expert
            for e, x in enumerate(layer.experts):
                per: dict[tuple[str, int], list[list[int]]] = {}
                for proj in [x.up] + ([x.gate] if x.gate else []):
                    for u, (n, r) in enumerate(piece_rows(proj.weight, proj.offset // (proj.shape[0] * proj.shape[1]),
                                                          list(proj.features or range(proj.shape[0])))):
                        per.setdefault((n, 0), [[] for _ in range(h)])[u].append(r)
                (dn, _), = piece_rows(x.down.weight, x.down.offset // (x.down.shape[0] * x.down.shape[1]), [0])
                per[(dn, 1)] = [[u] for u in range(h)]
                register(f"P_ffn_e{e}_{i}", h, per, f"the units of expert {e} of {x.module}", "stored expert tensors")
        elif layer.experts:  # one permutation per expert on a slice of a 3-D axis: not a block rule of the format
            omitted.append(f"P_ffn_{i} (S_{h} per expert, {len(layer.experts)} experts): the units of each expert of "
                           f"{ffn.module.rsplit('.', 1)[0]} permute a slice of a 3-D bank, which no axis entry states")
        for proj in [] if layer.experts else [ffn.up] + ([ffn.gate] if ffn.gate else []):
            feats = list(proj.features) if proj.features is not None else list(range(proj.stored_out))
            for name, ax in ((proj.weight, _rows_axis(proj)),) + (((proj.bias, 0),) if proj.bias else ()):
                grp = rows.setdefault((name, ax), [[] for _ in range(h)])
                for u in range(h):
                    grp[u].append(feats[u])
        if not layer.experts:
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
        for role, w, b in att.qk_norms:  # norms over the whole q or k projection (OLMo2): indexed by its features
            per = G * d if role == "q" else d
            for name in (w, b) if b else (w,):
                rows[(name, 0)] = [list(range(g * per, (g + 1) * per)) for g in range(Hkv)]
        rows[(att.o.weight, _cols_axis(att.o))] = [list(range(g * G * d, (g + 1) * G * d)) for g in range(Hkv)]
        register(f"P_heads_{i}", Hkv, rows, f"the heads of {att.module}", "a fused [Q | K | V] tensor")
    axes: dict[str, list[AxisEntry]] = {n: [None] * len(sh) for n, sh in shapes.items()}
    for (name, ax), segs in claims.items():
        m = shapes[name][ax]
        segs = sorted(segs)
        if len(segs) == 1 and segs[0][:2] == (0, m):
            axes[name][ax] = segs[0][2]
            continue
        entry, pos = [], 0
        for s0, n0, pid in segs:
            if s0 > pos:
                entry.append([None, s0 - pos])
            entry.append([pid, n0])
            pos = s0 + n0
        if pos < m:
            entry.append([None, m - pos])
        axes[name][ax] = entry
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
    """Apply ``perms`` through the spec alone (module docstring for the block convention and
    sub-blocks); IDs without a permutation in ``perms`` are left alone.

    Raises:
        ShapeError: a slice whose length is not a multiple of its permutation's size, or
            malformed sub-blocks.
    """
    axes = spec.axes if isinstance(spec, PermutationSpec) else spec["axes"]
    out = dict(params)
    for name, entries in axes.items():
        t = out[name]
        for ax, entry in enumerate(entries):
            if not axis_ids(entry) & set(perms):
                continue
            m = t.shape[ax]
            idx = torch.arange(m)
            for start, size, pid in axis_blocks(entry, m, f"axis {ax} of {name!r}"):
                if pid is None or pid not in perms:
                    continue
                p = perms[pid]
                n = p.numel()
                if size % n:
                    raise ShapeError(f"permutation spec: axis {ax} of {name!r} has a slice of length {size}, not a multiple "
                                     f"of {pid}'s size {n}.")
                b = size // n
                idx[start:start + size] = start + (p[:, None] * b + torch.arange(b)[None, :]).reshape(-1)
            t = t.index_select(ax, idx)
        out[name] = t
    return out


def verify_spec(model: nn.Module, spec: PermutationSpec, params: Mapping[str, Tensor], inputs: Mapping[str, Any],
                output: Callable[[Any], Tensor], generator: torch.Generator, draws: int = 2,
                output_perm: str | None = None, to_model: Callable[[Params], Params] | None = None) -> dict[str, Any]:
    """Relative output change under random elements applied through the spec: each permutation
    alone, and ``draws`` joint elements of the whole group. Returns ``{"errors": {ID: err,
    "joint": err}, "max_error": ..., "min_motion": ...}`` (motion: ‖g·θ − θ‖/‖θ‖ over the moved tensors).
    ``output_perm``: the ID whose permutation also acts on the output's last axis (a base model's
    ``last_hidden_state`` lies in the residual stream): then ``F(g·θ) = F(θ)[..., π]`` is checked.
    ``to_model``: ``params`` are the checkpoint's stored tensors and this puts them back into the
    model's (:func:`paramsym.census.stored.from_pieces`) before each evaluation."""
    fuse = to_model or dict
    with torch.no_grad():
        base = output(functional_call(model, fuse(params), (), dict(inputs)))
        errs, motions = {}, []

        def check(perms: dict[str, Tensor]) -> float:
            new = apply_spec(params, spec, perms)
            moved = [n for n, ids in spec.axes.items() if any(axis_ids(e) & set(perms) for e in ids)]
            num = sum(float((new[n] - params[n]).pow(2).sum()) for n in moved)
            den = sum(float(params[n].pow(2).sum()) for n in moved)
            motions.append((num / den) ** 0.5 if den else 0.0)
            out = output(functional_call(model, fuse(new), (), dict(inputs)))
            ref = base[..., perms[output_perm]] if output_perm in perms else base
            return float((out - ref).norm() / base.norm())

        for pid in spec.perms:
            errs[pid] = check({pid: random_perms({"perms": {pid: spec.perms[pid]}}, generator)[pid]})
        errs["joint"] = max(check(random_perms(spec, generator)) for _ in range(draws))
    return {"errors": errs, "max_error": max(errs.values()), "min_motion": min(motions) if motions else 0.0}
