"""What can be aligned in a model: interchangeable unit groups, attention layers, the function.

Alignment works on parameters as ``dict[str, Tensor]``. An :class:`Architecture` describes, for
a model of a given architecture,

* its **unit groups** (:class:`UnitGroup`): sets of ``n`` interchangeable units — hidden units of
  an MLP layer, FFN units of a transformer layer, heads of an attention layer. Each member of a
  group is a tensor and a ``(n, k)`` table of flat positions in it: row ``i`` lists the ``k``
  entries that belong to unit ``i`` (its incoming weights and bias — role ``"in"`` — or its
  outgoing weights — role ``"out"``). Permuting the units by ``π`` writes
  ``T.flat[pos[i]] ← T.flat[pos[π(i)]]`` in every member (the exact action
  :class:`~paramsym.actions.HiddenPermutationAction` / :class:`~paramsym.actions.HeadPermutationAction`);
  positive rescaling by ``c`` multiplies the ``"in"`` entries of unit ``i`` by ``c_i`` and
  divides its ``"out"`` entries by ``c_i`` (:class:`~paramsym.actions.RescalingAction`), which
  is exact only behind a positively homogeneous activation (``rescalable``);
* its **attention layers** (:class:`~paramsym.models.adapters.AttentionLayout`), whose per-head
  GL(d_k) on (W_Q, W_K) (the rotary commutant under rotary embeddings) and GL(d_v) on (W_V, W_O) are
  :class:`~paramsym.actions.attention.QueryKeyAction` and
  :class:`~paramsym.actions.attention.ValueOutputAction`;
* the **function** ``forward(params, x) -> logits`` used to evaluate losses along a path.

Two builders: :func:`mlp_architecture` (a chain of linear layers, weights ``(out, in)`` and
biases, with one elementwise activation between them; e.g. :func:`paramsym.models.mlp.mlp`) and
:func:`hf_architecture` (a Hugging Face model, through :func:`paramsym.models.adapters.adapt`).
Which symmetries apply is decided from the catalogue's predicates: permutations for any
elementwise activation, rescaling when :func:`~paramsym.actions.linear.check_homogeneous`
accepts the activation, attention on every layer (GL(d_k) on query/key, or the rotary commutant
when the adapter reports rotary embeddings; GL(d_v) on value/output).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..actions.linear import check_homogeneous
from ..errors import ActionError, ArchitectureMismatchError, ShapeError
from ..models.adapters import AttentionLayout, ModelLayout, Projection, adapt
from ..targets.base import model_output

__all__ = ["Architecture", "UnitGroup", "check_same_architecture", "hf_architecture", "mlp_architecture"]


@dataclass(frozen=True)
class Member:
    """Entries of tensor ``name`` belonging to each unit: ``positions`` ``(n, k)`` flat indices."""

    name: str
    positions: Tensor
    role: str  # "in" (incoming weights/bias of the unit) or "out" (outgoing weights)


@dataclass(frozen=True)
class UnitGroup:
    """``size`` interchangeable units (see module docstring).

    Attributes:
        name: e.g. ``"fc1"`` (hidden units after layer fc1) or ``"transformer.h.0.attn.heads"``.
        kind: the catalogue kind of its permutation action (``"hidden_permutation"`` or
            ``"head_permutation"``), or ``"residual_permutation"`` (GPT-2's residual stream, not
            in the catalogue: see :func:`_residual_group`).
        rescalable: positive rescaling is an exact symmetry of these units (homogeneous activation).
        pair: for MLP hidden units, ``(earlier weight, earlier bias or None, later weight)`` —
            the names the catalogue actions take.
    """

    name: str
    kind: str
    size: int
    members: tuple[Member, ...]
    rescalable: bool = False
    pair: tuple[str, str | None, str] | None = None


@dataclass
class Architecture:
    """Unit groups, attention layers and the function of one architecture (module docstring)."""

    kind: str  # "mlp" or "hf"
    names: dict[str, tuple[int, ...]]
    groups: list[UnitGroup]
    attention: list[AttentionLayout]
    forward: Callable[[Mapping[str, Tensor], Tensor], Tensor]
    activation: str
    info: dict = field(default_factory=dict)
    module: nn.Module | None = None  # the Hugging Face model (float64) behind ``forward``; None for an MLP chain

    @property
    def rescalable(self) -> bool:
        return any(g.rescalable for g in self.groups)


def check_param_pair(a: object, b: object, what: tuple[str, str] = ("a", "b"), same_dtype: bool = False) -> None:
    """Raise a named error unless ``a`` and ``b`` are mappings of tensors with the same names and
    shapes (dtypes may differ unless ``same_dtype``: distance and interpolate compute in float64
    or by broadcasting). The Python-API check of
    :func:`~paramsym.alignment.matching.distance` and :func:`~paramsym.alignment.path.interpolate`.

    Raises:
        ConfigError: not mappings of tensors.
        ArchitectureMismatchError: other names or shapes (listed).
    """
    from ..errors import ConfigError

    for name, m in zip(what, (a, b)):
        if not isinstance(m, Mapping) or not all(isinstance(t, Tensor) for t in m.values()):
            raise ConfigError(f"{name} must be a dict of parameter tensors (name -> Tensor); received "
                              f"{type(m).__name__}.")
    only = sorted(set(a) ^ set(b), key=_natural)
    shapes = [f"{n}: {tuple(a[n].shape)} vs {tuple(b[n].shape)}" for n in sorted(a, key=_natural)
              if n in b and a[n].shape != b[n].shape]
    if same_dtype:
        shapes += [f"{n}: {a[n].dtype} vs {b[n].dtype}" for n in sorted(a, key=_natural)
                   if n in b and a[n].dtype != b[n].dtype]
    if only or shapes:
        raise ArchitectureMismatchError(f"{what[0]} and {what[1]} do not hold the same tensors: "
                                        + "; ".join(([f"not in both: {only[:8]}"] if only else [])
                                                    + ([f"different shapes or dtypes: {'; '.join(shapes[:8])}"] if shapes else []))
                                        + ". Pass the parameters of two models of one architecture.")


def check_same_architecture(a: Mapping[str, Tensor], b: Mapping[str, Tensor], what: tuple[str, str] = ("A", "B")) -> None:
    """Raise :class:`ArchitectureMismatchError` unless ``a`` and ``b`` have the same names, shapes and dtypes.

    The message lists (at most 8 of each) the tensors only in A, only in B, and of different shapes.
    """
    only_a = sorted((n for n in a if n not in b), key=_natural)
    only_b = sorted((n for n in b if n not in a), key=_natural)
    shapes = [f"{n}: {tuple(a[n].shape)} vs {tuple(b[n].shape)}" for n in sorted(a, key=_natural)
              if n in b and a[n].shape != b[n].shape]
    dtypes = [f"{n}: {str(a[n].dtype).removeprefix('torch.')} vs {str(b[n].dtype).removeprefix('torch.')}"
              for n in sorted(a, key=_natural) if n in b and a[n].dtype != b[n].dtype]
    if only_a or only_b or shapes or dtypes:
        parts = []
        if only_a:
            parts.append(f"only in {what[0]}: {only_a[:8]}" + (f" (+{len(only_a) - 8} more)" if len(only_a) > 8 else ""))
        if only_b:
            parts.append(f"only in {what[1]}: {only_b[:8]}" + (f" (+{len(only_b) - 8} more)" if len(only_b) > 8 else ""))
        if shapes:
            parts.append("different shapes: " + "; ".join(shapes[:8]) + (f" (+{len(shapes) - 8} more)" if len(shapes) > 8 else ""))
        if dtypes:
            parts.append("different dtypes: " + "; ".join(dtypes[:8]) + (f" (+{len(dtypes) - 8} more)" if len(dtypes) > 8 else "")
                         + " (convert both models to one floating dtype)")
        raise ArchitectureMismatchError(
            f"models {what[0]} and {what[1]} do not have the same architecture — {'; '.join(parts)}. "
            "Alignment needs two models with the same tensor names and shapes.")


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def mlp_architecture(params: Mapping[str, Tensor], activation: str | nn.Module = "relu") -> Architecture:
    """The architecture of a chain of linear layers ``x ↦ W_L σ(⋯ σ(W_1 x + b_1) ⋯) + b_L``.

    Weights are the 2-D tensors in natural name order (``fc2`` before ``fc10``); the bias of
    ``X.weight`` is ``X.bias`` when present. Hidden layer ℓ's units are rows of ``W_ℓ`` (with
    ``b_ℓ``) — role ``in`` — and columns of ``W_{ℓ+1}`` — role ``out``.

    Raises:
        ShapeError: tensors that are not weights/biases of a chain, or shapes that do not chain.
    """
    names = sorted((n for n, t in params.items() if t.ndim == 2), key=_natural)
    if len(names) < 2:
        raise ShapeError(f"an MLP needs at least two 2-D weight tensors (out × in) in a chain; received "
                         f"{[(n, tuple(t.shape)) for n, t in params.items()]}.")
    empty = [(n, tuple(params[n].shape)) for n in names if params[n].numel() == 0]
    if empty:
        raise ShapeError(f"an MLP needs layers of width >= 1; weights {empty[:4]} are empty (a zero-width layer has no "
                         "units to align). Give the parameters of a trained model.")
    biases = {}
    for w in names:
        b = w[: -len("weight")] + "bias" if w.endswith("weight") else None
        if b in params:
            if tuple(params[b].shape) != (params[w].shape[0],):
                raise ShapeError(f"bias {b!r} has shape {tuple(params[b].shape)}; expected ({params[w].shape[0]},).")
            biases[w] = b
    other = [n for n in params if n not in names and n not in biases.values()]
    if other:
        raise ShapeError(f"not an MLP (chain of linear layers): tensors {other[:8]} are neither 2-D weights nor their "
                         "biases ('X.weight' → 'X.bias'). Give an HF save_pretrained directory for other architectures.")
    for i in range(1, len(names)):
        if params[names[i]].shape[1] != params[names[i - 1]].shape[0]:
            raise ShapeError(f"the weights do not chain: {names[i]!r} {tuple(params[names[i]].shape)} needs "
                             f"{params[names[i - 1]].shape[0]} columns to follow {names[i - 1]!r} "
                             f"{tuple(params[names[i - 1]].shape)}.")
    act_desc = activation if isinstance(activation, str) else type(activation).__name__
    try:
        check_homogeneous(activation)
        homogeneous = True
    except ActionError:
        homogeneous = False
    act_fn = _activation(activation)
    groups = []
    for i in range(len(names) - 1):
        W, U = params[names[i]], params[names[i + 1]]
        h, n_in = W.shape
        m = U.shape[0]
        members = [Member(names[i], torch.arange(h * n_in).reshape(h, n_in), "in")]
        if names[i] in biases:
            members.append(Member(biases[names[i]], torch.arange(h).reshape(h, 1), "in"))
        members.append(Member(names[i + 1], torch.arange(m * h).reshape(m, h).T.contiguous(), "out"))
        groups.append(UnitGroup(names[i].rsplit(".", 1)[0], "hidden_permutation", h, tuple(members), homogeneous,
                                (names[i], biases.get(names[i]), names[i + 1])))
    order = [(w, biases.get(w)) for w in names]

    def forward(p: Mapping[str, Tensor], x: Tensor) -> Tensor:
        for k, (w, b) in enumerate(order):
            x = x @ p[w].T
            if b is not None:
                x = x + p[b]
            if k < len(order) - 1:
                x = act_fn(x)
        return x

    shapes = {n: tuple(t.shape) for n, t in params.items()}
    return Architecture("mlp", shapes, groups, [], forward, act_desc,
                        {"widths": [int(params[names[0]].shape[1])] + [int(params[w].shape[0]) for w in names]})


def _activation(activation: str | nn.Module) -> Callable[[Tensor], Tensor]:
    if isinstance(activation, nn.Module):
        return activation
    from ..models.mlp import activation_module

    return activation_module(activation)


def _unit_positions(proj: Projection, units: int, per: int, how: str) -> Tensor:
    """``(units, k)`` flat positions: rows (``how="rows"``) or columns of ``per`` canonical rows/columns each."""
    idx = torch.arange(units * per).reshape(units, per)
    if how == "rows":
        return torch.stack([proj.row_positions(r).reshape(-1) for r in idx])
    return torch.stack([proj.column_positions(r).reshape(-1) for r in idx])


def hf_architecture(model: nn.Module, n_classes: int | None = None, positions: str = "last",
                    layout: ModelLayout | None = None) -> Architecture:
    """The architecture of a Hugging Face model with an adapter (:func:`paramsym.models.adapters.adapt`),
    or of any model whose ``layout`` is given (e.g. the census's derived one,
    :attr:`paramsym.census.spaces.Spaces.layout`: no adapter needed).

    Unit groups per layer: the FFN units (rows of ``up``/``gate`` with their biases, columns of
    ``down``) and — when every query head has its own key/value head — the attention heads (query,
    key, value rows and biases, output columns of each head). Attention layers: every layer (query/key
    by GL(d_k), or by the rotary commutant under rotary embeddings). FFN units are rescalable only behind a homogeneous activation.
    ``forward(params, x)`` is the model's logits (or last hidden state) at the last position
    (``positions="last"``) or at every position (``positions="all"``: ``(N, T, C)``, a language
    model's next-token logits), restricted to the first ``n_classes`` entries
    (``arch.info["n_classes"]``, may be set later); an output without a position axis (an image
    classifier's ``(N, C)`` logits) is taken as it is. The residual stream is a unit group of
    GPT-2 and ViT (:func:`_residual_group`).

    Raises:
        ConfigError: ``positions`` not ``"last"`` or ``"all"``.
    """
    if positions not in ("last", "all"):
        from ..errors import ConfigError

        raise ConfigError(f"positions must be 'last' or 'all'; received {positions!r}.")
    from torch.func import functional_call

    layout = adapt(model) if layout is None else layout
    params = dict(model.named_parameters())
    groups: list[UnitGroup] = []
    attention: list[AttentionLayout] = []
    acts = set()
    for layer in layout.layers:
        ffn = layer.ffn
        acts.add(ffn.activation)
        try:
            check_homogeneous(ffn.activation)
            homogeneous = ffn.up.layout == "out_in" and ffn.gate is None
        except ActionError:
            homogeneous = False
        F = ffn.hidden
        members = []
        for proj in (ffn.up, ffn.gate):
            if proj is None:
                continue
            members.append(Member(proj.weight, _unit_positions(proj, F, 1, "rows"), "in"))
            if proj.bias is not None:
                members.append(Member(proj.bias, proj.bias_positions(torch.arange(F)).reshape(F, 1), "in"))
        members.append(Member(ffn.down.weight, _unit_positions(ffn.down, F, 1, "cols"), "out"))
        groups.append(UnitGroup(f"{ffn.module}.units", "hidden_permutation", F, tuple(members), homogeneous))
        att = layer.attention
        if att.num_kv_heads == att.num_heads:
            H, d = att.num_heads, att.head_dim
            hm = []
            for proj in (att.q, att.k, att.v):
                hm.append(Member(proj.weight, _unit_positions(proj, H, d, "rows"), "in"))
                if proj.bias is not None:
                    hm.append(Member(proj.bias, proj.bias_positions(torch.arange(H * d)).reshape(H, d), "in"))
            hm.append(Member(att.o.weight, _unit_positions(att.o, H, d, "cols"), "out"))
            groups.append(UnitGroup(f"{att.module}.heads", "head_permutation", H, tuple(hm)))
        attention.append(att)

    residual = _residual_group(params, layout)
    if residual is not None:
        groups.append(residual)
    info = {"model_type": layout.model_type, "residual_permutation": residual is not None, "layers": len(layout.layers), "n_classes": n_classes, "positions": positions,
            "heads_permutable": all(a.num_kv_heads == a.num_heads for a in (la.attention for la in layout.layers))}

    def forward(p: Mapping[str, Tensor], x: Tensor) -> Tensor:
        out = functional_call(model, dict(p), (x,))
        y = model_output(out)
        if y.ndim == 3 and info["positions"] == "last":  # may be set later, like n_classes
            y = y[:, -1]
        k = info["n_classes"]  # set later by callers that choose the data (arch.info["n_classes"])
        return y if k is None else y[:, :k]

    shapes = {n: tuple(t.shape) for n, t in params.items()}
    return Architecture("hf", shapes, groups, attention, forward, ",".join(sorted(acts)), info, model)


def _stream_axes(params: Mapping[str, Tensor], layout) -> dict[str, int] | None:
    """The tensors outside the layers' projections that carry the residual stream, with the axis of
    length ``D`` (``None``: a model type whose stream is not described, or a tensor missing).

    GPT-2: token and position embeddings (column ``i``; the tied LM head included), every
    LayerNorm weight and bias. ViT: the CLS token and position embeddings (last axis), the patch
    projection's output channels and bias, every LayerNorm, the classifier's input columns."""
    D = layout.hidden_size
    names = list(params)
    norms = [n for n in names if params[n].ndim == 1 and (".ln_" in n or n.rsplit(".", 2)[-2] in ("ln_f", "layernorm")
                                                           or ".layernorm_" in n)]
    if len(norms) != 4 * len(layout.layers) + 2:
        return None
    if layout.model_type == "gpt2":
        emb = {n: 1 for n in names if n.endswith(("wte.weight", "wpe.weight"))}
        return emb | {n: 0 for n in norms} if len(emb) == 2 else None
    if layout.model_type == "vit":
        want = {"embeddings.cls_token": 2, "embeddings.position_embeddings": 2,
                "patch_embeddings.projection.weight": 0, "patch_embeddings.projection.bias": 0, "classifier.weight": 1}
        found = {n: ax for n in names for suffix, ax in want.items() if n.endswith(suffix)}
        if len(found) != len(want) or any(params[n].shape[ax] != D for n, ax in found.items()):
            return None
        return found | {n: 0 for n in norms}
    return None


def _residual_group(params: Mapping[str, Tensor], layout) -> UnitGroup | None:
    """The residual-stream permutation (GPT-2, ViT): coordinate ``i`` of the stream is entry ``i``
    along the stream axis of every tensor of :func:`_stream_axes`, input column ``i`` of q/k/v
    and the FFN ``up`` projection, output row ``i`` (and bias entry) of the attention output and
    FFN ``down`` projections. LayerNorm commutes with permutations of its coordinates (mean and
    variance are symmetric), residual additions are coordinatewise, so permuting all of them
    together is exact. ``None`` if the model's stream is not described."""
    axes = _stream_axes(params, layout)
    if axes is None:
        return None
    D = layout.hidden_size
    members = [Member(n, torch.arange(params[n].numel()).reshape(params[n].shape).movedim(ax, 0).reshape(D, -1), "in")
               for n, ax in axes.items()]
    cols = torch.arange(D)
    for layer in layout.layers:
        for proj in (layer.attention.q, layer.attention.k, layer.attention.v, layer.ffn.up):
            members.append(Member(proj.weight, proj.column_positions(cols).T.contiguous(), "in"))
        for proj in (layer.attention.o, layer.ffn.down):
            members.append(Member(proj.weight, proj.row_positions(cols), "in"))
            if proj.bias is not None:
                members.append(Member(proj.bias, proj.bias_positions(cols).reshape(D, 1), "in"))
    return UnitGroup("residual", "residual_permutation", D, tuple(members))
