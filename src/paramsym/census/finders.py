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
* the catalogue finders of :mod:`paramsym.census.catalogue_finders`, which place the
  catalogue's exact actions (:func:`paramsym.actions.catalogue.catalogue`) in the model:
  :class:`KeyBiasFinder` (``key_bias_translation``), :class:`ValueBiasFinder` (``value_bias_shift``), :class:`HeadPermutationFinder`
  (``head_permutation``), :class:`FFNPermutationFinder` (``hidden_permutation``, ReLU
  ``rescaling``), :class:`NormScaleFinder` (``norm_scale``), :class:`SequentialMLPFinder`
  (``hidden_basis``, ``rescaling``, ``hidden_permutation`` in plain ``nn.Sequential`` MLPs).

Add more with ``census(..., finders=[*DEFAULT_FINDERS, MyFinder()])``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..actions.attention import QueryKeyAction, ValueOutputAction
from ..models.adapters import AttentionLayout
from ..params import ParameterBlock
from .base import KNOWN_MODULES, Candidate, CensusContext, SymmetryFinder
from .catalogue_finders import (
    FFNPermutationFinder,
    HeadPermutationFinder,
    KeyBiasFinder,
    NormScaleFinder,
    ResidualPermutationFinder,
    SequentialMLPFinder,
    ValueBiasFinder,
    attention_layouts,
)

__all__ = ["Candidate", "CensusContext", "SymmetryFinder", "AttentionFinder", "FFNPermutationFinder", "NormScaleFinder",
           "KeyBiasFinder", "ValueBiasFinder", "HeadPermutationFinder", "SequentialMLPFinder", "ResidualPermutationFinder", "DEFAULT_FINDERS", "KNOWN_MODULES"]

Params = dict[str, Tensor]


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
        return attention_layouts(ctx)

    def find(self, ctx: CensusContext) -> list[Candidate]:
        out = []
        for lay in self.layouts(ctx):
            if lay.qk_refused:  # traced: query/key not verified for this layer (census.refused says why)
                out += self._value_output(ctx, lay)
                continue
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
            out += self._value_output(ctx, lay)
        return out

    @staticmethod
    def _value_output(ctx: CensusContext, lay: AttentionLayout) -> list[Candidate]:
        heads = f"{lay.num_kv_heads} key/value heads" + (
            f" shared by {lay.num_heads} query heads" if lay.num_kv_heads != lay.num_heads else "")
        vo_block = ValueOutputAction.block_for(ctx.params, lay)
        vo = ValueOutputAction(vo_block, lay)
        return [Candidate(lay.module, "attention.value_output.gl", vo.dimension, _moved(vo_block),
                          _action_transform(ValueOutputAction, lay, vo_block),
                          note=f"GL(d_v = {lay.head_dim}) × {heads}",
                          extra={"heads": lay.num_heads, "kv_heads": lay.num_kv_heads, "head_dim": lay.head_dim,
                                 "per_head_dimension": vo.head_dimension()})]


DEFAULT_FINDERS: list[SymmetryFinder] = [AttentionFinder(), KeyBiasFinder(), ValueBiasFinder(), HeadPermutationFinder(), FFNPermutationFinder(),
                                          NormScaleFinder(), SequentialMLPFinder(), ResidualPermutationFinder()]
