"""Architecture adapters: where each layer's attention and FFN weights live in a real model.

An adapter maps a Hugging Face model (chosen by ``config.model_type``) to a
:class:`ModelLayout`: per layer ℓ, the attention projections ``q, k, v, o`` and the FFN
projections ``up`` (``gate``) ``down`` as :class:`Projection` s — the parameter name, its storage
layout and, for fused tensors, which output features belong to the projection — plus the head
structure (heads, key/value heads, head dimension) and the rotary position embedding (rotary
dimensions and frequencies). Known types:

* ``bert`` — ``nn.Linear`` (out × in) ``query/key/value``, ``attention.output.dense``,
  ``intermediate.dense → output.dense``; absolute positions (no rotary).
* ``gpt2`` — ``Conv1D`` stores weights **input-major** (in × out, ``y = x W + b``); ``c_attn``
  is fused ``[q | k | v]`` along the output features.
* ``gpt_neox`` (Pythia) — fused ``query_key_value`` (out × in) with the **per-head interleaved**
  layout ``[q_h | k_h | v_h]`` for h = 0..H−1; rotary on the first
  ``rotary_dim = head_dim · partial_rotary_factor`` dimensions of every head.
* ``llama`` — ``q/k/v/o_proj`` (out × in), grouped-query attention with ``num_key_value_heads``
  (query head h reads key/value head ``h // (H / H_kv)``), rotary on the whole head, gated FFN
  ``down(act(gate x) ⊙ up x)``.
* ``vit`` (Vision Transformer, transformers ≥ 5 names) — ``q/k/v/o_proj`` (out × in) in
  ``layers.ℓ.attention``, pre-norm ``layernorm_before → q,k,v`` and ``layernorm_after → mlp.fc1``,
  FFN ``mlp.fc1 → mlp.fc2``; no rotary.

Rotary layout (all four use HF's ``rotate_half``): dimension ``i`` and ``i + rotary_dim/2`` of a
head form the pair rotated by angle ``position · freqs[i]``.

Register another architecture with :func:`register_adapter` (``fn(model) -> ModelLayout``).

Forward-mode AD: PyTorch's fused attention kernels have no forward-mode derivative, so models
analysed with JVPs must use the **eager** attention path. :func:`paramsym.models.loading.load_model`
loads with ``attn_implementation="eager"`` (safetensors only); :func:`require_eager` switches a loaded model to it (or raises
:class:`~paramsym.errors.AttentionImplementationError` saying what to do).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor, nn

from ..errors import (
    AttentionImplementationError,
    UnknownArchitectureError,
)

__all__ = [
    "Projection", "AttentionLayout", "FFNLayout", "LayerLayout", "ModelLayout",
    "register_adapter", "known_model_types", "adapt", "mha_layout", "require_eager",
    "ffn_activation",
]

Layout = Literal["out_in", "in_out"]


@dataclass(frozen=True)
class Projection:
    """A linear map ``y = W x + b`` stored in (part of) a parameter tensor.

    Attributes:
        weight: parameter name of the stored weight.
        bias: parameter name of the stored bias, or ``None``.
        layout: ``"out_in"`` (``nn.Linear``: ``W`` stored as is) or ``"in_out"`` (``Conv1D``:
            ``Wᵀ`` stored).
        shape: the stored tensor's shape.
        features: output features of the stored tensor that belong to this projection, in
            order (fused tensors); ``None`` = all of them.
        offset: flat position in the stored tensor where the ``shape``-sized matrix starts (0; an
            expert ``e`` of a 3-D expert bank ``(E, out, in)``: ``e·out·in``, Mixtral).
    """

    weight: str
    bias: str | None
    layout: Layout
    shape: tuple[int, int]
    features: tuple[int, ...] | None = None
    offset: int = 0

    @property
    def stored_out(self) -> int:
        return self.shape[0] if self.layout == "out_in" else self.shape[1]

    @property
    def in_features(self) -> int:
        return self.shape[1] if self.layout == "out_in" else self.shape[0]

    @property
    def out_features(self) -> int:
        return self.stored_out if self.features is None else len(self.features)

    def _rows(self, rows: Sequence[int] | Tensor) -> Tensor:
        r = torch.as_tensor(rows, dtype=torch.long).reshape(-1)
        if self.features is not None:
            r = torch.as_tensor(self.features, dtype=torch.long)[r]
        return r

    def _flat(self, out_idx: Tensor, in_idx: Tensor) -> Tensor:
        if self.layout == "out_in":
            return self.offset + out_idx[:, None] * self.shape[1] + in_idx[None, :]
        return self.offset + in_idx[None, :] * self.shape[1] + out_idx[:, None]

    def row_positions(self, rows: Sequence[int] | Tensor) -> Tensor:
        """Flat positions in ``weight`` of the canonical ``W[rows, :]`` (``len(rows) × in``)."""
        return self._flat(self._rows(rows), torch.arange(self.in_features))

    def column_positions(self, cols: Sequence[int] | Tensor) -> Tensor:
        """Flat positions in ``weight`` of the canonical ``W[:, cols]`` (``out × len(cols)``)."""
        c = torch.as_tensor(cols, dtype=torch.long).reshape(-1)
        return self._flat(self._rows(torch.arange(self.out_features)), c)

    def bias_positions(self, rows: Sequence[int] | Tensor) -> Tensor:
        """Flat positions in ``bias`` of ``b[rows]``."""
        return self._rows(rows)

    @property
    def tensors(self) -> tuple[str, ...]:
        return (self.weight,) if self.bias is None else (self.weight, self.bias)


@dataclass(frozen=True)
class AttentionLayout:
    """One attention layer: ``q, k, v, o`` projections and the head structure.

    Query head ``h`` uses rows ``h·d .. (h+1)·d − 1`` of ``q`` (``d = head_dim``) and key/value
    head ``h // (num_heads / num_kv_heads)``; its output enters ``o`` through columns
    ``h·d_v ..``. Rotary: the first ``rotary_dim`` dimensions of each q/k head are rotated,
    pair ``(i, i + rotary_dim/2)`` at angle ``position · rotary_freqs[i]``.
    """

    module: str
    q: Projection
    k: Projection
    v: Projection
    o: Projection
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rotary_dim: int = 0
    rotary_freqs: tuple[float, ...] = ()
    qk_refused: str | None = None  # why no query/key symmetry is claimed (traced; e.g. q/k norms, interleaved rotary)
    #: norms over the *whole* query or key projection (OLMo2): ``("q" | "k", weight, bias or None)``; their
    #: scales are indexed by the projection's features, so a head permutation moves them too
    qk_norms: tuple[tuple[str, str, str | None], ...] = ()

    @property
    def group_size(self) -> int:
        """Query heads per key/value head."""
        return self.num_heads // self.num_kv_heads

    def query_heads(self, kv_head: int) -> list[int]:
        """The query heads that read key/value head ``kv_head``."""
        g = self.group_size
        return list(range(kv_head * g, (kv_head + 1) * g))

    def head_rows(self, head: int) -> list[int]:
        return list(range(head * self.head_dim, (head + 1) * self.head_dim))

    @property
    def tensors(self) -> tuple[str, ...]:
        names: list[str] = []
        for p in (self.q, self.k, self.v, self.o):
            names += [n for n in p.tensors if n not in names]
        return tuple(names)


@dataclass(frozen=True)
class FFNLayout:
    """The feed-forward block ``down(act(up x))`` or, gated, ``down(act(gate x) ⊙ up x)``."""

    module: str
    up: Projection
    down: Projection
    activation: str
    gate: Projection | None = None

    @property
    def hidden(self) -> int:
        return self.up.out_features

    @property
    def input_module(self) -> str:
        """Name of the sub-module whose input is the FFN input ``x`` (the ``up`` projection's module)."""
        return self.up.weight.rsplit(".", 1)[0]

    @property
    def tensors(self) -> tuple[str, ...]:
        names = list(self.up.tensors) + list(self.gate.tensors if self.gate else ()) + [self.down.weight]
        return tuple(names)


@dataclass(frozen=True)
class LayerLayout:
    """Layer ℓ: its attention, its FFN, and the norms feeding them (``norm_in → q,k,v``,
    ``norm_ffn → up/gate``, for pre-norm models; ``None`` where the norm output also feeds the
    residual stream, as in post-norm BERT)."""

    index: int
    module: str
    attention: AttentionLayout
    ffn: FFNLayout
    norm_attention: str | None = None
    norm_ffn: str | None = None
    norm_shared: str | None = None  # one norm feeding both q,k,v and up/gate (parallel blocks: old Falcon, GPT-J)
    #: a mixture of experts (Mixtral): every expert's FFN, as slices of the 3-D expert bank (``ffn`` is expert 0's);
    #: the router reads the stream and only weights the experts' outputs
    experts: tuple[FFNLayout, ...] = ()


@dataclass(frozen=True)
class ModelLayout:
    """Every layer of a model, by ``model_type``."""

    model_type: str
    layers: tuple[LayerLayout, ...]
    hidden_size: int
    info: dict[str, Any] = field(default_factory=dict)


_ADAPTERS: dict[str, Callable[[nn.Module], ModelLayout]] = {}


def register_adapter(model_type: str, fn: Callable[[nn.Module], ModelLayout]) -> None:
    """Register ``fn(model) -> ModelLayout`` for HF models with ``config.model_type == model_type``."""
    if not callable(fn):
        raise UnknownArchitectureError(f"register_adapter({model_type!r}, fn): fn must be callable, received {type(fn).__name__}.")
    _ADAPTERS[str(model_type)] = fn


def known_model_types() -> list[str]:
    """The registered ``model_type`` s."""
    return sorted(_ADAPTERS)


def adapt(model: nn.Module) -> ModelLayout:
    """The :class:`ModelLayout` of an HF model, chosen by ``model.config.model_type``.

    Raises:
        UnknownArchitectureError: no ``config.model_type``, or one without an adapter (the
            message lists the known types and how to register one).
    """
    config = getattr(model, "config", None)
    mt = getattr(config, "model_type", None)
    if mt is None:
        raise UnknownArchitectureError(
            f"{type(model).__name__} has no config.model_type (not a Hugging Face model); adapters exist for "
            f"{known_model_types()}. Register one with paramsym.models.adapters.register_adapter(model_type, fn)."
        )
    if mt not in _ADAPTERS:
        raise UnknownArchitectureError(
            f"no architecture adapter for model_type {mt!r}; known: {known_model_types()}. Register one with "
            "paramsym.models.adapters.register_adapter(model_type, fn), fn(model) -> ModelLayout."
        )
    return _ADAPTERS[mt](model)


# -- helpers ------------------------------------------------------------------------------
def _layers(model: nn.Module, suffix: str) -> tuple[str, nn.ModuleList]:
    for name, mod in model.named_modules():
        if isinstance(mod, nn.ModuleList) and (name == suffix or name.endswith("." + suffix)):
            return name, mod
    raise UnknownArchitectureError(f"{type(model).__name__}: cannot find the layer list {suffix!r} the adapter expects.")


def _proj(params: dict[str, Tensor], module: str, layout: Layout = "out_in",
          features: Sequence[int] | None = None) -> Projection:
    w, b = f"{module}.weight", f"{module}.bias"
    if w not in params:
        raise UnknownArchitectureError(f"the adapter expects a parameter {w!r}, which the model does not have.")
    return Projection(w, b if b in params else None, layout, tuple(params[w].shape),
                      None if features is None else tuple(int(i) for i in features))


def _inv_freq(model: nn.Module, rotary_dim: int) -> tuple[float, ...]:
    for name, buf in model.named_buffers():
        if name.endswith("rotary_emb.inv_freq"):
            return tuple(float(x) for x in buf.detach().double().cpu())
    cfg = model.config
    base = float((getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", getattr(cfg, "rope_theta", 10000.0)))
    return tuple(float(x) for x in 1.0 / base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))


def _bert(model: nn.Module) -> ModelLayout:
    cfg, params = model.config, dict(model.named_parameters())
    prefix, layers = _layers(model, "encoder.layer")
    H = cfg.num_attention_heads
    d = cfg.hidden_size // H
    out = []
    for i in range(len(layers)):
        m = f"{prefix}.{i}"
        att = AttentionLayout(
            f"{m}.attention", _proj(params, f"{m}.attention.self.query"), _proj(params, f"{m}.attention.self.key"),
            _proj(params, f"{m}.attention.self.value"), _proj(params, f"{m}.attention.output.dense"), H, H, d)
        ffn = FFNLayout(m, _proj(params, f"{m}.intermediate.dense"), _proj(params, f"{m}.output.dense"), str(cfg.hidden_act))
        out.append(LayerLayout(i, m, att, ffn))
    return ModelLayout("bert", tuple(out), cfg.hidden_size)


def _gpt2(model: nn.Module) -> ModelLayout:
    cfg, params = model.config, dict(model.named_parameters())
    prefix, layers = _layers(model, "h")
    D, H = cfg.n_embd, cfg.n_head
    d = D // H
    out = []
    for i in range(len(layers)):
        m = f"{prefix}.{i}"
        fused = f"{m}.attn.c_attn"
        q, k, v = (_proj(params, fused, "in_out", range(j * D, (j + 1) * D)) for j in range(3))
        att = AttentionLayout(f"{m}.attn", q, k, v, _proj(params, f"{m}.attn.c_proj", "in_out"), H, H, d)
        ffn = FFNLayout(f"{m}.mlp", _proj(params, f"{m}.mlp.c_fc", "in_out"), _proj(params, f"{m}.mlp.c_proj", "in_out"),
                        str(cfg.activation_function))
        out.append(LayerLayout(i, m, att, ffn, f"{m}.ln_1", f"{m}.ln_2"))
    return ModelLayout("gpt2", tuple(out), D)


def _gpt_neox(model: nn.Module) -> ModelLayout:
    cfg, params = model.config, dict(model.named_parameters())
    prefix, layers = _layers(model, "layers")
    D, H = cfg.hidden_size, cfg.num_attention_heads
    d = D // H
    factor = float((getattr(cfg, "rope_parameters", None) or {}).get("partial_rotary_factor", getattr(cfg, "rotary_pct", 1.0)))
    rot = int(d * factor)
    freqs = _inv_freq(model, rot)
    out = []
    for i in range(len(layers)):
        m = f"{prefix}.{i}"
        fused = f"{m}.attention.query_key_value"
        # per head h the fused output features are [q_h | k_h | v_h], each of size d
        q, k, v = (_proj(params, fused, "out_in", [h * 3 * d + j * d + c for h in range(H) for c in range(d)])
                   for j in range(3))
        att = AttentionLayout(f"{m}.attention", q, k, v, _proj(params, f"{m}.attention.dense"), H, H, d, rot, freqs)
        ffn = FFNLayout(f"{m}.mlp", _proj(params, f"{m}.mlp.dense_h_to_4h"), _proj(params, f"{m}.mlp.dense_4h_to_h"),
                        str(cfg.hidden_act))
        out.append(LayerLayout(i, m, att, ffn, f"{m}.input_layernorm", f"{m}.post_attention_layernorm"))
    return ModelLayout("gpt_neox", tuple(out), D, {"parallel_residual": bool(cfg.use_parallel_residual)})


def _llama(model: nn.Module) -> ModelLayout:
    cfg, params = model.config, dict(model.named_parameters())
    prefix, layers = _layers(model, "layers")
    H = cfg.num_attention_heads
    Hkv = getattr(cfg, "num_key_value_heads", None) or H
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // H
    freqs = _inv_freq(model, d)
    out = []
    for i in range(len(layers)):
        m = f"{prefix}.{i}"
        a = f"{m}.self_attn"
        att = AttentionLayout(a, _proj(params, f"{a}.q_proj"), _proj(params, f"{a}.k_proj"), _proj(params, f"{a}.v_proj"),
                              _proj(params, f"{a}.o_proj"), H, Hkv, d, d, freqs)
        ffn = FFNLayout(f"{m}.mlp", _proj(params, f"{m}.mlp.up_proj"), _proj(params, f"{m}.mlp.down_proj"),
                        str(cfg.hidden_act), gate=_proj(params, f"{m}.mlp.gate_proj"))
        out.append(LayerLayout(i, m, att, ffn, f"{m}.input_layernorm", f"{m}.post_attention_layernorm"))
    return ModelLayout("llama", tuple(out), cfg.hidden_size)


def _vit(model: nn.Module) -> ModelLayout:
    cfg, params = model.config, dict(model.named_parameters())
    prefix, layers = _layers(model, "layers")
    H = cfg.num_attention_heads
    d = cfg.hidden_size // H
    out = []
    for i in range(len(layers)):
        m = f"{prefix}.{i}"
        a = f"{m}.attention"
        att = AttentionLayout(a, _proj(params, f"{a}.q_proj"), _proj(params, f"{a}.k_proj"), _proj(params, f"{a}.v_proj"),
                              _proj(params, f"{a}.o_proj"), H, H, d)
        ffn = FFNLayout(f"{m}.mlp", _proj(params, f"{m}.mlp.fc1"), _proj(params, f"{m}.mlp.fc2"), str(cfg.hidden_act))
        out.append(LayerLayout(i, m, att, ffn, f"{m}.layernorm_before", f"{m}.layernorm_after"))
    return ModelLayout("vit", tuple(out), cfg.hidden_size)


for _mt, _fn in (("bert", _bert), ("gpt2", _gpt2), ("gpt_neox", _gpt_neox), ("llama", _llama), ("vit", _vit)):
    register_adapter(_mt, _fn)


def mha_layout(name: str, module: nn.MultiheadAttention) -> AttentionLayout:
    """The :class:`AttentionLayout` of an ``nn.MultiheadAttention`` named ``name`` in its model.

    Fused ``in_proj_weight`` (3E × E, rows ``[q | k | v]``) or separate ``q/k/v_proj_weight``;
    ``out_proj`` is ``o``.

    Raises:
        UnknownArchitectureError: ``add_bias_kv`` (learned extra key/value tokens, which the
            per-head actions would also have to move) is not supported.
    """
    if module.bias_k is not None or module.bias_v is not None:
        raise UnknownArchitectureError(f"{name}: nn.MultiheadAttention with add_bias_kv=True is not supported by the attention "
                                       "layouts (its extra key/value tokens are not described); build it with add_bias_kv=False.")
    pre = f"{name}." if name else ""
    params = {n: p for n, p in module.named_parameters()}
    E, H = module.embed_dim, module.num_heads
    bias = f"{pre}in_proj_bias" if "in_proj_bias" in params else None
    if module._qkv_same_embed_dim:
        shape = tuple(params["in_proj_weight"].shape)
        q, k, v = (Projection(f"{pre}in_proj_weight", bias, "out_in", shape, tuple(range(j * E, (j + 1) * E)))
                   for j in range(3))
    else:
        def sep(j: int, which: str) -> Projection:
            return Projection(f"{pre}{which}_proj_weight", bias, "out_in", tuple(params[f"{which}_proj_weight"].shape),
                              None) if bias is None else _SepBias(f"{pre}{which}_proj_weight", bias, "out_in",
                                                                    tuple(params[f"{which}_proj_weight"].shape),
                                                                    bias_offset=j * E)
        q, k, v = sep(0, "q"), sep(1, "k"), sep(2, "v")
    o = Projection(f"{pre}out_proj.weight", f"{pre}out_proj.bias" if "out_proj.bias" in params else None, "out_in",
                   tuple(params["out_proj.weight"].shape))
    return AttentionLayout(name, q, k, v, o, H, H, E // H)


@dataclass(frozen=True)
class _SepBias(Projection):
    """A separate q/k/v weight whose bias is a slice of the shared ``in_proj_bias``."""

    bias_offset: int = 0

    def bias_positions(self, rows: Sequence[int] | Tensor) -> Tensor:
        return torch.as_tensor(rows, dtype=torch.long).reshape(-1) + self.bias_offset


def ffn_activation(ffn: FFNLayout) -> Callable[[Tensor], Tensor]:
    """The elementwise activation of an FFN layout, from its Hugging Face name (``ACT2FN``).

    Raises:
        UnknownArchitectureError: a name Hugging Face does not know.
    """
    from transformers.activations import ACT2FN

    try:
        return ACT2FN[ffn.activation]
    except KeyError as exc:
        raise UnknownArchitectureError(f"{ffn.module}: unknown FFN activation {ffn.activation!r}; known: "
                                       f"{sorted(ACT2FN)}. Register an adapter that names one of them.") from exc


# -- loading -------------------------------------------------------------------------------
def require_eager(model: nn.Module) -> nn.Module:
    """Switch an HF model to the eager attention path (needed for forward-mode AD) in place.

    PyTorch's fused scaled-dot-product kernels have no forward-mode derivative; the eager path
    computes ``softmax(q kᵀ / √d) v`` with plain tensor operations. Returns the model.

    Raises:
        AttentionImplementationError: the model cannot be switched (reload it with
            ``attn_implementation="eager"``).
    """
    cfg = getattr(model, "config", None)
    if getattr(cfg, "_experts_implementation", None) not in (None, "eager") and hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation("eager")  # mixture-of-experts banks: the per-expert loop runs in float64
    if cfg is None or getattr(cfg, "_attn_implementation", "eager") in (None, "eager"):
        return model
    try:
        model.set_attn_implementation("eager")
    except Exception as exc:  # noqa: BLE001 - any failure gets the same advice
        raise AttentionImplementationError(
            f"{type(model).__name__} uses attention implementation {cfg._attn_implementation!r}, which has no forward-mode "
            f"derivative, and cannot be switched to 'eager' ({exc}). Load it with "
            "from_pretrained(..., attn_implementation='eager') or paramsym.models.loading.load_model."
        ) from exc
    return model
