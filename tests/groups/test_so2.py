"""The one so(2): ``J = [[0, −1], [1, 0]]``, ``exp(tJ)`` rotates counter-clockwise.

Both callers read it: teleport's SO(2) on Booth/Rosenbrock (basis ``J/√2``) and attribution
(the paper's ``Ω = −J``). Checked against closed forms: ``exp(tJ) = [[cos t, −sin t], [sin t, cos t]]``
by ``torch.linalg.matrix_exp`` and by cos/sin written out here.
"""

from __future__ import annotations

import math

import torch

from paramsym.attribution import OMEGA, so2
from paramsym.groups.lie import rotation, so2_basis, so2_generator
from paramsym.teleport.functions import BoothRotation, RosenbrockRotation, booth, rosenbrock

F64 = torch.float64


def _closed_form(t: float) -> torch.Tensor:
    return torch.tensor([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]], dtype=F64)


def test_the_generator_and_its_convention():
    J = so2_generator()
    assert J.tolist() == [[0.0, -1.0], [1.0, 0.0]]
    for t in (0.3, -1.2, 2.5):
        torch.testing.assert_close(torch.linalg.matrix_exp(t * J), _closed_form(t), rtol=0, atol=1e-15)
        torch.testing.assert_close(rotation(t), _closed_form(t), rtol=0, atol=0)
    # counter-clockwise: e1 turns towards +e2 for a small positive angle
    e1 = torch.tensor([1.0, 0.0], dtype=F64)
    assert float((torch.linalg.matrix_exp(0.1 * J) @ e1)[1]) > 0
    basis = so2_basis()
    assert basis.shape == (1, 2, 2) and abs(float(basis.norm()) - 1.0) <= 2e-16
    torch.testing.assert_close(basis[0] * math.sqrt(2), J, rtol=0, atol=1e-15)


def test_attribution_keeps_the_papers_sign():
    """Ω = −J (App. C.1: exp(tΩ) = R_{−t}) and the quadrature points are R_{2πk/M}."""
    assert torch.equal(OMEGA, -so2_generator()) and not torch.signbit(OMEGA).logical_and(OMEGA == 0).any()
    torch.testing.assert_close(torch.linalg.matrix_exp(0.7 * OMEGA), _closed_form(-0.7), rtol=0, atol=1e-15)
    g = so2(input_dim=3, input_plane=(0, 2), n_quadrature=8)
    gen = g.tau_generators[0]
    assert gen[0, 2] == OMEGA[0, 1] == 1.0 and gen[2, 0] == OMEGA[1, 0] == -1.0 and gen[1].abs().sum() == 0
    torch.testing.assert_close(g.taus[1][[0, 2]][:, [0, 2]], _closed_form(2 * math.pi / 8), rtol=0, atol=1e-15)


def test_teleport_rotations_turn_the_chart_counter_clockwise():
    """a(exp(tJ), p) = u⁻¹(R_t u(p)): in the chart, u turns by +t, and the loss is unchanged."""
    gen = torch.Generator().manual_seed(0)
    for act, f in ((BoothRotation().double(), booth), (RosenbrockRotation().double(), rosenbrock)):
        assert torch.equal(act._basis(F64), so2_basis())
        p = torch.randn(2, generator=gen, dtype=F64)
        t = 0.4
        q = act.act(torch.linalg.matrix_exp(t * so2_generator()), p)
        u0, u1 = act.u(p), act.u(q)
        turned = math.atan2(float(u1[1]), float(u1[0])) - math.atan2(float(u0[1]), float(u0[0]))
        assert abs((turned - t + math.pi) % (2 * math.pi) - math.pi) < 1e-12
        assert abs(float(f(q) - f(p))) <= 1e-12 * float(f(p)) and float((q - p).norm()) > 1e-3
