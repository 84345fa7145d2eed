"""The test-kit's functions; see :mod:`paramsym.testing`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import vmap

from .. import verdict as V
from ..actions.base import GroupAction, float64_copy
from ..errors import (
    ActionError,
    ConfigError,
    DegenerateTargetError,
    ShapeError,
    check_finite,
    check_seed,
)
from ..params import Selection
from ..targets import Batch, FunctionTarget, Target
from .results import (
    _JUDGED,
    _SKIPPED_DISCRETE,
    METRICS,
    ActionCheck,
    MetricResult,
)

PointSampler = Callable[[int, torch.Generator], Tensor]


def _as_target(target: Any, block: Any, batch: Any, output: Any, points: Any) -> Target:
    if isinstance(target, Target):
        if block is not None or batch is not None:
            raise ConfigError("block= and batch= are only used with an nn.Module; the Target already has its own.")
        return target
    if isinstance(target, nn.Module):
        if block is None or batch is None:
            missing = " and ".join(n for n, v in (("block", block), ("batch", batch)) if v is None)
            raise ConfigError(
                f"a torch.nn.Module needs {missing}: pass block=['layer.weight', ...] (the parameters "
                "the action transforms) and batch=X (the fixed inputs), or pass a paramsym Target."
            )
        return Target(model=target, block=block, batch=batch, output=output)
    if callable(target):
        if points is None:
            raise ConfigError(
                "a plain function F(θ) needs points: pass a tensor of parameter points (n, p) or (p,), "
                "or a sampler (n, generator) -> (n, p), so that paramsym knows the block's dimension."
            )
        # the base point: the first point, or one draw of the sampler (on a throwaway generator)
        pts = points(1, torch.Generator().manual_seed(0)) if callable(points) else torch.as_tensor(points)
        return FunctionTarget(target, pts.reshape(-1, pts.shape[-1])[0], name=getattr(target, "__name__", "function"))
    raise ConfigError(
        f"target must be a paramsym Target, a torch.nn.Module (with block= and batch=) or a function "
        f"F(θ) -> Tensor; received {type(target).__name__}."
    )


def _check_order(function: str, action: Any, target: Any) -> None:
    """Named error when the target comes first and the action second (detected by type)."""
    if isinstance(target, GroupAction) and not isinstance(action, GroupAction):
        raise ActionError(
            f"{function}(action, target, ...) takes the action first and the target second; received a "
            f"{type(action).__name__} first and the GroupAction {type(target).__name__} second. Swap them: "
            f"{function}({type(target).__name__}(...), target, ...)."
        )


def _check_action(action: Any, p: int) -> None:
    if not isinstance(action, GroupAction):
        raise ActionError(
            f"action must be a paramsym GroupAction (subclass paramsym.actions.base.GroupAction and "
            f"implement act(g, θ) with a .group and .p); received {type(action).__name__}."
        )
    if int(action.p) != p:
        raise ShapeError(f"the action acts on blocks of dimension p = {action.p}, but the target's block has p = {p}.")


def _sampler(points: Tensor | PointSampler | None, target: Target, dtype: torch.dtype) -> tuple[PointSampler, int]:
    """``(sampler, number of distinct points)``; a tensor of n points is cycled through."""
    if points is None:
        points = target.theta0
    if callable(points):
        return points, -1
    pts = torch.as_tensor(points)
    if pts.ndim == 1:
        pts = pts[None]
    if pts.ndim != 2 or pts.shape[-1] != target.p or pts.shape[0] == 0:
        raise ShapeError(
            f"points must have shape (n, p) or (p,) with p = {target.p} (the block's dimension); "
            f"received {tuple(torch.as_tensor(points).shape)}."
        )
    if not pts.is_floating_point():
        raise ShapeError(f"points must be floating point; received dtype {pts.dtype}.")
    check_finite("points", pts, "Evaluate the action only at finite parameter points.")
    pts = pts.detach().to(dtype)

    def sample(n: int, _gen: torch.Generator) -> Tensor:
        return pts[torch.arange(n) % pts.shape[0]]

    return sample, int(pts.shape[0])


def _tolerances(tolerances: Mapping[str, float] | None) -> dict[str, float]:
    tol = dict(V.TOLERANCES)
    for key, value in (tolerances or {}).items():
        full = _JUDGED[key].key if key in _JUDGED else key
        if full not in tol:
            raise ConfigError(f"unknown tolerance {key!r}; valid: {sorted(_JUDGED)} or {sorted(tol)}.")
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise ConfigError(f"tolerance {key!r} must be a finite number ≥ 0; received {value!r}.")
        tol[full] = float(value)
    return tol


def estimate_scales(
    target: Callable[[Tensor], Tensor],
    points: Tensor,
    *,
    generator: torch.Generator | None = None,
    perturb: float = 0.05,
    draws: int = 64,
) -> tuple[float, float]:
    """``(s_F, s_θ)`` from parameter points (float64).

    ``s_θ = sqrt(mean_k ‖θ_k‖²)``; ``s_F = sqrt(mean_k ‖F(θ_k) − F̄‖²)``, ``F̄ = mean_k F(θ_k)``
    (:func:`paramsym.verdict.output_scale`).
    When all points coincide (e.g. a single point), ``s_F`` is measured over ``θ_0 + σ ε_k``
    (``draws`` draws, ``ε ~ N(0, I)``, ``σ = perturb · s_θ / √p``).

    Raises:
        DegenerateTargetError: ``s_F = 0`` (relative to the output's RMS, below 1e-10): the
            output does not depend on the block; or ``s_θ = 0``.
    """
    pts = points.to(torch.float64)
    s_theta = float(pts.pow(2).sum(-1).mean().sqrt())
    if s_theta == 0.0:
        raise DegenerateTargetError(
            "every parameter point is zero, so the parameter scale s_θ = 0 and motion is undefined; "
            "pass s_theta= explicitly."
        )
    if bool((pts == pts[0]).all()):
        p = pts.shape[-1]
        gen = generator or torch.Generator().manual_seed(0)
        eps = torch.randn(draws, p, generator=gen, dtype=torch.float64)
        pts = pts[0] + perturb * s_theta / math.sqrt(p) * eps
    with torch.no_grad():
        F = vmap(target)(pts)
    return V.output_scale(F, what="the target's output F(θ)"), s_theta


# -- the check ------------------------------------------------------------------------------------

def _worst(values: Tensor, lower: bool, key: str, d: V.CellDraws) -> dict[str, Any]:
    """The worst sample of one metric: its index and value, the element ``g1`` (coefficients
    and generator indices, factor 0 first), ``g2`` for composition, the generator ``h`` for
    transport, and ``‖θ‖``."""
    v = values.detach().double()
    nan = torch.isnan(v)
    i = int(nan.nonzero()[0]) if nan.any() else int(v.argmin() if lower else v.argmax())
    if isinstance(d, _DiscreteDraws):
        return {"sample": i, "value": float(v[i]), "permutation": d.g1[i].argmax(-1).tolist(),
                "theta_norm": float(d.theta[i].norm())}
    out: dict[str, Any] = {"sample": i, "value": float(v[i]), "coeffs": [float(c) for c in d.s1.coeffs[i]],
                           "index": [int(j) for j in d.s1.index[i]], "theta_norm": float(d.theta[i].norm())}
    if key == "composition_err_p95":
        out["coeffs2"] = [float(c) for c in d.s2.coeffs[i]]
        out["index2"] = [int(j) for j in d.s2.index[i]]
    if key == "transport_err_p95":
        out["generator"] = int(d.which[i])
    return out


@dataclass
class _DiscreteDraws:
    theta: Tensor
    g1: Tensor


def _discrete_cell(act: Any, target: Callable[[Tensor], Tensor], sample_points: PointSampler, samples: int, k: int,
                   gen: torch.Generator, s_F: float, s_theta: float) -> tuple[dict[str, Tensor], _DiscreteDraws]:
    """Metrics of a discrete action (``act.order`` finite): elements are products of ``k`` draws of
    ``act.random_elements`` (permutation matrices, so ``g⁻¹ = gᵀ``); subdivision and transport
    need a Lie algebra and are skipped."""
    theta = sample_points(samples, gen).double()

    def draw() -> Tensor:
        g = act.random_elements(samples, gen).double()
        for _ in range(k - 1):
            g = act.random_elements(samples, gen).double() @ g
        return g

    g1, g2 = draw(), draw()
    disp = (act.act_many(g1, theta) - theta).norm(dim=-1)
    per = {"output_err_p95": V.output_errors(act, target, theta, g1, s_F),
           "composition_err_p95": V.composition_errors(act, theta, g1, g2),
           "inverse_err_p95": V.inverse_errors(act, theta, g1, g1.transpose(-1, -2)),
           "motion_median": disp / s_theta, "motion_rel_median": disp / theta.norm(dim=-1), "displacement_median": disp}
    return per, _DiscreteDraws(theta, g1)


def check_action(
    action: GroupAction,
    target: Target | nn.Module | Callable[[Tensor], Tensor],
    points: Tensor | PointSampler | None = None,
    *,
    block: Selection | Sequence[Selection] | None = None,
    batch: Batch | None = None,
    output: Callable[[Any], Tensor] | None = None,
    s_F: float | None = None,
    s_theta: float | None = None,
    rho: float = 0.5,
    factors: Sequence[int] = (1, 2),
    samples: int = 256,
    seed: int = 0,
    tolerances: Mapping[str, float] | None = None,
    unit_outputs: Callable[[Tensor], dict[str, Tensor]] | None = None,
) -> ActionCheck:
    """Run the verdict metrics of ``action`` on ``target`` and judge them against tolerances.

    Args:
        action: any :class:`~paramsym.actions.base.GroupAction` (evaluated on a float64 copy).
        target: a :class:`~paramsym.targets.Target`, an ``nn.Module`` (then ``block`` and
            ``batch`` are required; ``output`` optional, see :class:`~paramsym.targets.Target`),
            or a plain function ``F(θ) -> Tensor`` accepting float64 θ (then ``points`` is
            required).
        points: parameter points: a tensor ``(n, p)`` or ``(p,)`` (cycled through, ``samples``
            per cell), or a sampler ``(n, torch.Generator) -> (n, p)``; default: the target's
            current block ``θ_0``.
        s_F, s_theta: output and parameter scales; estimated from the points when ``None``
            (see :func:`estimate_scales`).
        rho: coefficient radius of the group elements (``Σ|t_j|`` uniform in ``[0.2ρ, ρ]``).
        factors: product lengths tested, one cell each; must include 1 (motion).
        samples: samples per cell (≥ 20).
        seed: seed of the check's ``torch.Generator``.
        tolerances: overrides of :data:`paramsym.verdict.TOLERANCES` (short names such as
            ``"output"`` or verdict keys such as ``"output_err_p95"``).
        unit_outputs: optional per-unit outputs for the compensation metrics (continuous actions).

    Discrete actions (``action.order`` not ``None``, e.g.
    :class:`~paramsym.actions.permutation.HiddenPermutationAction`): elements are products of
    ``k`` draws of ``action.random_elements`` (``rho`` is not used), the inverse is the transpose
    (permutation matrices), and subdivision and transport — which need a Lie algebra — are
    skipped and named in ``ActionCheck.skipped``.

    Returns:
        :class:`ActionCheck` (truthy when it passes; ``print`` it for a table).

    Raises:
        ActionError: ``action`` is not a GroupAction (or action and target are swapped).
        ShapeError: points or action of the wrong dimension.
        ConfigError: missing ``block``/``batch``/``points``, bad settings or tolerance keys.
        NonFiniteError: non-finite points, parameters, batch or action output.
        DegenerateTargetError: estimated ``s_F = 0`` (the output ignores the block).
    """
    _check_order("check_action", action, target)
    check_seed(seed)
    import numbers

    if isinstance(factors, (str, bytes)) or not all(isinstance(k, numbers.Integral) and not isinstance(k, bool)
                                                    for k in factors):
        raise ConfigError(f"factors must be a sequence of integers ≥ 1 including 1, e.g. (1, 2); received {factors!r}.")
    factors = [int(k) for k in factors]
    if 1 not in factors or any(k < 1 for k in factors):
        raise ConfigError(f"factors must be integers ≥ 1 and include 1 (motion is judged on one-factor elements); received {factors}.")
    if not (isinstance(rho, (int, float)) and math.isfinite(rho) and rho > 0):
        raise ConfigError(f"rho must be a finite number > 0; received {rho!r}.")
    if not isinstance(samples, numbers.Integral) or isinstance(samples, bool) or not 20 <= samples <= 10**7:
        raise ConfigError(f"samples must be an integer ≥ 20 (the errors are 95th percentiles) and ≤ 10**7 (samples per "
                          f"cell are held in memory); received {samples!r}.")
    for nm, val in (("s_F", s_F), ("s_theta", s_theta)):
        if val is not None and not (math.isfinite(val) and val > 0):
            raise ConfigError(f"{nm} must be a finite number > 0; received {val!r}.")
    tol = _tolerances(tolerances)
    tgt = _as_target(target, block, batch, output, points)
    _check_action(action, tgt.p)
    target64 = tgt.to(torch.float64)
    sample_points, distinct = _sampler(points, tgt, torch.float64)
    gen = torch.Generator().manual_seed(int(seed))
    estimated = {"s_F": s_F is None, "s_theta": s_theta is None}
    if s_F is None or s_theta is None:
        scale_pts = sample_points(max(distinct, 1) if distinct > 0 else 256, torch.Generator().manual_seed((int(seed) + 1) % 2**64))
        est_F, est_theta = estimate_scales(target64, scale_pts, generator=torch.Generator().manual_seed((int(seed) + 2) % 2**64))
        s_F = est_F if s_F is None else float(s_F)
        s_theta = est_theta if s_theta is None else float(s_theta)

    act = float64_copy(action)
    discrete = getattr(action, "order", None) is not None
    results: list[MetricResult] = []
    cells: list[dict[str, float]] = []
    with torch.no_grad():
        for k in factors:
            if discrete:
                per, d = _discrete_cell(act, target64, sample_points, int(samples), k, gen, s_F, s_theta)
                cell = V.summarise(per, float(rho), k, tol)  # cell_fits judges the metrics present
            else:
                d = V.draw_cell(act.group, sample_points, int(samples), float(rho), k, gen)
                per = V.cell_samples(act, target64, d, s_F=s_F, s_theta=s_theta, unit_outputs=unit_outputs, validate=True)
                cell = V.summarise(per, float(rho), k, tol)
            for key, vals in per.items():
                m = METRICS[key]
                if not m.judged:
                    continue
                lower = m.bound == "lower"
                results.append(MetricResult(
                    name=m.name, key=key, factors=k, value=cell[key], tolerance=tol[key],
                    bound=">=" if lower else "<=", enforced=(not m.one_factor_only or k == 1),
                    worst=_worst(vals, lower, key, d),
                ))
            cells.append(cell)
    return ActionCheck(
        results=results, cells=cells, tolerances=tol, s_F=float(s_F), s_theta=float(s_theta),
        scales_estimated=estimated, rho=float(rho), samples=int(samples), seed=int(seed),
        name=f"{type(action).__name__} on {tgt.name}",
        skipped=tuple(METRICS[key].name for key in _SKIPPED_DISCRETE) if discrete else (),
    )


def assert_invariant(
    action: GroupAction,
    target: Target | nn.Module | Callable[[Tensor], Tensor],
    points: Tensor | PointSampler | None = None,
    *,
    metrics: Sequence[str] | None = None,
    **kwargs: Any,
) -> ActionCheck:
    """Assert that ``action`` is an (approximate) symmetry of the target that moves parameters.

    Runs :func:`check_action` (all keyword arguments are passed on, e.g. ``block=``, ``batch=``,
    ``rho=``, ``tolerances=``) and raises ``AssertionError`` listing every failed metric with
    its value, tolerance and worst sample (the group element's coefficients and generators).

    Args:
        action: the action to test.
        target: a Target, an ``nn.Module`` (with ``block=`` and ``batch=``) or ``F(θ)``.
        points: parameter points or a sampler (default: the model's current block).
        metrics: short names of the metrics to enforce (default: all of them — invariance
            *and* the action law *and* motion). ``("output", "motion")`` checks only that the
            output is preserved and the parameters move.

    Returns:
        The :class:`ActionCheck` (when it passes).

    Raises:
        AssertionError: a failed metric (see above).
        ActionError: swapped arguments (the action comes first), or not a GroupAction.
        ConfigError: unknown metric names; and everything :func:`check_action` raises.
    """
    _check_order("assert_invariant", action, target)
    if metrics is not None:
        unknown = [m for m in metrics if m not in _JUDGED]
        if unknown:
            raise ConfigError(f"unknown metric(s) {unknown}; valid: {list(_JUDGED)}.")
    check = check_action(action, target, points, **kwargs)
    keys = None if metrics is None else {_JUDGED[m].key for m in metrics}
    failed = [r for r in check.failures if keys is None or r.key in keys]
    if failed:
        lines = [f"{check.name} is not an approximate symmetry (ρ = {check.rho}, {check.samples} samples per cell, "
                 f"seed {check.seed}, s_F = {check.s_F:.4g}, s_θ = {check.s_theta:.4g}):"]
        lines += ["  " + r.describe() for r in failed]
        raise AssertionError("\n".join(lines))
    return check


__all__ = ["ActionCheck", "MetricResult", "METRICS", "assert_invariant", "check_action", "estimate_scales"]
