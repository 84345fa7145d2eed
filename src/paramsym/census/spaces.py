"""Census without an adapter: which tensor axes share a space, derived from the model itself.

:func:`derive_spaces` runs the model once with forward hooks and finds, by *dataflow
probing* (no module or parameter names are read):

1. **module roles** — an ``nn.Embedding``; a *linear* module (a 2-d ``weight`` and optional bias
   whose recorded output equals ``x Wᵀ + b`` — layout ``out_in`` — or ``x W + b`` — ``in_out``,
   GPT-2's ``Conv1D``); a *norm* (a 1-d weight/bias over the last axis; *centred* (LayerNorm)
   when its output does not change under ``x ↦ x + c·1``, RMS-type otherwise);
2. **the residual stream** (width ``D`` = the input embedding's width: an ``nn.Embedding``'s, or
   the output channels of the one convolution inside it, a ViT's patch embedding) — a linear *reads* the
   stream when its input is (the token-0 slice of) a norm's output, and a linear that does not
   read the stream but writes ``D`` features *writes* it; the input writers
   (:attr:`Spaces.input_writers`) are the patch convolution and parameters whose rows the stream
   receives (probed: a CLS token, position embeddings). Stream axes: the embeddings' column
   axis, the input writers' stream axis, every ``D``-wide norm's weight and bias, the readers'
   input axis, the writers' output axis and bias;
3. **per layer** (the children of the longest ``nn.ModuleList``), with every reader's output
   made an autograd leaf (so gradients follow only the direct path reader → writer): the
   *attention* writer is the one whose input at token ``t > 0`` depends on reader features at
   token 0 (mixing across tokens); among its readers' features, the **query** features affect
   only the same token, the **key/value** features also later tokens. The key/value features are
   split by hypotheses (``[K | V]``, ``[V | K]``, per key/value head ``[k_g | v_g]``), the head
   count is ``config.num_attention_heads`` (or its aliases), ``d = |q| / H``, ``H_kv = |k| / d``,
   the rotary dimension ``2 · len(inv_freq)`` of the model's ``rotary_emb.inv_freq`` buffer;
   **a hypothesis is kept only when the query/key and value/output actions of the catalogue
   verify on the actual weights**. The FFN readers are the other readers feeding the second
   writer: one (``up``), two (gated; ``up`` is the one whose scaling the writer absorbs), or one
   fused ``[gate | up]`` / ``[up | gate]`` (again: verified hypotheses). A norm whose output only
   the attention (FFN) readers read becomes the layer's ``norm_attention`` (``norm_ffn``) when the
   norm-scale action verifies; a norm whose output exactly the attention *and* FFN readers read
   (parallel blocks: old-architecture Falcon) becomes the layer's ``norm_shared`` when the
   norm-scale action, absorbed by all of them, verifies.

The result is a :class:`~paramsym.models.adapters.ModelLayout` (the adapters' data structure, so
every finder works on it unchanged) plus the residual-stream axes (:class:`Spaces`).

The steps live in three modules along these concept lines — :mod:`paramsym.census.tracing`
(steps 1–2 and the dataflow of step 3: what each module computes), :mod:`paramsym.census.proposing`
(the hypotheses of step 3) and :mod:`paramsym.census.verifying` (the probes that keep or refute
them) — and :func:`derive_spaces` here puts them together. The public names
(:class:`Spaces`, :class:`NormInfo`, :func:`head_count`, :func:`activation_name`) stay importable
from this module.

Raises :class:`~paramsym.errors.TraceError` where the probing cannot follow a module (it says
which module and why and lists what was found before).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import TraceError
from ..models.adapters import LayerLayout, ModelLayout
from .precision import float64_throughout
from .proposing import propose_attention, propose_experts, propose_ffn
from .tracing import NormInfo, Spaces, activation_name, dataflow, head_count, pre_norm, trace_roles
from .verifying import Invariance

__all__ = ["Spaces", "NormInfo", "derive_spaces", "head_count", "activation_name"]


def derive_spaces(model: nn.Module, inputs: Mapping[str, Any], output: Callable[[Any], Tensor]) -> Spaces:
    """Derive the tensor-axis spaces of an HF transformer (module docstring).

    Args:
        model: the model, in eval mode, in float64 (probes compare at 1e-9; float32 works with
            looser probe tolerances, 1e-5 for the module checks and 1e-4 for the hypotheses).
        inputs: keyword inputs (``input_ids``, ``attention_mask``) with at least 2 tokens.
        output: maps the model's output to the tensor compared by the probes.

    Raises:
        TraceError: a module the tracer cannot follow (which and why; what was found).
    """
    roles = trace_roles(model, inputs, output)
    named = dict(model.named_parameters())
    mods = dict(model.named_modules())
    base, D, stream, embeddings = roles.base, roles.hidden_size, roles.stream, roles.embeddings
    stream_norms, linears, layouts = roles.stream_norms, roles.linears, roles.layouts
    readers, writers, reader_norm, unfollowed = roles.readers, roles.writers, roles.reader_norm, roles.unfollowed
    norm_outs = {n: roles.norms[n][1] for n in stream_norms}

    # -- layers -----------------------------------------------------------------------------
    lists = [(n, m) for n, m in mods.items() if isinstance(m, nn.ModuleList)]
    if not lists:
        raise TraceError(f"{type(model).__name__}: no nn.ModuleList of layers; found readers {sorted(readers)} and "
                         f"writers {sorted(writers)}.")
    prefix, layer_list = max(lists, key=lambda nm: len(nm[1]))
    cfg = getattr(model, "config", None)
    H = head_count(cfg)
    inv = [b for n, b in model.named_buffers() if n.endswith("inv_freq")]
    rot = 2 * int(inv[0].numel()) if inv else 0

    def pfx(i: int) -> str:
        return f"{prefix}.{i}." if prefix else f"{i}."

    found: list[str] = []
    layers = []
    banks = roles.banks
    flow = dataflow(model, inputs, readers, {**writers, **{b: "" for b in banks}})
    invariant = Invariance(model, named, inputs, output, base)
    refused: list[dict[str, Any]] = []
    for i in range(len(layer_list)):
        lr = [n for n in readers if n.startswith(pfx(i))]
        lw = [n for n in writers if n.startswith(pfx(i))] + [b for b in banks if b.startswith(pfx(i))]
        if len(lw) != 2:
            odd = [u for u in unfollowed if u["module"].startswith(pfx(i))]
            raise TraceError(f"layer {pfx(i)[:-1]}: expected two modules writing the residual stream (attention output, "
                             f"FFN output); found {lw} (readers {lr}); cannot follow {odd or 'no other module'}. "
                             f"Found so far: {found}.")
        cross = {w: any(bool(flow[w]["cross"][r].any()) for r in lr if r in flow[w]["cross"]) for w in lw}
        att_w = [w for w in lw if cross[w] and set(flow[w]["uses"]) <= set(lr) and w not in banks]
        att_w = sorted(att_w, key=lambda w: len(flow[w]["uses"]))[:1]
        if not att_w:
            raise TraceError(f"layer {pfx(i)[:-1]}: no stream writer mixes tokens (no attention found among {lw}). "
                             f"Found so far: {found}.")
        aw = att_w[0]
        fw = next(w for w in lw if w != aw)
        att = propose_attention(i, pfx(i), aw, flow[aw], lr, linears, H, rot, model, invariant, found)
        att = _with_qk_norms(att, roles)
        ffn_readers = [r for r in flow[fw]["uses"] if r in lr and r not in {att.q.weight.rsplit(".", 1)[0],
                                                                          att.k.weight.rsplit(".", 1)[0],
                                                                          att.v.weight.rsplit(".", 1)[0]}]
        experts: tuple = ()
        if fw in banks:  # a mixture of experts: per-expert FFNs in a 3-D bank, a router reading the stream
            experts = propose_experts(fw, banks[fw], named, activation_name(cfg), invariant, found)
            ffn = experts[0]
            routers = [r for r in lr if r not in {p.weight.rsplit(".", 1)[0] for p in (att.q, att.k, att.v)}]
            for n in sorted({reader_norm[r] for r in routers if r in reader_norm} & set(stream_norms)):
                refused.append({"module": n, "kind": "norm_scale",
                                "reason": f"feeds the router {routers} and the expert bank {fw} (3-D): the norm-scale "
                                          "action is placed on linear readers only (not implemented for expert banks)"})
        else:
            ffn = propose_ffn(pfx(i), fw, ffn_readers, linears, activation_name(cfg), invariant, found)
        layer = LayerLayout(i, pfx(i)[:-1], att, ffn)
        att_mods = {p.weight.rsplit(".", 1)[0] for p in (att.q, att.k, att.v)}
        ffn_mods = {p.weight.rsplit(".", 1)[0] for p in (ffn.up, *([ffn.gate] if ffn.gate else []))}
        na = pre_norm(att_mods, readers, reader_norm, pfx(i))
        nf = pre_norm(ffn_mods, readers, reader_norm, pfx(i))
        # a norm without parameters (OLMo) has no scale to move: no slot
        if na is not None and (na not in stream_norms or not invariant.norm_scale(layer, na, att, stream_norms[na], linears)):
            na = None
        if nf is not None and (nf not in stream_norms or not invariant.norm_scale(layer, nf, ffn, stream_norms[nf], linears)):
            nf = None
        ns = None  # parallel blocks: one norm feeding both the attention and the FFN readers
        if na is None and nf is None:
            ns = pre_norm(att_mods | ffn_mods, readers, reader_norm, pfx(i))
            if ns is not None and (ns not in stream_norms
                                   or not invariant.norm_scale(layer, ns, None, stream_norms[ns], linears)):
                ns = None
        if experts:  # the FFN-side norm is refused above; the attention's pre-norm stays
            nf = ns = None
        layer = LayerLayout(i, pfx(i)[:-1], att, ffn, na, nf, ns, experts)
        layers.append(layer)
        found.append(f"layer {i}: attention {sorted(att_mods)} → {aw}, FFN {sorted(ffn_mods)} → {fw}")
    mt = getattr(cfg, "model_type", None) or type(model).__name__
    layout = ModelLayout(str(mt), tuple(layers), D, {"derived": True})
    outs = [*norm_outs.values(), *roles.free_norms.values()]
    in_stream = any(base.shape == y.shape and torch.equal(base, y) for y in outs)
    islands = False
    if base.dtype == torch.float64:
        with torch.no_grad():
            islands = not torch.equal(base, float64_throughout(lambda: output(model(**inputs))))
    return Spaces(layout, D, stream, embeddings, stream_norms, readers, writers, layouts, unfollowed, in_stream,
                  dict(reader_norm), list(roles.direct_readers), sorted(roles.free_norms), sorted(banks), refused,
                  islands, input_writers=roles.input_writers)


def _with_qk_norms(att, roles) -> Any:
    """Record the norms over the whole query or key projection (OLMo2's ``q_norm``/``k_norm``: width
    ``H·d`` / ``H_kv·d``, input the projection's output): a head permutation must move their scales."""
    from dataclasses import replace

    found = []
    for role, proj in (("q", att.q), ("k", att.k)):
        mod = proj.weight.rsplit(".", 1)[0]
        for n, r in roles.over_reader.items():
            info = roles.norms[n][0]
            if r == mod and proj.features is None and info.size == proj.out_features:
                found.append((role, info.weight, info.bias))
    return replace(att, qk_norms=tuple(found)) if found else att
