"""The trainer's objective (fused network passes, shared regulariser points, F(θ) evaluated once)
equals the straightforward per-term computation in float64: every loss term and the gradient of
the total with respect to every trainable parameter (network weights and learned generators).

The reference evaluates each term by its formula ([Discovery] §5.1–5.2), one sample at a time,
with ``torch.func.jvp`` of the action's single-sample ``act`` and of the target: nothing of the
fused path (no ``step_quantities``, no shared rows, no reused outputs, nothing in reduced coordinates).
"""

from __future__ import annotations

import pytest
import torch
from torch.func import jvp

from paramsym.actions.learned import LearnedAction
from paramsym.config import apply_overrides
from paramsym.discovery import objectives as O
from paramsym.discovery.config import DiscoverConfig
from paramsym.discovery.problems import build_problem
from paramsym.discovery.train import Trainer


def _isometric_basis(p: int) -> torch.Tensor:
    """``p × p/2`` columns of a Hadamard matrix / 2 (entries ±1/2 and 0, rows shuffled): orthonormal exactly
    in float32, so the float32-stored basis is exact and the residual form equals the block form to rounding."""
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < p // 2:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)])
    E = torch.cat([h / h.shape[0] ** 0.5, torch.zeros(p - h.shape[0], h.shape[0], dtype=torch.float64)])
    return E[torch.randperm(p, generator=torch.Generator().manual_seed(1))]


def _trainer(preset: str, r: int, variant: str, basis: bool = False) -> Trainer:
    problem = build_problem(preset)
    cfg = apply_overrides(DiscoverConfig.for_preset(preset), [
        f"objective.variant={variant}", f"group.generators={r}", "action.width=32", "train.batch=8",
        "objective.gamma_transport=0.7", "objective.gamma_finite=1.3", "objective.lambda_scale=0.5",
        "objective.lambda_div=0.25", "objective.invariance_weight=3"])
    tr = Trainer(problem, cfg, problem.scales(cfg.objective.beta, torch.Generator().manual_seed(0)))
    if basis:  # reduced coordinates: the trainer's step takes the residual form (nothing only squared is expanded)
        a = tr.action
        tr.action = LearnedAction(a.group, a.p, theta_center=a.theta_center, theta_scale=float(a.theta_scale[0]),
                                  out_scale=float(a.out_scale), width=32, basis=_isometric_basis(a.p),
                                  generator=torch.Generator().manual_seed(3))
    tr.action.double()
    tr.target = problem.target.to(torch.float64)
    return tr


def _reference(tr: Trainer, theta_mu, theta, g1, g2, h) -> dict[str, torch.Tensor]:
    """Every term from its formula, one sample at a time (no batching, nothing shared)."""
    a, F, sc = tr.action, tr.target, tr.scales
    eye = torch.eye(g1.shape[-1], dtype=theta.dtype)

    def field(hh, th):  # v_h(θ) = D_g a(g, θ)|_I [h]
        return jvp(lambda g: a.act(g, th), (eye,), (hh,))[1]

    gens = a.group.generators()
    inv = torch.stack([jvp(F, (th,), (field(hi, th),))[1].pow(2).sum() for th in theta for hi in gens]).mean()
    trans = torch.stack([(jvp(lambda g, th=th: a.act(g, th), (gg,), (hh @ gg,))[1] - field(hh, a.act(gg, th))).pow(2).sum()
                         for th, gg, hh in zip(theta, g1, h)]).mean()
    comp = torch.stack([(a.act(b @ c, th) - a.act(b, a.act(c, th))).pow(2).sum() for th, c, b in zip(theta, g1, g2)]).mean()
    pres = torch.stack([(F(a.act(gg, th)) - F(th)).pow(2).sum() for th, gg in zip(theta, g1)]).mean()
    fields_mu = torch.stack([torch.stack([field(hi, th) for hi in gens]) for th in theta_mu])
    return {"inv": inv / sc.s_F**2, "trans": trans / sc.motion**2, "comp": comp / sc.motion**2, "pres": pres / sc.s_F**2,
            "scale": O.scale_penalty(fields_mu, sc), "div": O.diversity_penalty(fields_mu)}


@pytest.mark.parametrize("preset, r, basis", [("sigmoid-scalar", 1, False), ("linear2x2", 4, False), ("linear2x2", 2, True)])
@pytest.mark.parametrize("variant", ["hybrid", "infinitesimal", "finite"])
def test_objective_and_gradient_equal_the_per_term_reference(preset: str, r: int, basis: bool, variant: str) -> None:
    torch.set_num_threads(1)
    tr = _trainer(preset, r, variant, basis)
    b = tr.batch(step=tr.cfg.train.steps // 2)  # the main stage: products of several factors
    if basis:  # the fused step really takes the residual form here
        q = tr.action.step_quantities(b.theta, b.theta_mu, b.g1, b.g2, b.h, infinitesimal=True, finite=True,
                                      shared=b.shared, residuals=True)
        assert q.direct is None and q.comp_residual is not None and q.fields_mu.shape[-1] == tr.action.q < tr.action.p
    assert b.theta.dtype == torch.float64 and b.g1.requires_grad  # gradients reach the learned generators
    assert torch.equal(b.theta[:b.shared], b.theta_mu[:b.shared]) and 0 < b.shared < len(b.theta_mu)
    got = tr.objective(b)
    ref = _reference(tr, b.theta_mu, b.theta, b.g1, b.g2, b.h)
    ob = tr.cfg.objective
    inf, fin = variant in ("hybrid", "infinitesimal"), variant in ("hybrid", "finite")
    w = ob.invariance_weight
    total = ob.lambda_scale * ref["scale"] + ob.lambda_div * ref["div"]
    if inf:
        total = total + w * ref["inv"] + ob.gamma_transport * ref["trans"]
    if fin:  # the hybrid weighs the finite terms by γ2, the finite variant alone by 1
        g2w = ob.gamma_finite if inf else 1.0
        total = total + g2w * (ref["comp"] + w * ref["pres"])
    # float64: both sides compute the same formulas in another order (rounding ≈ 1e-16 per operation);
    # 1e-10 leaves room for cancellation in the residuals' differences, nothing more
    for k in ref:
        if (k in ("inv", "trans") and not inf) or (k in ("comp", "pres") and not fin):
            assert float(got[k]) == 0.0, k
            continue
        assert float(ref[k].detach()) > 0 or k == "div", k  # every compared term is a real, nonzero quantity
        torch.testing.assert_close(got[k], ref[k], rtol=1e-10, atol=1e-300, msg=k)
    torch.testing.assert_close(got["total"], total, rtol=1e-10, atol=0.0)
    params = [p for p in tr.action.parameters() if p.requires_grad]
    g_got = torch.autograd.grad(got["total"], params, retain_graph=True)
    g_ref = torch.autograd.grad(total, params)
    names = [n for n, p in tr.action.named_parameters() if p.requires_grad]
    whole = float(torch.cat([g.reshape(-1) for g in g_ref]).norm())
    for name, p_got, p_ref in zip(names, g_got, g_ref):
        # the last layer's bias cancels in b(g, θ) − b(I, θ): its gradient is 0 up to rounding
        scale = float(p_ref.norm())
        assert scale > 0 or name.endswith("bias"), name
        assert float((p_got - p_ref).norm()) <= 1e-10 * scale + 1e-14 * whole, name
