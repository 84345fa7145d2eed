"""Scale symmetries of normalisation layers absorbed by the next linear layer(s).

A normalisation layer ends with a per-channel affine map, ``y = γ ⊙ n(x) + β`` (LayerNorm;
RMSNorm has no ``β``), where ``n(x)`` does not depend on ``γ, β``. When ``y`` feeds *only*
linear layers ``z_k = W_k y + c_k``, a diagonal ``D = diag(d)`` can be moved between them:

    (γ, β, W_k) ↦ (D γ, D β, W_k D⁻¹):   W_k D⁻¹ (D γ ⊙ n(x) + D β) = W_k (γ ⊙ n(x) + β).

Group: the positive diagonal matrices ``{exp(diag t)}`` (every invertible diagonal D works; the
verdict samples the identity component), abelian, dimension = the normalised size h. It is not
a symmetry when ``y`` also feeds anything else (a residual stream after a post-LN block, a
non-linear consumer): the census's numerical verification catches such a wrong claim.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from ..errors import ActionError, ShapeError
from ..params import ParameterBlock
from .exact import DiagonalScalingAction
from .layout import entry, locate, refuse_untouched, replace


class NormScaleAction(DiagonalScalingAction):
    """``(γ, β, W_1..W_K) ↦ (d ⊙ γ, d ⊙ β, W_k diag(d)⁻¹)`` for ``d = diag(g)``.

    Args:
        block: exactly the norm's weight (and bias) and the consumers' weights (whole tensors).
        earlier: name of the normalisation weight γ (shape ``(h,)``; e.g. ``"ln.weight"``).
        later: name(s) of the weight(s) of the linear layer(s) reading the normalised output
            (each ``(m_k, h)``, columns = the normalised channels).
        earlier_bias: name of β; default: ``earlier`` with ``weight`` → ``bias`` when the block
            holds it (LayerNorm), none otherwise (RMSNorm).

    Raises:
        ShapeError: a name not in the block, a partial tensor, or shapes that do not chain.
        ActionError: the block holds tensors the action would leave untouched (the consumers'
            biases are invariant).
    """

    kind = "norm_scale"

    def __init__(self, block: ParameterBlock, earlier: str, later: str | Sequence[str], *,
                 earlier_bias: str | None = None):
        super().__init__()
        cls = "NormScaleAction"
        later = [later] if isinstance(later, str) else list(later)
        if not later:
            raise ShapeError(f"{cls}: name at least one linear layer (its weight) that reads the normalised output.")
        ge = entry(block, earlier, cls)
        if len(ge.shape) != 1:
            raise ShapeError(f"{cls}: the normalisation weight {earlier!r} has shape {ge.shape}; expected (h,) (a 1-d "
                             "elementwise affine weight over one normalised dimension).")
        h = ge.shape[0]
        names = set(block.names)
        if earlier_bias is None and earlier.endswith("weight"):
            guess = earlier[: -len("weight")] + "bias"
            earlier_bias = guess if guess in names else None
        self.g_loc = locate(block, earlier, None, cls)
        self.b_loc = None
        if earlier_bias is not None:
            if tuple(entry(block, earlier_bias, cls).shape) != (h,):
                raise ShapeError(f"{cls}: the normalisation bias {earlier_bias!r} must have shape ({h},).")
            self.b_loc = locate(block, earlier_bias, None, cls)
        self.w_locs, self.w_shapes = [], []
        for w in later:
            shp = tuple(entry(block, w, cls).shape)
            if len(shp) != 2 or shp[1] != h:
                raise ShapeError(f"{cls}: the consumer weight {w!r} has shape {shp}; a linear layer reading the {h} "
                                 f"normalised channels has shape (m, {h}). Pass (earlier=norm weight, later=linear weight).")
            self.w_locs.append(locate(block, w, None, cls))
            self.w_shapes.append(shp)
        moved = [self.g_loc] + ([self.b_loc] if self.b_loc is not None else []) + self.w_locs
        refuse_untouched(cls, block, moved, "The consumers' biases are invariant.")
        self.size, self.dimension, self.p = h, h, block.size

    @classmethod
    def for_modules(cls, block: ParameterBlock, norm: nn.Module, norm_name: str,
                    later: str | Sequence[str]) -> NormScaleAction:
        """From a ``nn.LayerNorm``/``nn.RMSNorm`` module named ``norm_name`` (checks it has an
        elementwise affine weight over one dimension)."""
        weight = getattr(norm, "weight", None)
        if not isinstance(weight, Tensor) or weight.ndim != 1:
            raise ActionError(f"NormScaleAction: {norm_name!r} ({type(norm).__name__}) has no 1-d elementwise affine "
                              "weight (elementwise_affine=False?); there is no scale to move.")
        return cls(block, f"{norm_name}.weight", later)

    def act_diagonal(self, d: Tensor, theta: Tensor) -> Tensor:
        """``(d ⊙ γ, d ⊙ β, W_k diag(d)⁻¹)`` entrywise."""
        d = d.to(theta.dtype)
        parts = [(self.g_loc, theta[self.g_loc] * d)]
        if self.b_loc is not None:
            parts.append((self.b_loc, theta[self.b_loc] * d))
        for loc, shp in zip(self.w_locs, self.w_shapes):
            parts.append((loc, (theta[loc].reshape(shp) / d).reshape(-1)))
        return replace(theta, parts)
