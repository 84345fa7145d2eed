"""What a safetensors checkpoint stores, read from its headers, and the loaded model's names for it.

A checkpoint directory holds ``model.safetensors`` or shards ``model-0000i-of-0000n.safetensors``
with ``model.safetensors.index.json`` (``weight_map``: tensor name → shard). A safetensors file
is ``u64 N`` (little-endian), an ``N``-byte JSON header ``{name: {dtype, shape, data_offsets}}``
and the data; :func:`read_checkpoint` reads only the headers (no tensor is allocated) and checks
that the index and the shards agree and that no shard is truncated (the largest
``data_offsets`` end must equal the file's data length) — each disagreement a
:class:`~paramsym.errors.CheckpointError` naming the file and the tensor.

The loaded model may call a stored tensor otherwise: transformers renames on loading (GPT-NeoX
stores ``embed_out.weight``, the model's parameter is ``lm_head.weight``), and ties (GPT-2's
``lm_head.weight`` is the input embedding, stored once). :func:`stored_names` maps each tensor the
model would save (``state_dict`` names, tied repeats once) to the names the checkpoint stores it
under: the same name with the same shape, else the one stored tensor of that shape **whose
values equal the model's** (read one at a time with ``safe_open``); a model name stored under
its own name *and* as a tied repeat gets both. Exports name these stored tensors.

**Expert banks stored per expert.** transformers (≥ 5) loads Mixtral's stored
``block_sparse_moe.experts.<e>.w1/w3.weight`` (``(h, D)`` each) into one 3-D
``mlp.experts.gate_up_proj`` (``(E, 2h, D)``: ``gate_up[e] = [w1_e ; w3_e]``) and the ``w2_e``
(``(D, h)``) into ``mlp.experts.down_proj`` (``(E, D, h)``), and renames
``block_sparse_moe`` → ``mlp``; ``save_pretrained`` writes the per-expert layout back. The rules
come from transformers' own conversion mapping for the model type
(:func:`conversions`: renamings, and converters that stack per-expert tensors on axis 0 and
optionally concatenate them on axis 1 — any other operation is not read, and its tensor stays
unresolved, a named error). :func:`expert_pieces` resolves each bank into :class:`Piece` s (one
stored 2-D tensor = rows ``start:start+size`` of expert ``e``'s slice), checked against the
stored shapes and, where the model has values, the stored values; a checkpoint that stores the
fused banks under the model's names (written by a converter-free writer) matches by name and has
no pieces. :func:`to_pieces` / :func:`from_pieces` cut a parameter set into the stored tensors
and put it back (exact: slicing and concatenation).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from ..errors import CheckpointError
from ..models.checks import StoredTensor, read_header

__all__ = ["Piece", "StoredTensor", "conversions", "expert_pieces", "from_pieces", "read_checkpoint", "stored_names",
           "loading_estimate", "to_pieces", "INDEX_FILE"]

INDEX_FILE = "model.safetensors.index.json"
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
                "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}


def read_checkpoint(directory: str | Path) -> dict[str, StoredTensor]:
    """Every stored tensor of the safetensors checkpoint in ``directory``, from the headers only.

    Raises:
        CheckpointError: no safetensors file; an index that is not JSON or names a shard the
            directory lacks or a tensor its shard does not hold; a shard the index does not
            name; a truncated shard; a tensor stored in two shards.
    """
    d = Path(directory)
    files = sorted(d.glob("*.safetensors"))
    index = d / INDEX_FILE
    weight_map: dict[str, str] | None = None
    if index.is_file():
        try:
            weight_map = dict(json.loads(index.read_text())["weight_map"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint index {str(index)!r} is not a safetensors index with a weight_map "
                                  f"({type(exc).__name__}: {exc}); save the model again.") from None
        shards = sorted(set(weight_map.values()))
        missing = [s for s in shards if not (d / s).is_file()]
        if missing:
            raise CheckpointError(f"checkpoint index {str(index)!r} names shard {missing[0]!r} "
                                  f"({sum(1 for v in weight_map.values() if v == missing[0])} tensors), which "
                                  f"{str(d)!r} lacks; copy the missing shard(s) {missing[:3]}.")
        unlisted = [f.name for f in files if f.name not in set(shards)]
        if unlisted:
            raise CheckpointError(f"checkpoint {str(d)!r}: shard {unlisted[0]!r} is missing from the index "
                                  f"{INDEX_FILE} (which names {shards[:3]}); remove the stray file or save the model "
                                  "again.")
        files = [d / s for s in shards]
    if not files:
        raise CheckpointError(f"checkpoint {str(d)!r} holds no *.safetensors file; give a directory written by "
                              "save_pretrained.")
    out: dict[str, StoredTensor] = {}
    for f in files:
        for name, t in read_header(f).items():
            if name in out:
                raise CheckpointError(f"checkpoint {str(d)!r}: tensor {name!r} is stored in both {out[name].file.name!r} "
                                      f"and {f.name!r}; save the model again.")
            out[name] = t
    if weight_map is not None:
        for name, shard in weight_map.items():
            if name not in out or out[name].file.name != shard:
                raise CheckpointError(f"checkpoint index {str(index)!r} names tensor {name!r} in shard {shard!r}, which "
                                      f"does not hold it{f' (it is in {out[name].file.name!r})' if name in out else ''}; "
                                      "save the model again.")
    return out


def _load_one(t: StoredTensor) -> Tensor:
    from safetensors import safe_open

    with safe_open(str(t.file), framework="pt") as fh:
        return fh.get_tensor(t.name)


def stored_names(model: nn.Module, stored: Mapping[str, StoredTensor],
                 pieces: Mapping[str, list[Piece]] | None = None) -> dict[str, list[str]]:
    """``{model name: [stored names]}`` for every tensor ``model`` saves (``state_dict`` keys,
    tied repeats folded into their first name) except the expert banks in ``pieces`` (stored per
    expert: :func:`expert_pieces`), resolved against the checkpoint (module docstring; a name
    transformers renames on loading — Mixtral's ``mlp.gate.weight`` stored as
    ``block_sparse_moe.gate.weight`` — is found under its stored name by :func:`conversions`). Call it on the model as loaded (values unchanged; any dtype the stored values
    convert to exactly), or on a model on the ``meta`` device (no values: an unmatched name is
    resolved only when exactly one unmatched stored tensor has its shape).

    Raises:
        CheckpointError: a model tensor with no stored counterpart (neither its name nor a
            stored tensor of its shape and values), or one whose values match several stored tensors.
    """
    first: dict[int, str] = {}
    tied: dict[str, list[str]] = {}
    for name, t in model.state_dict(keep_vars=True).items():
        canon = first.setdefault(id(t), name)
        tied.setdefault(canon, []).append(name)
    tensors = {n: t.detach() for n, t in model.state_dict(keep_vars=True).items() if n in tied}
    out: dict[str, list[str]] = {}
    renames, _ = conversions(getattr(getattr(model, "config", None), "model_type", None))
    for canon, names in tied.items():
        same = [n for n in names if n in stored and stored[n].shape == tuple(tensors[canon].shape)]
        if not same:
            same = [r for n in names if (r := _to_stored_name(n, renames)) != n and r in stored
                    and stored[r].shape == tuple(tensors[canon].shape)]
        if same:
            out[canon] = same
    taken = {s for v in out.values() for s in v} | {q.stored for v in (pieces or {}).values() for q in v}
    for canon in tied:
        if canon in out or canon in (pieces or {}):
            continue
        p = tensors[canon]
        shaped = [s for s, t in stored.items() if s not in taken and t.shape == tuple(p.shape)]
        if p.is_meta:  # no values (a model built on the meta device): the one unmatched stored tensor of its shape
            equal = shaped
        else:
            equal = [s for s in shaped if torch.equal(_load_one(stored[s]).to(p.dtype), p)]
        if len(equal) != 1:
            why = ("no stored tensor has its shape and values" if not equal
                   else f"{'its shape matches' if p.is_meta else 'its values equal'} {len(equal)} stored tensors {equal[:3]}")
            raise CheckpointError(f"model tensor {canon!r} {tuple(p.shape)} of {type(model).__name__}: not stored under "
                                  f"that name and {why} (of {len(shaped)} stored tensors of its shape); the checkpoint "
                                  "stores it transformed (split, fused or converted), which an export cannot name.")
        out[canon] = equal
        taken.add(equal[0])
    return out


def renaming(stored_as: Mapping[str, list[str]]) -> tuple[dict[str, str], dict[str, str]]:
    """``(model → stored, stored → model)``: each model tensor's first stored name, and every
    stored name back to its model tensor."""
    return ({m: s[0] for m, s in stored_as.items()}, {x: m for m, s in stored_as.items() for x in s})


def _own_axes(data: Mapping[str, object], pieces: Mapping[str, list[Piece]] | None
              ) -> tuple[dict[str, object], list[tuple[str, object]]]:
    """``(axes, rest)``: the spec's axes of the per-expert tensors of ``pieces`` (already stored
    names, kept as they are) and the other ``(name, axes)`` pairs, to be renamed."""
    own = {q.stored for ps in (pieces or {}).values() for q in ps}
    items = list(dict(data["axes"]).items())  # type: ignore[call-overload]
    return {n: ax for n, ax in items if n in own}, [(n, ax) for n, ax in items if n not in own]


def spec_to_stored(data: Mapping[str, object], stored_as: Mapping[str, list[str]],
                   pieces: Mapping[str, list[Piece]] | None = None) -> dict[str, object]:
    """A permutation-spec JSON (``{"perms", "axes", ...}``) with every tensor named as the
    checkpoint stores it (a tensor stored under several names gets each, with the same axes);
    the stored per-expert tensors of ``pieces`` (already stored names) are kept as they are.

    Raises:
        CheckpointError: the spec names a tensor the checkpoint does not store.
    """
    axes, rest = _own_axes(data, pieces)
    for name, ax in rest:
        if name not in stored_as:
            raise CheckpointError(f"the permutation spec names {name!r}, which the checkpoint does not store.")
        for s in stored_as[name]:
            axes[s] = ax
    return {**data, "axes": axes}


def spec_from_stored(data: Mapping[str, object], stored_as: Mapping[str, list[str]],
                     pieces: Mapping[str, list[Piece]] | None = None) -> dict[str, object]:
    """The inverse of :func:`spec_to_stored` (for verifying a written spec on the loaded model;
    the per-expert tensors of ``pieces`` keep their stored names: :func:`from_pieces` fuses them).

    Raises:
        CheckpointError: a stored name that is no model tensor's, or two stored names of one model
            tensor with different axes.
    """
    _, back = renaming(stored_as)
    axes, rest = _own_axes(data, pieces)
    for name, ax in rest:
        if name not in back:
            raise CheckpointError(f"the permutation spec names {name!r}, which is no tensor of the checkpoint.")
        m = back[name]
        if m in axes and axes[m] != ax:
            raise CheckpointError(f"the permutation spec gives {name!r} other axes than another stored name of {m!r}.")
        axes[m] = ax
    return {**data, "axes": axes}


def rename_architecture(arch: Mapping[str, object], rename: Mapping[str, str]) -> dict[str, object]:
    """A MergeKit architecture dict with ``name`` and ``tied_names`` of the pre/post weights renamed
    by ``rename`` (names not in it unchanged). Layer templates are kept and must need no renaming.

    Raises:
        CheckpointError: ``rename`` renames a layer tensor (a template cannot state per-layer names).
    """
    def one(e: Mapping[str, object]) -> dict[str, object]:
        out = dict(e, name=rename.get(str(e["name"]), e["name"]))
        if e.get("tied_names"):
            out["tied_names"] = [rename.get(t, t) for t in e["tied_names"]]  # type: ignore[union-attr]
        return out

    layer = [str(e["name"]) for e in arch["layer_templates"]["weights"]]  # type: ignore[index]
    moved = [n for n in rename if rename[n] != n and any(_matches(t, n) for t in layer)]
    if moved:
        raise CheckpointError(f"the checkpoint stores layer tensor {moved[0]!r} as {rename[moved[0]]!r}; a MergeKit "
                              "layer template cannot state per-layer renamings: use --export permutation-spec.")
    return {**arch, "pre_weights": [one(e) for e in arch["pre_weights"]],  # type: ignore[union-attr]
            "post_weights": [one(e) for e in arch["post_weights"]]}  # type: ignore[union-attr]


def _matches(template: str, name: str) -> bool:
    import re

    head, sep, tail = template.partition("${layer_index}")
    return bool(re.fullmatch(re.escape(head) + r"\d+" + re.escape(tail), name)) if sep else template == name


def loading_estimate(stored: Mapping[str, StoredTensor], copies: int = 3) -> int:
    """Bytes of loading the checkpoint (as stored) and holding ``copies`` float64 copies of it (the
    float64 model, a transformed parameter set, the export's comparison): an estimate checked
    against ``--max-memory`` before anything is loaded."""
    total = 0
    for t in stored.values():
        n = 1
        for s in t.shape:
            n *= s
        total += t.nbytes + copies * 8 * n
    return total


@dataclass(frozen=True)
class Piece:
    """One stored 2-D tensor of a 3-D model tensor ``(E, R, C)``: ``T[expert, start:start + size, :]``."""

    stored: str
    expert: int
    start: int
    size: int


def conversions(model_type: str | None) -> tuple[list[tuple[str, str]], list[tuple[str, list[str], bool]]]:
    """transformers' loading conversions for ``model_type``, as far as they are read here:
    ``(renamings [(model substring, stored substring)], converters [(model suffix, stored source
    patterns with ``*`` for the expert index, concatenated on axis 1)])``. Only literal renamings
    and converters made of ``MergeModulelist(dim=0)`` optionally followed by ``Concatenate(dim=1)``
    are read; none for a type without a mapping (or a transformers without the registry)."""
    if model_type is None:
        return [], []
    try:
        from transformers.conversion_mapping import get_checkpoint_conversion_mapping
    except ImportError:  # transformers < 5: the model's names are the stored ones
        return [], []
    renames: list[tuple[str, str]] = []
    converters: list[tuple[str, list[str], bool]] = []
    literal = re.compile(r"^[\w.*]+$")
    for t in get_checkpoint_conversion_mapping(model_type) or []:
        src, tgt = list(getattr(t, "source_patterns", [])), list(getattr(t, "target_patterns", []))
        if not all(literal.match(x) for x in src + tgt) or len(tgt) != 1:
            continue
        ops = [(type(o).__name__, getattr(o, "dim", None)) for o in getattr(t, "operations", None) or []]
        if not ops and len(src) == 1 and "*" not in src[0] + tgt[0]:
            renames.append((tgt[0], src[0]))
        elif ops in ([("MergeModulelist", 0)], [("MergeModulelist", 0), ("Concatenate", 1)]) and \
                all(x.count("*") == 1 for x in src) and (len(src) == 1 or len(ops) == 2):
            converters.append((tgt[0], src, len(ops) == 2))
    return renames, converters


def _to_stored_name(name: str, renames: list[tuple[str, str]]) -> str:
    for model_part, stored_part in renames:
        name = name.replace(model_part, stored_part)
    return name


def expert_pieces(model: nn.Module, stored: Mapping[str, StoredTensor]) -> dict[str, list[Piece]]:
    """``{model name: [Piece]}`` for every 3-D model tensor the checkpoint stores per expert
    (module docstring), from the model's names and shapes and the stored headers; where the model
    has values (not ``meta``), each piece's stored values must equal its slice.

    Raises:
        CheckpointError: a piece whose stored values differ from the model's slice (the conversion
            read here is not the one transformers applied).
    """
    renames, converters = conversions(getattr(getattr(model, "config", None), "model_type", None))
    out: dict[str, list[Piece]] = {}
    state = model.state_dict()
    for name, t in state.items():
        if t.dim() != 3 or (name in stored and stored[name].shape == tuple(t.shape)):
            continue
        E, R, C = t.shape
        for target, sources, _ in converters:
            if not name.endswith(target):
                continue
            base = _to_stored_name(name[: -len(target)] + ".", renames)[:-1]
            names = [[base + s.replace("*", str(e)) for s in sources] for e in range(E)]
            if not all(n in stored and len(stored[n].shape) == 2 and stored[n].shape[1] == C for row in names for n in row):
                continue
            sizes = [[stored[n].shape[0] for n in row] for row in names]
            if any(sz != sizes[0] for sz in sizes) or sum(sizes[0]) != R:
                continue
            starts = [sum(sizes[0][:k]) for k in range(len(sources))]
            out[name] = [Piece(n, e, starts[k], sizes[0][k]) for e, row in enumerate(names) for k, n in enumerate(row)]
            break
    for name, ps in out.items():
        t = state[name]
        if t.is_meta:
            continue
        for q in ps:
            if not torch.equal(_load_one(stored[q.stored]).to(t.dtype), t[q.expert, q.start:q.start + q.size]):
                raise CheckpointError(f"stored tensor {q.stored!r} is not rows {q.start}:{q.start + q.size} of expert "
                                      f"{q.expert} of the loaded {name!r}; transformers converted it otherwise than its "
                                      "conversion mapping says, which an export cannot name.")
    return out


def to_pieces(params: Mapping[str, Tensor], pieces: Mapping[str, list[Piece]]) -> dict[str, Tensor]:
    """``params`` with every expert bank in ``pieces`` replaced by its stored per-expert tensors."""
    out = {n: t for n, t in params.items() if n not in pieces}
    for name, ps in pieces.items():
        for q in ps:
            out[q.stored] = params[name][q.expert, q.start:q.start + q.size]
    return out


def from_pieces(tensors: Mapping[str, Tensor], pieces: Mapping[str, list[Piece]]) -> dict[str, Tensor]:
    """The inverse of :func:`to_pieces`: each bank stacked (axis 0) from its experts' pieces
    concatenated in row order (axis 1)."""
    own = {q.stored for ps in pieces.values() for q in ps}
    out = {n: t for n, t in tensors.items() if n not in own}
    for name, ps in pieces.items():
        E = 1 + max(q.expert for q in ps)
        out[name] = torch.stack([torch.cat([tensors[q.stored] for q in sorted(ps, key=lambda q: q.start)
                                            if q.expert == e], dim=0) for e in range(E)])
    return out
