"""Exact actions on chains of linear layers: hidden-basis GL(h), its chain version, and positive
rescaling of homogeneous units ([Discovery] §6.1; known answers in its Appendix F).

The pair actions act on ``earlier → σ → later`` given by the weight names ``earlier`` (``V``,
h × n, hidden = rows) and ``later`` (``U``, m × h, hidden = columns), in that order, with the
earlier layer's bias ``b`` (h,) when the block holds it (found as the weight's name with
``weight`` → ``bias``, e.g. ``fc1.weight`` → ``fc1.bias``, or named with ``earlier_bias=``):

* :class:`HiddenBasisAction` — GL(h) change of hidden basis of a linear pair (σ = identity)
  ``F = U (V x + b) + c``: ``(V, b, U) ↦ (g V, g b, U g⁻¹)``, since
  ``U g⁻¹ (g V x + g b) = U (V x + b)``. Dimension h².
* :class:`LinearChainAction` — the same on a chain ``W_L ⋯ W_2 W_1`` of L linear layers (with
  biases): ``GL(h_1) × ⋯ × GL(h_{L−1})`` acting by ``W_i ↦ g_i W_i g_{i−1}⁻¹``, ``b_i ↦ g_i b_i``
  (``g_0 = g_L = I``). Dimension ``Σ h_i²``.
* :class:`RescalingAction` — positive rescaling of the hidden units of a positively homogeneous
  pair (ReLU, LeakyReLU of any slope, PReLU; ``σ(d z) = d σ(z)`` for ``d > 0``):
  ``V[j] ↦ d_j V[j]``, ``b[j] ↦ d_j b[j]``, ``U[:, j] ↦ U[:, j] / d_j`` with ``d = diag(g)``,
  the group ``{exp(diag t)}``. Dimension h.

All are exact: identity, composition and invariance hold to rounding. The last layer's bias is
invariant, so a block holding it (or any tensor besides the moved ones) is refused with
:class:`~paramsym.errors.ActionError`: the action would leave it untouched, and its motion and
verdict would silently include a fixed coordinate. The old keywords ``u_name``/``v_name`` and
``in_name``/``out_name`` still work, with a ``DeprecationWarning``. Fields come from the JVP in
:class:`~paramsym.actions.base.GroupAction` (checked against closed forms in the tests).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from ..errors import ActionError, ShapeError
from ..groups.lie import MatrixLieGroup
from ..params import ParameterBlock
from .exact import DiagonalScalingAction, ExactAction, gl_basis, random_exp
from .layout import entry, replace, require_block


def _slices(block: ParameterBlock, name: str, cls: str = "action") -> tuple[slice, tuple[int, ...]]:
    e = entry(block, name, cls)
    if not e.whole:
        raise ShapeError(f"{cls}: exact actions on layers need the whole tensor {name!r} in the block; the block "
                         f"selects {e.size} of its {_numel(e.shape)} entries.")
    return slice(e.offset, e.offset + e.size), e.shape


def _numel(shape: tuple[int, ...]) -> int:
    return int(math.prod(shape))


def _bias_of(weight: str, names: set[str]) -> str | None:
    guess = weight[: -len("weight")] + "bias" if weight.endswith("weight") else None
    return guess if guess in names else None


def _layer_pair(
    cls: str, block: ParameterBlock, earlier: str | None, later: str | None, earlier_bias: str | None,
    old: dict[str, str],
) -> tuple[slice, tuple[int, ...], slice | None, slice, tuple[int, ...]]:
    """Resolve ``(earlier, later)`` (accepting deprecated keywords), the earlier bias, and refuse
    block entries the action would not move. Returns the slices and shapes of V, b, U."""
    require_block(block, cls)
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
    v_sl, v_shape = _slices(block, earlier, cls)
    u_sl, u_shape = _slices(block, later, cls)
    if len(v_shape) != 2 or len(u_shape) != 2 or u_shape[1] != v_shape[0]:
        raise ShapeError(
            f"{cls}: the earlier weight {earlier!r} {tuple(v_shape)} must have as many rows as the later weight "
            f"{later!r} {tuple(u_shape)} has columns (the hidden units). Pass the layers in order (earlier, later)."
        )
    names = set(block.names)
    if earlier_bias is None:
        earlier_bias = _bias_of(earlier, names)
    b_sl = None
    if earlier_bias is not None:
        b_sl, b_shape = _slices(block, earlier_bias, cls)
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


class HiddenBasisAction(ExactAction):
    """GL(h) on a linear pair: ``(V, b, U) ↦ (g V, g b, U g⁻¹)``.

    Group: GL(h) (identity component; generators ``E_ij``), dimension h². Invariance:
    ``U g⁻¹ (g V x + g b) = U (V x + b)``; only for a *linear* hidden layer (or σ commuting with
    all of GL(h), i.e. the identity) — for ReLU use :class:`RescalingAction`.

    Args:
        block: the parameter block (must contain the tensors whole, and nothing else).
        earlier: name of V (the layer *before* the hidden space, h × n; hidden = rows).
        later: name of U (the layer *after*, m × h; hidden = columns).
        group: defaults to ``gl(h)`` with the ``E_ij`` basis (built on first use).
        earlier_bias: name of b when it is not ``earlier`` with ``weight`` → ``bias``.

    Raises:
        ShapeError: a name not in the block, a partial tensor, or shapes that do not chain.
        ActionError: the block holds tensors the action would not move.
    """

    kind = "hidden_basis"

    def __init__(self, block: ParameterBlock, earlier: str | None = None, later: str | None = None,
                 group: MatrixLieGroup | None = None, *, earlier_bias: str | None = None, **old: str):
        super().__init__()
        self.v_sl, self.v_shape, self.b_sl, self.u_sl, self.u_shape = _layer_pair(
            "HiddenBasisAction", block, earlier, later, earlier_bias, old)
        h = self.v_shape[0]
        self.size, self.dimension, self.p = h, h * h, block.size
        if group is not None:
            self.group = group

    def _basis(self, dtype: torch.dtype) -> Tensor:
        return gl_basis([self.size], dtype)

    def random_elements(self, n: int, generator: torch.Generator | None = None, rho: float = 0.5) -> Tensor:
        h = self.size
        return random_exp(torch.randn(n, h, h, generator=generator, dtype=self._probe.dtype), rho, generator)

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        g = g.to(theta.dtype)
        U = theta[self.u_sl].reshape(self.u_shape)
        V = theta[self.v_sl].reshape(self.v_shape)
        U2 = torch.linalg.solve(g.T, U.T).T  # U g⁻¹
        parts = [(self.u_sl, U2.reshape(-1)), (self.v_sl, (g @ V).reshape(-1))]
        if self.b_sl is not None:
            parts.append((self.b_sl, g @ theta[self.b_sl]))
        return replace(theta, parts)


class LinearChainAction(ExactAction):
    """``GL(h_1) × ⋯ × GL(h_{L−1})`` on a chain of L linear layers ``W_1, …, W_L`` (with biases).

    ``W_i ↦ g_i W_i g_{i−1}⁻¹`` and ``b_i ↦ g_i b_i`` for ``i < L`` (``g_0 = I``), ``W_L ↦ W_L g_{L−1}⁻¹``;
    ``g = diag(g_1, …, g_{L−1})`` is block-diagonal of size ``Σ h_i`` (its off-diagonal blocks
    are ignored). Invariance: each ``g_i`` cancels between layers i and i+1, as in
    :class:`HiddenBasisAction` (the layers must be linear, no activation between them).
    Dimension ``Σ h_i²``.

    Args:
        block: exactly the weights, and the biases of ``W_1..W_{L−1}`` (whole tensors).
        weights: names of ``W_1, …, W_L`` in order (``W_i`` is ``h_i × h_{i−1}``); L ≥ 2.
        biases: names of the biases of ``W_1..W_{L−1}`` (``None`` entries: none); default: each
            weight's ``weight`` → ``bias`` twin when the block holds it.

    Raises:
        ShapeError: fewer than two layers, a name not in the block, or shapes that do not chain.
        ActionError: the block holds tensors the action would not move (e.g. the last bias).
    """

    kind = "linear_chain"

    def __init__(self, block: ParameterBlock, weights: Sequence[str], biases: Sequence[str | None] | None = None):
        super().__init__()
        cls = "LinearChainAction"
        weights = list(weights)
        if len(weights) < 2:
            raise ShapeError(f"{cls} needs at least two weight names in order (W_1, ..., W_L); received {weights}.")
        locs = [_slices(block, w, cls) for w in weights]
        shapes = [tuple(s) for _, s in locs]
        for i in range(1, len(shapes)):
            if len(shapes[i]) != 2 or len(shapes[i - 1]) != 2 or shapes[i][1] != shapes[i - 1][0]:
                raise ShapeError(f"{cls}: {weights[i]!r} {shapes[i]} must have as many columns as {weights[i - 1]!r} "
                                 f"{shapes[i - 1]} has rows; pass the layers in order, earliest first.")
        names = set(block.names)
        if biases is None:
            biases = [_bias_of(w, names) for w in weights[:-1]]
        biases = list(biases)
        if len(biases) != len(weights) - 1:
            raise ShapeError(f"{cls}: give one bias (or None) per hidden layer, {len(weights) - 1}; received {len(biases)}.")
        self.w_sl = [sl for sl, _ in locs]
        self.w_shape = shapes
        self.b_sl: list[slice | None] = []
        for i, b in enumerate(biases):
            if b is None:
                self.b_sl.append(None)
                continue
            sl, shp = _slices(block, b, cls)
            if tuple(shp) != (shapes[i][0],):
                raise ShapeError(f"{cls}: bias {b!r} has shape {tuple(shp)}; expected ({shapes[i][0]},).")
            self.b_sl.append(sl)
        moved = set(weights) | {b for b in biases if b}
        untouched = [n for n in block.names if n not in moved]
        if untouched:
            raise ActionError(f"{cls} moves {sorted(moved)} only, but the block also holds {untouched}, which it would "
                              "leave untouched (the last layer's bias is invariant). Remove them from the block.")
        self.hidden = [s[0] for s in shapes[:-1]]
        self.size, self.dimension, self.p = sum(self.hidden), sum(h * h for h in self.hidden), block.size

    def _basis(self, dtype: torch.dtype) -> Tensor:
        return gl_basis(self.hidden, dtype)

    def random_elements(self, n: int, generator: torch.Generator | None = None, rho: float = 0.5) -> Tensor:
        a = torch.zeros(n, self.size, self.size, dtype=self._probe.dtype)
        start = 0
        for h in self.hidden:
            a[:, start : start + h, start : start + h] = torch.randn(n, h, h, generator=generator, dtype=a.dtype)
            start += h
        return random_exp(a, rho, generator)

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        g = g.to(theta.dtype)
        blocks, start = [], 0
        for h in self.hidden:
            blocks.append(g[start : start + h, start : start + h])
            start += h
        parts = []
        for i, (sl, shp) in enumerate(zip(self.w_sl, self.w_shape)):
            W = theta[sl].reshape(shp)
            if i > 0:
                W = torch.linalg.solve(blocks[i - 1].T, W.T).T  # W g_{i-1}⁻¹
            if i < len(blocks):
                W = blocks[i] @ W
                if self.b_sl[i] is not None:
                    parts.append((self.b_sl[i], blocks[i] @ theta[self.b_sl[i]]))
            parts.append((sl, W.reshape(-1)))
        return replace(theta, parts)


#: Activations known to be positively homogeneous: ``σ(d z) = d σ(z)`` for ``d > 0``.
HOMOGENEOUS = (nn.ReLU, nn.LeakyReLU, nn.PReLU, nn.Identity)
_HOMOGENEOUS_NAMES = {"relu", "leaky_relu", "leakyrelu", "prelu", "identity", "linear"}


def check_homogeneous(activation: nn.Module | str | Callable[[Tensor], Tensor], cls: str = "RescalingAction") -> str:
    """Describe ``activation`` if it is positively homogeneous, else raise :class:`ActionError`.

    Known modules (:data:`HOMOGENEOUS`) and names (``"relu"``, ``"leaky_relu"``, ``"prelu"``,
    ``"identity"``) are accepted as such; any other callable is tested numerically,
    ``σ(d z) = d σ(z)`` on 64 random ``z`` (vectors of 8 entries) and ``d ∈ {0.5, 3}``
    (relative tolerance 1e-12 in float64).

    Raises:
        ActionError: a non-homogeneous activation (named, with the accepted ones listed).
    """
    if isinstance(activation, HOMOGENEOUS):
        if isinstance(activation, nn.LeakyReLU):
            return f"LeakyReLU(negative_slope={activation.negative_slope})"
        return type(activation).__name__
    accepted = "nn.ReLU, nn.LeakyReLU (any negative_slope), nn.PReLU, nn.Identity, or 'relu'/'leaky_relu'/'prelu'/'identity'"
    if isinstance(activation, str):
        if activation.lower() in _HOMOGENEOUS_NAMES:
            return activation.lower()
        raise ActionError(f"{cls}: activation {activation!r} is not known to be positively homogeneous "
                          f"(σ(d z) = d σ(z) for d > 0, which rescaling needs); accepted: {accepted}.")
    if not callable(activation):
        raise ActionError(f"{cls}: activation must be an nn.Module, a name or a callable; received {type(activation).__name__}.")
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(64, 8, generator=gen, dtype=torch.float64) * 3
    try:
        with torch.no_grad():
            ok = all(torch.allclose(activation(d * z), d * activation(z), rtol=1e-12, atol=1e-12 * float(z.abs().max()))
                     for d in (0.5, 3.0))
    except Exception as exc:  # a module that cannot run on float64 (8,) rows
        raise ActionError(f"{cls}: could not evaluate the activation {activation!r} on float64 inputs to test "
                          f"homogeneity ({exc}); use one of: {accepted}.") from exc
    if not ok:
        raise ActionError(f"{cls}: activation {activation!r} is not positively homogeneous: σ(d z) ≠ d σ(z) for d > 0, "
                          f"so rescaling hidden units changes the output. Rescaling applies to {accepted} "
                          "(for a linear hidden layer use HiddenBasisAction).")
    return getattr(activation, "__name__", type(activation).__name__)


class RescalingAction(DiagonalScalingAction):
    """Positive rescaling of the hidden units between ``earlier`` and ``later``.

    ``V[j] ↦ d_j V[j]``, ``b[j] ↦ d_j b[j]`` (the earlier bias, when in the block),
    ``U[:, j] ↦ U[:, j] / d_j`` for ``d = diag(g)``; the group is ``{exp(diag t)}`` (positive
    diagonal matrices, generators ``E_jj``), dimension h, abelian. Invariance by positive
    homogeneity of σ: ``U D⁻¹ σ(D (V x + b)) = U D⁻¹ D σ(V x + b)``, exact for ReLU, LeakyReLU of
    any negative slope (``leaky(d z) = d leaky(z)`` for ``d > 0``) and PReLU.

    Args:
        block: the parameter block (must contain the tensors whole, and nothing else).
        earlier: name of the earlier weight V (h × n).
        later: name of the later weight U (m × h).
        group: defaults to the diagonal group above.
        earlier_bias: name of b when it is not ``earlier`` with ``weight`` → ``bias``.
        activation: the activation between the layers (module, name or callable), checked to be
            positively homogeneous (:func:`check_homogeneous`); ``None`` skips the check (the
            caller vouches for it). Its description is kept as ``self.activation``.

    Raises:
        ShapeError: a name not in the block, a partial tensor, or shapes that do not chain.
        ActionError: the block holds tensors the action would not move, or the activation is not
            positively homogeneous.
    """

    kind = "rescaling"

    def __init__(self, block: ParameterBlock, earlier: str | None = None, later: str | None = None,
                 group: MatrixLieGroup | None = None, *, earlier_bias: str | None = None,
                 activation: nn.Module | str | Callable[[Tensor], Tensor] | None = None, **old: str):
        super().__init__()
        self.activation = None if activation is None else check_homogeneous(activation)
        self.in_sl, self.in_shape, self.b_sl, self.out_sl, self.out_shape = _layer_pair(
            "RescalingAction", block, earlier, later, earlier_bias, old)
        h = self.in_shape[0]
        self.size, self.dimension, self.p = h, h, block.size
        if group is not None:
            self.group = group

    def act_diagonal(self, d: Tensor, theta: Tensor) -> Tensor:
        """``(diag(d) V, d ⊙ b, U diag(d)⁻¹)`` entrywise."""
        d = d.to(theta.dtype)
        w_in = theta[self.in_sl].reshape(self.in_shape) * d[:, None]
        w_out = theta[self.out_sl].reshape(self.out_shape) / d[None, :]
        parts = [(self.in_sl, w_in.reshape(-1)), (self.out_sl, w_out.reshape(-1))]
        if self.b_sl is not None:
            parts.append((self.b_sl, theta[self.b_sl] * d))
        return replace(theta, parts)
