"""Discovery on a pretrained transformer's FFN subnetwork ([Discovery] §6.3).

The problem: a fixed ``N``-token prefix X, FFN layer ℓ of a BERT-type encoder
(``intermediate.dense → GELU → output.dense``), one *moving* unit ``j`` and ``k ≥ N``
*compensating* units ``B`` chosen by pivoted QR of the prefix features
(:func:`paramsym.actions.compensating.select_compensators`, unit ``j`` excluded, model order). The
unit, compensators, block and target come from the one FFN-unit module
:mod:`paramsym.actions.ffn_unit` (:func:`~paramsym.actions.ffn_unit.prepare`); this module adds
the discovery problem (μ anchored at the real weights). The block is

    θ = ( W_in[j, :], b_in[j], W_out[:, B] )          (p = d + 1 + d·k)

and the target is the subnetwork's boundary output on the prefix (Proposition 4.1),

    F_X(θ) = vec( GELU(h W_in[{j} ∪ B]ᵀ + b_in[{j} ∪ B]) W_out[:, {j} ∪ B]ᵀ ),

computed from the FFN input ``h`` captured once (:class:`paramsym.targets.FFNBoundaryTarget`, the
one implementation of the boundary target at real scale), not by rerunning the model. Since the
block lies inside these units' weights, preserving F_X preserves the whole model's output on X. A known symmetry exists: translate unit j's incoming
weights and set ``U_B' = U_B + u_j (σ_j − σ_j') S_B⁺`` (Corollary 4.6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..actions import ffn_unit
from ..actions.ffn_unit import incoming_size
from ..errors import ConfigError, ShapeError
from ..models.adapters import require_eager
from ..models.loading import load_minilm
from ..targets import FFNBoundaryTarget
from .problem import DiscoveryProblem

#: share of μ's points at the real weights θ0 (:class:`AnchoredProblem`)
ANCHOR = 0.9

@dataclass
class AnchoredProblem(DiscoveryProblem):
    """A discovery problem whose μ keeps a share of its points at the real weights θ0.

    ``μ = anchor · δ_{θ0} + (1 − anchor) · N(θ0, σ² I)``. A pretrained model's symmetry is wanted
    *at its weights*: with a Gaussian μ alone the network only ever sees points on a shell of
    radius ``σ √p`` around θ0 (``√p ≈ 80`` normalised units for p = 6,529) and must extrapolate to
    θ0 itself, where the edits are made; the anchored points train the field there too (and the
    transformed points ``a(g, θ0)`` of a batch then trace the orbit through θ0).
    """

    anchor: float = 0.5

    def sample(self, n: int, generator: torch.Generator, dtype: torch.dtype | None = None) -> Tensor:
        """``n`` points: each is θ0 with probability ``anchor``, else ``θ0 + σ ε`` (one draw of ε per point)."""
        base = self.theta_base
        eps = torch.randn(n, base.numel(), generator=generator, dtype=torch.float64)
        keep = (torch.rand(n, 1, generator=generator, dtype=torch.float64) >= self.anchor).to(torch.float64)
        return (base.to(torch.float64) + self.perturb_std * keep * eps).to(dtype or base.dtype).to(base.device)


DEFAULT_TEXT = (
    "The quick brown fox jumps over the lazy dog while the committee reviews the annual budget "
    "report and discusses several new proposals for the public library."
)


def prefix_ids(tokenizer: Any, tokens: int, text: str = DEFAULT_TEXT) -> Tensor:
    """The first ``tokens`` token ids of ``text`` (``[CLS]`` included) as a ``(1, tokens)`` tensor.

    Raises:
        ShapeError: ``text`` has fewer tokens.
    """
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=True)["input_ids"]
    if ids.shape[1] < tokens:
        n = int(ids.shape[1])
        fix = (f"use at most {n} tokens (the built-in prefix text has no more)" if text == DEFAULT_TEXT
               else f"give a longer text or at most {n} tokens")
        raise ShapeError(f"the prefix text has {n} tokens; need at least tokens = {tokens}: {fix}.")
    return ids[:, :tokens]


def ffn_features(model: nn.Module, input_ids: Tensor, layer: int) -> tuple[Tensor, Tensor]:
    """``(h, S)``: the FFN input ``h`` (N × d, float64) of ``layer`` on the prefix and every unit's
    feature ``S = act(h W_upᵀ + b_up)`` (H × N) (:func:`paramsym.actions.ffn_unit.ffn_features`)."""
    return ffn_unit.ffn_features(model, {"input_ids": input_ids}, layer)


def boundary_problem(target: FFNBoundaryTarget, *, perturb_rel: float = 0.005, anchor: float = ANCHOR,
                     name: str = "ffn-unit", description: str = "", info: dict[str, Any] | None = None) -> AnchoredProblem:
    """The discovery problem of an :class:`~paramsym.targets.FFNBoundaryTarget` (protocol block).

    μ: θ0 with probability ``anchor``, else ``θ0 + σ ε``, ``ε ~ N(0, I)``, ``σ = perturb_rel ·
    RMS(θ0)`` (:class:`AnchoredProblem`). ``unit_outputs(θ)`` splits the
    boundary output into the moving units' part ``A_M W_Mᵀ`` and the compensators' ``A_B W_Bᵀ``
    (token-major, as ``F``), for the verdict's cancellation measure.
    """
    if not perturb_rel > 0:
        raise ConfigError(f"perturb_rel must be > 0; received {perturb_rel}.")
    if not 0 <= anchor < 1:
        raise ConfigError(f"anchor must lie in [0, 1); received {anchor}.")
    nm = target.n_moving
    theta0 = target.theta0
    std = float(perturb_rel * theta0.double().pow(2).mean().sqrt())

    def split(theta: Tensor) -> tuple[Tensor, Tensor]:
        c = target.to(theta.dtype).compact(theta) if theta.dtype != target.dtype else target.compact(theta)
        A, W = target.features_of(c), c["down.weight"]
        return (A[:, :nm] @ W[:, :nm].T).reshape(-1), (A[:, nm:] @ W[:, nm:].T).reshape(-1)

    def unit_outputs(theta: Tensor) -> dict[str, Tensor]:
        flat = theta.reshape(-1, theta.shape[-1])
        mov, comp = torch.func.vmap(split)(flat)
        return {"moving": mov.reshape(*theta.shape[:-1], -1), "compensators": comp.reshape(*theta.shape[:-1], -1)}

    return AnchoredProblem(name=name, description=description or repr(target), target=target, perturb_std=std,
                           unit_outputs=unit_outputs, info=dict(info or {}), anchor=float(anchor))


def ffn_unit_problem(
    model: nn.Module,
    input_ids: Tensor,
    *,
    layer: int,
    unit: int | None = None,
    compensators: int | None = None,
    perturb_rel: float = 0.005,
    anchor: float = ANCHOR,
    name: str = "minilm-ffn-unit",
) -> AnchoredProblem:
    """The FFN-unit compensation problem on a Hugging Face model with an adapter (see module docstring).

    Args:
        model: a ``transformers`` model known to :func:`paramsym.models.adapters.adapt` (BERT such
            as all-MiniLM-L6-v2, GPT-2, GPT-NeoX, Llama); switched to eager attention on a copy.
        input_ids: ``(1, N)`` prefix token ids.
        layer: FFN layer ℓ.
        unit: the moving unit j (default: the unit with the largest feature RMS on the prefix).
        compensators: k (default N).
        perturb_rel: σ of μ in units of the block's RMS entry.
        anchor: share of μ's points at θ0 (:class:`AnchoredProblem`).
        name: the problem's name.

    Raises:
        ShapeError: layer/unit out of range, or k outside ``N ≤ k < H``.
        ConvergenceError: the compensating features are too ill-conditioned (> 1e4).
        UnknownArchitectureError: no adapter for the model type.
    """
    import copy

    if input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ShapeError(f"input_ids must have shape (1, N); received {tuple(input_ids.shape)}.")
    model = require_eager(copy.deepcopy(model)).eval()
    u = ffn_unit.prepare(model, layer=layer, unit=unit, batch={"input_ids": input_ids}, compensators=compensators)
    u.target.name = f"{name}:L{u.layer}u{u.unit}"
    h = u.target.h
    N, k = u.tokens, len(u.compensators)
    return boundary_problem(
        u.target, perturb_rel=perturb_rel, anchor=anchor, name=name,
        description=f"{type(model).__name__} FFN layer {u.layer}: moving unit {u.unit} (incoming weights + bias) and "
        f"{k} compensators' outgoing weights (pivoted QR, cond {u.condition_number:.3g}); boundary output on a "
        f"{N}-token prefix",
        info={"layer": u.layer, "unit": u.unit, "compensators": u.compensators, "feature_condition": u.condition_number,
              "tokens": N, "d_model": h.shape[1], "ffn_width": u.hidden})


def minilm_ffn_unit(seed: int = 0, *, layer: int = 3, unit: int | None = None, tokens: int = 16,
                    compensators: int | None = None, text: str = DEFAULT_TEXT) -> DiscoveryProblem:
    """The preset ``minilm-ffn-unit``: :func:`ffn_unit_problem` on the real all-MiniLM-L6-v2.

    ``seed`` is accepted for the preset signature; the problem is deterministic.
    """
    model, tok = load_minilm()
    return ffn_unit_problem(model, prefix_ids(tok, tokens, text), layer=layer, unit=unit, compensators=compensators)


def block_layout(problem: DiscoveryProblem) -> dict[str, int]:
    """``{"incoming": n, "outgoing": n}``: sizes of the two parts of the block (incoming first)."""
    n = incoming_size(problem.target)
    return {"incoming": n, "outgoing": problem.target.p - n}
