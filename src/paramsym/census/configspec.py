"""The permutation spec of a checkpoint without reading its weights (issue 34).

The spec (:mod:`paramsym.census.permspec`) depends only on the architecture, the config's sizes
and the stored tensor names — not on the weights' values. :func:`spec_without_weights`:

1. reads the checkpoint's **headers** (:func:`paramsym.census.stored.read_checkpoint`: names,
   shapes, index/shard checks; nothing allocated) and ``config.json``;
2. builds the full model on the ``meta`` device (names and shapes of every tensor, no storage);
3. traces a **two-layer copy** of the config at the real widths (the vocabulary cut to
   ``max(128, 1 + largest special token id)``, random weights drawn from a seeded generator) with
   :func:`paramsym.census.spaces.derive_spaces`, and verifies its spec *through the serialised
   file* on that copy (random elements of every permutation, as the weighted export does);
4. extends the spec from layer 1 to every layer (names and IDs renumbered; layers 0 and 1 must
   agree, else the layers differ and the weighted export is needed), checks every axis against
   the full model's shapes (:func:`~paramsym.census.permspec.axis_parts`), and names the
   checkpoint's stored tensors (same name and shape; else the one unmatched stored tensor of
   that shape — GPT-NeoX's ``embed_out.weight``; a name transformers renames on loading under
   its stored name; otherwise a named error). Expert banks the checkpoint stores per expert
   (Mixtral: :func:`~paramsym.census.stored.expert_pieces`, from the names and shapes) are
   traced, verified and written as those stored tensors, one unit group per expert.

Memory: the two-layer copy in the tracing dtype (its estimate, times 4 for the tracer's
transforms and copies, is checked against ``max_memory``, when given, **before** anything is allocated:
:class:`~paramsym.errors.TooLargeError`), i.e. a small multiple of two decoder layers plus the
cut embeddings. What this does not verify is the spec on the checkpoint's own weights (the
weighted export does, when memory allows): the group is a property of the architecture, the
tests apply such specs to stored checkpoints and reload them.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from ..groups.memory import check_memory, format_bytes
from .permspec import PER_SLICE, PermutationSpec, axis_parts, spec_from_spaces, verify_spec
from .stored import (
    expert_pieces,
    from_pieces,
    read_checkpoint,
    spec_to_stored,
    stored_names,
    to_pieces,
)

__all__ = ["meta_checkpoint", "spec_without_weights", "TRACE_LAYERS"]

TRACE_LAYERS = 2
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
_ID = re.compile(r"^(P_\w+?)_(\d+)$")


def _auto_class(cfg: Any):
    import transformers

    archs = list(getattr(cfg, "architectures", None) or [])
    if any(a.endswith(("LMHeadModel", "ForCausalLM")) for a in archs):
        return transformers.AutoModelForCausalLM
    if any(a.endswith("ForImageClassification") for a in archs):  # ViT: its base class adds a pooler it lacks
        return transformers.AutoModelForImageClassification
    return transformers.AutoModel


def _small_config(cfg: Any) -> tuple[Any, str, int]:
    key = next((k for k in _LAYER_KEYS if isinstance(getattr(cfg, k, None), int)), None)
    if key is None:
        raise ConfigError(f"config of model_type {cfg.model_type!r} names no layer count among {list(_LAYER_KEYS)}.")
    L = int(getattr(cfg, key))
    small = copy.deepcopy(cfg)
    setattr(small, key, min(L, TRACE_LAYERS))
    for k, v in cfg.to_dict().items():  # per-layer lists (layer_types, ...) cut with the layers
        if isinstance(v, list) and len(v) == L and L > TRACE_LAYERS:
            setattr(small, k, v[:TRACE_LAYERS])
    V = int(getattr(cfg, "vocab_size", 0) or 0)
    special = [int(v) for k, v in cfg.to_dict().items() if k.endswith("_token_id") and isinstance(v, int)
               and not isinstance(v, bool) and 0 <= v < V]
    if V:
        small.vocab_size = min(V, max(128, 1 + max(special, default=0)))
    return small, key, L


def _random_weights(model: nn.Module, gen: torch.Generator, std: float = 0.2) -> None:
    """Seeded random weights: matrices ``N(0, 1/fan)`` (``fan`` = their last axis, so activations
    stay O(1) at real widths and the softmax does not saturate — a saturated softmax hides the
    keys' reach to later tokens from the tracer), vectors ``N(0, std²)``, norm scales ``1 + N(0, std²)``."""
    with torch.no_grad():
        for p in model.parameters():
            scale = std if p.dim() < 2 else p.shape[-1] ** -0.5
            noise = scale * torch.randn(p.shape, generator=gen, dtype=p.dtype)
            p.copy_(1 + noise if p.dim() == 1 and bool((p == 1).all()) else noise)


def _extend(spec: dict[str, Any], layer_prefix: str, L: int) -> dict[str, Any]:
    """Layer 1's entries (names under ``layer_prefix + "1."``, IDs ``P_*_1``) copied to layers
    0..L−1; layer 0 must be layer 1's with the index changed."""
    pat = re.compile(rf"^{re.escape(layer_prefix)}(\d+)\.(.*)$")

    def renumber(entry: Any, j: int) -> Any:
        def one(pid: Any) -> Any:
            m = _ID.match(pid) if isinstance(pid, str) else None
            return f"{m.group(1)}_{j}" if m else pid
        if isinstance(entry, dict):  # per-slice entries (a stacked expert bank)
            return {PER_SLICE: entry[PER_SLICE], "entries": [renumber(e, j) for e in entry["entries"]]}
        return [[one(b[0]), b[1]] for b in entry] if isinstance(entry, list) else one(entry)

    per_layer: dict[int, dict[str, list]] = {}
    outer: dict[str, list] = {}
    for name, axes in spec["axes"].items():
        m = pat.match(name)
        if m:
            per_layer.setdefault(int(m.group(1)), {})[m.group(2)] = axes
        else:
            outer[name] = axes
    last = max(per_layer)
    template = per_layer[last]
    for i, entries in per_layer.items():
        again = {n: [renumber(e, i) for e in axes] for n, axes in template.items()}
        if entries != again:
            raise ConfigError(f"layers {i} and {last} of the traced copy differ (tensors {sorted(set(entries) ^ set(again))[:3]}"
                              " or their axes); their spec cannot be extended to every layer: export with the weights.")
    perms = {k: v for k, v in spec["perms"].items() if not _ID.match(k)}
    layer_perms = {m.group(1): v for k, v in spec["perms"].items() if (m := _ID.match(k)) and int(m.group(2)) == last}
    axes = dict(outer)
    for j in range(L):
        perms.update({f"{base}_{j}": n for base, n in layer_perms.items()})
        axes.update({f"{layer_prefix}{j}.{n}": [renumber(e, j) for e in a] for n, a in template.items()})
    return {"perms": perms, "axes": axes}


def _on_meta(model: nn.Module) -> nn.Module:
    """A ``meta``-device copy of ``model`` (names, shapes and config; no values, nothing allocated)."""
    with torch.device("meta"):
        return type(model)(model.config)


def meta_checkpoint(directory: str | Path) -> tuple[Any, ...]:
    """What the headers and ``config.json`` of the checkpoint in ``directory`` say, nothing
    allocated: ``(stored tensors, config, model class, the whole model on the meta device, the
    two-layer config, its layer-count key, the layer count, the two-layer copy's parameter count)``.

    Raises:
        CheckpointError: bad index or shards (:func:`~paramsym.census.stored.read_checkpoint`).
        ConfigError: a config naming no layer count.
    """
    import transformers

    stored = read_checkpoint(directory)
    cfg = transformers.AutoConfig.from_pretrained(str(directory), local_files_only=True)
    cls = _auto_class(cfg)
    with torch.device("meta"):
        full = cls.from_config(cfg, attn_implementation="eager")
    small_cfg, key, L = _small_config(cfg)
    with torch.device("meta"):
        n_small = sum(p.numel() for p in cls.from_config(small_cfg, attn_implementation="eager").parameters())
    return stored, cfg, cls, full, small_cfg, key, L, n_small


def spec_without_weights(directory: str | Path, *, seed: int = 0, max_memory: int | None = None,
                         dtype: torch.dtype = torch.float64) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(spec JSON in the checkpoint's stored names, report)`` of the checkpoint in ``directory``
    without reading its weights (module docstring).

    Raises:
        CheckpointError: bad index or shards (:func:`~paramsym.census.stored.read_checkpoint`), or a
            model tensor the checkpoint stores under no resolvable name.
        TooLargeError: the two-layer copy would exceed ``max_memory`` (nothing allocated).
        ConfigError: no layer count, layers that differ, or a spec that does not fit the full shapes.
        ToleranceError: the spec fails its check on the traced copy.
        TraceError: the tracer cannot follow the architecture.
    """

    from ..errors import ToleranceError
    from ..models.adapters import require_eager
    from .export import export_tolerance
    from .spaces import derive_spaces
    from .walk import _output, default_inputs

    stored, cfg, cls, full, small_cfg, key, L, n_small = meta_checkpoint(directory)
    itemsize = torch.finfo(dtype).bits // 8
    if max_memory is not None:
        check_memory(4 * n_small * itemsize, f"tracing a {TRACE_LAYERS}-layer copy of {type(full).__name__} "
                     f"({n_small:,} parameters in {str(dtype).removeprefix('torch.')}, ×4 for the tracer)", max_memory,
                     "Pass --dtype float32 to halve it.")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        small = cls.from_config(small_cfg, attn_implementation="eager")
    small = require_eager(small).to(dtype).eval()
    _random_weights(small, torch.Generator().manual_seed(int(seed)))
    inputs = default_inputs(small, torch.Generator().manual_seed(int(seed)))
    with torch.no_grad():
        spaces = derive_spaces(small, inputs, _output)
    params = {k: v.detach() for k, v in small.named_parameters()}
    small_pieces = expert_pieces(_on_meta(small), stored)  # its layers are the checkpoint's first ones
    spec = spec_from_spaces(spaces, params, pieces=small_pieces)
    parsed = json.loads(json.dumps(spec.to_json()))
    check = PermutationSpec({k: int(v) for k, v in parsed["perms"].items()}, parsed["axes"])
    rep = verify_spec(small, check, to_pieces(params, small_pieces), inputs, _output,
                      torch.Generator().manual_seed(int(seed)), output_perm="P_res" if spaces.output_in_stream else None,
                      to_model=lambda t: from_pieces(t, small_pieces))
    tol = export_tolerance(spaces, dtype)
    if rep["max_error"] > tol or rep["min_motion"] <= 0:
        raise ToleranceError(f"the spec traced on a {TRACE_LAYERS}-layer copy of {type(full).__name__} fails its check "
                             f"through the file: {rep['max_error']:.2e} > {tol:.0e}; nothing written.")
    first = spaces.layout.layers[0].module
    prefix = first.rsplit(".", 1)[0] + "." if "." in first else ""
    data = _extend(parsed, prefix, L) if L > TRACE_LAYERS or len(spaces.layout.layers) > 1 else parsed
    pieces = expert_pieces(full, stored)
    shapes = {n: tuple(t.shape) for n, t in full.state_dict().items() if n not in pieces}
    shapes.update({q.stored: stored[q.stored].shape for ps in pieces.values() for q in ps})
    for name, axes in data["axes"].items():
        if name not in shapes or len(axes) != len(shapes[name]):
            raise ConfigError(f"the extended spec names {name!r}, which the full {type(full).__name__} "
                              f"{'lacks' if name not in shapes else f'has with shape {shapes[name]}'}.")
        for ax, entry in enumerate(axes):
            for _, _, size, pid in axis_parts(entry, tuple(shapes[name]), ax, f"axis {ax} of {name!r}"):
                if pid is not None and size % int(data["perms"][pid]):
                    raise ConfigError(f"axis {ax} of {name!r} ({size}) is no multiple of {pid}'s {data['perms'][pid]}.")
    names = stored_names(full, stored, pieces)
    out = spec_to_stored(data, names, pieces)
    return out, {"perms": len(out["perms"]), "layers": L, "traced_layers": len(spaces.layout.layers),
                 "traced_parameters": n_small, "verification": rep | {"tolerance": tol},
                 "renamed": {m: s for m, s in ((m, s[0]) for m, s in names.items()) if m != s},
                 "estimate": format_bytes(4 * n_small * itemsize), "stored_tensors": len(stored)}

