"""Permutations of hidden units and of attention heads: the discrete exact symmetries.

* :class:`HiddenPermutationAction` — the symmetric group ``S_h`` on the hidden units of a pair
  ``earlier → σ → later`` of linear layers with *any* elementwise σ: for a permutation matrix P,
  ``(V, b, U) ↦ (P V, P b, U Pᵀ)``, since ``U Pᵀ σ(P V x + P b) = U Pᵀ P σ(V x + b)`` (σ
  commutes with permutations and ``Pᵀ = P⁻¹``). Order ``h!``.
* :class:`HeadPermutationAction` — ``S_H`` on the heads of a multi-head attention layer: the
  output is a sum over heads of terms that each depend on one head's parameters only (query,
  key, value rows and the output columns of that head, or ``M_h, R_h`` of RMHSA), so permuting
  the heads' parameter blocks together permutes the summands. Order ``H!``.

* :class:`SignFlipAction` — ``{±1}^h`` on the hidden units of a pair whose later layer is linear
  in the earlier one's output (a gated unit ``down(σ(gate x) ⊙ up x)``: ``up`` row ``j`` and
  ``down`` column ``j`` both negated), or with an odd σ: ``(V, b, U) ↦ (S V, S b, U S)`` for
  ``S = diag(±1)``. Order ``2^h`` (with the positive rescalings: ``(ℝ∖{0})^h``).

All three are discrete: ``dimension = 0``, ``order`` the exact group order (``log10_order`` for
large ones); they have no Lie group to sample (``action.group`` raises a named error), and their
elements are permutation matrices: ``act(P, θ)`` for ``P = permutation_matrix(perm)`` or
``random_elements(n, generator)``; with ``P[i, π(i)] = 1``, new unit (head) ``i`` is old unit
``π(i)``. ``act`` is linear in ``g`` (``einsum``), so it is exact for permutation matrices (each
entry is one old entry times 1 plus zeros) and ``act(P₂, act(P₁, θ)) = act(P₂ P₁, θ)``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..errors import ActionError, ShapeError
from ..params import ParameterBlock
from .exact import ExactAction, factorial, random_permutations
from .layout import entry, locate, refuse_untouched, replace
from .linear import _layer_pair


class _Discrete(ExactAction):
    compact = "permutation"

    def random_elements(self, n: int, generator: torch.Generator | None = None, rho: float = 0.5) -> Tensor:
        """``n`` uniformly random permutation matrices (``rho`` is ignored)."""
        return random_permutations(n, self.size, generator, self._probe.dtype)

    def random_compact(self, generator: torch.Generator | None = None) -> Tensor:
        """One uniformly random ``perm`` (the draw of ``random_elements(1, generator)[0]``, whose
        matrix is ``permutation_matrix(perm)``)."""
        return torch.randperm(self.size, generator=generator)

    def act_compact(self, c: Tensor, theta: Tensor) -> Tensor:
        return self.act_permutation(c, theta)

    def act_permutation(self, perm: Tensor, theta: Tensor) -> Tensor:
        raise NotImplementedError


def as_permutation(g: Tensor) -> Tensor | None:
    """``perm`` with ``g = permutation_matrix(perm)`` (``g[i, perm[i]] = 1``, zeros elsewhere), or
    ``None`` when the square matrix ``g`` is no permutation matrix."""
    if g.dim() != 2 or g.shape[0] != g.shape[1]:
        return None
    perm = g.argmax(dim=1)
    n = g.shape[0]
    if int(g.count_nonzero()) != n or not bool((g[torch.arange(n), perm] == 1).all()) or \
            not torch.equal(torch.sort(perm).values, torch.arange(n, device=perm.device)):
        return None
    return perm


class _UnitAction(_Discrete):
    """A finite group of ``h × h`` matrices ``g`` acting on the hidden units of a layer pair:
    ``(V, b, U) ↦ (g V, g b, U gᵀ)`` (``gᵀ = g⁻¹`` for permutation and sign matrices)."""

    def __init__(self, block: ParameterBlock, earlier: str | None = None, later: str | None = None, *,
                 earlier_bias: str | None = None):
        super().__init__()
        self.v_sl, self.v_shape, self.b_sl, self.u_sl, self.u_shape = _layer_pair(
            type(self).__name__, block, earlier, later, earlier_bias, {})
        h = self.v_shape[0]
        self.size, self.dimension, self.order, self.p = h, 0, self._order(h), block.size

    @staticmethod
    def _order(h: int) -> int:
        raise NotImplementedError

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        g = g.to(theta.dtype)
        U = theta[self.u_sl].reshape(self.u_shape)
        V = theta[self.v_sl].reshape(self.v_shape)
        parts = [(self.u_sl, (U @ g.T).reshape(-1)), (self.v_sl, (g @ V).reshape(-1))]
        if self.b_sl is not None:
            parts.append((self.b_sl, g @ theta[self.b_sl]))
        return replace(theta, parts)

    def act_diagonal(self, d: Tensor, theta: Tensor) -> Tensor:
        """``act(diag(d), θ)`` entrywise: ``(d ⊙ V rows, d ⊙ b, U columns ⊙ d)`` (``gᵀ = g`` for a
        diagonal ``g``; each entry is one old entry times ``d_j``, as in the dense product)."""
        d = d.to(theta.dtype)
        U = theta[self.u_sl].reshape(self.u_shape)
        V = theta[self.v_sl].reshape(self.v_shape)
        parts = [(self.u_sl, (U * d[None, :]).reshape(-1)), (self.v_sl, (V * d[:, None]).reshape(-1))]
        if self.b_sl is not None:
            parts.append((self.b_sl, theta[self.b_sl] * d))
        return replace(theta, parts)


class HiddenPermutationAction(_UnitAction):
    """``S_h`` on hidden units: ``(V, b, U) ↦ (P V, P b, U Pᵀ)`` (see the module docstring).

    Args:
        block: exactly ``V``, the earlier bias ``b`` (optional) and ``U``, whole tensors.
        earlier: name of V (h × n); later: name of U (m × h); earlier_bias: name of b when it
            is not ``earlier`` with ``weight`` → ``bias``.

    Raises:
        ShapeError: a name not in the block, a partial tensor, or shapes that do not chain.
        ActionError: the block holds tensors the action would not move (the later bias).
    """

    kind = "hidden_permutation"
    _order = staticmethod(factorial)

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        """``(P V, P b, U Pᵀ)``; a permutation matrix ``g`` (every element the group draws) is
        applied by indexing (:meth:`act_permutation`: the same numbers, no ``h × h`` products)."""
        perm = None if g.requires_grad or torch._C._functorch.is_functorch_wrapped_tensor(g) else as_permutation(g)
        if perm is not None:  # (not under vmap/grad transforms, which keep the dense products)
            return self.act_permutation(perm, theta)
        return super().act(g, theta)

    def act_permutation(self, perm: Tensor, theta: Tensor) -> Tensor:
        """``act(permutation_matrix(perm), θ)`` by indexing: ``V[perm]``, ``b[perm]``, ``U[:, perm]``
        (exact, O(p), no ``h × h`` matrix; equal to :meth:`act` entry for entry)."""
        perm = torch.as_tensor(perm, dtype=torch.long, device=theta.device)
        U = theta[self.u_sl].reshape(self.u_shape)
        V = theta[self.v_sl].reshape(self.v_shape)
        parts = [(self.u_sl, U[:, perm].reshape(-1)), (self.v_sl, V[perm].reshape(-1))]
        if self.b_sl is not None:
            parts.append((self.b_sl, theta[self.b_sl][perm]))
        return replace(theta, parts)


class SignFlipAction(_UnitAction):
    """``{±1}^h`` on hidden units: ``(V, b, U) ↦ (S V, S b, U S)``, ``S = diag(±1)`` (module docstring).
    Valid where the later layer is linear in the unit (a gated FFN's ``up`` rows) or σ is odd.
    Arguments (``block``, ``earlier``, ``later``, ``earlier_bias``) as :class:`HiddenPermutationAction`.

    Raises:
        ShapeError, ActionError: as :class:`HiddenPermutationAction`.
    """

    kind = "sign_flip"
    compact = "diagonal"

    @staticmethod
    def _order(h: int) -> int:
        return 2**h

    def random_elements(self, n: int, generator: torch.Generator | None = None, rho: float = 0.5) -> Tensor:
        """``n`` uniformly random ``diag(±1)`` matrices (``rho`` is ignored)."""
        signs = torch.randint(0, 2, (n, self.size), generator=generator).to(self._probe.dtype) * 2 - 1
        return torch.diag_embed(signs)

    def random_compact(self, generator: torch.Generator | None = None) -> Tensor:
        """The signs ``(±1,)*h`` of one random element (the draw of ``random_elements(1, generator)[0]``)."""
        return torch.randint(0, 2, (1, self.size), generator=generator)[0].to(self._probe.dtype) * 2 - 1

    def act_compact(self, c: Tensor, theta: Tensor) -> Tensor:
        return self.act_diagonal(c, theta)


class HeadPermutationAction(_Discrete):
    """``S_H`` on attention heads: every head-carrying tensor, viewed as ``(pre, H, post)``, has its
    head axis permuted, ``T[a, i, b] ↦ Σ_j P[i, j] T[a, j, b]`` (module docstring).

    Args:
        block: exactly the head-carrying tensors (whole).
        heads: the number of heads H.
        layout: ``{name: (pre, post)}`` — tensor ``name`` reshaped (row-major) to ``(pre, H, post)``
            puts head ``i``'s entries at ``[:, i, :]``. E.g. a packed ``in_proj_weight (3E, E)`` is
            ``(3, d_h·E)``, ``out_proj.weight (E, E)`` is ``(E, d_h)``, RMHSA's ``M (H, d, d)`` is
            ``(1, d²)``. Use :meth:`for_mha` and :meth:`for_rmhsa` for the standard layouts.

    Raises:
        ShapeError: a name not in the block, or a layout that does not fit a tensor's size.
        ActionError: the block holds tensors the action would not move (the output bias).
    """

    kind = "head_permutation"

    def __init__(self, block: ParameterBlock, heads: int, layout: dict[str, tuple[int, int]]):
        super().__init__()
        cls = "HeadPermutationAction"
        if int(heads) < 1:
            raise ShapeError(f"{cls}: heads must be ≥ 1; received {heads}.")
        H = int(heads)
        self.names = list(layout)
        self.locs, self.views = [], []
        for name, (pre, post) in layout.items():
            numel = math.prod(entry(block, name, cls).shape)
            if pre * H * post != numel:
                raise ShapeError(f"{cls}: {name!r} has {numel} entries, which is not (pre={pre}) × (heads={H}) × "
                                 f"(post={post}); check the number of heads and the layout.")
            self.locs.append(locate(block, name, None, cls))
            self.views.append((int(pre), H, int(post)))
        refuse_untouched(cls, block, self.locs, "Output biases are invariant under head permutations.")
        self.size, self.dimension, self.order, self.p = H, 0, factorial(H), block.size

    @classmethod
    def for_mha(cls, block: ParameterBlock, mha: nn.MultiheadAttention, prefix: str = "") -> HeadPermutationAction:
        """Head permutations of an ``nn.MultiheadAttention`` named ``prefix`` in the model.

        The block must hold every head-carrying parameter of the module: ``in_proj_weight`` (or
        ``q/k/v_proj_weight``), ``in_proj_bias``, ``bias_k``, ``bias_v`` when present, and
        ``out_proj.weight`` — and not ``out_proj.bias``.

        Raises:
            ActionError: not an ``nn.MultiheadAttention``, or a head-carrying parameter missing
                from the block (named; permuting the others alone would change the output).
        """
        if not isinstance(mha, nn.MultiheadAttention):
            raise ActionError(f"HeadPermutationAction.for_mha needs an nn.MultiheadAttention; received {type(mha).__name__}.")
        H, E = mha.num_heads, mha.embed_dim
        dh = E // H
        p = f"{prefix}." if prefix else ""
        layout: dict[str, tuple[int, int]] = {}
        if mha.in_proj_weight is not None:
            layout[f"{p}in_proj_weight"] = (3, dh * E)
        else:
            layout[f"{p}q_proj_weight"] = (1, dh * E)
            layout[f"{p}k_proj_weight"] = (1, dh * mha.kdim)
            layout[f"{p}v_proj_weight"] = (1, dh * mha.vdim)
        if mha.in_proj_bias is not None:
            layout[f"{p}in_proj_bias"] = (3, dh)
        for extra in ("bias_k", "bias_v"):
            if getattr(mha, extra) is not None:
                layout[f"{p}{extra}"] = (1, dh)
        layout[f"{p}out_proj.weight"] = (E, dh)
        missing = [n for n in layout if n not in block.names]
        if missing:
            raise ActionError(f"HeadPermutationAction: the block lacks {missing} of the attention layer {prefix!r}; every "
                              f"head-carrying parameter must be permuted together. Use block={list(layout)}.")
        return cls(block, H, layout)

    @classmethod
    def for_rmhsa(cls, block: ParameterBlock, M: str, R: str) -> HeadPermutationAction:
        """Head permutations of RMHSA parameters ``M, R`` (each ``(H, d, d)``, named in the block)."""
        shp = tuple(entry(block, M, "HeadPermutationAction").shape)
        if len(shp) != 3 or shp[1] != shp[2] or tuple(entry(block, R, "HeadPermutationAction").shape) != shp:
            raise ShapeError(f"HeadPermutationAction.for_rmhsa: M and R must both have shape (H, d, d); received M {shp}, "
                             f"R {tuple(entry(block, R, 'HeadPermutationAction').shape)}.")
        return cls(block, shp[0], {M: (1, shp[1] * shp[2]), R: (1, shp[1] * shp[2])})

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        g = g.to(theta.dtype)
        parts = []
        for loc, view in zip(self.locs, self.views):
            parts.append((loc, torch.einsum("ij,ajb->aib", g, theta[loc].reshape(view)).reshape(-1)))
        return replace(theta, parts)

    def act_permutation(self, perm: Tensor, theta: Tensor) -> Tensor:
        """``act(permutation_matrix(perm), θ)`` by indexing the head axis (exact, O(p))."""
        perm = torch.as_tensor(perm, dtype=torch.long, device=theta.device)
        return replace(theta, [(loc, theta[loc].reshape(view)[:, perm, :].reshape(-1))
                               for loc, view in zip(self.locs, self.views)])

