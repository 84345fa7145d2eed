"""The verdict: finite-action tests of any :class:`GroupAction` on any target (spec §5).

One definition per metric. For points θ ~ μ and group samples g (coefficient radius ρ, exactly
k factors), with ``Δ(θ) = a(g, θ) − θ``:

=====================  ============================================================================
output error           ``‖F(a(g,θ)) − F(θ)‖ / s_F``
composition error      ``‖a(g2 g1, θ) − a(g2, a(g1, θ))‖ / (‖a(g1,θ) − θ‖ + ‖a(g2, a(g1,θ)) − a(g1,θ)‖)``
inverse error          the same with ``g2 = g1⁻¹``, compared with θ
subdivision error      ``‖a(g, θ) − S(θ)‖ / ‖a(g, θ) − θ‖`` where S applies every factor
                       ``exp(t_j h_j)`` as two half steps ``exp(t_j h_j / 2)``, in path order
transport error        ``‖D_g a(g,θ)[h g] − v_h(a(g,θ))‖ / ‖v_h(a(g,θ))‖``, h a random generator
motion                 ``‖a(g,θ) − θ‖ / s_θ`` (median; the tolerance is motion ≥ 0.05, i.e. 0.05 s_θ)
moving-output change   ``‖ΔY_moving‖ / s_F`` (median; problems with per-unit outputs)
cancellation error     ``‖ΔY_comp + ΔY_moving‖ / ‖ΔY_moving‖``
=====================  ============================================================================

Errors are summarised by 95th percentiles, motion by medians. A cell *fits* when every
tolerance of :data:`TOLERANCES` holds (motion only for one-factor cells); a fitted action
*fits* when the ρ = 0.5 cells with one and two factors both fit. Across seeds, errors are the
median of the seeds' 95th percentiles and "fits" counts the seeds that fit.

All computations run in float64 on copies of the action and target. Ratios with a zero
denominator are 0 when the numerator is 0 too and ``inf`` otherwise.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import Tensor
from torch.func import vmap

from .actions.base import GroupAction
from .groups.lie import GroupSamples

#: p95 upper bounds (errors) and the median lower bound for one-factor motion (units of s_θ).
TOLERANCES: dict[str, float] = {
    "output_err_p95": 1e-3,
    "composition_err_p95": 1e-2,
    "inverse_err_p95": 1e-2,
    "subdivision_err_p95": 1e-2,
    "transport_err_p95": 2e-2,
    "motion_median": 0.05,
    "moving_output_median": 0.005,
    "cancellation_err_p95": 1e-2,
}
ERROR_KEYS = ("output_err_p95", "composition_err_p95", "inverse_err_p95", "subdivision_err_p95", "transport_err_p95")


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    out = num / den
    out = torch.where((num == 0) & (den == 0), torch.zeros_like(out), out)
    return torch.where((num != 0) & (den == 0), torch.full_like(out, float("inf")), out)


def p95(x: Tensor) -> float:
    """95th percentile (linear interpolation)."""
    return float(torch.quantile(x.double(), 0.95))


def median(x: Tensor) -> float:
    return float(torch.quantile(x.double(), 0.5))


# -- per-sample metrics (one definition each) ---------------------------------------------------

def output_errors(action: GroupAction, target: Callable[[Tensor], Tensor], theta: Tensor, g: Tensor, s_F: float) -> Tensor:
    """``‖F(a(g,θ)) − F(θ)‖ / s_F`` per sample."""
    moved = action.act_many(g, theta)
    return (vmap(target)(moved) - vmap(target)(theta)).norm(dim=-1) / s_F


def composition_errors(action: GroupAction, theta: Tensor, g1: Tensor, g2: Tensor) -> Tensor:
    """Relative composition error per sample (compared with ``a(g2 g1, θ)``)."""
    a1 = action.act_many(g1, theta)
    a21 = action.act_many(g2, a1)
    direct = action.act_many(g2 @ g1, theta)
    return _ratio((direct - a21).norm(dim=-1), (a1 - theta).norm(dim=-1) + (a21 - a1).norm(dim=-1))


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


# -- the grid -------------------------------------------------------------------------------------

@dataclass
class Verdict:
    """Grid results for one fitted action (one seed)."""

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


def cell_fits(cell: dict[str, float], tol: dict[str, float] = TOLERANCES) -> bool:
    """Whether one grid cell meets every tolerance (motion only for one-factor cells)."""
    ok = all(cell[k] <= tol[k] for k in ERROR_KEYS if k in cell)
    if cell["factors"] == 1:
        ok = ok and cell["motion_median"] >= tol["motion_median"]
    if "moving_output_median" in cell:
        ok = ok and cell["moving_output_median"] >= tol["moving_output_median"]
        ok = ok and cell["cancellation_err_p95"] <= tol["cancellation_err_p95"]
    return bool(ok)


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
    declared: tuple[float, int] = (0.5, 1),
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
        declared: the cell reported in tables (ρ, factors).
        progress: show a progress bar over the cells.
    """
    from tqdm.auto import tqdm

    act = copy.deepcopy(action).double().eval()
    gen = torch.Generator().manual_seed(seed)
    group = act.group
    cells = []
    grid = [(float(r), int(k)) for r in rhos for k in factors]
    with torch.no_grad():
        for rho, k in tqdm(grid, disable=not progress, desc="verdict"):
            theta = sample_points(samples, gen).double()
            s1 = group.sample(samples, rho, exact_factors=k, generator=gen)
            s2 = group.sample(samples, rho, exact_factors=k, generator=gen)
            g1 = group.matrices(s1).double()
            g2 = group.matrices(s2).double()
            g1_inv = group.matrices(s1.inverse()).double()
            which = torch.randint(0, group.num_generators, (samples,), generator=gen)
            h = group.generators().double()[which]
            moved = act.act_many(g1, theta)
            cell = {
                "rho": rho,
                "factors": k,
                "output_err_p95": p95(output_errors(act, target, theta, g1, s_F)),
                "composition_err_p95": p95(composition_errors(act, theta, g1, g2)),
                "inverse_err_p95": p95(inverse_errors(act, theta, g1, g1_inv)),
                "subdivision_err_p95": p95(subdivision_errors(act, theta, s1)),
                "transport_err_p95": p95(transport_errors(act, theta, g1, h)),
                "motion_median": median((moved - theta).norm(dim=-1) / s_theta),
                "motion_rel_median": median((moved - theta).norm(dim=-1) / theta.norm(dim=-1)),
                "displacement_median": median((moved - theta).norm(dim=-1)),
            }
            if unit_outputs is not None:
                mv, canc = compensation(unit_outputs, theta, moved, s_F)
                cell["moving_output_median"] = median(mv)
                cell["cancellation_err_p95"] = p95(canc)
            cell["fits"] = cell_fits(cell)
            cells.append(cell)
    v = Verdict(cells=cells)
    rho0, k0 = declared
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
    act = copy.deepcopy(action).double().eval()
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
