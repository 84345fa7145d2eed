"""The FFN-unit compensation problem on a real model — its one implementation ([Discovery] §6.3, Cor. 4.6).

Both the closed-form path (:mod:`paramsym.compensation`, ``paramsym compensate``) and the learned
path (:mod:`paramsym.discovery.transformer`, ``paramsym experiment transformer``,
``paramsym compensate --learned``) build on this module; experiments only configure and compose.

**Block extraction** (:func:`prepare`). Layer ℓ's FFN input ``h`` (N × d) is captured once on a
fixed N-token prefix; every unit's feature ``S = act(h W_upᵀ + b_up)`` (H × N) follows
(:func:`ffn_features`). The moving unit j (default: the unit of largest feature RMS on the
prefix) is fixed; the ``k ≥ N`` compensators B are chosen by pivoted QR of the other units'
features (:func:`~paramsym.actions.compensating.select_compensators`; listed in model order, so
the block's columns are those of the masked weight matrix) and refused when their features are singular (condition number > 1e4).
The block is

    θ = ( W_in[j, :], b_in[j] (and gate rows), W_out[:, B] )     (incoming part first)

and the target is the boundary output of ``{j} ∪ B`` on the prefix
(:class:`~paramsym.targets.FFNBoundaryTarget`, float64, never rerunning the model); the model
depends on θ only through it (Prop. 4.1).

**Installation** (:class:`Installer`): block values are written into one float32 copy of the
host model (its stored dtype), i.e. rounded to float32, and the last hidden state on the prefix
is read; ``drift(θ) = ‖H(θ) − H(θ0)‖ / ‖H(θ0)‖``.

**Evaluation protocol of an action** (:func:`evaluate_action`, the paper's): ``samples`` group
elements ``g = exp(t h)`` (one factor, ``|t|`` uniform in ``[0.2ρ, ρ]``) at the real weights θ0.
With ``s`` = float32 rounding (the weights as a checkpoint stores them),
``θ1 = s(a(g1, θ0))``:

* ``drift_relative``: median over elements of ``drift(θ1)``;
* ``drift_random``: the same for ``θ0 + z``, z Gaussian on the block with ``‖z‖ = ‖θ1 − θ0‖``
  (matched motion); ``drift_uncompensated``: θ1 on the incoming part only, the compensators at θ0;
* ``ratio_random`` / ``ratio_uncompensated``: median control drift over median learned drift;
* ``motion_median``: **entrywise** relative motion, the median over elements of
  ``median_i |θ1_i − θ0_i| / |θ0_i|`` (:func:`motion_entrywise`, all block entries with θ0_i ≠ 0);
* ``composition_error`` / ``composition_error_p95``: stored-weight two-step composition, the median /
  95th percentile over elements of
  ``‖s(a(g2 g1, θ0)) − s(a(g2, θ1))‖ / (‖θ1 − θ0‖ + ‖s(a(g2, θ1)) − θ1‖)`` — the second step acts on
  the float32-rounded weights θ1, as a model updated twice through its checkpoint. Computed by the
  one definition :func:`paramsym.actions.composition.composition_errors` (with ``store = s``) and
  its :func:`~paramsym.actions.composition.p95`, the same as Table 1's verdict; the paper's
  statistic is the p95 (:mod:`paramsym.paper_stats`), the median is kept as a diagnostic.

**Field magnitude** (:func:`motion_beta`): β in units of ``s_θ = ‖θ0‖`` chosen *before any
training* from the unit's own scales so that, if the learned field has the magnitude β asks for
and lies in the symmetry directions, the evaluation's median entrywise motion is
``margin × motion``: the symmetric tangents at θ0 are ``u = (δ, o)`` with ``δ`` any incoming
direction and ``o = −A_B⁺ (J_in δ)`` the compensators' least-squares response
(:func:`symmetric_tangent`); ``r`` = median over random isotropic δ (in the span of the incoming
directions the action can move in: all of them, or :func:`incoming_range` for
:func:`compensation_span_basis`) of ``median_i |u_i| / |θ0_i| · s_θ / ‖u‖`` (rule ``min``: the
smallest such ratio, over the draws and the span's singular directions); the median ``|t|`` of an
evaluation element is ``0.6 ρ``; so ``β = margin · motion / (0.6 ρ r)``.

**Coordinates** the learned action can move in: :func:`unit_span_basis` (the span of the closed-form
compensation, with two trivially symmetric families: incoming moves orthogonal to the prefix's FFN
inputs and compensator increments in the null space of their features) and
:func:`compensation_span_basis` (the same without them: every symmetric direction in it compensates).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ..errors import ConfigError, ConvergenceError, ShapeError, TooLargeError
from ..groups.memory import budget_bytes
from ..models.adapters import adapt
from ..targets import FFNBoundaryTarget, capture_inputs
from .base import float64_copy
from .compensating import select_compensators
from .composition import composition_errors, median, p95

__all__ = ["FFNUnit", "Installer", "EVAL_KEYS", "check_rho", "ffn_features", "prepare", "incoming_size",
           "last_hidden", "motion_entrywise", "uncompensated_theta", "per_unit_change", "symmetric_tangent",
           "motion_beta", "BETA_RULES", "evaluate_action", "unit_span_basis", "incoming_range",
           "compensation_span_basis"]

#: the figures of :func:`evaluate_action` (what ``--json`` prints for a learned action)
EVAL_KEYS = ("motion_median", "ratio_random", "ratio_uncompensated", "composition_error", "composition_error_p95")


@dataclass
class FFNUnit:
    """Everything fixed by the choice of model, layer, unit and prefix (see :func:`prepare`)."""

    model: nn.Module
    model_type: str
    layer: int
    unit: int
    batch: dict[str, Tensor]
    target: FFNBoundaryTarget
    compensators: list[int]
    condition_number: float
    hidden: int

    @property
    def tokens(self) -> int:
        return int(self.target.h.shape[0])


def check_rho(rho: Any, flag: str = "rho") -> float:
    """``rho`` as a finite float > 0 (a group-element radius), else a one-line :class:`ConfigError`
    (:func:`paramsym.options.float_option`)."""
    from ..options import float_option

    return float_option(rho, flag, minimum=0.0, exclusive=True)


def last_hidden(model: nn.Module, batch: Mapping[str, Tensor]) -> Tensor:
    """The model's last hidden state on ``batch`` (``last_hidden_state`` or the first output)."""
    with torch.no_grad():
        out = model(**batch)
    h = getattr(out, "last_hidden_state", None)
    return h if isinstance(h, Tensor) else out[0]


def ffn_features(model: nn.Module, batch: Mapping[str, Tensor], layer: int,
                 max_memory: int = 2 * 2**30) -> tuple[Tensor, Tensor]:
    """``(h, S)``: layer ``layer``'s FFN input ``h`` (N × d, float64) on ``batch`` and every unit's
    feature ``S`` (H × N) on it, through the model's adapter."""
    ffn = adapt(model).layers[int(layer)].ffn
    batch = dict(batch)
    h = capture_inputs(model, ffn.input_module, batch).double()
    every = FFNBoundaryTarget.from_layer(model, int(layer), list(range(ffn.hidden)), batch, inputs=h,
                                         block=["up.weight"], max_memory=max_memory)
    return h, every.features().T


def prepare(model: nn.Module, *, layer: int, unit: int | None, batch: Mapping[str, Tensor],
            compensators: int | None = None, max_cond: float = 1e4, max_memory: int = 2 * 2**30,
            name: str = "") -> FFNUnit:
    """Cache layer ``layer``'s FFN input on the prefix, choose compensators, build the boundary target.

    Args:
        model: a Hugging Face model with an adapter (:func:`~paramsym.models.adapters.adapt`).
        layer: the FFN layer ℓ.
        unit: the moving FFN unit j (``None``: the unit of largest feature RMS on the prefix).
        batch: the prefix, e.g. ``{"input_ids": ids}`` with ``ids`` of shape ``(1, N)``.
        compensators: number of compensators k (default: the number of prefix tokens N; ≥ N).
        max_cond: largest accepted condition number of the compensators' features.
        max_memory: budget in bytes for the all-units features and the target's evaluation.
        name: the target's name (default ``MODEL_TYPE:layerL:unitJ+k``).

    Raises:
        UnknownArchitectureError: no adapter for the model type.
        ShapeError: layer or unit out of range, or a prefix longer than the compensators can absorb.
        ConvergenceError: the unit's best compensators have singular (ill-conditioned) features.
        TooLargeError: the all-units features would exceed ``max_memory`` (the estimate is named).
    """
    layout = adapt(model)
    L = len(layout.layers)
    if not 0 <= int(layer) < L:
        raise ShapeError(f"--layer {layer} is out of range: the model has {L} layers (0..{L - 1}). Choose one of them.")
    ffn = layout.layers[int(layer)].ffn
    H = ffn.hidden
    if unit is not None and not 0 <= int(unit) < H:
        raise ShapeError(f"--unit {unit} is out of range: layer {layer}'s FFN has {H} units (0..{H - 1}). Choose one of them.")
    max_memory = budget_bytes(max_memory)
    need = 8 * H * (ffn.up.in_features * (2 if ffn.gate is not None else 1) + ffn.down.out_features + 64)
    if need > max_memory:
        raise TooLargeError(f"the all-units features of layer {layer} need about {need / 2**20:.0f} MiB in float64, over the "
                            f"memory budget of {max_memory / 2**20:.0f} MiB; raise max_memory.")
    batch = dict(batch)
    h, S = ffn_features(model, batch, int(layer), max_memory=max_memory)
    if unit is None:
        unit = int(S.pow(2).mean(1).argmax())
    unit = int(unit)
    N = h.shape[0]
    k = N if compensators is None else int(compensators)
    if k < N:
        raise ShapeError(f"--compensators {k} cannot absorb a change on a prefix of {N} tokens (need at least {N}); use "
                         f"--compensators {N} or more, or a prefix of at most {k} tokens.")
    if k > H - 1:
        raise ShapeError(f"--compensators {k}: layer {layer} has only {H - 1} other units; the prefix of {N} tokens is too "
                         f"long for this FFN (at most {H - 1} tokens).")
    others = [u for u in range(H) if u != unit]
    try:
        picked, cond = select_compensators(S[others], k, max_cond=max_cond)
    except ConvergenceError as exc:
        raise ConvergenceError(f"--unit {unit} of layer {layer}: no usable compensators: {exc}") from None
    comps = sorted(others[i] for i in picked)
    target = FFNBoundaryTarget.from_layer(model, int(layer), [unit] + comps, batch, inputs=h, max_memory=max_memory,
                                          name=name or f"{layout.model_type}:layer{layer}:unit{unit}+{k}")
    return FFNUnit(model, layout.model_type, int(layer), unit, batch, target, comps, float(cond), H)


def incoming_size(target: FFNBoundaryTarget) -> int:
    """How many leading block coordinates are the moving units' incoming weights and biases (and
    gate rows); the compensators' outgoing columns follow (:meth:`FFNBoundaryTarget.protocol_block`)."""
    incoming = set(target.incoming_names())
    return sum(int(e.index.numel()) for e in target.block.entries if e.name in incoming)


def motion_entrywise(theta0: Tensor, theta: Tensor) -> float:
    """Median entrywise relative motion ``median_i |θ_i − θ0_i| / |θ0_i|`` over the entries with θ0_i ≠ 0."""
    theta0, theta = theta0.double(), theta.double()
    mask = theta0 != 0
    if not bool(mask.any()):
        return 0.0
    return float(((theta - theta0).abs()[mask] / theta0.abs()[mask]).median())


def uncompensated_theta(target: FFNBoundaryTarget, theta: Tensor, theta0: Tensor | None = None) -> Tensor:
    """``θ`` on the incoming part, the compensators' outgoing columns left at θ0."""
    th0 = target.theta0 if theta0 is None else theta0
    out = th0.to(theta.dtype).clone()
    n = incoming_size(target)
    out[..., :n] = theta[..., :n]
    return out


def per_unit_change(unit: FFNUnit, edited: nn.Module) -> Tensor:
    """Relative change of every unit's weights (incoming rows, bias, gate, outgoing column) of the layer."""
    ffn = adapt(unit.model).layers[unit.layer].ffn
    orig, new = dict(unit.model.named_parameters()), dict(edited.named_parameters())
    H = ffn.hidden
    rows = torch.arange(H)
    num = torch.zeros(H, dtype=torch.float64)
    den = torch.zeros(H, dtype=torch.float64)
    projs = [("up", ffn.up), ("down", ffn.down)] + ([("gate", ffn.gate)] if ffn.gate is not None else [])
    for key, proj in projs:
        a = orig[proj.weight].detach().reshape(-1).double()
        b = new[proj.weight].detach().reshape(-1).double()
        pos = proj.column_positions(rows).T if key == "down" else proj.row_positions(rows)  # (H, ·)
        num += (b[pos] - a[pos]).pow(2).sum(1)
        den += a[pos].pow(2).sum(1)
        if key != "down" and proj.bias is not None:
            bp = proj.bias_positions(rows)
            ab = orig[proj.bias].detach().reshape(-1).double()[bp]
            num += (new[proj.bias].detach().reshape(-1).double()[bp] - ab).pow(2)
            den += ab.pow(2)
    return (num / den.clamp_min(1e-300)).sqrt()


class Installer:
    """Writes block values into one copy of the host model in its stored dtype (float32), in place and back.

    Args:
        target: the unit's :class:`~paramsym.targets.FFNBoundaryTarget` (:meth:`~FFNBoundaryTarget.write`).
        dtype: the copy's dtype (float32: the dtype checkpoints store).
        model: write into this model instead of a private copy (its own dtype; ``dtype`` ignored).
    """

    def __init__(self, target: FFNBoundaryTarget, dtype: torch.dtype = torch.float32, model: nn.Module | None = None):
        self.target = target
        self.model = model.eval() if model is not None else copy.deepcopy(target.model).to(dtype).eval()
        dtype = next(self.model.parameters()).dtype
        self.batch = target.batch
        self.theta0 = target.theta0.to(dtype).clone()
        self.h0 = self.hidden(self.theta0)

    @torch.no_grad()
    def hidden(self, theta: Tensor, batch: Mapping[str, Tensor] | None = None) -> Tensor:
        """The last hidden state (float64) with the block at ``theta`` (rounded to the copy's dtype)."""
        old = self.target.write(self.model, theta)
        try:
            return last_hidden(self.model, self.batch if batch is None else batch).double()
        finally:
            self.target.restore(self.model, old)

    def drift(self, theta: Tensor, batch: Mapping[str, Tensor] | None = None, reference: Tensor | None = None) -> float:
        """``‖H(θ) − H(θ0)‖ / ‖H(θ0)‖`` on the prefix (or on ``batch`` against its ``reference`` state)."""
        ref = self.h0 if reference is None else reference.double()
        return float((self.hidden(theta, batch) - ref).norm() / ref.norm())

    def per_unit(self, unit: FFNUnit, theta: Tensor) -> Tensor:
        """:func:`per_unit_change` of the installed model with the block at ``theta``."""
        old = self.target.write(self.model, theta)
        try:
            return per_unit_change(unit, self.model)
        finally:
            self.target.restore(self.model, old)


def unit_span_basis(target: FFNBoundaryTarget) -> Tensor:
    """Reduced coordinates of the unit's block in which the closed-form compensation moves: ``E`` (p × q, float64).

    Columns: every incoming coordinate (the moving units' incoming weights, biases and gate rows;
    identity columns), and for each compensator b and each column ``q_a`` of an orthonormal basis of the
    moving units' outgoing columns ``W_down[:, M]`` the increment ``ΔW_down[:, b] = q_a`` (all other
    entries 0). So ``q = n_in + n_moving · k`` of ``p = n_in + m · k`` (one moving unit: ``d + 1 + k``
    of ``d + 1 + d k``), the columns are orthonormal (``EᵀE = I``: the coordinates are isometric), and
    the symmetric tangents of :func:`symmetric_tangent` lie in ``range(E)``: the compensation
    ``W_B' = W_B + W_M (A_M − A_M') A_B⁺`` (Cor. 4.6) only adds outgoing increments along ``W_M``'s
    columns. The directions left out (compensators' outgoing increments orthogonal to ``W_M``) change the
    boundary output on the prefix unless they lie in the null space of ``A_B``, and are never needed.

    Raises:
        ShapeError: the moving units' outgoing columns are linearly dependent (rank < n_moving).
    """
    T = target.to(torch.float64)
    nm = int(T.n_moving)
    n_in = incoming_size(T)
    W = T.compact(T.theta0)["down.weight"]  # m × s
    m, k = int(W.shape[0]), int(W.shape[1]) - nm
    Q, R = torch.linalg.qr(W[:, :nm])
    if bool((R.diagonal().abs() <= 1e-12 * max(float(W[:, :nm].abs().max()), 1e-300)).any()):
        raise ShapeError(f"unit_span_basis: the {nm} moving units' outgoing columns are linearly dependent; "
                         "choose moving units with independent outgoing weights.")
    idx = {n: torch.full(v.shape, -1.0, dtype=torch.float64) for n, v in T.params.items()}
    idx["down.weight"][:, nm:] = torch.arange(m * k, dtype=torch.float64).reshape(m, k)
    pos = T.block.gather(idx)
    if not (bool((pos[:n_in] < 0).all()) and bool((pos[n_in:] >= 0).all())):
        raise ShapeError("unit_span_basis: the block is not the protocol block (incoming part first, then the "
                         "compensators' outgoing columns); build the target with its default block.")
    p = int(pos.numel())
    E = torch.zeros(p, n_in + nm * k, dtype=torch.float64)
    E[:n_in, :n_in] = torch.eye(n_in, dtype=torch.float64)
    flat = pos[n_in:].long()
    rows = torch.arange(n_in, p)
    i, b = flat // k, flat % k
    for a in range(nm):
        E[rows, n_in + a * k + b] = Q[i, a]
    return E


def incoming_range(target: FFNBoundaryTarget) -> Tensor:
    """The incoming directions that change the boundary output on the prefix: ``R`` (n_in × r, float64, orthonormal).

    ``R`` spans ``range(J_inᵀ)``, ``J_in = ∂F/∂θ_in`` at θ0 (the moving units' incoming weights, biases
    and gate rows). Its rank is at most ``n_moving · N`` (each moving unit's features on the N prefix
    tokens; gated units ``2 n_moving · N``); the orthogonal complement (``d + 1 − N`` of ``d + 1``
    directions for one unit) leaves every moving unit's pre-activation on the prefix unchanged, so it
    preserves the boundary output **exactly, at every order, without compensation** — a trivial symmetry of
    the prefix. Columns are the right singular vectors of ``J_in`` in decreasing singular value; the rank
    counts the singular values above ``max(shape) · eps₆₄ · σ_max`` (numpy's ``matrix_rank`` rule).
    """
    T = target.to(torch.float64)
    th0 = T.theta0
    n_in = incoming_size(T)
    eye = torch.eye(th0.numel(), dtype=torch.float64)[:n_in]
    J = torch.vmap(lambda u: torch.func.jvp(T, (th0,), (u,))[1].reshape(-1))(eye)  # n_in × out: row i = ∂F/∂θ_i
    U, S, _ = torch.linalg.svd(J, full_matrices=False)  # J's column space is range(J_inᵀ)
    tol = max(J.shape) * torch.finfo(torch.float64).eps * float(S.max())
    return U[:, : int((S > tol).sum())].contiguous()


def compensation_span_basis(target: FFNBoundaryTarget) -> Tensor:
    """Reduced coordinates spanned by the closed-form compensation of prefix-effective incoming moves: ``E`` (p × q).

    Columns: the incoming directions ``R`` of :func:`incoming_range` (zero on the outgoing part), and for
    each column ``q_a`` of an orthonormal basis of the moving units' outgoing columns ``W_down[:, M]`` and
    each column ``c_l`` of an orthonormal basis of the compensators' feature row space ``range(A_Bᵀ)``
    (``A_B``: N × k) the increment ``ΔW_down[:, B] = q_a c_lᵀ``. So ``q = r + n_moving · rank(A_B)``
    (one unit, k ≥ N: ``2N``) of ``p``; ``EᵀE = I``. For an incoming move ``δ ∈ range(R)`` the exact
    compensation ``ΔW_B = W_M (A_M − A_M') A_B⁺`` (Cor. 4.6, every order) lies in ``range(E)``, and the
    first-order symmetric tangents of such δ (:func:`symmetric_tangent`) are the only symmetric
    directions in it: the two trivial families of the unit-span coordinates (:func:`unit_span_basis`) —
    incoming moves that leave the prefix pre-activations unchanged, and compensator increments in the
    null space of ``A_B`` — are left out, so a field in these coordinates preserves the output only by
    compensating.

    Raises:
        ShapeError: as :func:`unit_span_basis`.
    """
    T = target.to(torch.float64)
    span = unit_span_basis(T)  # validates the block; p × (n_in + n_moving k)
    n_in = incoming_size(T)
    nm = int(T.n_moving)
    k = (span.shape[1] - n_in) // nm
    A = T.features()[:, nm:]  # N × k
    _, S, Vh = torch.linalg.svd(A, full_matrices=False)
    tol = max(A.shape) * torch.finfo(torch.float64).eps * float(S[0])
    C = Vh[: int((S > tol).sum())].T  # k × rank(A_B), orthonormal
    R = incoming_range(T)
    out = [torch.cat([R, torch.zeros(span.shape[0] - n_in, R.shape[1], dtype=torch.float64)])]
    for a in range(nm):
        out.append(span[:, n_in + a * k: n_in + (a + 1) * k] @ C)
    return torch.cat(out, dim=1)


def symmetric_tangent(target: FFNBoundaryTarget, incoming: Tensor) -> Tensor:
    """The block tangent ``u = (δ, o)`` at θ0 with incoming part ``δ = incoming`` that leaves the
    boundary output unchanged to first order: ``o = −A_B⁺ (J_in δ)`` (compensators' features ``A_B``,
    N × k; minimum-norm least squares, exact when ``k ≥ N`` and ``A_B`` has rank N)."""
    T = target.to(torch.float64)
    th0 = T.theta0
    n_in = incoming_size(T)
    u = torch.zeros_like(th0)
    u[:n_in] = incoming.to(torch.float64)
    _, dF = torch.func.jvp(T, (th0,), (u,))
    A = T.features()[:, T.n_moving:]  # N × k
    N = A.shape[0]
    OT = torch.linalg.pinv(A) @ dF.reshape(N, -1)  # k × m
    tangent = {k: torch.zeros_like(v) for k, v in T.params.items()}
    tangent["down.weight"][:, T.n_moving:] = -OT.T
    out = T.block.gather(tangent).clone()
    out[:n_in] = u[:n_in]
    return out


BETA_RULES = ("median", "min")


def motion_beta(target: FFNBoundaryTarget, *, motion: float, rho: float, margin: float = 2.0, draws: int = 16,
                generator: torch.Generator | None = None, incoming: Tensor | None = None, rule: str = "median"
                ) -> tuple[float, dict[str, float]]:
    """The field magnitude β (units of ``s_θ = ‖θ0‖``) for a median entrywise motion of ``margin · motion``
    at evaluation radius ``rho`` (module docstring), from the unit's scales alone (no training).

    Args:
        target: the unit's boundary target.
        motion: the median entrywise motion to reach (the paper's 0.069 %).
        rho: the evaluation radius (median ``|t|`` = 0.6 ρ).
        margin: the factor over ``motion`` aimed at.
        draws: random incoming directions δ.
        generator: draws δ (default seed 0).
        incoming: an orthonormal basis (n_in × r) of the incoming directions the action can move in
            (:func:`incoming_range` for :func:`compensation_span_basis`); ``None``: all of them.
        rule: ``"median"``: ``r`` = the median entry ratio over isotropic δ in ``incoming``'s span (protocol
            v1/v2); ``"min"``: the smallest entry ratio over those draws and over ``incoming``'s columns
            (its singular directions), so a field of the magnitude β asks for reaches the motion **in whichever
            symmetric direction of the span it lies** (protocol v3).

    Returns ``(β, {"entry_ratio": r used, "entry_ratio_median", "entry_ratio_min",
    "entry_ratio_spread": (max − min)/median of r over the draws})``.
    """
    check_rho(rho)
    if not (math.isfinite(float(motion)) and motion > 0 and margin > 0):
        raise ConfigError(f"motion and margin must be finite numbers > 0; received motion={motion!r}, margin={margin!r}.")
    if rule not in BETA_RULES:
        raise ConfigError(f"rule must be one of {list(BETA_RULES)}; received {rule!r}.")
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    th0 = target.theta0.double()
    n_in = incoming_size(target)
    if incoming is not None and (incoming.ndim != 2 or incoming.shape[0] != n_in or incoming.shape[1] < 1):
        raise ShapeError(f"incoming must be an n_in × r basis with n_in = {n_in}, r ≥ 1; received {tuple(incoming.shape)}.")
    D = None if incoming is None else incoming.to(torch.float64)
    s_theta = float(th0.norm())

    def ratio(delta: Tensor) -> float:
        u = symmetric_tangent(target, delta)
        return motion_entrywise(th0, th0 + u * (s_theta / float(u.norm())))

    rs = []
    for _ in range(int(draws)):
        xi = torch.randn(n_in if D is None else D.shape[1], generator=gen, dtype=torch.float64)
        rs.append(ratio(xi if D is None else D @ xi))
    r_med = float(np.median(rs))
    r_min = min(rs)
    if rule == "min":
        basis = D if D is not None else torch.eye(n_in, dtype=torch.float64)
        r_min = min([r_min, *(ratio(basis[:, i]) for i in range(basis.shape[1]))])
    r = r_med if rule == "median" else r_min
    beta = margin * float(motion) / (0.6 * float(rho) * r)
    return beta, {"entry_ratio": r, "entry_ratio_median": r_med, "entry_ratio_min": r_min,
                  "entry_ratio_spread": float((max(rs) - min(rs)) / r_med)}


def evaluate_action(target: FFNBoundaryTarget, action: Any, *, samples: int = 32, rho: float = 0.5,
                    generator: torch.Generator | None = None, installer: Installer | None = None,
                    elements: tuple[Tensor, Tensor] | None = None) -> dict[str, Any]:
    """The paper's whole-model protocol for any group action on the unit's block (module docstring).

    Args:
        target: the unit's boundary target (its model is the host; θ0 the real weights).
        action: a :class:`~paramsym.actions.base.GroupAction` with a ``group`` (evaluated in float64).
        samples: number of group elements (the paper's 32).
        rho: coefficient radius (one factor; the paper's 0.5).
        generator: draws the elements and the random control (default seed 2024).
        installer: a reusable :class:`Installer` of ``target`` (built when ``None``).
        elements: ``(g1, g2)`` matrices ``(samples, s, s)`` instead of drawing them.

    Returns:
        ``samples``, ``rho``, the figures of :data:`EVAL_KEYS`, ``drift_relative``,
        ``drift_random``, ``drift_uncompensated``, ``motion_norm_median``, ``motion_incoming_median``.

    Raises:
        ConfigError: ``rho`` not a finite number > 0, or ``samples`` < 1.
    """
    rho = check_rho(rho)
    if int(samples) < 1:
        raise ConfigError(f"samples must be an integer ≥ 1 (group elements of the evaluation); received {samples}.")
    inst = installer or Installer(target)
    act = float64_copy(action)
    grp = act.group
    gen = generator if generator is not None else torch.Generator().manual_seed(2024)
    n_in = incoming_size(target)
    th0 = inst.theta0.double()
    stored = inst.theta0.dtype
    with torch.no_grad():
        if elements is None:
            g1 = grp.matrices(grp.sample(samples, rho, exact_factors=1, generator=gen)).double()
            g2 = grp.matrices(grp.sample(samples, rho, exact_factors=1, generator=gen)).double()
        else:
            g1, g2 = (e.double() for e in elements)
        n = g1.shape[0]

        def store(x: Tensor) -> Tensor:  # the weights as the checkpoint stores them
            return x.to(stored).double()

        t1 = store(act.act_many(g1, th0.expand(n, -1)))
        comp = composition_errors(act, th0.expand(n, -1), g1, g2, store=store)
    rows = []
    for i in range(n):
        d = t1[i] - th0
        z = torch.randn(th0.numel(), generator=gen, dtype=torch.float64)
        z = z * d.norm() / z.norm()
        rows.append({"learned": inst.drift(t1[i]), "random": inst.drift(th0 + z),
                     "uncompensated": inst.drift(uncompensated_theta(target, t1[i], th0)),
                     "motion": motion_entrywise(th0, t1[i]), "motion_norm": float(d.norm() / th0.norm()),
                     "motion_incoming": float(d[:n_in].norm() / th0[:n_in].norm())})
    med = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
    floor = max(med["learned"], 1e-300)
    return {
        "samples": int(n), "rho": rho,
        "motion_median": med["motion"], "ratio_random": med["random"] / floor,
        "ratio_uncompensated": med["uncompensated"] / floor,
        "composition_error": median(comp), "composition_error_p95": p95(comp),
        "drift_relative": med["learned"], "drift_random": med["random"], "drift_uncompensated": med["uncompensated"],
        "motion_norm_median": med["motion_norm"], "motion_incoming_median": med["motion_incoming"],
    }
