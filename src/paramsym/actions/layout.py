"""Where an exact action's tensors lie inside a block's flat vector θ.

An exact action transforms named tensors (or named parts of tensors, e.g. the key third of a
packed ``in_proj_bias``) of a :class:`~paramsym.params.ParameterBlock`. This module resolves
"flat positions ``P`` of tensor ``name``" to the θ coordinates holding them (:func:`locate`),
reads and writes them functionally (:func:`take`, :func:`replace`; ``vmap``/``jvp``-safe) and
refuses blocks holding coordinates the action would leave untouched (:func:`refuse_untouched`):
such a coordinate is fixed by the action, so the verdict's motion and invariance would silently
include it (and for a bias that the action *should* move, e.g. a later layer's, the output
would change).

A location is a ``slice`` of θ when the positions are contiguous in θ (a whole tensor, or one
contiguous range of a selection), else a ``LongTensor`` of θ indices.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..errors import ActionError, ShapeError
from ..params import ParameterBlock

Loc = slice | Tensor


def require_block(block: object, cls: str = "action") -> ParameterBlock:
    """``block`` itself when it is a :class:`~paramsym.params.ParameterBlock`.

    Raises:
        ActionError: anything else (a Target is named: pass ``target.block``).
    """
    if isinstance(block, ParameterBlock):
        return block
    hint = (" It is a target: pass its parameter block, target.block." if hasattr(block, "block")
            and isinstance(getattr(block, "block", None), ParameterBlock) else "")
    raise ActionError(f"{cls}: the first argument must be a ParameterBlock; received {type(block).__name__}.{hint}")


def entry(block: ParameterBlock, name: str, cls: str = "action"):
    """The block entry of tensor ``name``.

    Raises:
        ShapeError: ``name`` is not in the block (the block's tensors are listed).
        ActionError: ``block`` is not a ParameterBlock (e.g. the Target instead of its block).
    """
    require_block(block, cls)
    for e in block.entries:
        if e.name == name:
            return e
    raise ShapeError(f"{cls}: parameter {name!r} is not in the block; the block holds {block.names}. "
                     f"Add {name!r} to the block (or pass the right name).")


def locate(block: ParameterBlock, name: str, positions: Tensor | None = None, cls: str = "action") -> Loc:
    """θ coordinates of flat ``positions`` of tensor ``name`` (default: all of it), in order.

    Raises:
        ShapeError: ``name`` is not in the block, or the block selects only some of the positions
            (the missing count is named).
    """
    e = entry(block, name, cls)
    numel = 1
    for s in e.shape:
        numel *= s
    if positions is None and (e.stored_index is None or e.whole):  # the whole tensor, stored whole: one slice
        return slice(e.offset, e.offset + numel)
    pos = torch.arange(numel) if positions is None else torch.as_tensor(positions, dtype=torch.long).reshape(-1)
    if e.stored_index is None or e.whole:
        idx = e.offset + pos
    else:
        stored = e.stored_index
        where = torch.searchsorted(stored, pos).clamp_max(stored.numel() - 1)
        missing = int((stored[where] != pos).sum())
        if missing:
            raise ShapeError(
                f"{cls}: the block selects {e.size} of the {numel} entries of {name!r}, but the action moves "
                f"{pos.numel()} of them and {missing} are not selected. Select them all (e.g. the whole tensor "
                "or the slice the action acts on).")
        idx = e.offset + where
    if idx.numel() and bool((idx[1:] - idx[:-1] == 1).all()):
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def size(loc: Loc) -> int:
    return loc.stop - loc.start if isinstance(loc, slice) else int(loc.numel())


def take(theta: Tensor, loc: Loc) -> Tensor:
    """The coordinates of θ at ``loc``."""
    return theta[loc]


def replace(theta: Tensor, parts: Sequence[tuple[Loc, Tensor]]) -> Tensor:
    """θ with the given (disjoint) locations replaced by flat values; functional and vmap-safe."""
    if all(isinstance(loc, slice) for loc, _ in parts):
        pieces, pos = [], 0
        for sl, value in sorted(parts, key=lambda item: item[0].start):
            pieces.append(theta[pos : sl.start])
            pieces.append(value.reshape(-1))
            pos = sl.stop
        pieces.append(theta[pos:])
        return torch.cat(pieces)
    out = theta
    for loc, value in parts:
        idx = torch.arange(loc.start, loc.stop, device=theta.device) if isinstance(loc, slice) else loc.to(theta.device)
        out = out.index_put((idx,), value.reshape(-1))
    return out


def refuse_untouched(cls: str, block: ParameterBlock, moved: Sequence[Loc], hint: str = "") -> None:
    """Raise :class:`ActionError` when θ has coordinates outside ``moved`` (or ``moved`` overlap).

    The message names the tensors holding the untouched coordinates.
    """
    if all(isinstance(loc, slice) for loc in moved):  # slices: disjoint and covering θ by their ends (O(#slices))
        spans = sorted((loc.start, loc.stop) for loc in moved)
        if spans and spans[0][0] == 0 and spans[-1][1] == block.size and \
                all(a[1] == b[0] for a, b in zip(spans, spans[1:])):
            return
    cover = torch.zeros(block.size, dtype=torch.long)
    for loc in moved:
        if isinstance(loc, slice):
            cover[loc] += 1
        else:
            cover.index_add_(0, loc.cpu(), torch.ones(loc.numel(), dtype=torch.long))
    if bool((cover > 1).any()):
        raise ShapeError(f"{cls}: two of the tensors it moves overlap in the block; name each tensor once.")
    idle = (cover == 0).nonzero().reshape(-1)
    if idle.numel():
        names = [e.name for e in block.entries if bool((cover[e.offset : e.offset + e.size] == 0).any())]
        raise ActionError(
            f"{cls} leaves {idle.numel()} coordinates of the block untouched (in {names}); an action's block "
            f"must hold exactly what it moves. Remove them from the block. {hint}".rstrip())
