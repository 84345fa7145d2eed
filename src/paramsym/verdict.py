"""The verdict: finite-action tests of any :class:`GroupAction` on any target ([Discovery] App. D.2).

One definition per metric. For points θ ~ μ and group samples g (coefficient radius ρ, exactly
k factors), with ``Δ(θ) = a(g, θ) − θ``:

=====================  ============================================================================
output error           ``‖F(a(g,θ)) − F(θ)‖ / s_F``
composition error      ``‖a(g2 g1, θ) − a(g2, a(g1, θ))‖ / (‖a(g1,θ) − θ‖ + ‖a(g2, a(g1,θ)) − a(g1,θ)‖)``
                       (:func:`paramsym.actions.composition.composition_errors`, shared with
                       the transformer FFN-unit protocol)
inverse error          the same with ``g2 = g1⁻¹``, compared with θ
subdivision error      ``‖a(g, θ) − S(θ)‖ / ‖a(g, θ) − θ‖`` where S applies every factor
                       ``exp(t_j h_j)`` as two half steps ``exp(t_j h_j / 2)``, in path order
transport error        ``‖D_g a(g,θ)[h g] − v_h(a(g,θ))‖ / ‖v_h(a(g,θ))‖``, h a random generator
motion                 ``‖a(g,θ) − θ‖ / s_θ`` (median; the tolerance is motion ≥ 0.05, i.e. 0.05 s_θ)
moving-output change   ``‖ΔY_moving‖ / s_F`` (median; problems with per-unit outputs)
cancellation error     ``‖ΔY_comp + ΔY_moving‖ / ‖ΔY_moving‖``
=====================  ============================================================================

:data:`METRICS` is the one table of these metrics: cell key, short name, label, tolerance,
bound direction, statistic and unit; :data:`TOLERANCES` and :data:`ERROR_KEYS` are views of it.
The output scale is :func:`output_scale`, ``s_F = sqrt(E‖F − E F‖²)``, for every caller.

Errors are summarised by 95th percentiles, motion by medians. A cell *fits* when every
tolerance holds (motion only for one-factor cells); a fitted action *fits* when the cells with
one and two factors at the declared ρ (0.5 when the grid has it, else the grid's ρ nearest 0.5)
fit. Across seeds, errors are the median of the seeds' 95th percentiles and "fits" counts the
seeds that fit. The per-cell computation (:func:`draw_cell`, :func:`cell_samples`,
:func:`summarise`) is shared by :func:`evaluate` and :func:`paramsym.testing.check_action`.

All computations run in float64 on copies of the action and target. Ratios with a zero
denominator are 0 when the numerator is 0 too and ``inf`` otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import Tensor
from torch.func import vmap

from .actions.base import GroupAction, float64_copy
from .actions.composition import composition_errors, median, p95, safe_ratio
from .errors import DegenerateTargetError, ShapeError, check_finite
from .groups.lie import GroupSamples


@dataclass(frozen=True)
class Metric:
    """One verdict metric.

    Attributes:
        key: the cell key (``"output_err_p95"``), as in ``metrics.json``.
        name: the short name (``"output"``), used in messages, ``tolerances=`` and ``metrics=``.
        label: human-readable label for tables and figures.
        tolerance: the bound, or ``None`` for metrics that are reported, not judged.
        bound: ``"upper"`` (passes when value ≤ tolerance) or ``"lower"`` (value ≥ tolerance).
        statistic: ``"p95"`` or ``"median"`` over the samples of a cell.
        unit: ``""`` (a ratio), ``"s_θ"`` or ``"s_F"``.
        one_factor_only: judged on one-factor cells only (motion).
    """

    key: str
    name: str
    label: str
    tolerance: float | None
    bound: str
    statistic: str
    unit: str = ""
    one_factor_only: bool = False

    @property
    def judged(self) -> bool:
        return self.tolerance is not None

    @property
    def sign(self) -> str:
        """``"≤"`` for upper bounds, ``"≥"`` for lower bounds."""
        return "≤" if self.bound == "upper" else "≥"

    def passes(self, value: float, tolerance: float | None = None) -> bool:
        """Whether ``value`` meets ``tolerance`` (default: this metric's own); a missing or NaN value
        (``None``: stored by a diverged run) never does."""
        tol = self.tolerance if tolerance is None else tolerance
        if tol is None:
            return True
        if value is None or value != value:
            return False
        return bool(value <= tol) if self.bound == "upper" else bool(value >= tol)

    def summary(self, values: Tensor) -> float:
        """The cell statistic of per-sample ``values`` (NaN when any sample is NaN)."""
        if torch.isnan(values).any():
            return float("nan")
        return p95(values) if self.statistic == "p95" else median(values)


def _m(key: str, name: str, label: str, tol: float | None, bound: str, unit: str = "", one: bool = False) -> Metric:
    return Metric(key, name, label, tol, bound, "p95" if key.endswith("_p95") else "median", unit, one)


#: The one table of verdict metrics, by cell key (order = display order).
METRICS: dict[str, Metric] = {m.key: m for m in (
    _m("output_err_p95", "output", "output error p95", 1e-3, "upper", "s_F"),
    _m("composition_err_p95", "composition", "composition error p95", 1e-2, "upper"),
    _m("inverse_err_p95", "inverse", "inverse error p95", 1e-2, "upper"),
    _m("subdivision_err_p95", "subdivision", "subdivision error p95", 1e-2, "upper"),
    _m("transport_err_p95", "transport", "transport error p95", 2e-2, "upper"),
    _m("motion_median", "motion", "motion median (units of s_θ)", 0.05, "lower", "s_θ", one=True),
    _m("moving_output_median", "moving_output", "moving-output change median (units of s_F)", 0.005, "lower", "s_F"),
    _m("cancellation_err_p95", "cancellation", "cancellation error p95", 1e-2, "upper"),
    _m("motion_rel_median", "motion_rel", "relative motion ‖Δθ‖/‖θ‖ median", None, "lower"),
    _m("displacement_median", "displacement", "displacement ‖Δθ‖ median", None, "lower"),
)}

#: Tolerances of the judged metrics, by cell key (a view of :data:`METRICS`).
TOLERANCES: dict[str, float] = {k: m.tolerance for k, m in METRICS.items() if m.tolerance is not None}
#: Keys of the error metrics of invariance and the action law (judged upper bounds, without the
#: compensation problems' cancellation error), a view of :data:`METRICS`.
ERROR_KEYS = tuple(k for k, m in METRICS.items() if m.judged and m.bound == "upper" and k != "cancellation_err_p95")


def metric(name: str) -> Metric:
    """The metric with short name or cell key ``name``.

    Raises:
        KeyError: unknown name (the message lists the valid ones).
    """
    if name in METRICS:
        return METRICS[name]
    for m in METRICS.values():
        if m.name == name:
            return m
    raise KeyError(f"unknown metric {name!r}; valid: {[m.name for m in METRICS.values()]} or {list(METRICS)}.")


_ratio = safe_ratio


# -- the output scale (one definition) ----------------------------------------------------------

def output_scale(outputs: Tensor | Iterable[Tensor], *, what: str = "the target's output", hint: str = "") -> float:
    """``s_F = sqrt(E‖F − E F‖²)``: the centred RMS of outputs ``(n, q)`` over n parameter points.

    The one definition of the output scale in paramsym. The expectation is the mean over the
    rows; ``s_F`` measures how much the output varies over the points, the unit of every output
    error. ``outputs`` may also be an iterable of row chunks ``(n_c, q)`` (evaluated lazily
    within a memory budget, e.g. :meth:`paramsym.targets.FFNBoundaryTarget.output_chunks`): the
    chunks' means and centred sums of squares ``M2`` are merged pairwise (Chan et al.:
    ``M2 = M2_a + M2_b + ‖μ_b − μ_a‖² n_a n_b / (n_a + n_b)``), never as a difference of squares.
    One chunk is the dense formula.

    Args:
        outputs: ``(n, q)`` outputs ``F(θ_k)`` (or ``(n,)`` for scalar outputs), or chunks of rows.
        what: names the output in the error message.
        hint: what to do, appended to the error message.

    Raises:
        NonFiniteError: an output is NaN or infinite.
        DegenerateTargetError: ``s_F = 0`` or ``s_F ≤ 1e-10 ×`` the output's RMS ``sqrt(E‖F‖²)``:
            the output does not vary with the parameters.
    """
    chunks = [outputs] if isinstance(outputs, Tensor) else outputs
    n, mean, m2, sum_sq, dense = 0, None, 0.0, 0.0, None
    for chunk in chunks:
        F = chunk.detach().to(torch.float64)
        F = F.reshape(F.shape[0], -1)
        check_finite(what, F, "The model produced NaN/inf at the parameter points.")
        nb, mb = F.shape[0], F.mean(0)
        m2b = float((F - mb).pow(2).sum())
        sum_sq += float(F.pow(2).sum())
        if mean is None:
            n, mean, m2, dense = nb, mb, m2b, F
            continue
        dense = None
        delta, tot = mb - mean, n + nb
        m2 = m2 + m2b + float(delta.pow(2).sum()) * n * nb / tot
        mean, n = mean + delta * (nb / tot), tot
    if dense is not None:  # one chunk: the dense formula
        s_F = float((dense - dense.mean(0)).pow(2).sum(-1).mean().sqrt())
        rms = float(dense.pow(2).sum(-1).mean().sqrt())
    else:
        s_F, rms = (m2 / max(n, 1)) ** 0.5, (sum_sq / max(n, 1)) ** 0.5
    if not s_F > 1e-10 * rms or s_F == 0.0:
        raise DegenerateTargetError(
            f"{what} does not depend on the parameter block: its variation s_F = {s_F:.3g} (output RMS "
            f"{rms:.3g}) over {n} points. " + (hint or "Select parameters that the output uses, or pass s_F= explicitly.")
        )
    return s_F


# -- per-sample metrics (one definition each) ---------------------------------------------------

def output_errors(action: GroupAction, target: Callable[[Tensor], Tensor], theta: Tensor, g: Tensor, s_F: float) -> Tensor:
    """``‖F(a(g,θ)) − F(θ)‖ / s_F`` per sample."""
    moved = action.act_many(g, theta)
    return (vmap(target)(moved) - vmap(target)(theta)).norm(dim=-1) / s_F


def inverse_errors(action: GroupAction, theta: Tensor, g: Tensor, g_inv: Tensor) -> Tensor:
    """Relative inverse error per sample: ``a(g⁻¹, a(g, θ))`` compared with θ."""
    a1 = action.act_many(g, theta)
    back = action.act_many(g_inv, a1)
    return _ratio((back - theta).norm(dim=-1), (a1 - theta).norm(dim=-1) + (back - a1).norm(dim=-1))


def subdivision_errors(action: GroupAction, theta: Tensor, samples: GroupSamples) -> Tensor:
    """``a(g, θ)`` against applying every factor as two half steps, relative to motion."""
    group = action.group
    one = action.act_many(group.matrices(samples).to(theta.dtype), theta)
    cur = theta
    for j in range(samples.coeffs.shape[1]):
        half = group.matrices(samples.factor(j).scale(0.5)).to(theta.dtype)
        cur = action.act_many(half, action.act_many(half, cur))
    return _ratio((one - cur).norm(dim=-1), (one - theta).norm(dim=-1))


def transport_errors(action: GroupAction, theta: Tensor, g: Tensor, h: Tensor) -> Tensor:
    """``‖D_g a(g,θ)[hg] − v_h(a(g,θ))‖ / ‖v_h(a(g,θ))‖`` per sample."""
    lhs = action.transported_many(g, h, theta)
    rhs = action.field_many(h, action.act_many(g, theta))
    return _ratio((lhs - rhs).norm(dim=-1), rhs.norm(dim=-1))


def motions(action: GroupAction, theta: Tensor, g: Tensor, s_theta: float) -> Tensor:
    """``‖a(g,θ) − θ‖ / s_θ`` per sample."""
    return (action.act_many(g, theta) - theta).norm(dim=-1) / s_theta


def compensation(unit_outputs: Callable[[Tensor], dict[str, Tensor]], theta: Tensor, moved: Tensor, s_F: float) -> tuple[Tensor, Tensor]:
    """Moving-output change ``‖ΔY_moving‖/s_F`` and cancellation error per sample."""
    before, after = unit_outputs(theta), unit_outputs(moved)
    d_move = after["moving"] - before["moving"]
    d_comp = after["compensators"] - before["compensators"]
    return d_move.norm(dim=-1) / s_F, _ratio((d_move + d_comp).norm(dim=-1), d_move.norm(dim=-1))


# -- one cell: draws, per-sample values, summary (shared by evaluate and testing.check_action) ----

@dataclass
class CellDraws:
    """The random draws of one grid cell, in the order they are taken from the generator:
    points θ, elements ``g1`` and ``g2`` (samples ``s1``, ``s2``; ``g1_inv`` = ``g1⁻¹``) and the
    transport generator ``h`` (index ``which``)."""

    rho: float
    factors: int
    theta: Tensor
    s1: GroupSamples
    s2: GroupSamples
    g1: Tensor
    g2: Tensor
    g1_inv: Tensor
    which: Tensor
    h: Tensor


def draw_cell(group, sample_points: Callable[[int, torch.Generator], Tensor], samples: int, rho: float,
              factors: int, generator: torch.Generator) -> CellDraws:
    """Draw one cell: ``samples`` points, two element samples of exactly ``factors`` factors with
    radius ``rho``, and one random generator per sample (float64)."""
    theta = sample_points(samples, generator).double()
    s1 = group.sample(samples, rho, exact_factors=factors, generator=generator)
    s2 = group.sample(samples, rho, exact_factors=factors, generator=generator)
    which = torch.randint(0, group.num_generators, (samples,), generator=generator)
    return CellDraws(
        rho=float(rho), factors=int(factors), theta=theta, s1=s1, s2=s2,
        g1=group.matrices(s1).double(), g2=group.matrices(s2).double(), g1_inv=group.matrices(s1.inverse()).double(),
        which=which, h=group.generators().double()[which],
    )


def cell_samples(
    action: GroupAction,
    target: Callable[[Tensor], Tensor],
    d: CellDraws,
    *,
    s_F: float,
    s_theta: float,
    unit_outputs: Callable[[Tensor], dict[str, Tensor]] | None = None,
    validate: bool = False,
) -> dict[str, Tensor]:
    """Per-sample values of every metric of :data:`METRICS` for one cell (keys = cell keys).

    With ``validate``, ``a(g1, θ)`` is checked first (shape as θ, finite), raising
    :class:`~paramsym.errors.ShapeError` / :class:`~paramsym.errors.NonFiniteError`.
    """
    theta = d.theta
    moved = action.act_many(d.g1, theta)
    if validate:
        if tuple(moved.shape) != tuple(theta.shape):
            raise ShapeError(f"action.act_many returned shape {tuple(moved.shape)} for points of shape {tuple(theta.shape)}.")
        check_finite("the action's output a(g, θ)", moved, "The action produced NaN/inf; check act() near these points.")
    disp = (moved - theta).norm(dim=-1)
    per = {
        "output_err_p95": output_errors(action, target, theta, d.g1, s_F),
        "composition_err_p95": composition_errors(action, theta, d.g1, d.g2),
        "inverse_err_p95": inverse_errors(action, theta, d.g1, d.g1_inv),
        "subdivision_err_p95": subdivision_errors(action, theta, d.s1),
        "transport_err_p95": transport_errors(action, theta, d.g1, d.h),
        "motion_median": disp / s_theta,
        "motion_rel_median": disp / theta.norm(dim=-1),
        "displacement_median": disp,
    }
    if unit_outputs is not None:
        per["moving_output_median"], per["cancellation_err_p95"] = compensation(unit_outputs, theta, moved, s_F)
    return per


def summarise(per: Mapping[str, Tensor], rho: float, factors: int, tol: Mapping[str, float] | None = None) -> dict[str, float]:
    """The cell dict: ``rho``, ``factors``, each metric's statistic (:meth:`Metric.summary`) and
    ``fits`` (:func:`cell_fits` with tolerances ``tol``)."""
    cell: dict[str, float] = {"rho": float(rho), "factors": int(factors)}
    for key, values in per.items():
        cell[key] = METRICS[key].summary(values)
    cell["fits"] = cell_fits(cell, TOLERANCES if tol is None else tol)
    return cell


# -- the grid -------------------------------------------------------------------------------------

@dataclass
class Verdict:
    """Grid results for one fitted action (one seed). ``declared`` is the declared cell
    (its ``rho`` and ``factors`` say which); ``fits`` judges the declared ρ with 1 and 2 factors."""

    cells: list[dict[str, float]]
    tolerances: dict[str, float] = field(default_factory=lambda: dict(TOLERANCES))
    fits: bool = False
    declared: dict[str, float] = field(default_factory=dict)

    def cell(self, rho: float, factors: int) -> dict[str, float]:
        for c in self.cells:
            if abs(c["rho"] - rho) < 1e-12 and c["factors"] == factors:
                return c
        raise KeyError(f"no verdict cell for rho={rho}, factors={factors}; cells: {[(c['rho'], c['factors']) for c in self.cells]}")

    def to_dict(self) -> dict:
        return asdict(self)


def cell_fits(cell: Mapping[str, float], tol: Mapping[str, float] = TOLERANCES) -> bool:
    """Whether one grid cell meets every tolerance of :data:`METRICS` present in it (metrics
    with ``one_factor_only``, i.e. motion, only in one-factor cells)."""
    ok = True
    for key, m in METRICS.items():
        if key not in cell or key not in tol or (m.one_factor_only and cell["factors"] != 1):
            continue
        ok = ok and m.passes(cell[key], tol[key])
    return bool(ok)


def declared_cell(rhos: Sequence[float], factors: Sequence[int]) -> tuple[float, int]:
    """The default declared cell of a grid: ρ = 0.5 when the grid has it, else the grid's ρ
    nearest 0.5 (the smaller on a tie); one factor when the grid has it, else the fewest."""
    rs = sorted(float(r) for r in rhos)
    rho = min(rs, key=lambda r: (abs(r - 0.5), r))
    ks = sorted(int(k) for k in factors)
    return rho, (1 if 1 in ks else ks[0])


def evaluate(
    action: GroupAction,
    target: Callable[[Tensor], Tensor],
    sample_points: Callable[[int, torch.Generator], Tensor],
    *,
    s_F: float,
    s_theta: float,
    rhos: Sequence[float] = (0.1, 0.3, 0.5, 0.8, 1.2),
    factors: Sequence[int] = (1, 2, 4, 8),
    samples: int = 512,
    seed: int = 12345,
    unit_outputs: Callable[[Tensor], dict[str, Tensor]] | None = None,
    declared: tuple[float, int] | None = None,
    progress: bool = False,
) -> Verdict:
    """Run the finite-action test grid.

    Args:
        action: any group action (evaluated on a float64 copy).
        target: ``F(θ)`` accepting float64 θ (e.g. ``Target.to(torch.float64)``).
        sample_points: ``(n, generator) -> (n, p)`` float64 points of μ.
        s_F, s_theta: the fixed output and parameter scales.
        rhos, factors, samples: the grid and samples per cell.
        seed: seed of the evaluation generator (independent of training).
        unit_outputs: per-unit outputs for the compensation metrics (optional).
        declared: the cell reported in tables (ρ, factors); default :func:`declared_cell`.
        progress: show a progress bar over the cells.
    """
    from tqdm.auto import tqdm

    act = float64_copy(action)
    gen = torch.Generator().manual_seed(seed)
    cells = []
    grid = [(float(r), int(k)) for r in rhos for k in factors]
    with torch.no_grad():
        for rho, k in tqdm(grid, disable=not progress, desc="verdict"):
            d = draw_cell(act.group, sample_points, samples, rho, k, gen)
            per = cell_samples(act, target, d, s_F=s_F, s_theta=s_theta, unit_outputs=unit_outputs)
            cells.append(summarise(per, rho, k))
    v = Verdict(cells=cells)
    rho0, k0 = declared_cell(rhos, factors) if declared is None else (float(declared[0]), int(declared[1]))
    v.declared = v.cell(rho0, k0) if (rho0, k0) in grid else {}
    two = [(rho0, 1), (rho0, 2)]
    v.fits = all(v.cell(*rk)["fits"] for rk in two if rk in grid) and any(rk in grid for rk in two)
    return v


def combine(verdicts: Sequence[Verdict]) -> dict:
    """Across seeds: per cell, the median of the seeds' values; ``fits`` = number of seeds that fit."""
    if not verdicts:
        return {}
    cells = []
    for i, c0 in enumerate(verdicts[0].cells):
        merged = {"rho": c0["rho"], "factors": c0["factors"]}
        for key in c0:
            if key in ("rho", "factors", "fits"):
                continue
            merged[key] = float(np.median([v.cells[i][key] for v in verdicts]))
        merged["fits"] = int(sum(bool(v.cells[i]["fits"]) for v in verdicts))
        cells.append(merged)
    return {"cells": cells, "fits": int(sum(v.fits for v in verdicts)), "seeds": len(verdicts)}


# -- generated curves -----------------------------------------------------------------------------

def generated_curves(
    action: GroupAction,
    target: Callable[[Tensor], Tensor],
    sample_points: Callable[[int, torch.Generator], Tensor],
    *,
    s_F: float,
    generator_index: int = 0,
    points: int = 32,
    times: int = 61,
    tmax: float = 0.5,
    seed: int = 54321,
    calibration_t: float = 0.3,
    unit_outputs: Callable[[Tensor], dict[str, Tensor]] | None = None,
) -> dict[str, list]:
    """Output drift along ``θ(t) = a(exp(t h), θ0)`` against a matched random translation.

    For ``points`` fresh θ0 and ``times`` values of t in ``[−tmax, tmax]`` (float64):
    ``drift(t) = ‖F(θ(t)) − F(θ0)‖ / s_F``. The reference is ``θ0 + t z`` with one random
    direction z whose length makes the RMS motion at ``t = calibration_t`` equal to the action's
    RMS motion there, measured on separate validation points.

    Returns:
        JSON-able dict: ``t``, per-t median and quartiles of the learned and random drift,
        median motion, and (with ``unit_outputs``) per-unit output changes along the first curve.
    """
    act = float64_copy(action)
    gen = torch.Generator().manual_seed(seed)
    group = act.group
    ts = torch.linspace(-tmax, tmax, times, dtype=torch.float64)
    with torch.no_grad():
        val = sample_points(points, gen).double()
        g_cal = group.matrices(group.one_parameter(torch.full((points,), calibration_t), generator_index)).double()
        rms_motion = float((act.act_many(g_cal, val) - val).pow(2).sum(-1).mean().sqrt())
        z = torch.randn(val.shape[1], generator=gen, dtype=torch.float64)
        z = z / z.norm() * rms_motion / calibration_t
        theta0 = sample_points(points, gen).double()
        F0 = vmap(target)(theta0)
        g_t = group.matrices(group.one_parameter(ts, generator_index)).double()  # (T, s, s)
        T, P = len(ts), points
        th_rep = theta0.repeat(T, 1)
        g_rep = g_t.repeat_interleave(P, 0)
        curve = act.act_many(g_rep, th_rep)  # (T*P, p)
        drift = (vmap(target)(curve) - F0.repeat(T, 1)).norm(dim=-1).reshape(T, P) / s_F
        rand = th_rep + ts.repeat_interleave(P)[:, None] * z
        rdrift = (vmap(target)(rand) - F0.repeat(T, 1)).norm(dim=-1).reshape(T, P) / s_F
        motion = (curve - th_rep).norm(dim=-1).reshape(T, P)

    def q(x: Tensor, level: float) -> list[float]:
        return torch.quantile(x, level, dim=1).tolist()

    out: dict[str, list] = {
        "t": ts.tolist(),
        "learned_median": q(drift, 0.5),
        "learned_q25": q(drift, 0.25),
        "learned_q75": q(drift, 0.75),
        "random_median": q(rdrift, 0.5),
        "random_q25": q(rdrift, 0.25),
        "random_q75": q(rdrift, 0.75),
        "motion_median": q(motion, 0.5),
        "random_scale": [float(z.norm())],
    }
    if unit_outputs is not None:
        first = curve.reshape(T, P, -1)[:, 0]
        before = unit_outputs(theta0[:1])
        after = unit_outputs(first)
        out["unit_moving"] = ((after["moving"] - before["moving"]).sum(-1) / s_F).tolist()
        out["unit_compensators"] = ((after["compensators"] - before["compensators"]).sum(-1) / s_F).tolist()
    return out
