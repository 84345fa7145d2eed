"""One metric table, one output scale, one per-cell computation, one argument order.

* ``verdict.METRICS`` is the table that the tolerances, ``cell_fits``, the test-kit's messages and
  the discovery report read (no second copy).
* ``verdict.output_scale`` is ``s_F = sqrt(E‖F − E F‖²)`` (checked against a hand computation)
  and is what the discovery problems, the test-kit and the lifting experiment use.
* ``check_action`` and ``evaluate`` give identical cells on the same inputs, also with
  compensation metrics.
* ``check_action`` and ``assert_invariant`` both take ``(action, target)``; a swap is named.
* The report follows the configured grid and its declared ρ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from paramsym import testing as T
from paramsym import verdict as V
from paramsym.actions.catalogue import RescalingAction
from paramsym.discovery.problems import build_problem
from paramsym.errors import ActionError, DegenerateTargetError, NonFiniteError
from paramsym.runs.rundir import RunDir

DT = torch.float64


def test_metric_table_is_the_single_source():
    assert T.METRICS is V.METRICS
    judged = {k: m for k, m in V.METRICS.items() if m.judged}
    assert V.TOLERANCES == {k: m.tolerance for k, m in judged.items()}
    assert V.ERROR_KEYS == ("output_err_p95", "composition_err_p95", "inverse_err_p95", "subdivision_err_p95",
                            "transport_err_p95")
    for key, m in V.METRICS.items():
        assert m.key == key and m.bound in ("upper", "lower") and m.statistic in ("p95", "median")
        assert key.endswith("_" + m.statistic) and V.metric(m.name) is m and V.metric(key) is m
    assert V.METRICS["motion_median"].one_factor_only and V.METRICS["motion_median"].unit == "s_θ"
    with pytest.raises(KeyError, match="unknown metric"):
        V.metric("outptu")
    # Metric.passes is cell_fits' rule: ≤ for upper bounds, ≥ for lower ones
    assert V.METRICS["output_err_p95"].passes(1e-3) and not V.METRICS["output_err_p95"].passes(1.01e-3)
    assert V.METRICS["motion_median"].passes(0.05) and not V.METRICS["motion_median"].passes(0.049)


def test_output_scale_formula_and_degenerate_case():
    gen = torch.Generator().manual_seed(0)
    F = torch.randn(50, 3, generator=gen, dtype=DT) * torch.tensor([1.0, 2.0, 0.5], dtype=DT) + 7.0
    x = F.numpy()
    by_hand = math.sqrt(np.mean(np.sum((x - x.mean(0)) ** 2, axis=1)))
    assert V.output_scale(F) == pytest.approx(by_hand, rel=1e-13)
    assert V.output_scale(F[:, 0]) == pytest.approx(float(np.std(x[:, 0])), rel=1e-13)  # (n,) outputs
    with pytest.raises(DegenerateTargetError, match=r"'host' does not depend on the parameter block.*pass s_F"):
        V.output_scale(torch.ones(10, 2, dtype=DT), what="'host'")
    with pytest.raises(NonFiniteError):
        V.output_scale(torch.tensor([[1.0], [float("nan")]], dtype=DT))


def test_every_s_F_is_output_scale():
    """Discovery problems, the test-kit's estimate and the lifting host scale: the same number as
    output_scale of the outputs they evaluate."""
    problem = build_problem("relu242")
    sc = problem.scales(0.3, torch.Generator().manual_seed(4), n=64)
    pts = problem.sample(64, torch.Generator().manual_seed(4), DT)
    F = torch.func.vmap(problem.target.to(DT))(pts)
    assert sc.s_F == V.output_scale(F)
    s_F, _ = T.estimate_scales(problem.target.to(DT), pts)
    assert s_F == V.output_scale(F)
    from paramsym.experiments.discovery.lifting.run import host_scale

    host = build_problem("relu2881-unit")
    gen = torch.Generator().manual_seed(5)
    Theta = host.host.to(DT).theta0 + 0.2 * torch.randn(32, host.host.p, generator=gen, dtype=DT)
    assert host_scale(host, 0.2, 5, n=32) == V.output_scale(torch.func.vmap(host.host.to(DT))(Theta))


def test_check_action_equals_evaluate_with_compensation():
    """Same inputs → identical cells, including the compensation metrics of a compensating
    problem, for an untrained LearnedAction (every metric O(1), so nothing is trivially 0)."""
    from paramsym.actions.learned import LearnedAction
    from paramsym.groups.lie import MatrixLieGroup

    problem = build_problem("sigmoid-scalar")
    gen = torch.Generator().manual_seed(0)
    action = LearnedAction(MatrixLieGroup(1, 2, generator=gen), problem.target.p, theta_center=problem.theta_base,
                           theta_scale=0.2, out_scale=1.0, width=16, generator=gen)

    def points(n, g):
        return problem.sample(n, g, DT)

    kw = dict(s_F=0.7, s_theta=1.3, samples=24, unit_outputs=problem.unit_outputs)
    check = T.check_action(action, problem.target, points, rho=0.3, factors=(1, 3), seed=2, **kw)
    ref = V.evaluate(action, problem.target.to(DT), points, rhos=(0.3,), factors=(1, 3), seed=2, **kw)
    assert check.cells == ref.cells
    assert "cancellation_err_p95" in check.cells[0] and "moving_output_median" in check.cells[1]


def test_argument_order_is_action_then_target_and_a_swap_is_named():
    problem = build_problem("relu242")
    action = RescalingAction(problem.target.block, "fc1.weight", "fc2.weight")
    assert T.check_action(action, problem.target, samples=20).passed
    assert T.assert_invariant(action, problem.target, samples=20).passed
    for fn in (T.check_action, T.assert_invariant):
        with pytest.raises(ActionError, match=rf"{fn.__name__}\(action, target, \.\.\.\) takes the action first.*Swap"):
            fn(problem.target, action, samples=20)


def _run_with_grid(tmp_path, rhos, factors, declared=None):
    problem = build_problem("relu242")
    action = RescalingAction(problem.target.block, "fc1.weight", "fc2.weight")
    sc = problem.scales(0.3, torch.Generator().manual_seed(0), n=64)
    v = V.evaluate(action, problem.target.to(DT), lambda n, g: problem.sample(n, g, DT), s_F=sc.s_F,
                   s_theta=sc.s_theta, rhos=rhos, factors=factors, samples=24, declared=declared)
    run = RunDir(tmp_path / "run")
    run.write_json("config.json", {"preset": "relu242"})
    run.write_json("metrics.json", {"preset": "relu242", "objective": "hybrid", "seed": 0, "p": 16, "q": 32,
                                    "steps": 0, "scales": {"s_F": sc.s_F, "s_theta": sc.s_theta, "beta": 0.3},
                                    "verdict": v.to_dict()})
    return v, run


@pytest.mark.parametrize("rhos, factors, rho0, text", [
    ((0.5, 1.2), (1, 2, 4), 0.5, "at ρ = 0.5 with one and two factors"),
    ((0.3, 0.8), (1, 2), 0.3, "at ρ = 0.3 with one and two factors"),  # 0.5 not in the grid: nearest
    ((0.7,), (1, 4), 0.7, "at ρ = 0.7 with one factor."),
])
def test_report_follows_the_configured_grid(tmp_path, monkeypatch, rhos, factors, rho0, text):
    from paramsym.discovery import report

    monkeypatch.setattr(report, "make_figures", lambda run: [])
    v, run = _run_with_grid(tmp_path, rhos, factors)
    assert v.declared["rho"] == rho0 and v.declared["factors"] == 1 and v.fits
    md = report.render(run)
    assert "**Verdict: fits** every tolerance " + text in md
    assert f"## Declared cell (ρ = {rho0:g}, 1 factor)" in md
    if 0.5 not in rhos:
        assert "ρ = 0.5" not in md


def test_declared_cell_rule_and_explicit_declaration(tmp_path):
    assert V.declared_cell([0.1, 0.5, 0.8], [1, 2]) == (0.5, 1)
    assert V.declared_cell([0.4, 0.6], [2, 4]) == (0.4, 2)  # tie → the smaller ρ; fewest factors
    v, _ = _run_with_grid(tmp_path, (0.3, 0.8), (1, 2), declared=(0.8, 2))
    assert (v.declared["rho"], v.declared["factors"]) == (0.8, 2)
