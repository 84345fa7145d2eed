"""Parameter blocks: a named selection of a model's parameters, flattened to one vector θ.

A block is an ordered list of entries ``(name, index)``; ``index`` holds flat positions inside
the parameter tensor ``name``. For parameters ``P`` (a ``dict[str, Tensor]`` the ``torch.func``
way),

    gather(P)      = concat_k  P[name_k].reshape(-1)[index_k]          (θ ∈ R^p)
    scatter(θ, P)  = P with P[name_k].reshape(-1)[index_k] replaced by θ[offset_k : offset_k+n_k]

and ``gather(scatter(θ, P)) == θ`` exactly, while every unselected entry of ``P`` is untouched.
``scatter`` is functional (no in-place writes), differentiable in θ and works under
``vmap``/``jvp``.

Selections are given per parameter as

* ``"fc1.weight"``                  the whole tensor,
* ``"fc1.weight[3]"``, ``"fc1.weight[3, :]"``   row 3,
* ``"fc1.weight[:, 3]"``            column 3,
* ``"fc1.weight[0:2, 1]"``          any mix of integers and ``start:stop[:step]`` slices,
* ``("fc1.weight", mask)``          a boolean mask of the parameter's shape.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .errors import MaskError, ParameterNameError, check_finite

Selection = str | tuple[str, Tensor]

_SEL = re.compile(r"^\s*(\w[\w.]*)\s*(?:\[(.*)\])?\s*$")


@dataclass(frozen=True)
class BlockEntry:
    """One parameter's share of a block: flat ``index`` positions of tensor ``name``."""

    name: str
    shape: tuple[int, ...]
    index: Tensor  # int64, flat positions inside the parameter, ascending
    offset: int  # start of this entry inside θ

    @property
    def size(self) -> int:
        return int(self.index.numel())

    @property
    def whole(self) -> bool:
        """True when the entry selects the whole tensor in order."""
        n = 1
        for s in self.shape:
            n *= s
        return self.size == n


def _parse_index(expr: str, shape: tuple[int, ...], name: str) -> tuple:
    items = [s.strip() for s in expr.split(",")]
    if len(items) > len(shape):
        raise MaskError(
            f"selection {name}[{expr}] has {len(items)} indices but parameter {name!r} has "
            f"{len(shape)} dimensions (shape {tuple(shape)})."
        )
    out: list[object] = []
    for dim, item in enumerate(items):
        try:
            if ":" in item:
                parts = [int(p) if p.strip() else None for p in item.split(":")]
                if len(parts) > 3:
                    raise ValueError(item)
                out.append(slice(*parts))
            else:
                i = int(item)
                if not -shape[dim] <= i < shape[dim]:
                    raise MaskError(
                        f"selection {name}[{expr}]: index {i} is out of range for dimension "
                        f"{dim} of size {shape[dim]} (shape {tuple(shape)})."
                    )
                out.append(i)
        except MaskError:
            raise
        except ValueError as exc:
            raise MaskError(
                f"selection {name}[{expr}]: cannot parse {item!r}; use integers and "
                "start:stop[:step] slices separated by commas, e.g. 'fc1.weight[:, 3]'."
            ) from exc
    return tuple(out)


def _mask_from_selection(sel: Selection, params: Mapping[str, Tensor]) -> tuple[str, Tensor]:
    if isinstance(sel, tuple):
        if len(sel) != 2 or not isinstance(sel[0], str):
            raise MaskError(f"a mask selection must be (name, bool mask), received {sel!r}.")
        name, mask = sel
        _check_name(name, params)
        mask = torch.as_tensor(mask)
        shape = tuple(params[name].shape)
        if mask.dtype != torch.bool:
            raise MaskError(
                f"mask for {name!r} has dtype {mask.dtype}; expected torch.bool of shape {shape}."
            )
        if tuple(mask.shape) != shape:
            raise MaskError(
                f"mask for {name!r} has shape {tuple(mask.shape)}, but the parameter has shape "
                f"{shape}; build the mask with torch.zeros({shape}, dtype=torch.bool)."
            )
        return name, mask.to(params[name].device)
    if not isinstance(sel, str):
        raise MaskError(f"selection must be a string or (name, mask), received {type(sel).__name__}.")
    m = _SEL.match(sel)
    if not m:
        raise MaskError(f"cannot parse selection {sel!r}; expected e.g. 'fc1.weight' or 'fc1.weight[:, 3]'.")
    name, expr = m.group(1), m.group(2)
    _check_name(name, params)
    shape = tuple(params[name].shape)
    mask = torch.zeros(shape, dtype=torch.bool, device=params[name].device)
    if expr is None or not expr.strip():
        mask[...] = True
    else:
        mask[_parse_index(expr, shape, name)] = True
    return name, mask


def _check_name(name: str, params: Mapping[str, Tensor]) -> None:
    if name not in params:
        avail = ", ".join(f"{k} {tuple(v.shape)}" for k, v in params.items())
        raise ParameterNameError(
            f"the model has no parameter named {name!r}. Available parameters: {avail}."
        )


class ParameterBlock:
    """An ordered selection of parameter entries, flattened into θ ∈ R^p.

    Args:
        params: the model's parameters (``dict(model.named_parameters())`` or any name→tensor map).
        selections: one or more selections (see module docstring). Selections of the same
            parameter are merged; entries keep the order of first appearance.

    Raises:
        ParameterNameError: a name the model does not have (the available names are listed).
        MaskError: an index or mask that does not fit the tensor, or an empty selection.
    """

    def __init__(self, params: Mapping[str, Tensor], selections: Selection | Sequence[Selection]):
        single_mask = (
            isinstance(selections, tuple)
            and len(selections) == 2
            and isinstance(selections[0], str)
            and isinstance(selections[1], Tensor)
        )
        if isinstance(selections, str) or single_mask:
            selections = [selections]
        selections = list(selections)
        if not selections:
            raise MaskError("a parameter block needs at least one selection; received none.")
        masks: dict[str, Tensor] = {}
        for sel in selections:
            name, mask = _mask_from_selection(sel, params)
            masks[name] = masks[name] | mask if name in masks else mask
        entries = []
        offset = 0
        for name, mask in masks.items():
            idx = torch.nonzero(mask.reshape(-1), as_tuple=False).reshape(-1).cpu()
            if idx.numel() == 0:
                raise MaskError(f"the selection of {name!r} is empty; select at least one entry.")
            entries.append(BlockEntry(name, tuple(params[name].shape), idx, offset))
            offset += int(idx.numel())
        self.entries: tuple[BlockEntry, ...] = tuple(entries)
        self.size = offset

    @classmethod
    def from_module(cls, model: nn.Module, selections: Selection | Sequence[Selection]) -> ParameterBlock:
        """Build a block from ``model.named_parameters()``."""
        return cls(dict(model.named_parameters()), selections)

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        parts = [f"{e.name}[{e.size}/{_numel(e.shape)}]" for e in self.entries]
        return f"ParameterBlock(p={self.size}: {', '.join(parts)})"

    def gather(self, params: Mapping[str, Tensor]) -> Tensor:
        """θ = concat of the selected entries (a new tensor; differentiable)."""
        pieces = []
        for e in self.entries:
            flat = params[e.name].reshape(-1)
            pieces.append(flat if e.whole else flat[e.index.to(flat.device)])
        return torch.cat(pieces)

    def scatter(self, theta: Tensor, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """Return a new dict: ``params`` with the selected entries replaced by ``theta``.

        Only the block's tensors are rebuilt; the others are passed through by reference.
        Works for a single θ of shape ``(p,)`` and inside ``vmap``/``jvp``.
        """
        if theta.shape[-1] != self.size:
            from .errors import ShapeError

            raise ShapeError(
                f"θ has {theta.shape[-1]} entries in its last dimension, but the block "
                f"{self!r} has p = {self.size}."
            )
        out = dict(params)
        for e in self.entries:
            piece = theta[..., e.offset : e.offset + e.size]
            base = params[e.name]
            if e.whole:
                out[e.name] = piece.reshape(e.shape).to(base.dtype)
            else:
                flat = base.reshape(-1).to(piece.dtype)
                out[e.name] = flat.index_put((e.index.to(flat.device),), piece).reshape(e.shape)
        return out

    def entry_slices(self) -> dict[str, slice]:
        """Where each parameter's entries sit inside θ."""
        return {e.name: slice(e.offset, e.offset + e.size) for e in self.entries}

    def describe(self) -> list[dict[str, object]]:
        """A JSON-able description: name, shape, number of selected entries."""
        return [
            {"name": e.name, "shape": list(e.shape), "selected": e.size, "offset": e.offset}
            for e in self.entries
        ]


def _numel(shape: Iterable[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def detached_params(model: nn.Module, *, include_buffers: bool = True) -> dict[str, Tensor]:
    """``{name: tensor.detach()}`` for every parameter (and buffer) of ``model``."""
    out = {k: v.detach() for k, v in model.named_parameters()}
    if include_buffers:
        out.update({k: v.detach() for k, v in model.named_buffers()})
    return out


def install(model: nn.Module, block: ParameterBlock, theta: Tensor) -> nn.Module:
    """Return a deep copy of ``model`` whose block entries are set to ``theta`` (no grad)."""
    check_finite("θ to install", theta, "Only finite parameter values can be installed.")
    new = copy.deepcopy(model)
    named = dict(new.named_parameters())
    replaced = block.scatter(theta.detach().to(next(iter(named.values())).device), named)
    with torch.no_grad():
        for e in block.entries:
            named[e.name].copy_(replaced[e.name].to(named[e.name].dtype))
    return new
