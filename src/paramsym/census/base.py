"""What finders share: the candidate record, the context, and canonical views of stored weights.

A :class:`Candidate` names the module, the kind, the continuous dimension (and the discrete
order where finite), the parameters it moves, and ``transform(params, generator) -> params``: a
*random group element* applied to the whole parameter dict.

Catalogue actions (:mod:`paramsym.actions.catalogue`) act on whole tensors in the ``nn.Linear``
layout (``W`` is ``out × in``). Real models store their maps differently: GPT-2's ``Conv1D``
stores ``Wᵀ``, its ``c_attn`` packs ``[q | k | v]`` in one tensor, GPT-NeoX interleaves the
heads' ``q, k, v`` rows. A :class:`View` reads *virtual* tensors in the canonical layout from
the stored ones (each virtual tensor is a gather of flat positions of one or more stored
tensors, pieces side by side along columns) and writes them back; :func:`catalogue_candidate`
applies a catalogue action to the virtual tensors. So each symmetry has one implementation (the
catalogue action) and the census only describes *where* it lies in a model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from ..actions.exact import ExactAction
from ..models.adapters import ModelLayout, Projection
from ..params import ParameterBlock

__all__ = ["Candidate", "CensusContext", "SymmetryFinder", "View", "catalogue_candidate", "KNOWN_MODULES"]

Params = dict[str, Tensor]

#: module kinds the built-in finders recognise (for messages)
KNOWN_MODULES = ["nn.MultiheadAttention", "HF models through the architecture adapters (model_type: see "
                 "paramsym.models.adapters.known_model_types()) or traced (paramsym.census.spaces)",
                 "nn.Sequential of nn.Linear and elementwise activations (MLPs)"]


@dataclass
class CensusContext:
    """What finders see: the model, its adapter layout (``None`` when not an adapted HF model)."""

    model: nn.Module
    layout: ModelLayout | None
    params: Mapping[str, Tensor]
    spaces: Any = None  # census.spaces.Spaces where derived (the residual stream's axes)


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
    tolerance: float | None = None  # a floor on the census tolerance, where the model computes part in float32
    expected: Callable[[Tensor], Tensor] | None = None  # equivariance: the output the last transform should give


class SymmetryFinder(Protocol):
    name: str

    def find(self, ctx: CensusContext) -> list[Candidate]: ...


@dataclass(frozen=True)
class Piece:
    """Flat ``positions`` (any shape) of the stored tensor ``name``; :meth:`ordered` (``positions``
    ``None``, ``shape`` given): its first ``prod(shape)`` entries in order, shaped ``shape`` (a whole
    ``nn.Linear`` weight or bias as stored) — read as a view and written as a slice, with no
    ``int64`` positions held (8 bytes per parameter per candidate)."""

    name: str
    positions: Tensor | None
    shape: tuple[int, ...] | None = None

    @classmethod
    def ordered(cls, name: str, shape: tuple[int, ...]) -> Piece:
        return cls(name, None, tuple(int(s) for s in shape))

    @property
    def dims(self) -> tuple[int, ...]:
        """The shape of the piece's values."""
        return tuple(self.positions.shape) if self.positions is not None else self.shape

    @property
    def size(self) -> int:
        return math.prod(self.dims)

    def flat_positions(self) -> Tensor:
        """The flat positions (built for an ordered piece)."""
        return self.positions if self.positions is not None else torch.arange(self.size).reshape(self.shape)


class View:
    """Virtual tensors gathered from stored ones: ``{virtual: [Piece, ...]}``.

    A virtual tensor with one piece has the piece's ``positions`` shape; with several pieces (all
    2-d with the same number of rows) it is their concatenation along columns — e.g. the rows of
    ``up`` and ``gate`` side by side, so that permuting the virtual rows permutes both.
    """

    def __init__(self, pieces: Mapping[str, list[Piece]]):
        self.pieces = {k: list(v) for k, v in pieces.items()}

    # -- building pieces -------------------------------------------------------------------
    @staticmethod
    def weight(proj: Projection) -> Piece:
        """The canonical ``W`` (``out × in``) of a projection."""
        if proj.layout == "out_in" and proj.features is None and proj.offset == 0:  # W as stored
            return Piece.ordered(proj.weight, proj.shape)
        return Piece(proj.weight, proj.row_positions(torch.arange(proj.out_features)))

    @staticmethod
    def bias(proj: Projection, column: bool = False) -> Piece:
        """The projection's bias ``(out,)`` (``(out, 1)`` with ``column=True``)."""
        if proj.features is None:
            return Piece.ordered(proj.bias, (proj.out_features, 1) if column else (proj.out_features,))
        pos = proj.bias_positions(torch.arange(proj.out_features))
        return Piece(proj.bias, pos[:, None] if column else pos)

    @staticmethod
    def whole(name: str, params: Mapping[str, Tensor]) -> Piece:
        return Piece.ordered(name, tuple(params[name].shape))

    # -- reading and writing ---------------------------------------------------------------
    @staticmethod
    def _take(p: Piece, params: Mapping[str, Tensor]) -> Tensor:
        flat = params[p.name].reshape(-1)
        return flat[p.positions] if p.positions is not None else flat[:p.size].reshape(p.shape)

    def read(self, params: Mapping[str, Tensor]) -> Params:
        """The virtual tensors (an ordered piece is a view of the stored tensor, not a copy: treat
        the result as read-only)."""
        out = {}
        for name, pieces in self.pieces.items():
            vals = [self._take(p, params) for p in pieces]
            out[name] = vals[0] if len(vals) == 1 else torch.cat(vals, dim=1)
        return out

    def write(self, params: Mapping[str, Tensor], virtual: Mapping[str, Tensor]) -> Params:
        flats: dict[str, Tensor] = {}
        for name, pieces in self.pieces.items():
            value, col = virtual[name], 0
            for p in pieces:
                if len(pieces) == 1:
                    part = value
                else:
                    width = p.dims[1]
                    part, col = value[:, col : col + width], col + width
                whole = p.positions is None and p.size == params[p.name].numel()
                if whole and p.name not in flats:  # the whole tensor, in order: no copy of the old one
                    flats[p.name] = part.reshape(-1).to(params[p.name].dtype)
                    continue
                flat = flats.get(p.name)
                if flat is None:
                    flat = flats[p.name] = params[p.name].reshape(-1).clone()
                if p.positions is None:
                    flat[:p.size] = part.reshape(-1).to(flat.dtype)
                else:
                    flat[p.positions.reshape(-1)] = part.reshape(-1).to(flat.dtype)
        new = dict(params)
        for n, flat in flats.items():
            new[n] = flat.reshape(params[n].shape)
        return new

    def moved(self) -> dict[str, int]:
        """Stored parameter name → number of its coordinates the view covers."""
        out: dict[str, int] = {}
        for pieces in self.pieces.values():
            for p in pieces:
                out[p.name] = out.get(p.name, 0) + p.size
        return out


def catalogue_candidate(module: str, view: View, make: Callable[[ParameterBlock], ExactAction], params: Mapping[str, Tensor],
                        note: str = "", kind: str | None = None, extra: dict[str, Any] | None = None,
                        discrete_order: str | None = None) -> Candidate:
    """A candidate applying one random element of the catalogue action ``make(block)`` (built on
    the block of the view's virtual tensors) — ``g = action.random_compact(generator)`` (the
    draw of ``random_elements(1, generator)[0]`` in the group's compact form: a permutation or a
    diagonal, no ``s × s`` matrix), ``θ_virtual ↦ action.act_compact(g, θ_virtual)``, written back
    into the stored tensors.

    The candidate's ``kind`` is the action's (e.g. ``hidden_permutation``), its dimension and
    order the action's (``discrete_order`` overrides the order's text, e.g. ``"96!"``). The
    view's virtual tensors must not overlap in the stored ones.
    """
    virtual = view.read(params)
    block = ParameterBlock.from_params(virtual, list(view.pieces))
    action = make(block)

    def transform(p: Params, gen: torch.Generator) -> Params:
        vp = view.read(p)
        theta = block.gather(vp)
        act = action.to(theta.dtype)
        g = act.random_compact(gen)  # a permutation or a diagonal where the group has one: no s × s matrix
        for _ in range(32):  # a discrete group: verify a non-identity element (e.g. one of 2! head orders)
            if action.order is None or action.order < 2 or not act.is_identity(g):
                break
            g = act.random_compact(gen)
        return view.write(p, block.scatter(act.act_compact(g, theta), vp))

    return Candidate(module, kind or action.kind, int(action.dimension), view.moved(), transform,
                     discrete_order=None if action.order is None else (discrete_order or action.order_text),
                     log10_order=action.log10_order, note=note, extra=dict(extra or {}))
