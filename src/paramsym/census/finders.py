"""Symmetry finders: each walks a model and proposes candidate symmetries to verify.

A :class:`SymmetryFinder` has ``find(ctx) -> list[Candidate]``. A :class:`Candidate` names the
module, the kind, the continuous dimension (and the discrete order where finite), the
parameters it moves, and ``transform(params, generator) -> params``: a *random group element*
applied to the whole parameter dict. The census (:mod:`paramsym.census.walk`) verifies every
candidate numerically, so a wrong claim is reported as unverified, never silently counted.

Built-in finders:

* :class:`AttentionFinder` — per layer, ``attention.query_key`` (GL(d_k) per key/value head, or
  the rotary commutant) and ``attention.value_output`` (GL(d_v) per key/value head), from the
  architecture adapters or ``nn.MultiheadAttention`` modules (actions of
  :mod:`paramsym.actions.attention`).
* :class:`FFNPermutationFinder` — permutations of the FFN hidden units (``up``/``gate`` rows and
  biases, ``down`` columns): discrete, order ``h!``, dimension 0.
* :class:`NormScaleFinder` — pre-norm models: ``γ, β ↦ s ⊙ γ, s ⊙ β`` of the norm feeding
  q/k/v (or up/gate) with the consumers' input columns divided by ``s``: dimension = width.

Add more with ``census(..., finders=[*DEFAULT_FINDERS, MyFinder()])``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from ..actions.attention import QueryKeyAction, ValueOutputAction
from ..models.adapters import AttentionLayout, ModelLayout, Projection, mha_layout
from ..params import ParameterBlock

__all__ = ["Candidate", "CensusContext", "SymmetryFinder", "AttentionFinder", "FFNPermutationFinder",
           "NormScaleFinder", "DEFAULT_FINDERS", "KNOWN_MODULES"]

Params = dict[str, Tensor]

#: module kinds the built-in finders recognise (for messages)
KNOWN_MODULES = ["nn.MultiheadAttention", "HF models through the architecture adapters (model_type: see "
                 "paramsym.models.adapters.known_model_types())"]


@dataclass
class CensusContext:
    """What finders see: the model, its adapter layout (``None`` when not an adapted HF model)."""

    model: nn.Module
    layout: ModelLayout | None
    params: Mapping[str, Tensor]


@dataclass
class Candidate:
    """A claimed symmetry. ``transform`` applies one random group element to all parameters."""

    module: str
    kind: str
    dimension: int
    moved: dict[str, int]  # parameter name -> number of coordinates moved
    transform: Callable[[Params, torch.Generator], Params]
    discrete_order: str | None = None
    log10_order: float | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class SymmetryFinder(Protocol):
    name: str

    def find(self, ctx: CensusContext) -> list[Candidate]: ...


def _moved(block: ParameterBlock) -> dict[str, int]:
    return {e.name: e.size for e in block.entries}


def _action_transform(action_cls, layout: AttentionLayout, block: ParameterBlock, **kw) -> Callable:
    def transform(params: Params, gen: torch.Generator) -> Params:
        p64 = {k: v for k, v in params.items()}
        action = action_cls(block, layout, **kw)
        theta = block.gather(p64)
        g = action.random_element(gen, dtype=theta.dtype)
        return block.scatter(action.act(g, theta), p64)

    return transform


class AttentionFinder:
    """Query/key and value/output symmetries of every attention layer.

    Args:
        qk_algebra: ``"auto"`` (rotary commutant under rotary embeddings) or ``"gl"`` (claims
            GL(d_k) even under rotary — wrong; used to test that verification catches it).
    """

    name = "attention"

    def __init__(self, qk_algebra: str = "auto"):
        self.qk_algebra = qk_algebra

    def layouts(self, ctx: CensusContext) -> list[AttentionLayout]:
        if ctx.layout is not None:
            return [layer.attention for layer in ctx.layout.layers]
        return [mha_layout(n, m) for n, m in ctx.model.named_modules() if isinstance(m, nn.MultiheadAttention)]

    def find(self, ctx: CensusContext) -> list[Candidate]:
        out = []
        for lay in self.layouts(ctx):
            qk_block = QueryKeyAction.block_for(ctx.params, lay)
            qk = QueryKeyAction(qk_block, lay, algebra=self.qk_algebra)
            heads = f"{lay.num_kv_heads} key/value heads" + (
                f" shared by {lay.num_heads} query heads" if lay.num_kv_heads != lay.num_heads else "")
            if qk.rotary:
                note = (f"rotary commutant, {qk.head_dimension()} per head (d_k = {lay.head_dim}, rotary on "
                        f"{lay.rotary_dim} dims) × {heads}")
                kind = "attention.query_key.rotary_commutant"
            else:
                note = f"GL(d_k = {lay.head_dim}) × {heads}"
                kind = "attention.query_key.gl"
            out.append(Candidate(lay.module, kind, qk.dimension, _moved(qk_block),
                                 _action_transform(QueryKeyAction, lay, qk_block, algebra=self.qk_algebra), note=note,
                                 extra={"heads": lay.num_heads, "kv_heads": lay.num_kv_heads, "head_dim": lay.head_dim,
                                        "per_head_dimension": qk.head_dimension()}))
            vo_block = ValueOutputAction.block_for(ctx.params, lay)
            vo = ValueOutputAction(vo_block, lay)
            out.append(Candidate(lay.module, "attention.value_output.gl", vo.dimension, _moved(vo_block),
                                 _action_transform(ValueOutputAction, lay, vo_block),
                                 note=f"GL(d_v = {lay.head_dim}) × {heads}",
                                 extra={"heads": lay.num_heads, "kv_heads": lay.num_kv_heads, "head_dim": lay.head_dim,
                                        "per_head_dimension": vo.head_dimension()}))
        return out


def _update(params: Params, name: str, positions: Tensor, values: Tensor) -> Params:
    flat = params[name].reshape(-1).clone()
    flat[positions.reshape(-1)] = values.reshape(-1)
    new = dict(params)
    new[name] = flat.reshape(params[name].shape)
    return new


def _permute_rows(params: Params, proj: Projection, perm: Tensor) -> Params:
    h = proj.out_features
    pos = proj.row_positions(torch.arange(h))
    params = _update(params, proj.weight, pos, params[proj.weight].reshape(-1)[pos[perm]])
    if proj.bias is not None:
        bpos = proj.bias_positions(torch.arange(h))
        params = _update(params, proj.bias, bpos, params[proj.bias].reshape(-1)[bpos[perm]])
    return params


class FFNPermutationFinder:
    """Permutations of each FFN's hidden units (discrete: order ``h!``, dimension 0)."""

    name = "ffn_permutation"

    def find(self, ctx: CensusContext) -> list[Candidate]:
        if ctx.layout is None:
            return []
        out = []
        for layer in ctx.layout.layers:
            ffn = layer.ffn
            h = ffn.hidden

            def transform(params: Params, gen: torch.Generator, ffn=ffn, h=h) -> Params:
                perm = torch.randperm(h, generator=gen)
                params = _permute_rows(params, ffn.up, perm)
                if ffn.gate is not None:
                    params = _permute_rows(params, ffn.gate, perm)
                pos = ffn.down.column_positions(torch.arange(h))  # (out, h)
                return _update(params, ffn.down.weight, pos, params[ffn.down.weight].reshape(-1)[pos[:, perm]])

            moved = {ffn.up.weight: ffn.up.out_features * ffn.up.in_features, ffn.down.weight: ffn.down.out_features * h}
            if ffn.gate is not None:
                moved[ffn.gate.weight] = h * ffn.gate.in_features
            for b in (ffn.up.bias, ffn.gate.bias if ffn.gate else None):
                if b is not None:
                    moved[b] = h
            out.append(Candidate(ffn.module, "ffn.hidden_permutation", 0, moved, transform, discrete_order=f"{h}!",
                                 log10_order=math.lgamma(h + 1) / math.log(10),
                                 note=f"S_{h} on the hidden units ({'gated ' if ffn.gate else ''}{ffn.activation})"))
        return out


class NormScaleFinder:
    """Pre-norm models: a norm's scale (and shift) absorbed by the projections it alone feeds."""

    name = "norm_scale"

    def find(self, ctx: CensusContext) -> list[Candidate]:
        if ctx.layout is None:
            return []
        out = []
        for layer in ctx.layout.layers:
            att, ffn = layer.attention, layer.ffn
            fused = {p.weight: p for p in (att.q, att.k, att.v)}  # fused q/k/v share one tensor
            for norm, consumers in ((layer.norm_attention, list(fused.values())),
                                    (layer.norm_ffn, [ffn.up] + ([ffn.gate] if ffn.gate else []))):
                if norm is None or f"{norm}.weight" not in ctx.params:
                    continue
                width = ctx.params[f"{norm}.weight"].numel()
                out.append(self._candidate(ctx, norm, consumers, width))
        return out

    @staticmethod
    def _candidate(ctx: CensusContext, norm: str, consumers: list[Projection], width: int) -> Candidate:
        def transform(params: Params, gen: torch.Generator) -> Params:
            s = torch.exp(0.5 * torch.randn(width, generator=gen, dtype=torch.float64))
            new = dict(params)
            for t in (f"{norm}.weight", f"{norm}.bias"):
                if t in new:
                    new[t] = new[t] * s.to(new[t].dtype)
            for proj in consumers:
                w = new[proj.weight]
                stored = proj.shape[0] if proj.layout == "out_in" else proj.shape[1]
                full = Projection(proj.weight, None, proj.layout, proj.shape)
                pos = full.column_positions(torch.arange(width)).reshape(stored, width)
                vals = w.reshape(-1)[pos] / s.to(w.dtype)[None, :]
                new = _update(new, proj.weight, pos, vals)
            return new

        moved = {t: width for t in (f"{norm}.weight", f"{norm}.bias") if t in ctx.params}
        for proj in consumers:
            moved[proj.weight] = proj.shape[0] * proj.shape[1]
        return Candidate(norm, "norm.scale", width, moved, transform,
                         note=f"diagonal scaling of the norm's output, absorbed by {[p.weight for p in consumers]}")


DEFAULT_FINDERS: list[SymmetryFinder] = [AttentionFinder(), FFNPermutationFinder(), NormScaleFinder()]
