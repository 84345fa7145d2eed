"""Known exact parameter symmetries, as :class:`GroupAction` s.

Both act on a layer pair ``earlier → σ → later`` given by the weight names ``earlier`` (``V``,
h × n, hidden = rows) and ``later`` (``U``, m × h, hidden = columns), in that order, with the
earlier layer's bias ``b`` (h,) when the block holds it:

* :class:`HiddenBasisAction` — GL(h) change of hidden basis of a linear pair
  ``F = U (V x + b)`` (or ``U σ(V x + b)`` with σ equivariant):
  ``(V, b, U) ↦ (g V, g b, U g⁻¹)``.
* :class:`RescalingAction` — positive rescaling of the hidden units of a homogeneous
  (ReLU/LeakyReLU) pair: ``V[j] ↦ d_j V[j]``, ``b[j] ↦ d_j b[j]``, ``U[:, j] ↦ U[:, j] / d_j``
  with ``d = diag(g)``; the group is the diagonal matrices ``exp(diag t)``.

Both are exact: identity, composition and invariance hold to rounding. The later layer's bias
is invariant under both, so a block holding it (or any tensor besides ``V``, ``b``, ``U``) is
refused with :class:`~paramsym.errors.ActionError`: the action would leave it untouched, and
its motion and verdict would silently include a fixed coordinate. The bias is found as the
weight's name with ``weight`` → ``bias`` (``fc1.weight`` → ``fc1.bias``), or named explicitly
with ``earlier_bias=``. The old keywords ``u_name``/``v_name`` and ``in_name``/``out_name``
still work, with a ``DeprecationWarning``.

They implement ``act`` only; fields come from the JVP in :class:`GroupAction` (and are checked
against closed forms in the tests).
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from ..errors import ActionError, ShapeError
from ..groups.lie import MatrixLieGroup
from ..params import ParameterBlock
from .base import GroupAction


def _slices(block: ParameterBlock, name: str) -> tuple[slice, tuple[int, ...]]:
    for e in block.entries:
        if e.name == name:
            if not e.whole:
                raise ShapeError(f"exact actions need the whole tensor {name!r} in the block.")
            return slice(e.offset, e.offset + e.size), e.shape
    raise ShapeError(f"parameter {name!r} is not in the block {block!r}.")


def _replace(theta: Tensor, parts: list[tuple[slice, Tensor]]) -> Tensor:
    """θ with the given (disjoint) slices replaced; functional and vmap-friendly."""
    pieces, pos = [], 0
    for sl, value in sorted(parts, key=lambda item: item[0].start):
        pieces.append(theta[pos : sl.start])
        pieces.append(value)
        pos = sl.stop
    pieces.append(theta[pos:])
    return torch.cat(pieces)


def _layer_pair(
    cls: str, block: ParameterBlock, earlier: str | None, later: str | None, earlier_bias: str | None,
    old: dict[str, str],
) -> tuple[slice, tuple[int, ...], slice | None, slice, tuple[int, ...]]:
    """Resolve ``(earlier, later)`` (accepting deprecated keywords), the earlier bias, and refuse
    block entries the action would not move. Returns the slices and shapes of V, b, U."""
    renamed = {"v_name": "earlier", "u_name": "later", "in_name": "earlier", "out_name": "later"}
    for key, value in old.items():
        if key not in renamed:
            raise TypeError(f"{cls}() got an unexpected keyword argument {key!r}")
        new = renamed[key]
        warnings.warn(f"{cls}({key}=...) is deprecated; use {new}=... (layer pairs are named (earlier, later)).",
                      DeprecationWarning, stacklevel=3)
        if new == "earlier":
            earlier = value if earlier is None else earlier
        else:
            later = value if later is None else later
    if earlier is None or later is None:
        raise ActionError(f"{cls} needs the weight names of the layer pair: {cls}(block, earlier='fc1.weight', "
                          f"later='fc2.weight') (the layer before the hidden units, then the one after).")
    v_sl, v_shape = _slices(block, earlier)
    u_sl, u_shape = _slices(block, later)
    if len(v_shape) != 2 or len(u_shape) != 2 or u_shape[1] != v_shape[0]:
        raise ShapeError(
            f"{cls}: the earlier weight {earlier!r} {tuple(v_shape)} must have as many rows as the later weight "
            f"{later!r} {tuple(u_shape)} has columns (the hidden units). Pass the layers in order (earlier, later)."
        )
    names = set(block.names)
    if earlier_bias is None:
        guess = earlier[: -len("weight")] + "bias" if earlier.endswith("weight") else None
        earlier_bias = guess if guess in names else None
    b_sl = None
    if earlier_bias is not None:
        b_sl, b_shape = _slices(block, earlier_bias)
        if tuple(b_shape) != (v_shape[0],):
            raise ShapeError(f"{cls}: the earlier bias {earlier_bias!r} has shape {tuple(b_shape)}; expected ({v_shape[0]},).")
    moved = {earlier, later} | ({earlier_bias} if earlier_bias else set())
    untouched = [n for n in block.names if n not in moved]
    if untouched:
        raise ActionError(
            f"{cls} on ({earlier!r}, {later!r}) moves {sorted(moved)} only, but the block also holds {untouched}, "
            "which it would leave untouched (the later layer's bias is invariant). Remove them from the block "
            f"(e.g. block={sorted(moved)}), or name the earlier bias with earlier_bias= if it is one of them."
        )
    return v_sl, tuple(v_shape), b_sl, u_sl, tuple(u_shape)


class HiddenBasisAction(GroupAction):
    """``(V, b, U) ↦ (g V, g b, U g⁻¹)`` on a block holding ``V`` (h × n), optionally the earlier
    bias ``b`` (h,), and ``U`` (m × h).

    Args:
        block: the parameter block (must contain the tensors whole, and nothing else).
        earlier: name of V (the layer *before* the hidden space; hidden = rows).
        later: name of U (the layer *after*; hidden = columns).
        group: defaults to the supplied group ``gl(h)`` with the ``E_ij`` basis.
        earlier_bias: name of b when it is not ``earlier`` with ``weight`` → ``bias``.

    Raises:
        ShapeError: a name not in the block, a partial tensor, or shapes that do not chain.
        ActionError: the block holds tensors the action would not move.
    """

    def __init__(self, block: ParameterBlock, earlier: str | None = None, later: str | None = None,
                 group: MatrixLieGroup | None = None, *, earlier_bias: str | None = None, **old: str):
        super().__init__()
        self.v_sl, self.v_shape, self.b_sl, self.u_sl, self.u_shape = _layer_pair(
            "HiddenBasisAction", block, earlier, later, earlier_bias, old)
        h = self.v_shape[0]
        if group is None:
            basis = torch.zeros(h * h, h, h)
            for k in range(h * h):
                basis[k].view(-1)[k] = 1.0
            group = MatrixLieGroup.supplied(basis)
        self.group = group
        self.p = block.size

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        g = g.to(theta.dtype)
        U = theta[self.u_sl].reshape(self.u_shape)
        V = theta[self.v_sl].reshape(self.v_shape)
        U2 = torch.linalg.solve(g.T, U.T).T  # U g⁻¹
        parts = [(self.u_sl, U2.reshape(-1)), (self.v_sl, (g @ V).reshape(-1))]
        if self.b_sl is not None:
            parts.append((self.b_sl, g @ theta[self.b_sl]))
        return _replace(theta, parts)


class RescalingAction(GroupAction):
    """Positive rescaling of the hidden units between ``earlier`` and ``later``.

    ``V[j] ↦ g_jj V[j]``, ``b[j] ↦ g_jj b[j]`` (the earlier bias, when in the block),
    ``U[:, j] ↦ U[:, j] / g_jj`` for the diagonal entries of ``g`` (the group is
    ``{exp(diag t)}``, generators ``E_jj``, supplied). For ReLU networks this is exact by positive
    homogeneity, ``relu(d z) = d relu(z)`` for ``d > 0``.

    Args:
        block: the parameter block (must contain the tensors whole, and nothing else).
        earlier: name of the earlier weight V (h × n).
        later: name of the later weight U (m × h).
        group: defaults to the diagonal group above.
        earlier_bias: name of b when it is not ``earlier`` with ``weight`` → ``bias``.

    Raises:
        ShapeError: a name not in the block, a partial tensor, or shapes that do not chain.
        ActionError: the block holds tensors the action would not move.
    """

    def __init__(self, block: ParameterBlock, earlier: str | None = None, later: str | None = None,
                 group: MatrixLieGroup | None = None, *, earlier_bias: str | None = None, **old: str):
        super().__init__()
        self.in_sl, self.in_shape, self.b_sl, self.out_sl, self.out_shape = _layer_pair(
            "RescalingAction", block, earlier, later, earlier_bias, old)
        h = self.in_shape[0]
        if group is None:
            basis = torch.zeros(h, h, h)
            for j in range(h):
                basis[j, j, j] = 1.0
            group = MatrixLieGroup.supplied(basis)
        self.group = group
        self.p = block.size

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        d = torch.diagonal(g).to(theta.dtype)
        w_in = theta[self.in_sl].reshape(self.in_shape) * d[:, None]
        w_out = theta[self.out_sl].reshape(self.out_shape) / d[None, :]
        parts = [(self.in_sl, w_in.reshape(-1)), (self.out_sl, w_out.reshape(-1))]
        if self.b_sl is not None:
            parts.append((self.b_sl, theta[self.b_sl] * d))
        return _replace(theta, parts)
