"""The discovery losses ([Discovery] §5.1–5.2) against closed forms.

* Exact actions (GL(2) hidden-basis change on ``linear2x2``, positive rescaling on ``relu242``):
  invariance, transport, composition and preservation are zero to float64 rounding.
* The counterexample ``a(t, θ) = θ + t + t²``: invariance and preservation vanish for a target
  constant along ``1``, but composition is ``mean ‖2 s t 1‖² / (s_θβ)²`` and transport
  ``mean ‖2 t 1‖² / (s_θβ)²``.
* A translation ``θ + t z``: an exact action (composition and transport vanish) that is not
  invariant: ``L_inv = ‖DF z‖² / s_F²`` and ``L_pres = mean t² ‖DF z‖² / s_F²`` for linear F.
* Regularisers on fields with known magnitudes and angles.
"""

from __future__ import annotations

import math

import pytest
import torch

from paramsym.actions.catalogue import HiddenBasisAction, RescalingAction
from paramsym.discovery import objectives as O
from paramsym.discovery.problems import build_problem
from paramsym.groups.lie import MatrixLieGroup

DT = torch.float64
# squared residuals of O(1) quantities in float64: rounding is ~1e-32; anything above 1e-24
# would be a real defect (the counterexamples below are O(1e-3) or larger)
ROUNDING = 1e-24


def _exact(name: str):
    problem = build_problem(name)
    target = problem.target.to(DT)
    if name == "linear2x2":
        action = HiddenBasisAction(target.block, earlier="fc1.weight", later="fc2.weight").double()
    else:
        action = RescalingAction(target.block, earlier="fc1.weight", later="fc2.weight").double()
    return problem, target, action


@pytest.mark.parametrize("name", ["linear2x2", "relu242"])
def test_every_loss_vanishes_for_an_exact_action(name):
    problem, target, action = _exact(name)
    gen = torch.Generator().manual_seed(3)
    scales = problem.scales(0.3, torch.Generator().manual_seed(1))
    theta = problem.sample(32, gen, DT)
    group = action.group
    g1 = group.matrices(group.sample(32, 0.8, 3, generator=gen)).double()
    g2 = group.matrices(group.sample(32, 0.8, 3, generator=gen)).double()
    h = group.generators().double()[torch.randint(0, group.num_generators, (32,), generator=gen)]
    # the losses would be large for a non-symmetry of this size: the elements really move θ
    assert float((action.act_many(g1, theta) - theta).norm(dim=-1).median()) > 0.05 * scales.s_theta
    assert float(O.invariance(action, target, theta, scales)) < ROUNDING
    assert float(O.transport(action, theta, g1, h, scales)) < ROUNDING
    assert float(O.composition(action, theta, g1, g2, scales)) < ROUNDING
    # inverse pairs too (a quarter of the training pairs)
    g1_inv = torch.linalg.inv(g1)
    assert float(O.composition(action, theta, g1, g1_inv, scales)) < ROUNDING
    assert float(O.preservation(action, target, theta, g1, scales)) < ROUNDING


def test_rescaling_fields_have_zero_diversity_penalty():
    """Rescalings of different units have disjoint supports: ⟨v_i, v_j⟩ = 0 exactly."""
    problem, target, action = _exact("relu242")
    theta = problem.sample(16, torch.Generator().manual_seed(0), DT)
    fields = action.fields_all(theta)
    assert fields.shape == (16, 4, target.p)
    assert float(O.diversity_penalty(fields)) == 0.0


def _line_samples(t):
    t = torch.as_tensor(t, dtype=DT)
    return torch.exp(t).reshape(-1, 1, 1)


def _shift_target(theta):
    """F(θ) = (θ0 − θ1, θ1 − θ2): constant along (1, 1, 1)."""
    return torch.stack([theta[0] - theta[1], theta[1] - theta[2]])


def test_counterexample_composition_and_transport_in_closed_form(actions):
    action = actions.QuadraticShift(3)
    scales = O.Scales(s_F=0.7, s_theta=1.3, beta=0.4)
    t = torch.tensor([0.3, -0.2, 0.45, -0.05, 0.1], dtype=DT)
    s = torch.tensor([-0.25, 0.4, 0.15, -0.35, 0.2], dtype=DT)
    theta = torch.randn(5, 3, generator=torch.Generator().manual_seed(0), dtype=DT)
    g1, g2 = _line_samples(t), _line_samples(s)
    p, m2 = 3, scales.motion**2
    comp = float(O.composition(action, theta, g1, g2, scales))
    assert comp == pytest.approx(float((4 * s**2 * t**2 * p).mean()) / m2, rel=1e-9)
    assert comp > 1e-3
    h = torch.ones(5, 1, 1, dtype=DT)
    trans = float(O.transport(action, theta, g1, h, scales))
    assert trans == pytest.approx(float((4 * t**2 * p).mean()) / m2, rel=1e-9)
    # identity exact and the generator compatible: the target constant along 1 is invariant
    assert float(O.invariance(action, _shift_target, theta, scales)) < ROUNDING
    assert float(O.preservation(action, _shift_target, theta, g1, scales)) < ROUNDING


def test_translation_is_an_action_but_not_invariant(actions):
    z = torch.tensor([1.0, 0.0, 0.0], dtype=DT)
    action = actions.Translation(z)
    scales = O.Scales(s_F=0.5, s_theta=2.0, beta=0.3)
    t = torch.tensor([0.3, -0.2, 0.45, -0.05], dtype=DT)
    s = torch.tensor([-0.25, 0.4, 0.15, 0.2], dtype=DT)
    theta = torch.randn(4, 3, generator=torch.Generator().manual_seed(1), dtype=DT)
    g1, g2 = _line_samples(t), _line_samples(s)
    # DF z = (1, 0) for F = (θ0 − θ1, θ1 − θ2), and the field is v = z
    assert float(O.invariance(action, _shift_target, theta, scales)) == pytest.approx(1.0 / 0.5**2, rel=1e-12)
    assert float(O.preservation(action, _shift_target, theta, g1, scales)) == pytest.approx(
        float((t**2).mean()) / 0.5**2, rel=1e-9
    )
    assert float(O.composition(action, theta, g1, g2, scales)) < ROUNDING
    h = torch.ones(4, 1, 1, dtype=DT)
    assert float(O.transport(action, theta, g1, h, scales)) < ROUNDING


def test_output_directional_matches_central_differences():
    problem = build_problem("relu242")
    target = problem.target.to(DT)
    gen = torch.Generator().manual_seed(2)
    theta = problem.sample(4, gen, DT)
    v = torch.randn(4, target.p, generator=gen, dtype=DT)
    eps = 1e-6
    fd = torch.stack([(target(th + eps * vv) - target(th - eps * vv)) / (2 * eps) for th, vv in zip(theta, v)])
    jvp = O.output_directional(target, theta, v)
    assert torch.allclose(jvp, fd, rtol=1e-6, atol=1e-8)


def test_scale_penalty_closed_form_and_zero_at_matching_beta(actions):
    # constant fields v_i = c_i e_i: E‖v_i/s_θ‖² = c_i² / s_θ²
    c = torch.tensor([1.0, 2.0, 0.5], dtype=DT)
    fields = (torch.eye(3, dtype=DT) * c[:, None]).expand(7, 3, 3)
    sc = O.Scales(s_F=1.0, s_theta=2.0, beta=0.5)
    m = c**2 / 4.0
    expected = float((((m - 0.25) / 0.25) ** 2).mean())  # = mean((0, 3, -0.75)²)
    assert expected == pytest.approx((0 + 9 + 0.5625) / 3)
    assert float(O.scale_penalty(fields, sc)) == pytest.approx(expected, rel=1e-14)
    # rotation field on R²: h = J/√2 (Frobenius-normalised), ‖hθ‖ = ‖θ‖/√2, so with
    # s_θ² = E‖θ‖² the mean squared field is exactly 1/2: β = 1/√2 gives zero penalty
    J = torch.tensor([[[0.0, -1.0], [1.0, 0.0]]], dtype=DT)
    rot = actions.LinearAction(MatrixLieGroup.supplied(J))
    theta = torch.randn(64, 2, generator=torch.Generator().manual_seed(0), dtype=DT)
    s_theta = float(theta.pow(2).sum(-1).mean().sqrt())
    f = rot.fields_all(theta)
    assert float(O.scale_penalty(f, O.Scales(1.0, s_theta, 1 / math.sqrt(2)))) < 1e-28
    assert float(O.scale_penalty(f, O.Scales(1.0, s_theta, 1.0))) == pytest.approx(0.25, rel=1e-12)


def test_diversity_penalty_duplicates_opposites_and_angles():
    e1 = torch.tensor([1.0, 0.0, 0.0], dtype=DT)
    e2 = torch.tensor([0.0, 1.0, 0.0], dtype=DT)
    n = 5

    def fields(*vs):
        return torch.stack(vs).expand(n, len(vs), 3)

    assert float(O.diversity_penalty(fields(e1, e2))) == 0.0
    # a duplicate and an opposite field: all three pairwise squared cosines are 1 → 3·2 = 6
    assert float(O.diversity_penalty(fields(e1, e1, -e1))) == pytest.approx(6.0, rel=1e-14)
    # 45°: cos² = 1/2, counted for (1, 2) and (2, 1)
    assert float(O.diversity_penalty(fields(e1, (e1 + e2) / math.sqrt(2)))) == pytest.approx(1.0, rel=1e-14)
    # one generator: nothing to compare
    assert float(O.diversity_penalty(fields(e1))) == 0.0
    # uncentered: two fields that are orthogonal on average but correlated pointwise sign-flip
    v = torch.stack([torch.stack([e1, e1]), torch.stack([e1, -e1])])  # (2 points, 2 fields, 3)
    assert float(O.diversity_penalty(v)) == 0.0


def test_sparsity_penalty_is_mean_absolute_entry():
    gens = torch.tensor([[[3.0, -4.0], [0.0, 0.0]]], dtype=DT) / 5.0
    assert float(O.sparsity_penalty(gens)) == pytest.approx((3 + 4) / 5 / 4)
