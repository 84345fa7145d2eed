"""The public test-kit ``paramsym.testing``: the same numbers as the verdict, pass for exact
symmetries, precise failures for the counterexample, the identity action and a non-invariant
translation, models given as ``nn.Module`` + block + batch, scale estimation, named errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch import nn
from toy_modules import UnusedBranch

from paramsym import verdict as V
from paramsym.actions.base import GroupAction
from paramsym.actions.catalogue import HiddenBasisAction, RescalingAction
from paramsym.actions.learned import LearnedAction
from paramsym.discovery.problems import build_problem
from paramsym.errors import (
    ActionError,
    ConfigError,
    DegenerateTargetError,
    NonFiniteError,
    ShapeError,
)
from paramsym.groups.lie import MatrixLieGroup
from paramsym.params import ParameterBlock
from paramsym.testing import ActionCheck, assert_invariant, check_action, estimate_scales

DT = torch.float64


def _shift_target(theta):
    """F(θ) = (θ0 − θ1, θ1 − θ2): constant along (1, 1, 1)."""
    return torch.stack([theta[0] - theta[1], theta[1] - theta[2]])


def _gauss_points(p):
    def sample(n, gen):
        return torch.randn(n, p, generator=gen, dtype=DT)

    return sample


@pytest.mark.parametrize("name", ["linear2x2", "relu242"])
def test_exact_actions_pass(name):
    problem = build_problem(name)
    target = problem.target
    if name == "linear2x2":
        action = HiddenBasisAction(target.block, "fc1.weight", "fc2.weight")
    else:
        action = RescalingAction(target.block, "fc1.weight", "fc2.weight")
    check = check_action(action, target, lambda n, g: problem.sample(n, g, DT), samples=64)
    assert isinstance(check, ActionCheck) and check.passed and bool(check)
    assert check.value("output") < 1e-12 and check.value("composition", 2) < 1e-12
    assert check.value("motion") > 0.05
    assert all(c["fits"] for c in check.cells)
    text = str(check)
    assert text.startswith("PASS") and "output p95" in text and "motion median" in text
    json.dumps(check.to_dict())
    assert assert_invariant(action, target, samples=64).passed  # default points: θ0


def test_check_reports_the_verdicts_numbers():
    """Same seed and sampler: every cell value equals paramsym.verdict.evaluate's (one definition
    per metric, same draws), here for an untrained learned action where all metrics are O(1)."""
    problem = build_problem("linear2x2")
    gen = torch.Generator().manual_seed(0)
    action = LearnedAction(MatrixLieGroup(2, 2, generator=gen), 8, theta_center=problem.theta_base,
                           theta_scale=0.2, out_scale=1.0, width=16, generator=gen)
    sc = problem.scales(0.3, torch.Generator().manual_seed(1))

    def points(n, g):
        return problem.sample(n, g, DT)

    check = check_action(action, problem.target, points, s_F=sc.s_F, s_theta=sc.s_theta, samples=40, seed=9)
    ref = V.evaluate(action, problem.target.to(DT), points, s_F=sc.s_F, s_theta=sc.s_theta, rhos=(0.5,),
                     factors=(1, 2), samples=40, seed=9)
    assert check.cells == ref.cells  # every key, bit for bit (one per-cell computation)
    assert check.passed == ref.fits
    for r in check.results:  # the per-metric results are the cells' values
        assert r.value == next(c for c in ref.cells if c["factors"] == r.factors)[r.key]


def test_counterexample_fails_exactly_the_action_law_metrics(actions):
    a = actions.QuadraticShift(3)
    check = check_action(a, _shift_target, _gauss_points(3), s_F=1.0, s_theta=1.0, samples=128)
    failed = {(r.name, r.factors) for r in check.failures}
    assert failed == {(m, k) for m in ("composition", "inverse", "subdivision", "transport") for k in (1, 2)}
    assert check.value("output") < 1e-13 and check.value("motion") > 0.05
    assert [c["fits"] for c in check.cells] == [False, False]  # verdict.cell_fits agrees
    # the worst composition sample is reported precisely: |2st| / (|t + t²| + |s + s²|)
    worst = next(r for r in check.results if r.name == "composition" and r.factors == 1).worst
    t, s = worst["coeffs"][0], worst["coeffs2"][0]
    assert worst["value"] == pytest.approx(abs(2 * s * t) / (abs(t + t * t) + abs(s + s * s)), rel=1e-9)
    tr = next(r for r in check.results if r.name == "transport" and r.factors == 1).worst
    assert tr["value"] == pytest.approx(2 * abs(tr["coeffs"][0]), rel=1e-9) and tr["generator"] == 0
    with pytest.raises(AssertionError) as exc:
        assert_invariant(a, _shift_target, _gauss_points(3), s_F=1.0, s_theta=1.0, samples=128)
    msg = str(exc.value)
    assert "QuadraticShift" in msg and "is not an approximate symmetry" in msg
    line = next(ln for ln in msg.splitlines() if ln.strip().startswith("composition error p95") and "(1 factor;" in ln)
    assert f"= {check.value('composition'):.3g} > tolerance 0.01" in line
    assert "worst sample #" in line and "g2 = exp(" in line
    # loosening exactly the failing tolerances makes it pass
    loose = {"composition": 10.0, "inverse": 10.0, "subdivision": 10.0, "transport": 10.0}
    assert check_action(a, _shift_target, _gauss_points(3), s_F=1.0, s_theta=1.0, samples=128, tolerances=loose).passed


def test_identity_action_fails_only_the_motion_floor(actions):
    problem = build_problem("relu242")
    exact = RescalingAction(problem.target.block, "fc1.weight", "fc2.weight")
    ident = actions.IdentityAction(exact.group, problem.target.p)
    check = check_action(ident, problem.target, samples=32)
    assert [(r.name, r.factors) for r in check.failures] == [("motion", 1)]
    assert all(r.value == 0.0 for r in check.results)
    with pytest.raises(AssertionError, match=r"motion median = 0 < tolerance 0.05 \(1 factor"):
        assert_invariant(ident, problem.target, samples=32)
    # restricting the enforced metrics is explicit
    assert_invariant(ident, problem.target, samples=32, metrics=("output", "composition"))
    with pytest.raises(ConfigError, match="unknown metric"):
        assert_invariant(ident, problem.target, samples=32, metrics=("outputs",))


def test_non_invariant_translation_fails_the_output_metric(actions):
    """θ + t z with F(θ) = (θ0 − θ1, θ1 − θ2), z = e_0: ‖F(a) − F(θ)‖ = |t|; one factor:
    |t| ~ U[0.2ρ, ρ], p95 = 0.96ρ (within 3.5%, four standard errors at 256 samples)."""
    a = actions.Translation(torch.tensor([1.0, 0.0, 0.0], dtype=DT))
    check = check_action(a, _shift_target, _gauss_points(3), s_F=1.0, s_theta=1.0, samples=256)
    assert {(r.name, r.factors) for r in check.failures} == {("output", 1), ("output", 2)}
    assert check.value("output") == pytest.approx(0.96 * 0.5, rel=0.035)
    with pytest.raises(AssertionError, match=r"output error p95 = .* > tolerance 0.001"):
        assert_invariant(a, _shift_target, _gauss_points(3), s_F=1.0, s_theta=1.0)


def _user_model(act: nn.Module) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 6, bias=False), act, nn.Linear(6, 2, bias=False))


def test_module_block_and_batch():
    X = torch.randn(10, 3, generator=torch.Generator().manual_seed(0))
    relu = _user_model(nn.ReLU())
    sel = ["0.weight", "2.weight"]
    action = RescalingAction(ParameterBlock.from_module(relu, sel), "0.weight", "2.weight")
    check = assert_invariant(action, relu, block=sel, batch=X, samples=32)
    assert check.scales_estimated == {"s_F": True, "s_theta": True}
    theta0 = torch.cat([relu[0].weight.detach().reshape(-1), relu[2].weight.detach().reshape(-1)])
    assert check.s_theta == pytest.approx(float(theta0.norm()), rel=1e-6)
    # tanh is not positively homogeneous: the same rescaling is not a symmetry
    tanh = _user_model(nn.Tanh())
    with pytest.raises(AssertionError, match="output error"):
        assert_invariant(action, tanh, block=sel, batch=X, samples=32)
    with pytest.raises(ConfigError, match="needs batch"):
        assert_invariant(action, relu, block=sel)
    with pytest.raises(ConfigError, match="needs block and batch"):
        check_action(action, relu)


def test_estimate_scales_formulas():
    problem = build_problem("relu242")
    target = problem.target.to(DT)
    pts = problem.sample(50, torch.Generator().manual_seed(0), DT)
    s_F, s_theta = estimate_scales(target, pts)
    F = np.stack([target(p).numpy() for p in pts])
    assert s_theta == pytest.approx(math.sqrt(float((pts.numpy() ** 2).sum(-1).mean())), rel=1e-12)
    assert s_F == pytest.approx(math.sqrt(float(((F - F.mean(0)) ** 2).sum(-1).mean())), rel=1e-10)
    # one point: s_F from θ0 + σε, σ = 0.05 s_θ / √p — positive and reproducible
    one = estimate_scales(target, pts[:1], generator=torch.Generator().manual_seed(3))
    again = estimate_scales(target, pts[:1], generator=torch.Generator().manual_seed(3))
    assert one == again and one[0] > 0 and one[1] == pytest.approx(float(pts[0].norm()))
    # explicit scales are used as given
    check = check_action(RescalingAction(problem.target.block, "fc1.weight", "fc2.weight"), problem.target,
                         pts, s_F=2.0, s_theta=3.0, samples=20)
    assert (check.s_F, check.s_theta) == (2.0, 3.0) and check.scales_estimated == {"s_F": False, "s_theta": False}


def test_bad_inputs_raise_named_errors(actions):
    problem = build_problem("relu242")
    target = problem.target
    exact = RescalingAction(target.block, "fc1.weight", "fc2.weight")
    with pytest.raises(ActionError, match="GroupAction"):
        check_action(lambda g, th: th, target)
    wrong = RescalingAction(ParameterBlock.from_module(_user_model(nn.ReLU()), ["0.weight", "2.weight"]), "0.weight", "2.weight")
    with pytest.raises(ShapeError, match="p = 30.*p = 16"):
        check_action(wrong, target)
    with pytest.raises(ShapeError, match=r"\(n, p\) or \(p,\) with p = 16"):
        check_action(exact, target, torch.zeros(4, 3))
    bad = target.theta0.clone()
    bad[2] = float("nan")
    with pytest.raises(NonFiniteError, match="points has 1 non-finite"):
        check_action(exact, target, bad)
    with pytest.raises(ConfigError, match="include 1"):
        check_action(exact, target, factors=(2, 4))
    with pytest.raises(ConfigError, match="samples must be an integer ≥ 20"):
        check_action(exact, target, samples=5)
    with pytest.raises(ConfigError, match="rho"):
        check_action(exact, target, rho=-1.0)
    with pytest.raises(ConfigError, match="s_F must be"):
        check_action(exact, target, s_F=0.0)
    with pytest.raises(ConfigError, match="unknown tolerance 'outptu'"):
        check_action(exact, target, tolerances={"outptu": 1.0})
    with pytest.raises(ConfigError, match="needs points"):
        check_action(actions.QuadraticShift(3), _shift_target)
    with pytest.raises(ConfigError, match="target must be"):
        check_action(exact, 3.0)
    # a block the output does not depend on (s_F = 0)
    m = UnusedBranch()
    with pytest.raises(DegenerateTargetError, match="does not depend on the parameter block"):
        check_action(_ScaleAll(4), m, block=["unused.weight"], batch=torch.ones(3, 2))
    with pytest.raises(DegenerateTargetError, match="s_θ = 0"):
        estimate_scales(_shift_target, torch.zeros(2, 3, dtype=DT))

    class NaNAction(type(actions.QuadraticShift(3))):
        def act(self, g, theta):
            return theta * torch.log(g[0, 0] - 2.0)

    with pytest.raises(NonFiniteError, match="action's output"):
        check_action(NaNAction(3), _shift_target, _gauss_points(3), s_F=1.0, s_theta=1.0, samples=20)


class _ScaleAll(GroupAction):
    """``a(g, θ) = g θ`` for the 1×1 group ``{e^t}``: scales the whole block."""

    def __init__(self, p):
        super().__init__()
        self.group = MatrixLieGroup.supplied(torch.ones(1, 1, 1))
        self.p = p

    def act(self, g, theta):
        return theta * g[0, 0].to(theta.dtype)


def test_compensation_metrics_are_added_with_unit_outputs(actions):
    a = actions.Translation(torch.tensor([1.0, -1.0, 0.0], dtype=DT))

    def unit_outputs(theta):  # moving unit reads θ0, compensator reads θ1: exact cancellation
        return {"moving": theta[..., :1], "compensators": theta[..., 1:2]}

    check = check_action(a, lambda th: (th[0] + th[1])[None], _gauss_points(3), s_F=1.0, s_theta=1.0,
                         samples=64, unit_outputs=unit_outputs)
    assert check.passed
    assert check.value("cancellation") < 1e-14 and check.value("cancellation", 2) < 1e-14
    # moving-output change |Δθ0| / s_F = |t|, |t| ~ U[0.1, 0.5] for one factor: median 0.3
    # (within 20%, about three standard errors at 64 samples)
    assert check.value("moving_output") == pytest.approx(0.3, rel=0.2)
    assert {"moving_output", "cancellation"} <= {r.name for r in check.results}
    # without unit outputs the compensation metrics are absent
    plain = check_action(a, lambda th: (th[0] + th[1])[None], _gauss_points(3), s_F=1.0, s_theta=1.0, samples=64)
    assert "cancellation" not in {r.name for r in plain.results}
