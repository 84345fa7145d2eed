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

A block of *whole* tensors (:meth:`ParameterBlock.from_params`, or :meth:`ParameterBlock.from_module`
with names or a predicate) is also the column layout of a Jacobian: θ is the concatenation of
the tensors in block order, each flattened row-major, and :meth:`ParameterBlock.unflatten` maps θ
back to ``{name: tensor}`` (views of θ) so that ``unflatten(flatten(P)) == P`` for the block's
tensors. There is one name check (:func:`_check_name`) and one error style for every selection.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .errors import MaskError, ParameterNameError, ShapeError, check_finite

Selection = str | tuple[str, Tensor]
#: a selection of whole tensors: names, one name, a predicate on names, or ``None`` (every
#: parameter with ``requires_grad``)
NameSelection = Sequence[str] | str | Callable[[str], bool] | None

_SEL = re.compile(r"^\s*(\w[\w.]*)\s*(?:\[(.*)\])?\s*$")


@dataclass(frozen=True)
class BlockEntry:
    """One parameter's share of a block: flat ``index`` positions of tensor ``name``.

    ``stored_index`` is ``None`` for a whole tensor (the positions ``0..n-1`` are then built
    on demand by :attr:`index`, so whole-tensor blocks of large models cost no index memory).
    """

    name: str
    shape: tuple[int, ...]
    stored_index: Tensor | None  # int64 flat positions inside the parameter, ascending; None = all
    offset: int  # start of this entry inside θ

    @property
    def index(self) -> Tensor:
        """Flat positions inside the parameter (``arange(n)`` for a whole tensor)."""
        return torch.arange(_numel(self.shape)) if self.stored_index is None else self.stored_index

    @property
    def size(self) -> int:
        return _numel(self.shape) if self.stored_index is None else int(self.stored_index.numel())

    @property
    def whole(self) -> bool:
        """True when the entry selects the whole tensor in order."""
        return self.stored_index is None or self.size == _numel(self.shape)


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
    def from_params(cls, params: Mapping[str, Tensor], names: Sequence[str] | None = None) -> ParameterBlock:
        """The block of whole tensors ``names`` (default: every tensor of ``params``, in order).

        This is the column layout of a Jacobian: θ = concat of the tensors, each row-major.
        """
        names = list(params) if names is None else list(names)
        if not names:
            raise MaskError(
                "a parameter block needs at least one tensor; the selection is empty (select at "
                "least one trainable parameter)."
            )
        block = cls.__new__(cls)
        entries, offset = [], 0
        for name in names:
            _check_name(name, params)
            e = BlockEntry(name, tuple(params[name].shape), None, offset)
            entries.append(e)
            offset += e.size
        block.entries, block.size = tuple(entries), offset
        return block

    @classmethod
    def from_module(
        cls, model: nn.Module, selections: Selection | Sequence[Selection] | Callable[[str], bool] | None = None
    ) -> ParameterBlock:
        """Build a block from ``model.named_parameters()``.

        ``selections`` are entry selections (module docstring), a predicate on parameter names
        (whole tensors), or ``None`` (every parameter with ``requires_grad``, whole tensors).
        """
        params = dict(model.named_parameters())
        if selections is None or callable(selections):
            if selections is None:
                names = [n for n, p in params.items() if p.requires_grad]
                what = "requires_grad"
            else:
                names = [n for n in params if selections(n)]
                what = "the predicate"
            if not names:
                avail = ", ".join(f"{k} {tuple(v.shape)}" for k, v in params.items())
                raise ParameterNameError(
                    f"no parameter of {type(model).__name__} is selected by {what}. Available "
                    f"parameters: {avail}."
                )
            return cls.from_params(params, names)
        if isinstance(selections, (list, tuple)) and all(isinstance(s, str) for s in selections):
            twice = sorted({s for s in selections if selections.count(s) > 1})
            if twice:
                raise MaskError(f"the block selection names {twice} more than once; name each parameter (or entry "
                                "selection) once.")
        if isinstance(selections, (list, tuple)) and selections and len(set(selections)) == len(selections) and all(
            isinstance(s, str) and "[" not in s for s in selections
        ):
            return cls.from_params(params, selections)  # whole tensors: no masks needed
        if isinstance(selections, str) and "[" not in selections:
            return cls.from_params(params, [selections.strip()])
        return cls(params, selections)

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    # -- whole-tensor layout (Jacobian columns) -------------------------------------------
    @property
    def is_whole(self) -> bool:
        """Every entry is a whole tensor (θ ↔ ``{name: tensor}`` by :meth:`unflatten`)."""
        return all(e.whole for e in self.entries)

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(e.shape for e in self.entries)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(e.size for e in self.entries)

    @property
    def offsets(self) -> tuple[int, ...]:
        return tuple(e.offset for e in self.entries)

    @property
    def numel(self) -> int:
        """``p`` (same as :attr:`size`)."""
        return self.size

    def slice(self, name: str) -> slice:
        """Positions of tensor ``name``'s entries inside θ (Jacobian columns)."""
        for e in self.entries:
            if e.name == name:
                return slice(e.offset, e.offset + e.size)
        raise ParameterNameError(
            f"the block has no parameter named {name!r}. Block parameters: {self.names}."
        )

    def owner(self, index: int) -> tuple[str, int]:
        """``(tensor name, flat position inside that tensor)`` of θ entry ``index``."""
        if not 0 <= index < self.size:
            raise ShapeError(f"index {index} is outside θ of length p = {self.size}.")
        for e in self.entries:
            if index < e.offset + e.size:
                return e.name, index - e.offset if e.stored_index is None else int(e.stored_index[index - e.offset])
        raise AssertionError("unreachable")

    def flatten(self, params: Mapping[str, Tensor]) -> Tensor:
        """θ from a name→tensor map holding (at least) the block's tensors; same as :meth:`gather`."""
        for e in self.entries:
            _check_name(e.name, params)
        return self.gather(params)

    def unflatten(self, theta: Tensor) -> dict[str, Tensor]:
        """``{name: tensor}`` of a whole-tensor block from θ (views of ``theta``).

        Raises:
            MaskError: the block selects parts of tensors (use :meth:`scatter` into full params).
            ShapeError: ``theta`` is not a vector of length ``p``.
        """
        if not self.is_whole:
            raise MaskError(
                f"{self!r} selects parts of tensors, so θ alone does not determine them; use "
                "block.scatter(theta, params) to write θ into the full parameters."
            )
        if theta.dim() != 1 or theta.numel() != self.size:
            raise ShapeError(f"flat parameter vector has shape {tuple(theta.shape)}; expected ({self.size},).")
        return {e.name: theta[e.offset : e.offset + e.size].view(e.shape) for e in self.entries}

    def tensors(self, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The block's whole tensors of ``params`` (``{name: params[name]}``, block order)."""
        for e in self.entries:
            _check_name(e.name, params)
        return {e.name: params[e.name] for e in self.entries}

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
