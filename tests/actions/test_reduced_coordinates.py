"""Reduced coordinates of the learned action (``basis = E``) and the FFN unit-span basis.

References are independent of the code under test: the conjugation ``θ + E(a_z(g, Eᵀθ) − Eᵀθ)``
written out with a second action on ``R^q`` that shares the network, the generic ``vmap``/``jvp``
training quantities, dense float64 linear algebra (``EᵀE``, projections, the closed-form
compensation of Cor. 4.6 written with a pseudo-inverse), and the boundary output recomputed.
"""

from __future__ import annotations

import pytest
import torch
from tiny_hf import tiny_bert, tiny_ids

from paramsym.actions.ffn_unit import incoming_size, symmetric_tangent, unit_span_basis
from paramsym.actions.learned import LearnedAction
from paramsym.config import apply_overrides
from paramsym.discovery import objectives as O
from paramsym.discovery.config import DiscoverConfig
from paramsym.discovery.problems import action_basis, build_problem
from paramsym.discovery.train import Trainer
from paramsym.errors import ConfigError
from paramsym.groups.lie import MatrixLieGroup

P, Q = 12, 5


def _basis(p: int = P, q: int = Q, seed: int = 0, selection: bool = False) -> torch.Tensor:
    """Orthonormal columns: dense (QR of a Gaussian), or a *selection* basis with one nonzero per
    row (rows grouped into q columns of signed entries ±1/√|group|, two rows left out)."""
    g = torch.Generator().manual_seed(seed)
    if not selection:
        return torch.linalg.qr(torch.randn(p, q, generator=g, dtype=torch.float64))[0]
    E = torch.zeros(p, q, dtype=torch.float64)
    rows = torch.randperm(p, generator=g)[: p - 2]
    for j, grp in enumerate(rows.chunk(q)):
        sign = torch.where(torch.rand(len(grp), generator=g) < 0.5, -1.0, 1.0).double()
        E[grp, j] = sign / len(grp) ** 0.5
    return E


def _pair(kind: str, selection: bool = False) -> tuple[LearnedAction, LearnedAction, torch.Tensor]:
    """An action on R^P with basis E and the same network as an action on R^Q (no basis)."""
    E = _basis(selection=selection)
    center = torch.linspace(-1, 1, P)
    group = MatrixLieGroup(2, 1, generator=torch.Generator().manual_seed(3))
    full = LearnedAction(group, P, theta_center=center, theta_scale=0.7, out_scale=0.3, width=16, depth=2,
                         generator=torch.Generator().manual_seed(4), kind=kind, flow_steps=3, basis=E).double()
    red = LearnedAction(group, Q, theta_center=(center.double() @ E).float(), theta_scale=0.7, out_scale=0.3,
                        width=16, depth=2, kind=kind, flow_steps=3).double()
    red.net.load_state_dict(full.net.state_dict())
    E = full.basis  # the float32-stored basis, exactly as the action holds it
    with torch.no_grad():
        red.theta_center.copy_(full.theta_center @ E)
    return full, red, E


@pytest.mark.parametrize("selection", [False, True])
@pytest.mark.parametrize("kind", ["direct", "flow"])
def test_action_is_the_conjugated_reduced_action_and_moves_only_in_the_span(kind: str, selection: bool) -> None:
    full, red, E = _pair(kind, selection)
    assert (getattr(full, "_cols", None) is not None) == selection  # the gather/scatter path is the one tested
    gen = torch.Generator().manual_seed(5)
    theta = torch.randn(6, P, generator=gen, dtype=torch.float64)
    g = full.group.matrices(full.group.sample(6, 0.8, 1, generator=gen)).double()
    with torch.no_grad():
        moved = full.act_many(g, theta)
        z = theta @ E
        ref = theta + (red.act_many(g, z) - z) @ E.T
        fields = full.fields_all(theta)
        ref_fields = red.fields_all(z) @ E.T
    torch.testing.assert_close(moved, ref, rtol=1e-9, atol=1e-11)  # float64, summed in another order
    torch.testing.assert_close(fields, ref_fields, rtol=1e-9, atol=1e-11)
    d = moved - theta
    assert d.norm(dim=-1).min() > 1e-4  # the action moves the points
    # the part orthogonal to range(E) is never moved (to the orthonormality of the float32-stored
    # columns, ‖EᵀE − I‖ ~ 1e-7)
    outside = d - torch.linalg.lstsq(E, d.T).solution.T @ E.T
    assert outside.norm() <= 1e-12 * d.norm()
    eye = torch.eye(2, dtype=torch.float64).expand(6, 2, 2)
    with torch.no_grad():
        assert torch.equal(full.act_many(eye, theta), theta)  # identity exactly


@pytest.mark.parametrize("selection", [False, True])
@pytest.mark.parametrize("inf, fin", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("kind", ["direct", "flow"])
def test_fused_training_quantities_equal_generic_with_a_basis(kind: str, inf: bool, fin: bool, selection: bool) -> None:
    full, _, _ = _pair(kind, selection)
    gen = torch.Generator().manual_seed(6)
    th, mu = torch.randn(4, P, generator=gen, dtype=torch.float64), torch.randn(3, P, generator=gen, dtype=torch.float64)
    g1 = full.group.matrices(full.group.sample(4, 0.6, 2, generator=gen)).double()
    g2 = full.group.matrices(full.group.sample(4, 0.6, 2, generator=gen)).double()
    h = full.group.generators().double().expand(4, 2, 2)
    fused = full.step_quantities(th, mu, g1, g2, h, infinitesimal=inf, finite=fin)
    generic = O.step_quantities(full, th, mu, g1, g2, h, infinitesimal=inf, finite=fin)
    for name in ("fields_mu", "moved", "fields", "direct", "two_step", "transported", "field_at_moved"):
        x, y = getattr(fused, name), getattr(generic, name)
        assert (x is None) == (y is None), name
        if x is not None:
            torch.testing.assert_close(x, y, rtol=1e-10, atol=1e-12, msg=name)


def test_flow_with_a_basis_composes_to_1e6_in_float64() -> None:
    full, _, _ = _pair("flow")
    full.flow_steps = 64
    gen = torch.Generator().manual_seed(7)
    theta = torch.randn(4, P, generator=gen, dtype=torch.float64)
    h = full.group.generators()[0].double()
    s, t = 0.3, -0.2
    gs, gt = torch.matrix_exp(s * h).expand(4, 2, 2), torch.matrix_exp(t * h).expand(4, 2, 2)
    with torch.no_grad():
        two = full.act_many(gs, full.act_many(gt, theta))
        one = full.act_many(torch.matrix_exp((s + t) * h).expand(4, 2, 2), theta)
        motion = (full.act_many(gt, theta) - theta).norm(dim=-1) + (two - full.act_many(gt, theta)).norm(dim=-1)
    assert float(((two - one).norm(dim=-1) / motion).max()) <= 1e-6


def test_bad_basis_is_refused_with_a_named_error() -> None:
    group = MatrixLieGroup(2, 1)
    kw = dict(theta_center=torch.zeros(P), theta_scale=1.0, out_scale=1.0, width=4, depth=1)
    with pytest.raises(ConfigError, match="p × q"):
        LearnedAction(group, P, basis=torch.zeros(P + 1, 2), **kw)
    with pytest.raises(ConfigError, match="orthonormal"):
        LearnedAction(group, P, basis=2 * _basis(), **kw)
    with pytest.raises(ConfigError, match="non-finite"):
        LearnedAction(group, P, basis=torch.full((P, 2), float("nan")), **kw)
    with pytest.raises(ConfigError, match="scalar"):
        LearnedAction(group, P, basis=_basis(), **{**kw, "theta_scale": torch.ones(P)})


# -- the FFN unit-span basis -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def problem():
    pytest.importorskip("transformers")
    from paramsym.discovery.transformer import ffn_unit_problem

    return ffn_unit_problem(tiny_bert(), tiny_ids(6), layer=1, unit=5, compensators=8, name="tiny")


def test_unit_span_basis_is_isometric_and_holds_the_closed_form_compensation(problem) -> None:
    T = problem.target.to(torch.float64)
    E = unit_span_basis(T)
    n_in, p = incoming_size(T), T.p
    k = len(problem.info["compensators"])
    d = T.h.shape[1]
    assert E.shape == (p, n_in + k) and p == n_in + d * k
    assert bool(((E != 0).sum(1) == 1).all())  # one nonzero per row: LearnedAction's gather/scatter path
    torch.testing.assert_close(E.T @ E, torch.eye(E.shape[1], dtype=torch.float64), rtol=0, atol=1e-12)
    proj = E @ E.T
    gen = torch.Generator().manual_seed(0)
    # first order: every symmetric tangent lies in range(E)
    for _ in range(4):
        u = symmetric_tangent(T, torch.randn(n_in, generator=gen, dtype=torch.float64))
        assert (u - proj @ u).norm() <= 1e-10 * u.norm()
    # finite: Cor. 4.6 written out here, W_B' = W_B + w_j (a_j − a_j') A_B⁺, for an incoming move δ
    th0 = T.theta0
    delta = torch.zeros(p, dtype=torch.float64)
    delta[:n_in] = 0.3 * th0[:n_in].norm() * torch.randn(n_in, generator=gen, dtype=torch.float64) / n_in ** 0.5
    c0, c1 = T.compact(th0), T.compact(th0 + delta)
    A0, A1 = T.features_of(c0), T.features_of(c1)  # N × (1 + k)
    Wj = c0["down.weight"][:, :1]
    dW = Wj @ (A0[:, :1] - A1[:, :1]).T @ torch.linalg.pinv(A0[:, 1:]).T
    full = dict(c0)
    full["down.weight"] = c0["down.weight"].clone()
    full["down.weight"][:, 1:] += dW
    theta = T.block.gather({**full, "up.weight": c1["up.weight"], "up.bias": c1["up.bias"]})
    step = theta - th0
    assert (T(theta) - T(th0)).norm() <= 1e-9 * (T(th0 + delta) - T(th0)).norm()  # the reference compensates
    assert (step - proj @ step).norm() <= 1e-10 * step.norm()  # and lies in the unit span
    # the left-out directions are not symmetric: an outgoing increment orthogonal to w_j changes F
    z = torch.randn(p, generator=gen, dtype=torch.float64)
    z[:n_in] = 0
    z = z - proj @ z
    _, dF = torch.func.jvp(T, (th0,), (z,))
    assert dF.norm() > 1e-3 * z.norm()


def test_unit_span_coordinates_need_an_ffn_target_and_are_a_config_choice() -> None:
    cfg = apply_overrides(DiscoverConfig.for_preset("sigmoid-scalar"), ["action.coordinates=unit-span"])
    with pytest.raises(ConfigError, match="FFN boundary target"):
        action_basis(build_problem("sigmoid-scalar"), cfg)
    with pytest.raises(ConfigError, match="action.coordinates"):
        apply_overrides(DiscoverConfig.for_preset("sigmoid-scalar"), ["action.coordinates=diagonal"]).validate()


def test_invariance_weight_multiplies_exactly_the_two_invariance_terms() -> None:
    torch.set_num_threads(1)
    pr = build_problem("sigmoid-scalar")
    terms = {}
    for w in (1.0, 3.0):
        cfg = apply_overrides(DiscoverConfig.for_preset("sigmoid-scalar"),
                              ["action.width=16", f"objective.invariance_weight={w}"])
        tr = Trainer(pr, cfg, pr.scales(cfg.objective.beta, torch.Generator().manual_seed(0)))
        terms[w] = {k: float(v.detach()) for k, v in tr.losses(0).items()}
        gf = cfg.objective.gamma_finite
    a, b = terms[1.0], terms[3.0]
    assert a["inv"] > 0 and a["pres"] > 0
    for k in ("inv", "pres", "trans", "comp", "scale"):  # the logged terms are unweighted and the same draws
        assert a[k] == pytest.approx(b[k], rel=1e-6)
    assert b["total"] - a["total"] == pytest.approx(2.0 * (a["inv"] + gf * a["pres"]), rel=1e-4)  # float32 totals
    with pytest.raises(ConfigError, match="invariance_weight"):
        apply_overrides(DiscoverConfig.for_preset("sigmoid-scalar"), ["objective.invariance_weight=0"]).validate()
