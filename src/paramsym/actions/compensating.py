"""Closed-form compensating actions (Corollary 4.6, Appendix C.2) and the choice of compensators.

For a two-layer block ``F_X(U, V) = U σ(V X)`` with batch ``X ∈ R^{n×N}``, a set B of k ≥ N
units whose feature matrix ``S_B = σ(V_B X) ∈ R^{k×N}`` has rank N can absorb any change of the
other units' output. :func:`select_compensators` picks B by column-pivoted QR of ``Sᵀ`` (the
greedy choice of the best-conditioned feature rows) and refuses a selection whose condition
number exceeds ``max_cond`` (default 1e4). :class:`CompensatingAction` is the resulting action of
the additive group on the block of an :class:`~paramsym.targets.FFNBoundaryTarget`.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import torch
from torch import Tensor

from ..errors import ConvergenceError, ShapeError
from .exact import ExactAction, translation_basis, translation_of
from .layout import locate, refuse_untouched, replace, size, take

__all__ = ["select_compensators", "CompensatingAction", "translation_element"]


def select_compensators(features: Tensor, k: int, max_cond: float = 1e4) -> tuple[list[int], float]:
    """Choose ``k`` compensating units from the feature matrix ``S = σ(V X)`` (H × N).

    Args:
        features: ``(H, N)`` unit features on the batch.
        k: number of compensators (must satisfy ``N ≤ k < H``).
        max_cond: largest accepted condition number of ``S_B``.

    Returns:
        ``(units, cond)``: the selected unit indices (pivot order) and ``cond(S_B)``.

    Raises:
        ShapeError: ``k`` out of range.
        ConvergenceError: the best selection is too ill-conditioned (the condition is named).
    """
    H, N = features.shape
    if not N <= k < H:
        raise ShapeError(
            f"need N ≤ k < H compensators for H = {H} units and a batch of N = {N}; received k = {k}. "
            + (f"The prefix of {N} tokens is longer than {k} compensators can absorb: use at least {N} "
               "compensators or a shorter prefix." if k < N else "Use fewer compensators.")
        )
    S = features.detach().to(torch.float64).cpu().numpy()
    _, _, piv = scipy.linalg.qr(S.T, pivoting=True, mode="economic")
    units = [int(i) for i in piv[:k]]
    sv = np.linalg.svd(S[units], compute_uv=False)
    cond = float(sv[0] / sv[N - 1]) if sv[N - 1] > 0 else float("inf")
    if not cond <= max_cond:
        raise ConvergenceError(
            f"the selected compensating features S_B (units {units}) have condition number "
            f"{cond:.3g} > {max_cond:.0e}; the closed-form compensation would be unstable. Use a "
            "different batch, more units, or raise max_cond knowingly."
        )
    return units, cond


def translation_element(c: Tensor) -> Tensor:
    """The unipotent matrix ``[[I, c], [0, 1]]`` of a translation ``c ∈ R^d`` (size ``d + 1``)."""
    d = c.shape[-1]
    g = torch.eye(d + 1, dtype=c.dtype, device=c.device)
    g[:d, d] = c
    return g


class CompensatingAction(ExactAction):
    """The closed-form compensating action (Corollary 4.6) of the additive group ``R^d``.

    Block (compact, see :class:`~paramsym.targets.FFNBoundaryTarget`): units ``C`` (moving, the
    target's first ``n_moving``) and ``B`` (compensators, the others) of ``F_X = U a(X)`` with unit
    features ``a_j(X) = σ(v_j x + b_j)`` or, gated, ``σ(g_j x + c_j)(v_j x + b_j)`` on the cached
    inputs ``X`` (N rows); ``S_B = a_B(X) ∈ R^{N×k}`` (rank N, so ``k ≥ N``). A translation
    ``t ∈ R^d`` moves the moving units' incoming weights and biases (and, with
    ``translate="all"``, their outgoing columns): ``θ_C' = θ_C + t``; the compensators' incoming
    weights stay; their outgoing columns absorb the change of the moving units' output on X:

        U_B' = U_B + ( F_C(θ_C) − F_C(θ_C') )ᵀ S_B⁺ᵀ,   F_C(θ_C) = a_C(X; θ_C) U_Cᵀ  (N × m),

    i.e. ``S_B ΔU_Bᵀ = F_C − F_C'`` solved with the pseudo-inverse ``S_B⁺`` (``S_B S_B⁺ = I_N``,
    the k × k system when k = N). Invariants (exact up to rounding): the boundary output on X is
    preserved (``S_B ΔU_Bᵀ + F_C' = F_C``); the group law holds, ``a(t₂, a(t₁, θ)) = a(t₁ + t₂, θ)``,
    since the corrections telescope, and ``a(−t, a(t, θ)) = θ``; outputs on other inputs change;
    a one-coordinate translation changes at most ``|C| + k`` units (one moving unit and the k
    compensators when ``|C| = 1``).

    Group: translations as unipotent ``(d+1) × (d+1)`` matrices ``[[I, t], [0, 1]]``
    (:func:`translation_element`); ``dimension = d`` = the number of translated coordinates.

    Args:
        target: an :class:`~paramsym.targets.FFNBoundaryTarget` whose block holds exactly the
            translated coordinates and the compensators' outgoing columns (its default block,
            with ``translate="incoming"``).
        translate: ``"incoming"`` (weights and biases into the moving units) or ``"all"`` (also
            their outgoing columns).
        max_cond: the largest accepted condition number of ``S_B``.

    Raises:
        ShapeError: fewer compensators than rows of X (``k < N``: the prefix is too long), no
            compensators, or a block missing coordinates.
        ConvergenceError: ``cond(S_B) > max_cond`` (the condition number is named).
        ActionError: the block holds coordinates the action leaves untouched.
    """

    kind = "compensating"

    def __init__(self, target, *, translate: str = "incoming", max_cond: float = 1e4):
        super().__init__()
        cls = "CompensatingAction"
        if translate not in ("incoming", "all"):
            raise ShapeError(f"{cls}: translate must be 'incoming' or 'all'; received {translate!r}.")
        self.target, self.translate = target, translate
        nC, s = target.n_moving, len(target.units)
        k, N = s - nC, target.h.shape[0]
        if k < N:
            raise ShapeError(f"{cls}: {k} compensators cannot absorb a change on a prefix of N = {N} rows (need k ≥ N); "
                             f"use at least {N} compensators or a prefix of at most {k} tokens.")
        S = target.features()[:, nC:].detach().to(torch.float64)
        sv = torch.linalg.svdvals(S)
        self.condition_number = float(sv[0] / sv[N - 1]) if float(sv[N - 1]) > 0 else float("inf")
        if not self.condition_number <= max_cond:
            raise ConvergenceError(
                f"{cls}: the compensators' features S_B on the prefix have condition number {self.condition_number:.3g} "
                f"> {max_cond:.0e} (singular or nearly so); the compensation would be unstable. Choose compensators with "
                "select_compensators (pivoted QR), use more compensators or a different prefix, or raise max_cond knowingly.")
        self.register_buffer("pinv", torch.linalg.pinv(S))  # (k, N): S_B⁺
        block, params = target.block, target.params
        rows = torch.arange(nC)
        self.moving_locs: list[tuple[str, object]] = []
        for name in target.incoming_names():
            shape = params[name].shape
            width = shape[1] if len(shape) == 2 else 1
            pos = (rows[:, None] * width + torch.arange(width)[None, :]).reshape(-1)
            self.moving_locs.append((name, locate(block, name, pos, cls)))
        m = params["down.weight"].shape[0]
        cols_all = torch.arange(m)[:, None] * s
        if translate == "all":
            self.moving_locs.append(("down.weight", locate(block, "down.weight", (cols_all + rows[None, :]).reshape(-1), cls)))
        self.comp_loc = locate(block, "down.weight", (cols_all + torch.arange(nC, s)[None, :]).reshape(-1), cls)
        refuse_untouched(cls, block, [loc for _, loc in self.moving_locs] + [self.comp_loc],
                         "It moves the moving units' incoming weights (and outgoing, with translate='all') and the "
                         "compensators' outgoing columns; build the target with its default block.")
        self.n_moving, self.k, self.m = nC, k, m
        self.dimension = sum(size(loc) for _, loc in self.moving_locs)
        self.size, self.p = self.dimension + 1, block.size

    def _basis(self, dtype: torch.dtype) -> Tensor:
        return translation_basis(self.dimension, dtype)

    def random_elements(self, n: int, generator: torch.Generator | None = None, rho: float = 0.5) -> Tensor:
        """``n`` translations with a uniformly random direction and length in ``[0.2ρ, ρ]``."""
        dt = self._probe.dtype
        c = torch.randn(n, self.dimension, generator=generator, dtype=torch.float64)
        r = rho * (0.2 + 0.8 * torch.rand(n, 1, generator=generator, dtype=torch.float64))
        c = (c / c.norm(dim=1, keepdim=True) * r).to(dt)
        return torch.stack([translation_element(ci) for ci in c])

    # -- the action -------------------------------------------------------------------------
    def moving_output(self, theta: Tensor, shift: Tensor | None = None) -> Tensor:
        """``F_C`` (N × m): the moving units' boundary output at θ (translated by ``shift``)."""
        t = self.target
        p = {k: v.to(theta.dtype) for k, v in t.params.items()}
        nC, off = self.n_moving, 0
        for name, loc in self.moving_locs:
            val = take(theta, loc)
            if shift is not None:
                val = val + shift[off: off + val.numel()]
            off += val.numel()
            if name == "down.weight":
                p[name] = val.reshape(self.m, nC)
            else:
                p[name] = val.reshape((nC,) + tuple(t.params[name].shape[1:]))
        if self.translate != "all":
            p["down.weight"] = p["down.weight"][:, :nC]
        A = t.features_of(p)  # moving rows only: the compact incoming tensors hold only the moving units
        return A @ p["down.weight"].T

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        """``a(t, θ)``: translate the moving coordinates by ``t = g[:d, d]``, compensate (see class docstring)."""
        c = translation_of(g).to(theta.dtype)
        delta = self.moving_output(theta) - self.moving_output(theta, c)  # (N, m)
        dU = (self.pinv.to(theta.dtype) @ delta).T  # (m, k): S_B ΔU_Bᵀ = delta
        parts, off = [], 0
        for _, loc in self.moving_locs:
            n = size(loc)
            parts.append((loc, take(theta, loc) + c[off: off + n]))
            off += n
        comp = take(theta, self.comp_loc) + dU.reshape(-1)
        parts.append((self.comp_loc, comp))
        return replace(theta, parts)

    def uncompensated(self, t: Tensor, theta: Tensor) -> Tensor:
        """θ with the moving coordinates translated by ``t`` and no compensation (the control)."""
        parts, off = [], 0
        for _, loc in self.moving_locs:
            n = size(loc)
            parts.append((loc, take(theta, loc) + t.to(theta.dtype)[off: off + n]))
            off += n
        return replace(theta, parts)

    def moving_coordinates(self, theta: Tensor) -> Tensor:
        """The translated coordinates of θ, in translation order (length ``dimension``)."""
        return torch.cat([take(theta, loc).reshape(-1) for _, loc in self.moving_locs])
