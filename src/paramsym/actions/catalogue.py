"""Known exact parameter symmetries, as :class:`GroupAction` s.

* :class:`HiddenBasisAction` — GL(h) change of hidden basis of a linear pair
  ``F = U V`` (or ``U σ(V X)`` with σ equivariant): ``(U, V) ↦ (U g⁻¹, g V)``.
* :class:`RescalingAction` — positive rescaling of hidden units of a homogeneous (ReLU/LeakyReLU)
  layer pair: ``W_in[j] ↦ e^{t_j} W_in[j]``, ``W_out[:, j] ↦ e^{−t_j} W_out[:, j]``; the group is
  the diagonal matrices ``exp(diag t)`` and the action reads the diagonal of ``g``.

Both are exact actions: identity, composition and invariance hold to rounding. They implement
``act`` only; fields come from the JVP in :class:`GroupAction` (and are checked against closed
forms in the tests).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import ShapeError
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


class HiddenBasisAction(GroupAction):
    """``(U, V) ↦ (U g⁻¹, g V)`` on a block holding ``U`` (m × h) and ``V`` (h × n).

    Args:
        block: the parameter block (must contain both tensors whole).
        u_name: name of U (the layer *after* the hidden space; hidden = columns).
        v_name: name of V (the layer *before*; hidden = rows).
        group: defaults to the supplied group ``gl(h)`` with the ``E_ij`` basis.
    """

    def __init__(self, block: ParameterBlock, u_name: str, v_name: str, group: MatrixLieGroup | None = None):
        super().__init__()
        self.u_sl, self.u_shape = _slices(block, u_name)
        self.v_sl, self.v_shape = _slices(block, v_name)
        h = self.u_shape[1]
        if self.v_shape[0] != h:
            raise ShapeError(f"U has {h} hidden columns but V has {self.v_shape[0]} rows.")
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
        return _replace(theta, [(self.u_sl, U2.reshape(-1)), (self.v_sl, (g @ V).reshape(-1))])


class RescalingAction(GroupAction):
    """Positive rescaling of hidden units ``units`` between ``in_name`` and ``out_name``.

    ``W_in[j] ↦ g_jj W_in[j]``, ``W_out[:, j] ↦ W_out[:, j] / g_jj`` for the diagonal entries of
    ``g`` (the group is ``{exp(diag t)}``, generators ``E_jj``, supplied). For ReLU networks
    this is exact by positive homogeneity.
    """

    def __init__(self, block: ParameterBlock, in_name: str, out_name: str, group: MatrixLieGroup | None = None):
        super().__init__()
        self.in_sl, self.in_shape = _slices(block, in_name)
        self.out_sl, self.out_shape = _slices(block, out_name)
        h = self.in_shape[0]
        if self.out_shape[1] != h:
            raise ShapeError(f"{in_name} has {h} rows but {out_name} has {self.out_shape[1]} columns.")
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
        return _replace(theta, [(self.in_sl, w_in.reshape(-1)), (self.out_sl, w_out.reshape(-1))])
