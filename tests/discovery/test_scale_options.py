"""The two scale options of a discovery run (issue 17), checked against independent computations.

* ``objective.output_scale = "motion"``: ``s_F = γ β s_θ`` with ``γ`` the median Jacobian gain
  ``‖D_θF(θ0) z‖ / ‖z‖`` over Gaussian directions; for a linear target ``F(θ) = A θ`` the gain of
  each draw is ``‖A z‖ / ‖z‖`` with the dense matrix (no autodiff), and ``L_inv`` of a field
  ``v`` of magnitude ``β s_θ`` is then ``‖A v‖² / (γ ‖v‖)²`` — the squared relative
  non-invariance.
* ``action.theta_scale``: the network input divides ``θ − θ_c`` by ``max(σ, β s_θ / √p)``
  (``entry``) or ``max(σ, β s_θ)`` (``move``); ``mu`` keeps σ.
* Bad values of either option are named errors.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from paramsym.discovery import objectives as O
from paramsym.discovery.config import DiscoverConfig, DiscoverOverrides
from paramsym.discovery.problem import DiscoveryProblem
from paramsym.discovery.problems import problem_scales, scale_generator
from paramsym.discovery.train import Trainer, input_scale
from paramsym.errors import ConfigError, DegenerateTargetError
from paramsym.targets import FunctionTarget

DT = torch.float64


def _linear_problem(p: int = 6, q: int = 4, std: float = 0.01) -> tuple[DiscoveryProblem, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    A = torch.randn(q, p, generator=gen, dtype=DT)
    theta0 = torch.randn(p, generator=gen, dtype=DT)
    target = FunctionTarget(lambda th: th @ A.T.to(th.dtype), theta0, name="linear")
    return DiscoveryProblem(name="linear", description="F = A θ", target=target, perturb_std=std), A


def _cfg(**sets: object) -> DiscoverConfig:
    return DiscoverOverrides({**{"objective.beta": 0.2}, **sets}).apply(DiscoverConfig())


def test_motion_output_scale_is_the_median_gain_times_the_field_magnitude() -> None:
    problem, A = _linear_problem()
    cfg = _cfg(**{"objective.output_scale": "motion"})
    sc = problem_scales(problem, cfg)
    mu = problem_scales(problem, _cfg())
    # the same draws, by hand: the mu scales consume the generator first, then 8 Gaussian directions
    gen = scale_generator(cfg)
    ref = problem.scales(0.2, gen)
    gains = []
    for _ in range(8):
        z = torch.randn(A.shape[1], generator=gen, dtype=DT)
        gains.append(float((A @ z).norm() / z.norm()))
    gamma = float(torch.tensor(gains).median())
    assert sc.s_theta == ref.s_theta == mu.s_theta and sc.beta == 0.2
    assert sc.s_F == pytest.approx(gamma * 0.2 * ref.s_theta, rel=1e-12)
    assert mu.s_F == pytest.approx(ref.s_F, rel=1e-12) and mu.s_F != pytest.approx(sc.s_F)
    # L_inv of one field of magnitude β s_θ is its squared relative non-invariance ‖A v‖² / (γ ‖v‖)²
    v = torch.randn(1, 1, A.shape[1], generator=torch.Generator().manual_seed(9), dtype=DT)
    v = v * (sc.beta * sc.s_theta / v.norm())
    loss = O.invariance_loss(problem.target, problem.theta_base[None], v, sc)
    assert float(loss) == pytest.approx(float((A @ v[0, 0]).norm() / (gamma * v.norm())) ** 2, rel=1e-10)


def test_a_constant_target_has_no_gain() -> None:
    theta0 = torch.ones(3, dtype=DT)
    flat = DiscoveryProblem(name="flat", description="", target=FunctionTarget(lambda th: th.sum()[None] * 0, theta0),
                            perturb_std=0.1)
    with pytest.raises(DegenerateTargetError, match="Jacobian gain 0"):
        flat.jacobian_gain(torch.Generator().manual_seed(0))


@pytest.mark.parametrize("mode", ["mu", "entry", "move"])
def test_network_input_scale(mode: str) -> None:
    problem, _ = _linear_problem(std=1e-4)
    cfg = _cfg(**{"action.theta_scale": mode, "action.width": 8})
    sc = problem_scales(problem, cfg)
    want = {"mu": 1e-4, "entry": max(1e-4, 0.2 * sc.s_theta / problem.target.p ** 0.5),
            "move": max(1e-4, 0.2 * sc.s_theta)}[mode]
    assert input_scale(problem, cfg, sc) == pytest.approx(want, rel=1e-12)
    action = Trainer(problem, cfg, sc).action
    assert torch.allclose(action.theta_scale, torch.full((problem.target.p,), want, dtype=torch.float32))
    if mode != "mu":  # the orbit's scale, well above μ's here
        assert want > 100 * 1e-4
    # a wide μ keeps its own σ under every mode
    wide = dataclasses.replace(problem, perturb_std=10.0)
    assert input_scale(wide, cfg, sc) == 10.0


@pytest.mark.parametrize(("key", "value"), [("objective.output_scale", "rms"), ("action.theta_scale", "orbit")])
def test_bad_scale_options_are_named(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.split(".")[1]):
        _cfg(**{key: value}).validate()
