"""Census without an adapter: which tensor axes share a space, derived from the model itself.

:func:`derive_spaces` runs the model once with forward hooks and finds, by *dataflow
probing* (no module or parameter names are read):

1. **module roles** — an ``nn.Embedding``; a *linear* module (a 2-d ``weight`` and optional bias
   whose recorded output equals ``x Wᵀ + b`` — layout ``out_in`` — or ``x W + b`` — ``in_out``,
   GPT-2's ``Conv1D``); a *norm* (a 1-d weight/bias over the last axis; *centred* (LayerNorm)
   when its output does not change under ``x ↦ x + c·1``, RMS-type otherwise);
2. **the residual stream** (width ``D`` = the input embedding's width) — a linear *reads* the
   stream when its input is (the token-0 slice of) a norm's output, and a linear that does not
   read the stream but writes ``D`` features *writes* it. Stream axes: the embeddings' column
   axis, every ``D``-wide norm's weight and bias, the readers' input axis, the writers' output
   axis and bias;
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
   norm-scale action verifies.

The result is a :class:`~paramsym.models.adapters.ModelLayout` (the adapters' data structure, so
every finder works on it unchanged) plus the residual-stream axes (:class:`Spaces`).

Raises :class:`~paramsym.errors.TraceError` where the probing cannot follow a module (it says
which module and why and lists what was found before).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ..errors import TraceError
from ..models.adapters import (
    AttentionLayout,
    FFNLayout,
    LayerLayout,
    ModelLayout,
    Projection,
    _inv_freq,
)

__all__ = ["Spaces", "NormInfo", "derive_spaces", "head_count", "activation_name"]

Params = dict[str, Tensor]
_HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads")
_ACT_KEYS = ("hidden_act", "hidden_activation", "activation_function", "activation")
_PROBE_TOL = 1e-6  # probes in float64 (float32 norms/softmax inside some models floor at ~1e-7); 1e-4 in float32


@dataclass(frozen=True)
class NormInfo:
    """A norm over the residual stream: parameter names, centred (LayerNorm) or RMS-type."""

    module: str
    weight: str
    bias: str | None
    centred: bool
    size: int
    float32_inside: bool = False  # computes in float32 even for float64 inputs (HF's RMSNorm upcast)


@dataclass
class Spaces:
    """What :func:`derive_spaces` found.

    Attributes:
        layout: per-layer attention/FFN projections (as the adapters give them).
        hidden_size: the residual-stream width ``D``.
        stream: ``(parameter name, axis)`` pairs indexed by the residual stream.
        embeddings: embedding weights (rows = tokens/positions, columns = the stream).
        norms: norms over the stream, by module name.
        readers, writers: linear modules reading / writing the stream, by module name → weight name.
        layouts: linear modules' storage layout (``out_in`` / ``in_out``) by weight name.
        unfollowed: modules with parameters that no role fits (module, type, why).
        output_in_stream: the compared output is a norm's output over the stream (a base model's
            ``last_hidden_state``): a stream permutation permutes it too (equivariance).
    """

    layout: ModelLayout
    hidden_size: int
    stream: list[tuple[str, int]]
    embeddings: list[str]
    norms: dict[str, NormInfo]
    readers: dict[str, str]
    writers: dict[str, str]
    layouts: dict[str, str]
    unfollowed: list[dict[str, Any]] = field(default_factory=list)
    output_in_stream: bool = False

    @property
    def float32_inside(self) -> bool:
        """Some norm on the stream computes in float32 even in a float64 run (so permutations of
        the stream are exact only to float32 rounding)."""
        return any(n.float32_inside for n in self.norms.values())

    def stream_axes(self) -> dict[str, list[int]]:
        """Parameter name → its axes indexed by the residual stream."""
        out: dict[str, list[int]] = {}
        for n, a in self.stream:
            out.setdefault(n, []).append(a)
        return out


def head_count(config: Any) -> int:
    """The number of query heads from an HF config (``num_attention_heads`` or an alias).

    Raises:
        TraceError: no known key.
    """
    for k in _HEAD_KEYS:
        v = getattr(config, k, None)
        if isinstance(v, int) and v > 0:
            return v
    raise TraceError(f"config {type(config).__name__}: no head count under any of {list(_HEAD_KEYS)}; the tracer needs "
                     "the number of query heads.")


def activation_name(config: Any) -> str:
    """The FFN activation's HF name from the config (``"unknown"`` when absent)."""
    for k in _ACT_KEYS:
        v = getattr(config, k, None)
        if isinstance(v, str):
            return v
    return "unknown"


def _first_tensor(args: tuple, kwargs: dict) -> Tensor | None:
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, Tensor):
            return a
    return None


def _out_tensor(out: Any) -> Tensor | None:
    if isinstance(out, Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], Tensor):
        return out[0]
    return None


def _close(a: Tensor, b: Tensor) -> bool:
    """Equal to rounding: 1e-9 relative in float64, 1e-5 in lower precision."""
    tol = 1e-9 if b.dtype == torch.float64 else 1e-5
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=tol, atol=tol * (1 + float(b.detach().abs().max()))))


def _float32_inside(mod: nn.Module, w: Tensor, b: Tensor | None, centred: bool) -> bool:
    """Whether a float64 norm's output misses the float64 reference by more than 1e-11 for every
    scale parametrisation (``w`` or ``1 + w``): the module computes in float32 inside."""
    g = torch.Generator().manual_seed(0)
    x = 1e3 * torch.randn(4, w.numel(), generator=g, dtype=torch.float64)
    with torch.no_grad():
        y = _out_tensor(mod(x))
    if y is None:
        return False
    xc = x - x.mean(-1, keepdim=True) if centred else x
    n = xc / xc.pow(2).mean(-1, keepdim=True).sqrt()
    for gamma in (w, 1 + w):
        ref = n * gamma.detach() + (0 if b is None else b.detach())
        if float((y - ref).norm() / ref.norm()) < 1e-11:
            return False
    return True


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
    named = dict(model.named_parameters())
    pid = {id(p): n for n, p in named.items()}
    mods = dict(model.named_modules())
    records: dict[str, tuple[Tensor, Tensor]] = {}
    hooks = []

    def recorder(name: str):
        def hook(mod, args, kwargs, out):
            x, y = _first_tensor(args, kwargs), _out_tensor(out)
            if x is not None and y is not None and name not in records:
                records[name] = (x.detach().clone(), y.detach().clone())  # clones: models add in place (Falcon)
        return hook

    own = {name: {n: p for n, p in m.named_parameters(recurse=False)} for name, m in mods.items()}
    own = {k: v for k, v in own.items() if v}
    for name in own:
        hooks.append(mods[name].register_forward_hook(recorder(name), with_kwargs=True))
    try:
        with torch.no_grad():
            base = output(model(**inputs))
    finally:
        for h in hooks:
            h.remove()

    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if not isinstance(emb, nn.Embedding):
        raise TraceError(f"{type(model).__name__}: no nn.Embedding input embedding (get_input_embeddings()); the tracer "
                         "takes the residual-stream width from it.")
    D = emb.embedding_dim
    embeddings, norms, linears, layouts, unfollowed = [], {}, {}, {}, []
    for name, ps in own.items():
        mod = mods[name]
        canon = {k: pid[id(p)] for k, p in ps.items()}
        rec = records.get(name)
        if isinstance(mod, nn.Embedding):
            if mod.embedding_dim == D:
                embeddings.append(canon["weight"])
            else:
                unfollowed.append({"module": name, "type": type(mod).__name__, "why": f"embedding width {mod.embedding_dim} ≠ {D}"})
            continue
        if set(ps) - {"weight", "bias"} or "weight" not in ps:
            unfollowed.append({"module": name, "type": type(mod).__name__, "why": f"parameters {sorted(ps)}"})
            continue
        if rec is None:
            unfollowed.append({"module": name, "type": type(mod).__name__, "why": "not called in the forward pass"})
            continue
        x, y = rec
        W, b = ps["weight"], ps.get("bias")
        if W.dim() == 2 and x.is_floating_point():
            lay = None
            if x.shape[-1] == W.shape[1] and _close(y, x @ W.T + (0 if b is None else b)):
                lay = "out_in"
            elif x.shape[-1] == W.shape[0] and _close(y, x @ W + (0 if b is None else b)):
                lay = "in_out"
            if lay is not None:
                linears[name] = (canon, lay, x, y)
                layouts[canon["weight"]] = lay
                continue
        if W.dim() == 1 and x.is_floating_point() and x.shape[-1] == W.shape[0] and y.shape == x.shape:
            with torch.no_grad():
                y2 = mod(x + 1.5)
            y2 = _out_tensor(y2)
            centred = y2 is not None and _close(y2, y)
            info = NormInfo(name, canon["weight"], canon.get("bias"), centred, W.shape[0],
                            x.dtype == torch.float64 and _float32_inside(mod, W, b, centred))
            norms[name] = (info, y)
            continue
        unfollowed.append({"module": name, "type": type(mod).__name__,
                           "why": "neither an embedding, a linear map (output ≠ x Wᵀ + b) nor a norm over the last axis"})

    stream_norms = {n: info for n, (info, _) in norms.items() if info.size == D}
    norm_outs = {n: norms[n][1] for n in stream_norms}

    def fed_by(x: Tensor) -> str | None:
        for n, y in norm_outs.items():
            if x is y or (x.shape == y.shape and torch.equal(x, y)):
                return n
            if x.dim() == y.dim() - 1 and x.shape == y[:, 0].shape and torch.equal(x, y[:, 0]):
                return n
        return None

    readers, writers, reader_norm = {}, {}, {}
    for name, (canon, _lay, x, y) in linears.items():
        src = fed_by(x)
        if src is not None:
            readers[name] = canon["weight"]
            reader_norm[name] = src
        elif y.shape[-1] == D:
            writers[name] = canon["weight"]
        else:
            unfollowed.append({"module": name, "type": type(mods[name]).__name__,
                               "why": f"a linear map neither reading the stream (its input is no norm's output) nor "
                                      f"writing it (out features {y.shape[-1]} ≠ {D})"})

    stream: list[tuple[str, int]] = [(w, 1) for w in embeddings]
    for info in stream_norms.values():
        stream += [(info.weight, 0)] + ([(info.bias, 0)] if info.bias else [])
    for w in readers.values():
        stream.append((w, 1 if layouts[w] == "out_in" else 0))
    for name, w in writers.items():
        stream.append((w, 0 if layouts[w] == "out_in" else 1))
        b = linears[name][0].get("bias")
        if b is not None:
            stream.append((b, 0))

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
    flow = _dataflow(model, inputs, readers, writers)
    invariant = _Invariance(model, named, inputs, output, base)
    for i in range(len(layer_list)):
        lr = [n for n in readers if n.startswith(pfx(i))]
        lw = [n for n in writers if n.startswith(pfx(i))]
        if len(lw) != 2:
            odd = [u for u in unfollowed if u["module"].startswith(pfx(i))]
            raise TraceError(f"layer {pfx(i)[:-1]}: expected two modules writing the residual stream (attention output, "
                             f"FFN output); found {lw} (readers {lr}); cannot follow {odd or 'no other module'}. "
                             f"Found so far: {found}.")
        cross = {w: any(bool(flow[w]["cross"][r].any()) for r in lr if r in flow[w]["cross"]) for w in lw}
        att_w = [w for w in lw if cross[w] and set(flow[w]["uses"]) <= set(lr)]
        att_w = sorted(att_w, key=lambda w: len(flow[w]["uses"]))[:1]
        if not att_w:
            raise TraceError(f"layer {pfx(i)[:-1]}: no stream writer mixes tokens (no attention found among {lw}). "
                             f"Found so far: {found}.")
        aw = att_w[0]
        fw = next(w for w in lw if w != aw)
        att = _attention(i, pfx(i), aw, flow[aw], lr, linears, H, rot, model, invariant, found)
        ffn_readers = [r for r in flow[fw]["uses"] if r in lr and r not in {att.q.weight.rsplit(".", 1)[0],
                                                                          att.k.weight.rsplit(".", 1)[0],
                                                                          att.v.weight.rsplit(".", 1)[0]}]
        ffn = _ffn(pfx(i), fw, ffn_readers, linears, activation_name(cfg), invariant, found)
        layer = LayerLayout(i, pfx(i)[:-1], att, ffn)
        att_mods = {p.weight.rsplit(".", 1)[0] for p in (att.q, att.k, att.v)}
        ffn_mods = {p.weight.rsplit(".", 1)[0] for p in (ffn.up, *([ffn.gate] if ffn.gate else []))}
        na = _pre_norm(att_mods, readers, reader_norm, pfx(i))
        nf = _pre_norm(ffn_mods, readers, reader_norm, pfx(i))
        if na is not None and not invariant.norm_scale(layer, na, att, stream_norms[na], linears):
            na = None
        if nf is not None and not invariant.norm_scale(layer, nf, ffn, stream_norms[nf], linears):
            nf = None
        layer = LayerLayout(i, pfx(i)[:-1], att, ffn, na, nf)
        layers.append(layer)
        found.append(f"layer {i}: attention {sorted(att_mods)} → {aw}, FFN {sorted(ffn_mods)} → {fw}")
    mt = getattr(cfg, "model_type", None) or type(model).__name__
    layout = ModelLayout(str(mt), tuple(layers), D, {"derived": True})
    in_stream = any(base.shape == y.shape and torch.equal(base, y) for y in norm_outs.values())
    return Spaces(layout, D, stream, embeddings, stream_norms, readers, writers, layouts, unfollowed, in_stream)


def _pre_norm(consumers: set[str], readers: dict[str, str], reader_norm: dict[str, str], prefix: str) -> str | None:
    """The norm inside the layer feeding exactly ``consumers`` (and nothing else that reads the stream)."""
    srcs = {reader_norm[c] for c in consumers}
    if len(srcs) != 1:
        return None
    n = srcs.pop()
    if not n.startswith(prefix) or {r for r, s in reader_norm.items() if s == n} != consumers:
        return None
    return n


def _dataflow(model: nn.Module, inputs: Mapping[str, Any], readers: dict[str, str], writers: dict[str, str]) -> dict:
    """Per writer: which reader output features at the last token reach its input at the last token
    (``local``), and which at token 0 reach its input at later tokens (``cross``: keys and values
    do, queries do not — also under a causal mask), with every reader's output an autograd leaf."""
    mods = dict(model.named_modules())
    leaves: dict[str, Tensor] = {}
    w_in: dict[str, Tensor] = {}
    hooks = []

    def leaf_hook(name):
        def hook(mod, args, out):
            if name in leaves:
                return None
            t = out.detach().requires_grad_(True)
            leaves[name] = t
            return t
        return hook

    def in_hook(name):
        def hook(mod, args, kwargs):
            x = _first_tensor(args, kwargs)
            if name not in w_in and x is not None:
                w_in[name] = x
        return hook

    for r in readers:
        hooks.append(mods[r].register_forward_hook(leaf_hook(r)))
    for w in writers:
        hooks.append(mods[w].register_forward_pre_hook(in_hook(w), with_kwargs=True))
    req = {n: p.requires_grad for n, p in model.named_parameters()}
    try:
        for p in model.parameters():
            p.requires_grad_(False)
        with torch.enable_grad():
            model(**inputs)
            gen = torch.Generator().manual_seed(1234)
            names = list(leaves)
            out = {}
            B, T = inputs["input_ids"].shape[:2]
            for w, x in w_in.items():
                if x.dim() == 2 and x.shape[0] == B * T:
                    x = x.reshape(B, T, -1)  # models that flatten tokens before a linear map (OPT's FFN)
                if x.dim() < 3 or not x.requires_grad:
                    out[w] = {"local": {}, "cross": {}, "uses": []}
                    continue
                r0 = torch.randn(x[:, -1].shape, generator=gen, dtype=x.dtype)
                r1 = torch.randn(x[:, 1:].shape, generator=gen, dtype=x.dtype)
                g0 = torch.autograd.grad((x[:, -1] * r0).sum(), [leaves[n] for n in names], retain_graph=True,
                                         allow_unused=True)
                g1 = torch.autograd.grad((x[:, 1:] * r1).sum(), [leaves[n] for n in names], retain_graph=True,
                                         allow_unused=True)
                g0 = [g if g is None or g.dim() != 2 else g.reshape(B, T, -1) for g in g0]
                g1 = [g if g is None or g.dim() != 2 else g.reshape(B, T, -1) for g in g1]
                local = {n: (g[:, -1] != 0).any(dim=0) for n, g in zip(names, g0) if g is not None}
                cross = {n: (g[:, 0] != 0).any(dim=0) for n, g in zip(names, g1) if g is not None}
                uses = [n for n in names if (n in local and bool(local[n].any())) or (n in cross and bool(cross[n].any()))]
                out[w] = {"local": local, "cross": cross, "uses": uses}
    finally:
        for h in hooks:
            h.remove()
        for n, p in model.named_parameters():
            p.requires_grad_(req[n])
    return out


class _Invariance:
    """``F(g·θ) ≈ F(θ)`` for candidate placements (the probes that select hypotheses)."""

    def __init__(self, model, params, inputs, output, base):
        self.model, self.inputs, self.output, self.base = model, dict(inputs), output, base
        self.params = {k: v.detach() for k, v in params.items()}

    def __call__(self, transform: Callable[[Params, torch.Generator], Params]) -> bool:
        try:
            with torch.no_grad():
                new = transform(self.params, torch.Generator().manual_seed(7))
                out = self.output(functional_call(self.model, new, (), self.inputs))
        except Exception:  # noqa: BLE001 - a hypothesis whose shapes do not fit is simply refuted
            return False
        tol = _PROBE_TOL if self.base.dtype == torch.float64 else 1e-4
        return float((out - self.base).norm() / self.base.norm()) <= tol

    def attention(self, lay: AttentionLayout) -> bool:
        from .finders import AttentionFinder

        ctx = _ctx(self, lay)
        return all(self(c.transform) for c in AttentionFinder().find(ctx))

    def ffn_up(self, up: Projection, down: Projection) -> bool:
        """Scaling the ``up`` features by α and the ``down`` input columns by 1/α is invisible."""
        def t(p, g):
            p = dict(p)
            a = 1.7
            for pos, name in ((up.row_positions(torch.arange(up.out_features)), up.weight),):
                flat = p[name].reshape(-1).clone()
                flat[pos.reshape(-1)] *= a
                p[name] = flat.reshape(p[name].shape)
            if up.bias is not None:
                flat = p[up.bias].reshape(-1).clone()
                flat[up.bias_positions(torch.arange(up.out_features))] *= a
                p[up.bias] = flat.reshape(p[up.bias].shape)
            flat = p[down.weight].reshape(-1).clone()
            flat[down.column_positions(torch.arange(down.in_features)).reshape(-1)] /= a
            p[down.weight] = flat.reshape(p[down.weight].shape)
            return p
        return self(t)

    def norm_scale(self, layer: LayerLayout, norm: str, part, info: NormInfo, linears) -> bool:
        from .catalogue_finders import NormScaleFinder

        att = isinstance(part, AttentionLayout)
        lay = LayerLayout(layer.index, layer.module, layer.attention, layer.ffn, norm if att else None,
                          None if att else norm)
        ctx = _ctx(self, None, ModelLayout("probe", (lay,), info.size))
        cands = NormScaleFinder().find(ctx)
        return bool(cands) and all(self(c.transform) for c in cands)


def _ctx(inv: _Invariance, lay: AttentionLayout | None, layout: ModelLayout | None = None):
    from .base import CensusContext

    if layout is None:
        dummy = FFNLayout("", lay.o, lay.o, "unknown")
        layout = ModelLayout("probe", (LayerLayout(0, lay.module, lay, dummy),), 0)
    return CensusContext(inv.model, layout, inv.params)


def _proj(linears, name: str, features: list[int] | None) -> Projection:
    canon, lay, _, _ = linears[name]
    shape = tuple(dict(_named_shapes(linears))[canon["weight"]])
    stored_out = shape[0] if lay == "out_in" else shape[1]
    feats = None if features is None or list(features) == list(range(stored_out)) else tuple(int(f) for f in features)
    return Projection(canon["weight"], canon.get("bias"), lay, shape, feats)


def _named_shapes(linears):
    for _, (canon, lay, x, y) in linears.items():
        W = (y.shape[-1], x.shape[-1]) if lay == "out_in" else (x.shape[-1], y.shape[-1])
        yield canon["weight"], W


def _common(names: list[str]) -> str:
    parts = [n.split(".") for n in names]
    out = []
    for seg in zip(*parts):
        if len(set(seg)) != 1:
            break
        out.append(seg[0])
    return ".".join(out)


def _attention(i, prefix, aw, flow, lr, linears, H, rot, model, invariant, found) -> AttentionLayout:
    q_feats, kv_feats = [], []
    for r in lr:
        if r not in flow["local"] and r not in flow["cross"]:
            continue
        loc = flow["local"].get(r)
        cr = flow["cross"].get(r)
        n = (loc if loc is not None else cr).numel()
        for j in range(n):
            c = bool(cr[j]) if cr is not None else False
            lo = bool(loc[j]) if loc is not None else False
            if c:
                kv_feats.append((r, j))
            elif lo:
                q_feats.append((r, j))
    where = f"layer {prefix[:-1]} attention (output {aw})"
    if not q_feats or not kv_feats:
        raise TraceError(f"{where}: found {len(q_feats)} query-like and {len(kv_feats)} key/value-like reader features; "
                         f"expected both. Found so far: {found}.")
    q_mods = {r for r, _ in q_feats}
    if len(q_mods) != 1:
        raise TraceError(f"{where}: query features come from several modules {sorted(q_mods)}. Found so far: {found}.")
    qm = q_mods.pop()
    nq = len(q_feats)
    if nq % H:
        raise TraceError(f"{where}: {nq} query features are not divisible by the {H} heads of the config. Found so far: "
                         f"{found}.")
    d = nq // H
    if len(kv_feats) % (2 * d):
        raise TraceError(f"{where}: {len(kv_feats)} key/value features do not split into key and value heads of "
                         f"dimension {d}. Found so far: {found}.")
    nkv = len(kv_feats) // 2
    Hkv = nkv // d
    if H % Hkv:
        raise TraceError(f"{where}: {H} query heads do not group over {Hkv} key/value heads. Found so far: {found}.")
    hyps = {"[K | V]": (kv_feats[:nkv], kv_feats[nkv:]), "[V | K]": (kv_feats[nkv:], kv_feats[:nkv]),
            "per key/value head [k | v]": ([f for g in range(Hkv) for f in kv_feats[2 * g * d: 2 * g * d + d]],
                                           [f for g in range(Hkv) for f in kv_feats[2 * g * d + d: 2 * g * d + 2 * d]])}
    o = _proj(linears, aw, None)
    freqs = _inv_freq(model, rot) if rot else ()
    tried = []
    for label, (kf, vf) in hyps.items():
        km, vm = {r for r, _ in kf}, {r for r, _ in vf}
        if len(km) != 1 or len(vm) != 1:
            tried.append(f"{label}: keys/values span modules")
            continue
        k = _proj(linears, km.pop(), [j for _, j in kf])
        v = _proj(linears, vm.pop(), [j for _, j in vf])
        q = _proj(linears, qm, [j for _, j in q_feats])
        lay = AttentionLayout(_common([q.weight, o.weight]), q, k, v, o, H, Hkv, d, min(rot, d), freqs)
        if invariant.attention(lay):
            return lay
        tried.append(f"{label}: query/key or value/output action not invariant")
    raise TraceError(f"{where}: no key/value split verified ({'; '.join(tried)}); H={H}, d={d}, H_kv={Hkv}. Found so far: "
                     f"{found}.")


def _ffn(prefix, fw, ffn_readers, linears, act, invariant, found) -> FFNLayout:
    down = _proj(linears, fw, None)
    h = down.in_features
    where = f"layer {prefix[:-1]} FFN (output {fw})"
    outs = {r: _proj(linears, r, None).out_features for r in ffn_readers}
    module = _common([*ffn_readers, fw]) or fw
    if len(ffn_readers) == 1 and outs[ffn_readers[0]] == h:
        return FFNLayout(module, _proj(linears, ffn_readers[0], None), down, act)
    if len(ffn_readers) == 2 and all(v == h for v in outs.values()):
        a, b = ffn_readers
        for up, gate in ((a, b), (b, a)):
            pu, pg = _proj(linears, up, None), _proj(linears, gate, None)
            if invariant.ffn_up(pu, down) and not invariant.ffn_up(pg, down):
                return FFNLayout(module, pu, down, act, gate=pg)
        raise TraceError(f"{where}: two readers {ffn_readers}, but neither alone is absorbed linearly by {fw} (no gated "
                         f"'up' found). Found so far: {found}.")
    if len(ffn_readers) == 1 and outs[ffn_readers[0]] == 2 * h:
        r = ffn_readers[0]
        for up, gate in ((range(h, 2 * h), range(h)), (range(h), range(h, 2 * h))):
            pu, pg = _proj(linears, r, list(up)), _proj(linears, r, list(gate))
            if invariant.ffn_up(pu, down) and not invariant.ffn_up(pg, down):
                return FFNLayout(module, pu, down, act, gate=pg)
        raise TraceError(f"{where}: fused reader {r} ({2 * h} features) splits neither as [gate | up] nor [up | gate]. "
                         f"Found so far: {found}.")
    raise TraceError(f"{where}: readers {outs} do not fit an FFN of {h} hidden units. Found so far: {found}.")


def log10_factorial(n: int) -> float:
    """``log10(n!)``."""
    return math.lgamma(n + 1) / math.log(10)
