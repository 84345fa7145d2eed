"""Finders that place the catalogue's exact actions (:mod:`paramsym.actions.catalogue`) in a model.

Each finder only says *where* a catalogue symmetry lies; the transformation is the catalogue
action itself, applied to canonical views of the stored weights (:class:`~.base.View`,
:func:`~.base.catalogue_candidate`). Kinds are the catalogue's kinds.

* :class:`FFNPermutationFinder` — ``hidden_permutation`` of each adapted FFN (``up``/``gate``
  rows and biases, ``down`` columns; :class:`~paramsym.actions.permutation.HiddenPermutationAction`
  on the virtual pair ``V = [W_up | b_up | W_gate | b_gate]`` (rows = hidden units), ``U = W_down``):
  discrete, order ``h!``; plus ``rescaling`` when the FFN's activation is ReLU (ungated).
* :class:`NormScaleFinder` — ``norm_scale``: a pre-norm's ``γ, β`` scaled by ``d`` and the input
  columns of the projections it alone feeds (q/k/v, or up/gate, or all of them for a norm shared
  by parallel attention and FFN — old-architecture Falcon) divided by ``d``
  (:class:`~paramsym.actions.normalization.NormScaleAction`); dimension = width.
* :class:`KeyBiasFinder` — ``key_bias_translation`` (softmax shift,
  :class:`~paramsym.actions.translation.KeyBiasTranslation`) wherever keys have a bias and no
  position-dependent map acts after it: dimension = key width per layer; under partial rotary
  embeddings (GPT-NeoX) only the ``d − rotary_dim`` pass-through dimensions of each key head.
* :class:`ValueBiasFinder` — ``value_bias_shift``
  (:class:`~paramsym.actions.translation.ValueBiasShift`): ``b_v ↦ b_v + c``, ``b_o ↦ b_o − W_o c``
  wherever values and output have biases; dimension = value width per layer.
* :class:`HeadPermutationFinder` — ``head_permutation`` (:class:`~paramsym.actions.permutation.HeadPermutationAction`)
  of every attention layer: the q, k, v rows (and biases) and the o columns of a head move
  together; with grouped-query attention a key/value head moves with its group of query heads
  (order ``H_kv!``; permutations inside a group are not listed).
* :class:`SequentialMLPFinder` — consecutive ``nn.Linear`` pairs in a plain ``nn.Sequential``:
  no activation between (``nn.Identity``/``nn.Dropout`` only) → ``hidden_basis`` GL(h), h²;
  ReLU/LeakyReLU/PReLU (one slope) → ``rescaling`` (h) and ``hidden_permutation``; any other
  elementwise activation → ``hidden_permutation`` only.
"""

from __future__ import annotations

import torch
from torch import nn

from ..actions.linear import HiddenBasisAction, RescalingAction
from ..actions.normalization import NormScaleAction
from ..actions.permutation import HeadPermutationAction, HiddenPermutationAction, SignFlipAction
from ..actions.translation import KeyBiasTranslation, ValueBiasShift
from ..models.adapters import AttentionLayout, Projection, mha_layout
from .base import Candidate, CensusContext, Piece, View, catalogue_candidate

__all__ = ["FFNPermutationFinder", "NormScaleFinder", "KeyBiasFinder", "ValueBiasFinder", "HeadPermutationFinder",
           "SequentialMLPFinder", "ResidualPermutationFinder", "attention_layouts"]

#: elementwise activations that commute with permutations of the hidden units
ELEMENTWISE = (nn.ReLU, nn.LeakyReLU, nn.PReLU, nn.Tanh, nn.Sigmoid, nn.GELU, nn.SiLU, nn.ELU, nn.CELU, nn.SELU,
               nn.Softplus, nn.Hardtanh, nn.ReLU6, nn.Mish, nn.Hardswish, nn.Hardsigmoid, nn.LogSigmoid, nn.Softsign,
               nn.Tanhshrink)
HOMOGENEOUS = (nn.ReLU, nn.LeakyReLU, nn.PReLU)
TRANSPARENT = (nn.Identity, nn.Dropout)


def attention_layouts(ctx: CensusContext) -> list[AttentionLayout]:
    """The adapted layers' attention, or every ``nn.MultiheadAttention`` of a plain model."""
    if ctx.layout is not None:
        return [layer.attention for layer in ctx.layout.layers]
    return [mha_layout(n, m) for n, m in ctx.model.named_modules() if isinstance(m, nn.MultiheadAttention)]


def _rows(proj: Projection) -> list[Piece]:
    """``[W | b]`` of a projection as column pieces (rows = output features)."""
    return [View.weight(proj)] + ([View.bias(proj, column=True)] if proj.bias is not None else [])


class FFNPermutationFinder:
    """Permutations (and, for ReLU, rescalings) of each adapted FFN's hidden units."""

    name = "ffn_permutation"

    def find(self, ctx: CensusContext) -> list[Candidate]:
        if ctx.layout is None:
            return []
        out = []
        for ffn in (f for layer in ctx.layout.layers for f in (layer.experts or (layer.ffn,))):
            h = ffn.hidden
            earlier = _rows(ffn.up) + (_rows(ffn.gate) if ffn.gate is not None else [])
            view = View({"V": earlier, "U": [View.weight(ffn.down)]})
            out.append(catalogue_candidate(
                ffn.module, view, lambda b: HiddenPermutationAction(b, "V", "U"), ctx.params,
                note=f"S_{h} on the hidden units ({'gated ' if ffn.gate else ''}{ffn.activation})",
                discrete_order=f"{h}!"))
            if ffn.gate is not None:  # down(σ(gate) ⊙ up) is linear in up: up row j × c, down column j ÷ c
                view = View({"V.weight": [View.weight(ffn.up)], "U.weight": [View.weight(ffn.down)],
                             **({"V.bias": [View.bias(ffn.up)]} if ffn.up.bias is not None else {})})
                c = catalogue_candidate(ffn.module, view, lambda b: RescalingAction(b, "V.weight", "U.weight"), ctx.params,
                                        note=f"rescaling of the {h} gated units' up rows (down columns ÷): the FFN is "
                                             "linear in up; the gate rows do not rescale")
                out.append(c)
                view = View({"V": _rows(ffn.up), "U": [View.weight(ffn.down)]})  # negative factors: the signs
                out.append(catalogue_candidate(ffn.module, view, lambda b: SignFlipAction(b, "V", "U"), ctx.params,
                                               note=f"sign flips of the {h} gated units' up rows and down columns "
                                                    "(with the rescalings: (ℝ∖{0})^h)", discrete_order=f"2^{h}"))
            if ffn.gate is None and ffn.activation.lower() == "relu":
                view = View({"V.weight": [View.weight(ffn.up)], "U.weight": [View.weight(ffn.down)],
                             **({"V.bias": [View.bias(ffn.up)]} if ffn.up.bias is not None else {})})
                out.append(catalogue_candidate(ffn.module, view, lambda b: RescalingAction(b, "V.weight", "U.weight"),
                                               ctx.params, note=f"positive rescaling of the {h} ReLU hidden units"))
        return out


def _scale_form(ctx: CensusContext, norm: str):
    """How the norm module ``norm`` applies its scale (:func:`paramsym.census.tracing.scale_form`;
    ``None`` when the module is not found)."""
    from .tracing import scale_form

    mod = dict(ctx.model.named_modules()).get(norm)
    if mod is None:
        return None
    return scale_form(mod, ctx.params[f"{norm}.weight"], ctx.params.get(f"{norm}.bias"))


def _on_scale(transform, weight: str, offset: float):
    """``transform`` acting on the scale ``γ = weight + offset`` instead of the stored weight: the
    catalogue's ``γ ↦ d ⊙ γ`` becomes ``w ↦ d ⊙ (w + offset) − offset``."""
    def t(p, gen):
        q = transform({**p, weight: p[weight] + offset}, gen)
        return {**q, weight: q[weight] - offset}
    return t


class NormScaleFinder:
    """Pre-norm models: a norm's scale (and shift) absorbed by the projections it alone feeds."""

    name = "norm_scale"

    def find(self, ctx: CensusContext) -> list[Candidate]:
        if ctx.layout is None:
            return []
        out = []
        for layer in ctx.layout.layers:
            att, ffn = layer.attention, layer.ffn
            gated = [ffn.up] + ([ffn.gate] if ffn.gate else [])
            for norm, consumers in ((layer.norm_attention, [att.q, att.k, att.v]), (layer.norm_ffn, gated),
                                    (layer.norm_shared, [att.q, att.k, att.v, *gated])):
                if norm is None or f"{norm}.weight" not in ctx.params:
                    continue
                whole = {p.weight: Projection(p.weight, None, p.layout, p.shape) for p in consumers}  # fused: once
                pieces = {f"{norm}.weight": [View.whole(f"{norm}.weight", ctx.params)]}
                if f"{norm}.bias" in ctx.params:
                    pieces[f"{norm}.bias"] = [View.whole(f"{norm}.bias", ctx.params)]
                later = [f"{w}:W" for w in whole]
                pieces.update({f"{w}:W": [View.weight(p)] for w, p in whole.items()})
                c = catalogue_candidate(
                    norm, View(pieces), lambda b, norm=norm, later=later: NormScaleAction(b, f"{norm}.weight", later),
                    ctx.params, note=f"diagonal scaling of the norm's output, absorbed by {list(whole)}")
                form = _scale_form(ctx, norm)
                if form is not None and form.offset:
                    c.transform = _on_scale(c.transform, f"{norm}.weight", form.offset)
                    c.note += f" (the norm's scale is γ = {form.offset:g} + w: the action scales γ)"
                out.append(c)
        return out


class KeyBiasFinder:
    """Softmax shift ``b_k ↦ b_k + c`` of every attention layer whose keys carry a bias.

    Args:
        ignore_rotary: also claim the translation on rotated key dimensions (wrong: ``R_j c``
            depends on the position; used to test that the verification refutes it).
    """

    name = "key_bias"

    def __init__(self, ignore_rotary: bool = False):
        self.ignore_rotary = ignore_rotary

    def find(self, ctx: CensusContext) -> list[Candidate]:
        out = []
        modules = dict(ctx.model.named_modules())
        for lay in attention_layouts(ctx):
            k = lay.k
            if k.bias is None or lay.qk_refused or getattr(modules.get(lay.module), "add_zero_attn", False):
                continue  # (refused query/key: the keys do not reach the softmax affinely; census.refused lists it)
            d, r = lay.head_dim, 0 if self.ignore_rotary else lay.rotary_dim
            if r >= d:
                continue  # every key dimension is rotated: R_j c depends on the position j
            rows = torch.tensor([h * d + c for h in range(lay.num_kv_heads) for c in range(r, d)])
            view = View({"key_bias": [Piece(k.bias, k.bias_positions(rows))]})
            note = (f"softmax shift on the key bias, {d - r} per key head × {lay.num_kv_heads}"
                    + (f" (the {d - r} dimensions after the {r} rotary ones)" if r else ""))
            c = catalogue_candidate(lay.module, view,
                                    lambda b, lay=lay: KeyBiasTranslation(b, "key_bias", heads=lay.num_kv_heads),
                                    ctx.params, note=note, extra={"per_head": d - r})
            out.append(c)
        return out


class ValueBiasFinder:
    """Value shift ``b_v ↦ b_v + c`` absorbed by the output bias (``δb_o = −W_o c``), wherever the
    value and output projections both have a bias (rotary does not touch values)."""

    name = "value_bias"

    def find(self, ctx: CensusContext) -> list[Candidate]:
        out = []
        modules = dict(ctx.model.named_modules())
        for lay in attention_layouts(ctx):
            if lay.v.bias is None or lay.o.bias is None or getattr(modules.get(lay.module), "add_zero_attn", False):
                continue
            view = View({"b_v": [View.bias(lay.v)], "W_o": [View.weight(lay.o)], "b_o": [View.bias(lay.o)]})
            c = catalogue_candidate(
                lay.module, view,
                lambda b, lay=lay: ValueBiasShift(b, "b_v", "W_o", "b_o", heads=lay.num_kv_heads, group_size=lay.group_size),
                ctx.params, note=f"value shift absorbed by the output bias, {lay.head_dim} per value head × {lay.num_kv_heads}")
            out.append(c)
        return out


class HeadPermutationFinder:
    """Permutations of the heads of every attention layer (whole heads: q, k, v rows, o columns)."""

    name = "head_permutation"

    def find(self, ctx: CensusContext) -> list[Candidate]:
        out = []
        for lay in attention_layouts(ctx):
            Hkv, g, d = lay.num_kv_heads, lay.group_size, lay.head_dim
            if Hkv < 2:
                continue
            pieces = {"q": _rows(lay.q), "k": _rows(lay.k), "v": _rows(lay.v), "o": [View.weight(lay.o)]}
            widths = {j: p.in_features + (p.bias is not None) for j, p in (("q", lay.q), ("k", lay.k), ("v", lay.v))}
            for role, w, b in lay.qk_norms:  # scales over the whole projection (OLMo2) move with its rows
                for t in (w, b) if b else (w,):
                    pieces[role].append(Piece(t, torch.arange(ctx.params[t].numel())[:, None]))
                    widths[role] += 1
            layout = {"q": (1, g * d * widths["q"]), "k": (1, d * widths["k"]), "v": (1, d * widths["v"]),
                      "o": (lay.o.out_features, g * d)}
            note = f"S_{Hkv} on the heads" + (f" (key/value heads with their {g} query heads each)" if g > 1 else "")
            out.append(catalogue_candidate(lay.module, View(pieces), lambda b, H=Hkv, lo=layout: HeadPermutationAction(b, H, lo),
                                           ctx.params, note=note, discrete_order=f"{Hkv}!"))
        return out


class SequentialMLPFinder:
    """Symmetries of consecutive ``nn.Linear`` pairs inside plain ``nn.Sequential`` containers."""

    name = "sequential_mlp"

    def find(self, ctx: CensusContext) -> list[Candidate]:
        out = []
        for name, seq in ctx.model.named_modules():
            if not isinstance(seq, nn.Sequential):
                continue
            kids = list(seq.named_children())
            for i, (a, first) in enumerate(kids):
                if not isinstance(first, nn.Linear):
                    continue
                j, acts = i + 1, []
                while j < len(kids) and not isinstance(kids[j][1], nn.Linear):
                    acts.append(kids[j][1])
                    j += 1
                if j >= len(kids):
                    break
                out += self._pair(ctx, name, a, kids[j][0], first, [m for m in acts if not isinstance(m, TRANSPARENT)])
        return out

    @staticmethod
    def _pair(ctx: CensusContext, seq: str, a: str, b: str, first: nn.Linear, acts: list[nn.Module]) -> list[Candidate]:
        pre = f"{seq}." if seq else ""
        V, U, bias = f"{pre}{a}.weight", f"{pre}{b}.weight", f"{pre}{a}.bias"
        names = [V, U] + ([bias] if first.bias is not None else [])
        view = View({n: [View.whole(n, ctx.params)] for n in names})
        module, h = f"{pre}{a}→{b}", first.out_features
        if not acts:
            return [catalogue_candidate(module, view, lambda blk: HiddenBasisAction(blk, V, U), ctx.params,
                                        note=f"GL({h}) change of basis between two linear layers")]
        if len(acts) > 1 or not isinstance(acts[0], ELEMENTWISE):
            return []
        act, out = acts[0], []
        single = not (isinstance(act, nn.PReLU) and act.num_parameters > 1)
        if isinstance(act, HOMOGENEOUS):
            out.append(catalogue_candidate(module, view, lambda blk: RescalingAction(blk, V, U, activation=act), ctx.params,
                                           note=f"positive rescaling of the {h} hidden units ({type(act).__name__})"))
        if single:
            out.append(catalogue_candidate(module, view, lambda blk: HiddenPermutationAction(blk, V, U), ctx.params,
                                           note=f"S_{h} on the hidden units ({type(act).__name__})", discrete_order=f"{h}!"))
        return out


class ResidualPermutationFinder:
    """``residual_permutation``: one permutation ``π ∈ S_D`` of the residual stream applied to every
    axis the tracer placed in it (:mod:`paramsym.census.spaces`): the embeddings' columns, every
    norm's weight and bias over the stream (LayerNorm and RMSNorm commute with permutations of
    their channels), the input axis of every linear map reading the stream and the output axis
    (and bias) of every one writing it. Where the compared output is itself in the stream (a base
    model's ``last_hidden_state``) the symmetry is an equivariance: ``F(π·θ) = F(θ)[..., π]``.
    Discrete, order ``D!``. Applied through the permutation spec
    (:func:`paramsym.census.permspec.apply_spec`), the same code the export verifies.
    """

    name = "residual_permutation"

    def find(self, ctx: CensusContext) -> list[Candidate]:
        sp = ctx.spaces
        if sp is None or not sp.stream:
            return []
        import math

        from .permspec import PermutationSpec, apply_spec, random_perms

        D = sp.hidden_size
        axes: dict[str, list] = {n: [None] * ctx.params[n].dim() for n, _ in sp.stream}
        for n, a in sp.stream:
            axes[n][a] = "P_res"
        spec = PermutationSpec({"P_res": D}, axes)
        last: dict[str, torch.Tensor] = {}

        def transform(p, gen):
            last.update(random_perms(spec, gen))
            return apply_spec(p, spec, last)

        expected = (lambda base: base[..., last["P_res"]]) if sp.output_in_stream else None
        moved = {n: int(ctx.params[n].numel()) for n in axes}
        note = (f"S_{D} on the residual stream: {len(sp.embeddings)} embedding(s), {len(sp.norms)} norm(s), "
                f"{len(sp.readers)} readers, {len(sp.writers)} writers"
                + ("; the output (last_hidden_state) is permuted with it" if sp.output_in_stream else ""))
        c = Candidate("(residual stream)", "residual_permutation", 0, moved, transform, discrete_order=f"{D}!",
                      log10_order=math.lgamma(D + 1) / math.log(10), note=note,
                      extra={"width": D, "tensors": len(axes), "equivariant_output": sp.output_in_stream},
                      expected=expected)
        return [c]
