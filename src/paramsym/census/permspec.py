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

**Per-slice axes.** An axis entry may also be an object
``{"per_slice_of_axis": s, "entries": [entry_0, ..., entry_{n-1}]}`` (``n`` = the length of axis
``s``, which no ID permutes: its entry is ``null``): slice ``k`` of the tensor along axis ``s``
has its own entry ``entry_k`` (``null``, an ID or sub-blocks, by the rules above) on this axis,
which keeps its index in the whole tensor. A stacked expert bank states one permutation per
expert this way: Mixtral's ``experts.gate_up_proj`` ``(E, 2h, D)`` has axis 1
``{"per_slice_of_axis": 0, "entries": [[["P_ffn_e0_i", h], ["P_ffn_e0_i", h]], ...]}`` and its
``down_proj`` ``(E, D, h)`` axis 2 ``{"per_slice_of_axis": 0, "entries": ["P_ffn_e0_i", ...]}``.
MergeKit's formats have no such field (its export refuses a spec that needs it, by name);
:func:`axis_parts` reads every form.

**Experts.** A mixture of experts (Mixtral) keeps each expert's FFN in a slice of a 3-D bank
``(E, 2h, D)`` / ``(E, D, h)``; a permutation of one expert's units acts on a slice along axis 0
and rows along axis 1: one ``P_ffn_e<e>_<i>`` per expert, on per-slice axes of the banks (above;
``sub_blocks=False``: omitted, as readers of the single-ID form expect). Given the checkpoint's
per-expert tensors (``pieces``:
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

__all__ = ["AxisEntry", "PER_SLICE", "PermutationSpec", "axis_blocks", "axis_ids", "axis_parts", "per_slice", "spec_from_spaces",
           "apply_spec", "random_perms", "verify_spec"]

Params = dict[str, Tensor]
#: one axis of a tensor: ``None``, a permutation ID, sub-blocks ``[[ID or None, size], ...]``, or
#: per-slice entries ``{"per_slice_of_axis": s, "entries": [...]}``
AxisEntry = str | None | list | dict
PER_SLICE = "per_slice_of_axis"


@dataclass
class PermutationSpec:
    """Permutation IDs with their sizes and, per tensor, the ID acting on each axis."""

    perms: dict[str, int]
    axes: dict[str, list[AxisEntry]]
    omitted: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"perms": dict(self.perms), "axes": {k: [_entry_json(e) for e in v] for k, v in self.axes.items()}}

    def log10_order(self) -> float:
        """``log10 ∏ n_p!`` — the order of the product of the spec's symmetric groups."""
        return sum(math.lgamma(n + 1) for n in self.perms.values()) / math.log(10)


def _entry_json(e: AxisEntry) -> Any:
    if isinstance(e, dict):
        return {PER_SLICE: int(e[PER_SLICE]), "entries": [_entry_json(x) for x in e["entries"]]}
    return [list(b) for b in e] if isinstance(e, list) else e


def _rows_axis(p: Projection) -> int:
    return 0 if p.layout == "out_in" else 1


def _cols_axis(p: Projection) -> int:
    return 1 if p.layout == "out_in" else 0


def axis_blocks(entry: AxisEntry, length: int, where: str = "") -> list[tuple[int, int, str | None]]:
    """The ``(start, size, ID or None)`` slices of an axis entry (module docstring): one slice for
    ``None`` or a plain ID, the listed slices for a sub-block entry.

    Raises:
        ShapeError: a malformed sub-block list, or sizes that do not sum to the axis length; a
            per-slice entry (its slices need the tensor's shape: :func:`axis_parts`).
    """
    if isinstance(entry, dict):
        raise ShapeError(f"permutation spec: {where or 'an axis'} has a per-slice entry ({PER_SLICE!r}); read it with "
                         "axis_parts(entry, shape, axis), which knows the tensor's shape.")
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
    if isinstance(entry, dict):
        return set().union(*(axis_ids(e) for e in entry.get("entries", [])))
    return {b[0] for b in entry if b[0] is not None}


def per_slice(entry: Mapping[str, Any], shape: tuple[int, ...], axis: int, where: str = "") -> tuple[int, list]:
    """``(s, [entry_k])`` of a per-slice entry on ``axis`` of a tensor of ``shape`` (module docstring).

    Raises:
        ShapeError: ``s`` not another axis of the tensor, a count of entries other than its
            length, a nested per-slice entry, or keys other than the two of the form.
    """
    s, entries = entry.get(PER_SLICE), entry.get("entries")
    if set(entry) != {PER_SLICE, "entries"} or not isinstance(s, int) or isinstance(s, bool) or \
            not isinstance(entries, list):
        raise ShapeError(f"permutation spec: {where or 'an axis'} has {dict(entry)!r}; expected "
                         f'{{"{PER_SLICE}": axis, "entries": [entry per slice]}}.')
    if not (0 <= s < len(shape)) or s == axis:
        raise ShapeError(f"permutation spec: {where or 'an axis'} is given per slice of axis {s}; expected another axis "
                         f"of the tensor's {len(shape)} (shape {tuple(shape)}).")
    if len(entries) != shape[s] or any(isinstance(e, dict) for e in entries):
        raise ShapeError(f"permutation spec: {where or 'an axis'} lists {len(entries)} per-slice entries for the "
                         f"{shape[s]} slices of axis {s}; expected one plain entry (null, ID or sub-blocks) per slice.")
    return s, entries


def axis_parts(entry: AxisEntry, shape: tuple[int, ...], axis: int, where: str = ""
               ) -> list[tuple[tuple[int, int] | None, int, int, str | None]]:
    """Every ``(slice, start, size, ID or None)`` of ``axis``'s entry in a tensor of ``shape``:
    ``slice`` is ``None`` (the part spans every slice) or ``(s, k)`` (slice ``k`` along axis ``s``
    of a per-slice entry); ``start``/``size`` cut ``axis`` as in :func:`axis_blocks`.

    Raises:
        ShapeError: a malformed entry (:func:`axis_blocks`, :func:`per_slice`).
    """
    if not isinstance(entry, dict):
        return [(None, *b) for b in axis_blocks(entry, shape[axis], where)]
    s, entries = per_slice(entry, shape, axis, where)
    return [((s, k), *b) for k, e in enumerate(entries) for b in axis_blocks(e, shape[axis], f"{where} (slice {k})")]


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

    # (tensor, axis, slice): slice None (the whole tensor) or (s, k): slice k along axis s (a stacked bank's expert)
    claims: dict[tuple[str, int, tuple[int, int] | None], list[tuple[int, int, str]]] = {}
    perms: dict[str, int] = {}
    omitted: list[str] = []

    def put(name: str, axis: int, start: int, size: int, pid: str, slc: tuple[int, int] | None = None) -> None:
        have = claims.setdefault((name, axis, slc), [])
        for s0, n0, p0 in have:
            if s0 < start + size and start < s0 + n0 and (s0, n0, p0) != (start, size, pid):
                raise ShapeError(f"permutation spec: axis {axis} of {name!r} is claimed by {p0} (slice {s0}:{s0 + n0}) and "
                                 f"{pid} (slice {start}:{start + size}).")
        if (start, size, pid) not in have:
            have.append((start, size, pid))

    def register(pid: str, size: int, rows: dict, what: str, fused: str) -> None:
        """Group ``pid`` (S_size) on every ``(tensor, axis[, slice])`` of ``rows`` when each axis
        cuts into slices of contiguous unit blocks (one slice covering a whole axis unless
        ``sub_blocks``); otherwise record it as omitted (``what`` sits in ``fused``)."""
        cuts = {k: _segments(grp, shapes[k[0]][k[1]]) for k, grp in rows.items()}
        whole = {k: c is not None and len(k) == 2 and c == [(0, shapes[k[0]][k[1]])] for k, c in cuts.items()}
        if all(c is not None for c in cuts.values()) and (sub_blocks or all(whole.values())):
            for k, segs in cuts.items():
                for s0, n0 in segs:
                    put(k[0], k[1], s0, n0, pid, k[2] if len(k) == 3 else None)
            perms[pid] = size
        else:
            why = "not consecutive blocks of one tensor axis" if not all(c is not None for c in cuts.values()) else \
                "sub-blocks of a fused axis or per-slice entries (sub_blocks=False)"
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
        elif layer.experts:  # stacked banks: one permutation per expert on its slice along axis 0 (per-slice entries)
            for e, x in enumerate(layer.experts):
                per = {}
                for proj in [x.up] + ([x.gate] if x.gate else []):
                    slc = (0, proj.offset // (proj.shape[0] * proj.shape[1]))
                    for u, r in enumerate(proj.features or range(proj.shape[0])):
                        per.setdefault((proj.weight, 1 + _rows_axis(proj), slc), [[] for _ in range(h)])[u].append(r)
                slc = (0, x.down.offset // (x.down.shape[0] * x.down.shape[1]))
                per[(x.down.weight, 1 + _cols_axis(x.down), slc)] = [[u] for u in range(h)]
                register(f"P_ffn_e{e}_{i}", h, per, f"the units of expert {e} of {x.module}", "a stacked expert bank")
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
    def entry_of(segs: list[tuple[int, int, str]], m: int) -> AxisEntry:
        segs = sorted(segs)
        if len(segs) == 1 and segs[0][:2] == (0, m):
            return segs[0][2]
        entry: list = []
        pos = 0
        for s0, n0, pid in segs:
            if s0 > pos:
                entry.append([None, s0 - pos])
            entry.append([pid, n0])
            pos = s0 + n0
        if pos < m:
            entry.append([None, m - pos])
        return entry

    axes: dict[str, list[AxisEntry]] = {n: [None] * len(sh) for n, sh in shapes.items()}
    by_axis: dict[tuple[str, int], dict[tuple[int, int] | None, list[tuple[int, int, str]]]] = {}
    for (name, ax, slc), segs in claims.items():
        by_axis.setdefault((name, ax), {})[slc] = segs
    for (name, ax), per_slc in by_axis.items():
        m = shapes[name][ax]
        if None in per_slc and len(per_slc) == 1:
            axes[name][ax] = entry_of(per_slc[None], m)
            continue
        slice_axes = {k[0] for k in per_slc if k is not None}
        s = min(slice_axes)
        if None in per_slc or len(slice_axes) > 1 or (name, s) in by_axis:
            raise ShapeError(f"permutation spec: axis {ax} of {name!r} is claimed both whole and per slice, or per slice "
                             f"of several axes or of a permuted axis ({sorted(per_slc, key=str)[:3]}).")
        axes[name][ax] = {PER_SLICE: s, "entries": [entry_of(per_slc[(s, k)], m) if (s, k) in per_slc else None
                                                    for k in range(shapes[name][s])]}
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


def _permute_axis(t: Tensor, ax: int, entry: AxisEntry, perms: Mapping[str, Tensor], where: str) -> Tensor:
    """``t`` with the permutations of ``entry`` applied on axis ``ax`` (a per-slice entry: slice
    by slice along its axis, stacked back)."""
    if isinstance(entry, dict):
        s, entries = per_slice(entry, tuple(t.shape), ax, where)
        return torch.stack([_permute_axis(t.select(s, k), ax - (ax > s), e, perms, f"{where} (slice {k})")
                            for k, e in enumerate(entries)], dim=s)
    m = t.shape[ax]
    idx = torch.arange(m)
    for start, size, pid in axis_blocks(entry, m, where):
        if pid is None or pid not in perms:
            continue
        p = perms[pid]
        n = p.numel()
        if size % n:
            raise ShapeError(f"permutation spec: {where} has a slice of length {size}, not a multiple of {pid}'s size {n}.")
        b = size // n
        idx[start:start + size] = start + (p[:, None] * b + torch.arange(b)[None, :]).reshape(-1)
    return t.index_select(ax, idx)


def apply_spec(params: Mapping[str, Tensor], spec: PermutationSpec | Mapping[str, Any],
               perms: Mapping[str, Tensor]) -> Params:
    """Apply ``perms`` through the spec alone (module docstring for the block convention,
    sub-blocks and per-slice entries); IDs without a permutation in ``perms`` are left alone.

    Raises:
        ShapeError: a slice whose length is not a multiple of its permutation's size, or
            malformed sub-blocks or per-slice entries.
    """
    axes = spec.axes if isinstance(spec, PermutationSpec) else spec["axes"]
    out = dict(params)
    for name, entries in axes.items():
        t = out[name]
        for ax, entry in enumerate(entries):
            if axis_ids(entry) & set(perms):
                t = _permute_axis(t, ax, entry, perms, f"axis {ax} of {name!r}")
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
