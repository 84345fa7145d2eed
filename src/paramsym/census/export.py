"""Exports of a model's permutation symmetries and tensor layout, each verified through the written data alone.

* ``permutation-spec`` — :class:`~paramsym.census.permspec.PermutationSpec` as JSON,
  ``{"perms": {ID: n}, "axes": {tensor: [ID or null per axis]}}`` (the block convention of
  :mod:`paramsym.census.permspec`).
* ``mergekit`` — the architecture file current MergeKit (0.1.x) loads
  (:func:`mergekit_v01_architecture`): ``model_type``, ``architectures``, ``pre_weights``,
  ``num_layers_config_key``, ``layer_templates.weights`` with ``${layer_index}``,
  ``post_weights``; per tensor only the fields of 0.1.x's ``WeightInfo``
  (:data:`MERGEKIT_V01_FIELDS`; it is declared ``extra="forbid"``): every stored tensor named
  once, ``vocabulary_axis`` on the token-indexed axis (input embedding and LM head rows, LM-head
  bias), tied names (``lm_head.weight`` sharing the embedding) ``optional`` with ``tied_names``.
  0.1.x has **no field for symmetry spaces**, so this file states none; the spaces are in
  ``permutation-spec`` (every axis) and ``mergekit-0.0``. (The top-level model of 0.1.x,
  ``JsonModuleArchDef``, leaves pydantic's default ``extra="ignore"``: an extra top-level key
  would load but be dropped unread, so none is added.) Verified by
  :func:`verify_mergekit_v01`: fields, the tensor list (and, from the CLI, the checkpoint's
  stored names), and a relabelling of the vocabulary applied through the file's
  ``vocabulary_axis`` entries.
* ``mergekit-0.1.4`` — the same file for MergeKit 0.1.4's reader: ``is_embed: true`` where
  0.1.5 states ``vocabulary_axis: 0`` (:mod:`paramsym.census.mergekit_versions`: 0.1.4 would
  silently drop ``vocabulary_axis``, 0.1.5 rejects ``is_embed``; each file is refused by the
  other's checks with :class:`~paramsym.errors.MergekitVersionError`).
* ``mergekit-0.0`` — MergeKit ≤ 0.0.6's space-annotated layout (:func:`mergekit_architecture`;
  written from the format's
  documented fields: ``model_type``, ``architectures``, ``pre_weights``, ``num_layers_config_key``,
  ``layer_templates.weights`` with ``${layer_index}``, ``post_weights``; per weight ``name``,
  ``input_space``, ``output_space``, ``is_embed``, ``is_vector``, ``head_split``, ``is_kq``).
  Spaces: ``running_residual`` (the stream), ``up_${layer_index}`` (FFN units),
  ``attn_qk_${layer_index}`` / ``attn_v_${layer_index}`` (with ``head_split``). The space fields
  follow ``nn.Linear`` (``input_space`` = axis 1, ``output_space`` = axis 0; a vector's space is
  its only axis). The format names **one space per axis**, so a fused axis (several spaces side
  by side: GPT-2's ``c_attn``, GPT-NeoX/Falcon's ``query_key_value``, Phi-3's ``qkv_proj`` and
  ``gate_up_proj`` — sub-blocks in the permutation spec) gets no space field and every space on
  it (that layer's heads; Phi-3's FFN units) is dropped from every tensor (never half written);
  the fused tensor's other axis keeps its space (``input_space: running_residual``). What is
  lost there: the head permutations of those models and Phi-3's FFN-unit permutations (the
  permutation-spec export keeps them). ``Conv1D``'s transposed storage cannot be described at
  all: the space fields name a space per weight, not per axis, and the one place MergeKit applies
  them to weights (its activation-based merge script, 0.0.6) multiplies ``output_space`` on axis 0
  and ``input_space`` on axis 1 of every weight (``is_embed`` flips embeddings only), so a space
  stated on a ``(in, out)`` weight would be applied to the wrong axis; MergeKit's own ``gpt2.json``
  states no spaces (0.0.5.1, 0.0.6, 0.1.5). Every space touching such a weight is dropped, which
  for GPT-2 is every space: it is refused with a :class:`~paramsym.errors.ConfigError` naming
  the transposed weights and ``permutation-spec`` (which names each tensor's axes). The space
  fields are MergeKit ≤ 0.0.6's: 0.1.x removed them (its ``WeightInfo`` forbids unknown
  fields, so 0.1.x does not load these files).

:func:`export` checks, before writing anything, that the path does not exist, then verifies the
data (``mergekit``: :func:`verify_mergekit_v01`; the other two as follows): the JSON is
serialised, parsed back, and random elements of every permutation it describes
are applied **from the parsed data alone** (a random permutation per ID / per space without
``head_split``; a random permutation of the key/value heads for ``head_split`` spaces is not
applied — MergeKit leaves its meaning to the merge method), and the model's outputs compared
(≤ 1e-10 relative in float64, 1e-5 in float32 or for models computing their norms in float32).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ..errors import ConfigError, ExportPathExistsError, ToleranceError
from .mergekit_versions import MERGEKIT_VERSIONS, check_version, from_v014, to_v014
from .permspec import PermutationSpec, axis_ids, spec_from_spaces, verify_spec
from .spaces import Spaces
from .stored import (
    Piece,
    from_pieces,
    rename_architecture,
    renaming,
    spec_from_stored,
    spec_to_stored,
    to_pieces,
)

__all__ = ["FORMATS", "MERGEKIT_V01_FIELDS", "export", "write_export", "mergekit_architecture", "mergekit_as_spec", "mergekit_v01_architecture",
           "export_tolerance", "spec_for_model", "verify_mergekit_v01"]

FORMATS = ("permutation-spec", "mergekit", "mergekit-0.1.4", "mergekit-0.0")
#: the per-tensor fields of MergeKit 0.1.x's ``WeightInfo`` (``extra="forbid"``: nothing else loads)
MERGEKIT_V01_FIELDS = ("name", "vocabulary_axis", "optional", "aliases", "force_dtype", "tied_names")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")


def export_tolerance(spaces: Spaces, dtype: torch.dtype) -> float:
    """The census's one rule (:mod:`paramsym.census.precision`) in its a-priori form:
    ``rounding_tolerance`` of what the model computes in — float32 where it runs in float32 or its
    norms compute in float32 inside (probed: :attr:`~paramsym.census.spaces.Spaces.float32_inside`;
    HF's RMSNorm upcasts) — over its ``L`` layers and stream width ``D``."""
    from .precision import compute_dtype, rounding_tolerance

    return rounding_tolerance(compute_dtype(dtype, spaces.float32_inside), len(spaces.layout.layers),
                              spaces.hidden_size)


def mergekit_architecture(model: nn.Module, spaces: Spaces, spec: PermutationSpec) -> dict[str, Any]:
    """The MergeKit ≤ 0.0.6 (``mergekit-0.0``) architecture description of ``model`` (module
    docstring); MergeKit 0.1.x rejects its space fields (:func:`mergekit_v01_architecture` is its format).

    Axis spaces come from ``spec`` (residual, FFN units) and from the attention layout (query/key
    and value/output spaces with ``head_split``), restricted to ``nn.Linear``-layout tensors.

    Raises:
        ConfigError: ``spec`` has a per-slice axis (a stacked expert bank's per-expert groups),
            which one space per tensor axis cannot state.
    """
    cfg = getattr(model, "config", None)
    params = dict(model.named_parameters())
    key, layer_prefix, pat = _layer_naming(model, spaces)
    # per tensor: axis -> space name
    space_of: dict[str, dict[int, str]] = {}
    lin_out_in = {w: lay for w, lay in spaces.layouts.items()}
    bad_spaces: set[str] = set()

    def mark(name: str, axis: int, space: str) -> None:
        space_of.setdefault(name, {})[axis] = space

    def space(pid: str) -> str | None:
        return "running_residual" if pid == "P_res" else (f"up_{pid[6:]}" if pid.startswith("P_ffn_") else None)

    for name, ids in spec.axes.items():
        for ax, pid in enumerate(ids):
            if isinstance(pid, dict):  # per-slice entries: no field of MergeKit's says "one space per slice"
                raise ConfigError(f"--export mergekit-0.0: axis {ax} of {name!r} {tuple(params[name].shape)} is permuted "
                                  f"per slice of axis {pid.get('per_slice_of_axis')} (a stacked expert bank: one "
                                  f"permutation per expert, {sorted(axis_ids(pid))[:2]}...), which MergeKit 0.0's "
                                  "input_space/output_space (one space per axis of a tensor) cannot state; use --export "
                                  "permutation-spec, whose per-slice entries state it.")
            if isinstance(pid, list):  # a fused axis: one space per axis cannot say it (module docstring)
                bad_spaces |= {sp for q in axis_ids(pid) if (sp := space(q)) is not None}
            elif pid is not None and space(pid) is not None:
                mark(name, ax, space(pid))
    heads: dict[str, dict[str, str]] = {}
    for layer in spaces.layout.layers:
        a = layer.attention
        i = layer.index
        for proj, sp in ((a.q, f"attn_qk_{i}"), (a.k, f"attn_qk_{i}"), (a.v, f"attn_v_{i}")):
            if proj.features is None and proj.layout == "out_in":
                mark(proj.weight, 0, sp)
                heads.setdefault(proj.weight, {})["head_split"] = "output"
                if sp.startswith("attn_qk"):
                    heads[proj.weight]["is_kq"] = "true"
                if proj.bias:
                    mark(proj.bias, 0, sp)
            else:
                bad_spaces.add(sp)
        if a.o.layout == "out_in":
            mark(a.o.weight, 1, f"attn_v_{i}")
            heads.setdefault(a.o.weight, {})["head_split"] = "input"
    # spaces touching a tensor the (out, in) convention cannot describe are dropped everywhere
    for name, axes in space_of.items():
        if params[name].dim() == 2 and lin_out_in.get(name, "out_in") != "out_in":
            bad_spaces |= set(axes.values())
    for name in list(space_of):
        space_of[name] = {ax: s for ax, s in space_of[name].items() if s not in bad_spaces}

    def entry(name: str) -> dict[str, Any]:
        m = pat.match(name)
        tmpl = pat.sub(lambda m: f"{layer_prefix}${{layer_index}}.", name)
        e: dict[str, Any] = {"name": tmpl}
        t = params[name]
        sp = dict(space_of.get(name, {}))
        if m:  # layer spaces are templated like the names
            sp = {ax: re.sub(rf"_{m.group(1)}$", "_${layer_index}", s) for ax, s in sp.items()}
        if name in spaces.embeddings and name == _input_embedding_name(model, params):
            e["is_embed"] = True
        if t.dim() == 1:
            e["is_vector"] = True
            if 0 in sp:
                e["input_space"] = sp[0]
        elif t.dim() == 2:
            if name in spaces.embeddings:
                if 1 in sp:
                    e["output_space"] = sp[1]
            else:
                if 1 in sp:
                    e["input_space"] = sp[1]
                if 0 in sp:
                    e["output_space"] = sp[0]
        h = heads.get(name, {})
        if "head_split" in h and (("output_space" in e and h["head_split"] == "output")
                                  or ("input_space" in e and h["head_split"] == "input")):
            e["head_split"] = h["head_split"]
            if h.get("is_kq"):
                e["is_kq"] = True
        return e

    pre, post, layer0 = [], [], []
    seen_layer = False
    for name in params:
        m = pat.match(name)
        if m:
            seen_layer = True
            if m.group(1) == "0":
                layer0.append(entry(name))
        elif seen_layer:
            post.append(entry(name))
        else:
            pre.append(entry(name))
    return {"model_type": getattr(cfg, "model_type", type(model).__name__),
            "architectures": list(getattr(cfg, "architectures", None) or [type(model).__name__]),
            "pre_weights": pre, "num_layers_config_key": key, "layer_templates": {"weights": layer0},
            "post_weights": post}


def _layer_naming(model: nn.Module, spaces: Spaces) -> tuple[str, str, re.Pattern[str]]:
    """The config key holding the layer count, the layers' name prefix and the pattern of a layer
    tensor's name (group 1: the layer index)."""
    cfg = getattr(model, "config", None)
    L = len(spaces.layout.layers)
    stored = cfg.to_dict() if hasattr(cfg, "to_dict") else {}  # prefer the key config.json spells (GPT-2: n_layer)
    keys = sorted(_LAYER_KEYS, key=lambda k: k not in stored)
    key = next((k for k in keys if getattr(cfg, k, None) == L), None)
    if key is None:
        raise ConfigError(f"mergekit export: no config key among {list(_LAYER_KEYS)} equals the {L} layers found.")
    first = spaces.layout.layers[0].module
    layer_prefix = first.rsplit(".", 1)[0] + "." if "." in first else ""
    return key, layer_prefix, re.compile(rf"^{re.escape(layer_prefix)}(\d+)\.")


def _input_embedding_name(model: nn.Module, params: Mapping[str, Tensor]) -> str | None:
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    for n, p in params.items():
        if emb is not None and p is emb.weight:
            return n
    return None


def _checkpoint_tensors(model: nn.Module) -> list[tuple[str, Tensor, str | None]]:
    """``(name, tensor, canonical name or None)`` for every ``state_dict`` key in order: parameters
    and persistent buffers; a key whose tensor is the same object as an earlier key's (tied
    weights, e.g. ``lm_head.weight`` = the input embedding) carries that earlier name — the one
    ``named_parameters()`` keeps and the checkpoint stores."""
    first: dict[int, str] = {}
    out = []
    for name, t in model.state_dict(keep_vars=True).items():
        canon = first.setdefault(id(t), name)
        out.append((name, t, None if canon == name else canon))
    return out


def _stale_buffers(model: nn.Module, checkpoint_names: Collection[str] | None) -> dict[str, Tensor]:
    """Non-persistent buffers of ``model`` that the checkpoint nevertheless stores (written by an
    older ``transformers``, ignored on loading)."""
    if not checkpoint_names:
        return {}
    saved = set(model.state_dict(keep_vars=True))
    return {n: b for n, b in model.named_buffers() if n in checkpoint_names and n not in saved}


def _after_layers(model: nn.Module, name: str, layer_prefix: str) -> bool:
    """Whether ``name``'s module comes after the layers in the model's module order."""
    mods = [n for n, _ in model.named_modules()]
    own = name.rsplit(".", 1)[0] if "." in name else ""
    first = next((i for i, n in enumerate(mods) if n.startswith(layer_prefix) and n != layer_prefix.rstrip(".")), len(mods))
    return own in mods and mods.index(own) > first


def _vocabulary_axes(model: nn.Module) -> dict[int, int]:
    """``{id(tensor): axis indexed by token ids}``: the input embedding's weight (``nn.Embedding``,
    ``(vocab, d)``: axis 0) and the output embedding's weight and bias (``nn.Linear`` rows, axis 0).

    Raises:
        ConfigError: the model has no ``nn.Embedding`` input embedding.
    """
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if not isinstance(emb, nn.Embedding):
        raise ConfigError(f"--export mergekit needs a token-embedding model (get_input_embeddings() an nn.Embedding); "
                          f"{type(model).__name__} has {type(emb).__name__}. Use --export permutation-spec.")
    axes = {id(emb.weight): 0}
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if isinstance(head, nn.Linear):
        axes[id(head.weight)] = 0
        if head.bias is not None:
            axes[id(head.bias)] = 0
    return axes


def mergekit_v01_architecture(model: nn.Module, spaces: Spaces, checkpoint_names: Collection[str] | None = None
                              ) -> dict[str, Any]:
    """The MergeKit 0.1.x architecture file of ``model`` (the ``--export mergekit`` format).

    Top level: ``model_type``, ``architectures``, ``pre_weights``, ``num_layers_config_key``,
    ``layer_templates.weights`` (layer 0's tensors with ``${layer_index}``), ``post_weights``.
    Per tensor only the fields of MergeKit 0.1.x's ``WeightInfo`` (:data:`MERGEKIT_V01_FIELDS`):
    ``name`` (every ``state_dict`` tensor once, in registration order), ``vocabulary_axis`` (the
    axis indexed by token ids: 0 for the input embedding ``(vocab, d)`` and for the output
    embedding's ``(vocab, d)`` weight and ``(vocab,)`` bias), ``force_dtype`` for integer buffers,
    and for a tied name (``lm_head.weight`` sharing the input embedding) ``optional: true`` with
    ``tied_names`` = the stored tensor's name, as MergeKit's own files write it (the checkpoint
    holds the tensor once; MergeKit skips the optional name when no input has it). A buffer the
    model no longer saves but ``checkpoint_names`` holds (``embeddings.position_ids`` of
    checkpoints from older ``transformers``) is listed ``optional`` (MergeKit's ``bert.json`` does
    the same). No space fields: 0.1.x has none (``WeightInfo`` forbids unknown fields);
    ``mergekit-0.0`` and ``permutation-spec`` carry the symmetries.
    """
    cfg = getattr(model, "config", None)
    key, layer_prefix, pat = _layer_naming(model, spaces)
    vocab = _vocabulary_axes(model)

    def tmpl(name: str) -> str:
        return pat.sub(lambda m: f"{layer_prefix}${{layer_index}}.", name)

    pre, post, layer0 = [], [], []
    seen_layer = False
    stale = _stale_buffers(model, checkpoint_names)
    for name, t, canon in _checkpoint_tensors(model) + [(n, b, None) for n, b in stale.items()]:
        e: dict[str, Any] = {"name": tmpl(name)}
        if id(t) in vocab:
            e["vocabulary_axis"] = vocab[id(t)]
        if canon is not None or name in stale:
            e["optional"] = True
        if canon is not None:
            e["tied_names"] = [tmpl(canon)]
        if not (t.is_floating_point() or t.is_complex()):
            e["force_dtype"] = str(t.dtype).removeprefix("torch.")
        m = pat.match(name)
        if m:
            seen_layer = True
            if m.group(1) == "0":
                layer0.append(e)
        elif name in stale:
            (post if _after_layers(model, name, layer_prefix) else pre).append(e)
        else:
            (post if seen_layer else pre).append(e)
    return {"model_type": getattr(cfg, "model_type", type(model).__name__),
            "architectures": list(getattr(cfg, "architectures", None) or [type(model).__name__]),
            "pre_weights": pre, "num_layers_config_key": key, "layer_templates": {"weights": layer0},
            "post_weights": post}


def _special_token_ids(cfg: Any, vocab: int) -> set[int]:
    """Token ids the model itself may treat specially (``*_token_id`` of the config: padding sets
    RoBERTa's positions): the vocabulary relabelling keeps them fixed."""
    out: set[int] = set()
    for k, v in (cfg.to_dict() if hasattr(cfg, "to_dict") else vars(cfg)).items():
        if k.endswith("_token_id"):
            for i in v if isinstance(v, (list, tuple)) else [v]:
                if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < vocab:
                    out.add(i)
    return out


def verify_mergekit_v01(arch: Mapping[str, Any], model: nn.Module, inputs: Mapping[str, Any],
                        output: Callable[[Any], Tensor], generator: torch.Generator) -> dict[str, Any]:
    """Check a MergeKit 0.1.x description against ``model``, reading the description alone.

    1. **Fields**: the top-level keys and each tensor's keys are among MergeKit 0.1.x's
       (:data:`MERGEKIT_V01_FIELDS`; its ``WeightInfo`` rejects any other).
    2. **Tensors**: templates expanded for ``config[num_layers_config_key]`` layers, the names of
       the entries neither ``optional`` nor tied are exactly the model's stored tensors
       (``state_dict`` less tied repeats), each once; an entry with ``tied_names`` is ``optional``
       and names a tensor that *is* (same object) one it lists; any other ``optional`` entry is a
       buffer the model does not save (a stale checkpoint buffer, :func:`mergekit_v01_architecture`).
    3. **Vocabulary axes** (function check): a random permutation ``p`` of the token ids (the
       config's special ids fixed) applied to every listed tensor on its ``vocabulary_axis``
       (``T' = T[p]`` along that axis), the inputs relabelled ``ids' = p⁻¹[ids]``: the output must
       equal ``F(θ)[..., p]`` for a model with an output embedding (logits indexed by token),
       else ``F(θ)`` — an embedding or LM head whose vocabulary axis is missing or wrong breaks it.

    Returns ``{"tensors", "tied", "vocabulary_axes": {name: axis}, "max_error", "min_motion",
    "errors": {"vocabulary": err}}``.

    Raises:
        ConfigError: a field, tensor list or tied name that does not hold (says which).
        MergekitVersionError: a MergeKit 0.1.4 file (``is_embed``; :mod:`.mergekit_versions`).
    """
    check_version(arch, "0.1.5")
    top = set(arch) - {"model_type", "architectures", "pre_weights", "layer_templates", "post_weights",
                       "num_layers_config_key"}
    if top or set(arch.get("layer_templates", {})) != {"weights"}:
        raise ConfigError(f"mergekit export: top-level keys {sorted(top)} / layer_templates keys "
                          f"{sorted(arch.get('layer_templates', {}))} are not MergeKit 0.1.x's.")
    cfg = model.config
    L = getattr(cfg, arch["num_layers_config_key"])
    entries = list(arch["pre_weights"]) + [
        {k: ([x.replace("${layer_index}", str(i)) for x in v] if isinstance(v, list) else
             v.replace("${layer_index}", str(i)) if isinstance(v, str) else v) for k, v in w.items()}
        for i in range(L) for w in arch["layer_templates"]["weights"]] + list(arch["post_weights"])
    bad = [(e.get("name"), sorted(set(e) - set(MERGEKIT_V01_FIELDS))) for e in entries if set(e) - set(MERGEKIT_V01_FIELDS)]
    if bad:
        raise ConfigError(f"mergekit export: fields outside MergeKit 0.1.x's WeightInfo {list(MERGEKIT_V01_FIELDS)}: {bad[:3]}.")
    tensors = {n: t for n, t, canon in _checkpoint_tensors(model) if canon is None}
    every = {n: t for n, t, _ in _checkpoint_tensors(model)}
    plain = [e["name"] for e in entries if not e.get("tied_names") and not e.get("optional")]
    buffers = dict(model.named_buffers())
    loose = [e["name"] for e in entries if e.get("optional") and not e.get("tied_names")]
    odd = sorted(n for n in loose if n not in buffers or n in every or loose.count(n) > 1)
    if odd:
        raise ConfigError(f"mergekit export of {type(model).__name__}: optional entries {odd[:3]} are not unsaved buffers "
                          "of the model (each once).")
    dup = sorted({n for n in plain if plain.count(n) > 1})
    missing, extra = sorted(set(tensors) - set(plain)), sorted(set(plain) - set(tensors))
    if dup or missing or extra:
        raise ConfigError(f"mergekit export of {type(model).__name__}: the file must name each stored tensor once; "
                          f"named twice {dup[:3]}, not named {missing[:3]}, not in the model {extra[:3]}.")
    tied = [e for e in entries if e.get("tied_names")]
    for e in tied:
        if not (e.get("optional") and e["name"] in every
                and any(t in tensors and every[t] is every[e["name"]] for t in e["tied_names"])):
            raise ConfigError(f"mergekit export of {type(model).__name__}: tied entry {e['name']!r} must be optional and "
                              f"name the tensor it shares among tied_names {e['tied_names']}.")
        if e.get("vocabulary_axis") != next(x.get("vocabulary_axis") for x in entries if x["name"] in e["tied_names"]):
            raise ConfigError(f"mergekit export: tied entry {e['name']!r} states another vocabulary_axis than its tensor.")
    vaxes = {e["name"]: int(e["vocabulary_axis"]) for e in entries
             if e.get("vocabulary_axis") is not None and not e.get("tied_names")}
    if "input_ids" not in inputs:
        raise ConfigError("mergekit export: the verification inputs carry no input_ids (a token model is required).")
    V = int(cfg.vocab_size)
    fixed = _special_token_ids(cfg, V)
    free = torch.tensor([i for i in range(V) if i not in fixed])
    p = torch.arange(V)
    q = free[torch.randperm(len(free), generator=generator)]
    if len(free) > 1 and torch.equal(q, free):
        q = free.roll(1)
    p[free] = q
    inv = torch.empty_like(p)
    inv[p] = torch.arange(V)
    params = {n: t.detach() for n, t in model.named_parameters()}
    new = dict(params)
    for n, ax in vaxes.items():
        if n not in params:  # an integer buffer cannot index the vocabulary here
            raise ConfigError(f"mergekit export: vocabulary_axis on {n!r}, which is not a parameter.")
        new[n] = params[n].index_select(ax, p.to(params[n].device))
    moved = [n for n in vaxes]
    num = sum(float((new[n] - params[n]).pow(2).sum()) for n in moved)
    den = sum(float(params[n].pow(2).sum()) for n in moved)
    relabelled = dict(inputs, input_ids=inv[inputs["input_ids"]])
    with torch.no_grad():
        base = output(functional_call(model, params, (), dict(inputs)))
        got = output(functional_call(model, new, (), relabelled))
    logits = model.get_output_embeddings() is not None if hasattr(model, "get_output_embeddings") else False
    ref = base[..., p] if logits else base
    err = float((got - ref).norm() / base.norm()) if got.shape == ref.shape else float("inf")
    return {"tensors": len(tensors), "tied": [e["name"] for e in tied], "optional_buffers": loose, "vocabulary_axes": vaxes,
            "errors": {"vocabulary": err}, "max_error": err, "min_motion": (num / den) ** 0.5 if den else 0.0}


def mergekit_as_spec(arch: Mapping[str, Any], params: Mapping[str, Tensor], num_layers: int) -> PermutationSpec:
    """The permutations a MergeKit description states, read from the description alone: one per
    space not split into heads (``input_space`` on axis 1 — a vector's only axis —, ``output_space``
    on axis 0 of layer weights and on axis 1 of the pre/post weights without an ``input_space``, the
    embeddings). A weight's ``head_split`` side (``"output"`` / ``"input"``) marks its space as
    split into heads; those spaces are not permuted.

    Raises:
        ConfigError: a listed tensor that the model does not have.
    """
    perms: dict[str, int] = {}
    axes: dict[str, list[str | None]] = {n: [None] * p.dim() for n, p in params.items()}
    head_spaces: set[str] = set()
    entries: list[dict[str, Any]] = [dict(e, _outer=True) for e in list(arch.get("pre_weights", []))
                                      + list(arch.get("post_weights", []))]
    for i in range(num_layers):
        for w in arch["layer_templates"]["weights"]:
            e = dict(w, _outer=False)
            for k in ("name", "input_space", "output_space"):
                if k in e:
                    e[k] = e[k].replace("${layer_index}", str(i))
            entries.append(e)
    for e in entries:
        side = {"output": "output_space", "input": "input_space"}.get(e.get("head_split", ""))
        if side and side in e:
            head_spaces.add(e[side])
    for e in entries:
        n = e["name"]
        if n not in params:
            raise ConfigError(f"mergekit description lists {n!r}, which the model does not have.")
        t = params[n]
        placements = []
        if t.dim() == 1 and "input_space" in e:
            placements.append((0, e["input_space"]))
        elif t.dim() == 2:
            if "input_space" in e:
                placements.append((1, e["input_space"]))
            if "output_space" in e:
                placements.append((1 if e["_outer"] and "input_space" not in e else 0, e["output_space"]))
        for ax, sp in placements:
            if sp in head_spaces:
                continue
            perms[sp] = t.shape[ax]
            axes[n][ax] = sp
    return PermutationSpec(perms, axes)


def export(model: nn.Module, spaces: Spaces, fmt: str, path: str | Path, inputs: Mapping[str, Any],
           output: Callable[[Any], Tensor], seed: int = 0, checkpoint_names: Collection[str] | None = None,
           stored_as: Mapping[str, list[str]] | None = None,
           pieces: Mapping[str, list[Piece]] | None = None) -> dict[str, Any]:
    """Verify and write the ``fmt`` export of ``model`` to ``path`` (a new file).

    ``model`` must be the float64 (or float32) model the spaces were derived on.
    ``checkpoint_names``: the tensor names stored in the checkpoint ``model`` was loaded from;
    for ``mergekit`` (which MergeKit matches by name) the file's tensors must be exactly these.
    ``stored_as``: ``{model name: [stored names]}`` (:func:`paramsym.census.stored.stored_names`):
    the file names the checkpoint's tensors (GPT-NeoX's ``embed_out.weight``, not the loaded
    ``lm_head.weight``), and is verified after mapping the parsed names back. ``pieces``: expert
    banks the checkpoint stores per expert (:func:`paramsym.census.stored.expert_pieces`, Mixtral):
    the permutation spec names those stored tensors with one unit group per expert, and is
    verified on them (the parameters cut into the stored tensors, permuted through the parsed
    file, fused back for each evaluation); MergeKit formats refuse them. Returns
    ``{"path", "format", "verification": {...}, "omitted": [...], "perms", "log10_order"}``
    (``mergekit``: no permutation groups — ``perms`` empty — and the verification of
    :func:`verify_mergekit_v01`).

    Raises:
        ConfigError: an unknown format; a description that fails its checks.
        ExportPathExistsError: ``path`` exists (nothing is overwritten).
        ToleranceError: the verification fails (nothing is written).
    """
    if fmt not in FORMATS:
        raise ConfigError(f"--export must be one of {list(FORMATS)}; received {fmt!r}.")
    path = Path(path)
    if path.exists():
        raise ExportPathExistsError(f"--out {str(path)!r} already exists; the export never overwrites. Choose a new path "
                                    "or remove the file.")
    params = {k: v.detach() for k, v in model.named_parameters()}
    spec = spec_from_spaces(spaces, params)
    dtype = next(iter(params.values())).dtype
    tol = export_tolerance(spaces, dtype)
    to_stored, from_stored = renaming(stored_as or {})
    if pieces and fmt != "permutation-spec":
        bank = next(iter(pieces))
        raise ConfigError(f"--export {fmt}: {type(model).__name__} stores {bank!r} per expert ({pieces[bank][0].stored!r}, "
                          f"...), which transformers fuses on loading; a MergeKit architecture file describes the loaded "
                          "model's tensors (and 0.0's spaces have no per-expert axis): use --export permutation-spec, "
                          "which names the stored per-expert tensors.")
    to_model = None
    if pieces:
        spec = spec_from_spaces(spaces, params, pieces=pieces)
        params = to_pieces(params, pieces)
        to_model = lambda t: from_pieces(t, pieces)  # noqa: E731
    if fmt in MERGEKIT_VERSIONS:
        data: dict[str, Any] = mergekit_v01_architecture(model, spaces, checkpoint_names)
        if checkpoint_names is not None:
            ours = {to_stored.get(n, n) for n, _, canon in _checkpoint_tensors(model) if canon is None} | set(
                _stale_buffers(model, checkpoint_names))
            only_ours, only_ckpt = sorted(ours - set(checkpoint_names)), sorted(set(checkpoint_names) - ours)
            if only_ours or only_ckpt:
                raise ConfigError(f"--export mergekit: the file must name the checkpoint's tensors, but {type(model).__name__} "
                                  f"names {len(only_ours)} the checkpoint lacks (e.g. {only_ours[:2]}) and the checkpoint "
                                  f"stores {len(only_ckpt)} it lacks (e.g. {only_ckpt[:2]}); load the checkpoint's own "
                                  "class (config.json 'architectures') or use --export permutation-spec.")
        data = rename_architecture(data, to_stored)
        version = MERGEKIT_VERSIONS[fmt]
        if version == "0.1.4":
            data = to_v014(data)
        back = rename_architecture(json.loads(json.dumps(data)), from_stored)
        rep = verify_mergekit_v01(from_v014(back) if version == "0.1.4" else back, model, inputs, output,
                                  torch.Generator().manual_seed(seed))
        rep["tolerance"] = tol
        rep["mergekit_version"] = version
        if rep["max_error"] > tol or rep["min_motion"] <= 0:
            raise ToleranceError(f"mergekit export of {type(model).__name__} failed its verification: relabelling the "
                                 f"vocabulary through the file's vocabulary_axis entries {rep['vocabulary_axes']} changes "
                                 f"the output by {rep['max_error']:.2e} > {tol:.0e} (motion {rep['min_motion']:.1e}); "
                                 "nothing written.")
        write_export(path, data)
        return {"path": str(path), "format": fmt, "verification": rep, "omitted": [], "perms": {}, "log10_order": 0.0}
    if fmt == "permutation-spec":
        data = spec.to_json() if stored_as is None else spec_to_stored(spec.to_json(), stored_as, pieces)
        parsed = json.loads(json.dumps(data))
        if stored_as is not None:
            parsed = spec_from_stored(parsed, stored_as, pieces)
        check_spec = PermutationSpec({k: int(v) for k, v in parsed["perms"].items()}, parsed["axes"])
        out_perm = "P_res" if spaces.output_in_stream else None
    else:
        data = rename_architecture(mergekit_architecture(model, spaces, spec), to_stored)
        parsed = rename_architecture(json.loads(json.dumps(data)), from_stored)
        check_spec = mergekit_as_spec(parsed, params, len(spaces.layout.layers))
        out_perm = "running_residual" if spaces.output_in_stream else None
    transposed = sorted(w for w, lay in spaces.layouts.items() if lay == "in_out")
    if fmt == "mergekit-0.0" and not check_spec.perms and transposed:
        w0 = transposed[0]
        owner = type(model.get_submodule(w0.rsplit(".", 1)[0])).__name__ if "." in w0 else type(model).__name__
        raise ConfigError(
            f"--export mergekit-0.0 cannot describe {type(model).__name__}: {len(transposed)} of its weights are stored "
            f"(in, out) (traced y = x·W + b, e.g. {w0!r} {tuple(params[w0].shape)} of a {owner}), and MergeKit's input_space/output_space carry no axis order (MergeKit applies "
            "output_space to axis 0 and input_space to axis 1 of every weight; is_embed flips embeddings "
            "only), so every space touching those weights is dropped and none is left to state; use --export "
            "permutation-spec, which names each tensor's axes (or --export mergekit: MergeKit 0.1.x's file, no spaces).")
    if not check_spec.perms:
        raise ConfigError(f"--export {fmt}: the description of {type(model).__name__} states no permutation that can be "
                          "verified (MergeKit's space fields assume (out, in) weights; this model stores (in, out) or fused "
                          "tensors); use --export permutation-spec.")
    rep = verify_spec(model, check_spec, params, inputs, output, torch.Generator().manual_seed(seed),
                      output_perm=out_perm, to_model=to_model)
    rep["tolerance"] = tol
    if rep["max_error"] > tol or rep["min_motion"] <= 0:
        raise ToleranceError(f"{fmt} export of {type(model).__name__} failed its verification: max relative output change "
                             f"{rep['max_error']:.2e} > {tol:.0e} (per permutation: "
                             f"{ {k: f'{v:.1e}' for k, v in rep['errors'].items()} }); nothing written.")
    write_export(path, data)
    return {"path": str(path), "format": fmt, "verification": rep, "omitted": spec.omitted,
            "perms": dict(check_spec.perms), "log10_order": check_spec.log10_order()}


def write_export(path: str | Path, data: dict[str, Any]) -> None:
    """Write export ``data`` as JSON (indent 1) to ``path``, a new file (``FileExistsError`` otherwise)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "x") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")


def spec_for_model(model: nn.Module, seed: int = 0, sub_blocks: bool = False) -> PermutationSpec:
    """The permutation spec of an HF model, traced on a float64 copy (the model is not changed).

    ``sub_blocks=True`` writes fused axes as sub-block lists (GPT-2's and Phi-3's heads, Phi-3's
    FFN units; :mod:`paramsym.census.permspec`); the default keeps single-ID axes only (those
    groups omitted), the form readers of plain Git Re-Basin specs expect
    (:mod:`paramsym.alignment.checkpoints` reads both; ``paramsym align --census-groups`` uses
    sub-blocks).

    Raises:
        TraceError: the tracer cannot follow the model.
    """
    import copy

    from ..models.adapters import require_eager
    from .spaces import derive_spaces
    from .walk import _output, default_inputs

    work = require_eager(copy.deepcopy(model)).double().eval()
    inputs = default_inputs(work, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        spaces = derive_spaces(work, inputs, _output)
    return spec_from_spaces(spaces, {k: v.detach() for k, v in model.named_parameters()}, sub_blocks=sub_blocks)
