"""Direct products of commuting actions on one block, and the rescaling of every hidden layer of an MLP.

:class:`ProductAction` joins actions ``a_1, …, a_m`` that each move some whole tensors of one
block into the action of ``G_1 × ⋯ × G_m`` with ``g = diag(g_1, …, g_m)`` (block-diagonal):

    a(g, θ) = a_m(g_m, ·) ∘ ⋯ ∘ a_1(g_1, ·) applied to the factors' coordinates of θ,

with Lie algebra ``g_1 ⊕ ⋯ ⊕ g_m`` (each factor's generators embedded in its diagonal block).
This is a group action when the factors commute — true for factors on disjoint tensors and for
rescalings of different hidden layers (``W_{i+1} ↦ D_{i+1} W_{i+1} D_i⁻¹``: left and right
multiplications commute). :func:`mlp_rescaling` builds that product for a ``fc1 → σ → … → fcL``
network with positively homogeneous σ: exact, so the loss is kept to rounding on any batch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ..actions.exact import ExactAction
from ..actions.linear import RescalingAction
from ..errors import ActionError, ShapeError
from ..params import ParameterBlock

__all__ = ["ProductAction", "mlp_rescaling", "linear_weight_names"]


class ProductAction(ExactAction):
    """``G_1 × ⋯ × G_m`` acting factor by factor on one block (module docstring).

    Args:
        block: the whole-tensor block θ lives in.
        factors: ``(names, action)`` pairs; ``action`` acts on the block of whole tensors ``names``
            (in that order, as in ``ParameterBlock.from_params(params, names)``), each name in ``block``.

    Raises:
        ShapeError: a factor's tensor is not (whole) in the block, or its size does not match.
        ActionError: no factors, or the block holds coordinates no factor moves.
    """

    kind = "product"

    def __init__(self, block: ParameterBlock, factors: Sequence[tuple[Sequence[str], object]]):
        super().__init__()
        if not factors:
            raise ActionError("ProductAction needs at least one (names, action) factor.")
        where = {e.name: e for e in block.entries}
        self.index: list[Tensor] = []
        covered = torch.zeros(block.size, dtype=torch.bool)
        for names, action in factors:
            parts = []
            for n in names:
                e = where.get(n)
                if e is None or not e.whole:
                    raise ShapeError(f"ProductAction: tensor {n!r} of factor {type(action).__name__} is not whole in the "
                                     f"block; the block holds {block.names}.")
                parts.append(torch.arange(e.offset, e.offset + e.size))
            idx = torch.cat(parts)
            if idx.numel() != int(action.p):
                raise ShapeError(f"ProductAction: factor {type(action).__name__} acts on p = {action.p} parameters but its "
                                 f"tensors {list(names)} hold {idx.numel()}.")
            covered[idx] = True
            self.index.append(idx)
        if not bool(covered.all()):
            idle = sorted({block.owner(int(i))[0] for i in (~covered).nonzero().reshape(-1)})
            raise ActionError(f"ProductAction leaves tensors {idle} of the block untouched; remove them from the block.")
        self.factors = torch.nn.ModuleList([a for _, a in factors])
        self.sizes = [int(a.group.generators().shape[-1]) for a in self.factors]
        self.size, self.p = sum(self.sizes), block.size
        self.dimension = sum(int(a.group.generators().shape[0]) for a in self.factors)

    def _basis(self, dtype: torch.dtype) -> Tensor:
        out = torch.zeros(self.dimension, self.size, self.size, dtype=dtype)
        k = s = 0
        for a, n in zip(self.factors, self.sizes):
            gens = a.group.generators().detach().to(dtype)
            out[k : k + gens.shape[0], s : s + n, s : s + n] = gens
            k, s = k + gens.shape[0], s + n
        return out

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        s = 0
        for a, n, idx in zip(self.factors, self.sizes, self.index):
            idx = idx.to(theta.device)
            theta = theta.index_put((idx,), a.act(g[s : s + n, s : s + n], theta[idx]))
            s += n
        return theta


def linear_weight_names(params: Mapping[str, Tensor]) -> list[str]:
    """``fc1.weight, fc2.weight, …`` of a :func:`paramsym.models.mlp.mlp` network, in layer order.

    Raises:
        ActionError: fewer than two such layers (no hidden layer to rescale).
    """
    found = sorted((int(m.group(1)), n) for n in params if (m := re.fullmatch(r"fc(\d+)\.weight", n)))
    if len(found) < 2:
        raise ActionError(f"mlp_rescaling needs an MLP with layers fc1.weight, fc2.weight, … (at least two); the "
                          f"parameters are {list(params)}. Pass weights=[...] with the linear layers' weight names.")
    return [n for _, n in found]


def mlp_rescaling(params: Mapping[str, Tensor], weights: Sequence[str] | None = None,
                  activation: object | None = "relu") -> tuple[ParameterBlock, ProductAction]:
    """Per-unit positive rescaling of every hidden layer of an MLP, as one :class:`ProductAction`.

    Hidden layer ``i`` (between weights ``W_i`` and ``W_{i+1}``) is rescaled by ``D_i = exp(diag t_i)``:
    ``W_i ↦ D_i W_i``, ``b_i ↦ D_i b_i``, ``W_{i+1} ↦ W_{i+1} D_i⁻¹`` (:class:`RescalingAction`);
    exact for positively homogeneous σ (ReLU, LeakyReLU). Biases are found as ``weight`` → ``bias``.

    Args:
        params: the model's parameters (names → tensors).
        weights: the linear layers' weight names in order (default :func:`linear_weight_names`).
        activation: checked to be positively homogeneous (``None`` skips the check).

    Returns:
        ``(block, action)``: the block of every weight and every hidden bias (not the last bias,
        which the action leaves invariant), and the product action on it.
    """
    weights = list(weights) if weights is not None else linear_weight_names(params)
    for w in weights:
        if w not in params:
            raise ShapeError(f"mlp_rescaling: weight {w!r} is not a parameter of the model; it has {list(params)}.")
    names: list[str] = []
    for i, w in enumerate(weights):
        names.append(w)
        b = w[: -len("weight")] + "bias" if w.endswith("weight") else None
        if i < len(weights) - 1 and b in params:
            names.append(b)
    block = ParameterBlock.from_params(params, names)
    factors = []
    for i in range(len(weights) - 1):
        sub = [weights[i]] + ([n] if (n := weights[i][: -len("weight")] + "bias") in names else []) + [weights[i + 1]]
        sub_block = ParameterBlock.from_params(params, sub)
        factors.append((sub, RescalingAction(sub_block, weights[i], weights[i + 1], activation=activation)))
    return block, ProductAction(block, factors)
