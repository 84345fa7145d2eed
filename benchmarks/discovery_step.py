"""Benchmark: cost of one hybrid discovery training step ([Discovery] §5.1–5.2), measured side by side.

Prints, per problem, medians over interleaved repetitions of the process's CPU time (the machine
is noisy: compare the ratios, not the absolute times):

(a) ``Trainer.step`` (the full hybrid objective, backward, clipping, Adam) over one forward +
    backward of the action network on the same batch (``act_many`` of B sampled elements on B
    points, squared norm, backward), side by side with the same ratio of the step before this
    round (``Trainer.residuals = False``: the fused quantities in block form; the same step as the
    current one without reduced coordinates) and of the previous step (:func:`previous_losses`,
    kept here as the baseline) — issue 33's aim is a ratio ≤ 5×;
(b) steps per second of ``Trainer.step`` against a naive baseline that computes the same hybrid
    objective one sample at a time (see :func:`naive_losses`):

    * group elements are sampled in a Python loop, one sample at a time (product length,
      simplex weights, total length, signs and generator indices drawn per sample), each element
      built factor by factor with ``torch.linalg.matrix_exp``; the inverse pairs of L_comp are
      built the same way from the reversed, negated factors; as in ``Trainer.losses`` one set of
      elements ``g1`` serves transport, composition and preservation;
    * every directional derivative is ``torch.autograd.functional.jvp(..., create_graph=True)``
      for one sample: the fields ``v_i(θ)`` (B points × r generators, for both the μ points and
      the mixed batch), ``D_θF(θ)[v_i(θ)]``, ``D_g a(g,θ)[h g]`` and ``v_h(a(g,θ))``;
    * ``a(g, θ)`` and ``F`` are evaluated per sample with the action's single-sample ``act``;
    * the batch composition (half μ points, half detached transformed points), the share of
      inverse pairs, the loss weights, the regularisers (on the μ fields), gradient clipping and
      Adam are those of ``Trainer``.

Before timing, the baseline's loss terms and gradients are compared with the library's
objectives (``paramsym.discovery.objectives``) on identical points and elements in float64, and
the agreement is printed: the baseline computes the same function, only without batching. The
previous step's terms and gradient are compared with ``Trainer.losses`` the same way (float64,
the same draws of the trainer's generator).

The previous step (before issue 33, item 5): four group-matrix calls; two dual network passes in
which every row carries its own primal (``b(I, θ)`` once per generator, the regulariser points
evaluated apart from the θ rows they share, tangent rows of zeros for ``b(g2 g1, θ)`` and
``b(g2, a(g1, θ))``); ``F(θ)`` evaluated twice (the invariance JVP and the preservation term).

With ``--breakdown`` it also prints where one step's time goes, each part timed apart on the
step's own batch, side by side with the forward+backward (adjacent windows, medians): the two
fused network passes (forward and backward), the matrix products those passes cannot avoid timed
alone on random operands of their shapes (:func:`gemms_alone`), the target terms (the invariance
JVP of F, whose primal F(θ) the preservation term reuses, and F(a(g1, θ)), forward and backward),
the group elements (``matrix_exp`` of every factor and the products, backward to the learned
generators), the draws of ``Trainer.batch``, the detached transformed points, clipping and Adam;
the rest of the step is loss assembly and Python glue. It prints the network rows per step
against the forward+backward's (:func:`network_rows`) and a floor: the unavoidable matrix products
plus the target terms, group elements, draws and transformed points.

Why the aim of ≤ 5× is out of reach (issue 33, item 5; development note of 2026-12-05 in
docs/discovery.md). The objective needs ``b`` at six kinds of input with ``(1.5 r + 2)`` tangent
rows per batch point on top of ``5.5`` primal rows, ``(7.5 + 1.5 r) B`` rows against the
forward+backward's ``2 B``: ``4.5×`` at r = 1 and ``6.75×`` at r = 4 (:func:`network_rows`). The
passes are bounded by their matrix products at these sizes (stacking each layer's primal and tangent
rows into one product, and a hand-written backward of the dual activation, were both measured and
gave no gain), so the network passes alone cost about the row ratio, and the rest of the objective
(the target's JVP, the group elements, the fixed random stream of the batch) adds to it: the floor
that ``--breakdown`` prints is above 5× for all three problems before any loss assembly or
optimizer step. Reaching 5× would take changing what is computed (fewer rows, e.g. one sampled
generator per point in ``L_inv``; a natively batched target; a different random stream), not how.

With ``--transformer`` the learned transformer action's problem (``minilm-ffn-unit``: one FFN unit
and its compensators of all-MiniLM-L6-v2, reduced coordinates) is measured the same way, without
the naive baseline.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/discovery_step.py [--rounds 7] [--naive-reps 1] [--transformer] [--breakdown]``
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from torch.autograd.functional import jvp as af_jvp

from paramsym.actions.base import StepQuantities, float64_copy
from paramsym.config import apply_overrides
from paramsym.discovery import objectives as O
from paramsym.discovery.config import DiscoverConfig
from paramsym.discovery.problems import build_problem
from paramsym.discovery.train import LOSS_TERMS, Trainer
from paramsym.groups.lie import GroupSamples

# -- the naive baseline ---------------------------------------------------------------------------


def naive_sample(group, n: int, rho: float, max_factors: int, gen: torch.Generator, dtype=torch.float32):
    """``n`` elements drawn one at a time (same law as ``MatrixLieGroup.sample``).

    Returns ``(matrices (n, s, s), factors)`` with ``factors[k] = [(t_j, i_j), ...]`` (applied
    first to last) so that inverses can be built from them.
    """
    gens = group.generators()
    eye = torch.eye(group.size, dtype=dtype)
    mats, factors = [], []
    for _ in range(n):
        m = int(torch.randint(1, max_factors + 1, (1,), generator=gen))
        w = -torch.log(torch.rand(m, dtype=torch.float64, generator=gen).clamp_min(1e-300))
        w = w / w.sum()
        total = rho * (0.2 + 0.8 * float(torch.rand(1, dtype=torch.float64, generator=gen)))
        signs = torch.randint(0, 2, (m,), generator=gen) * 2 - 1
        idx = torch.randint(0, group.num_generators, (m,), generator=gen)
        fac = [(float(total * w[j] * signs[j]), int(idx[j])) for j in range(m)]
        g = eye
        for t, i in fac:
            g = torch.linalg.matrix_exp(t * gens[i].to(dtype)) @ g
        mats.append(g)
        factors.append(fac)
    return torch.stack(mats), factors


def naive_inverse(group, factors, dtype=torch.float32) -> torch.Tensor:
    """``g⁻¹`` for each factor list, built one sample and one factor at a time."""
    gens = group.generators()
    eye = torch.eye(group.size, dtype=dtype)
    out = []
    for fac in factors:
        g = eye
        for t, i in reversed(fac):
            g = torch.linalg.matrix_exp(-t * gens[i].to(dtype)) @ g
        out.append(g)
    return torch.stack(out)


def _field(action, h, theta):
    eye = torch.eye(h.shape[-1], dtype=h.dtype)
    return af_jvp(lambda g: action.act(g, theta), eye, h, create_graph=True)[1]


def naive_losses(action, target, scales: O.Scales, theta_mu, theta, g_tr, h_tr, g1, g2, g_pres):
    """The hybrid loss terms, one sample at a time with ``torch.autograd.functional.jvp``."""
    gens = action.group.generators().to(theta.dtype)
    r = gens.shape[0]
    m2 = scales.motion**2
    fields_mu = torch.stack([torch.stack([_field(action, gens[i], th) for i in range(r)]) for th in theta_mu])
    inv = torch.stack([
        af_jvp(target, th, _field(action, gens[i], th), create_graph=True)[1].pow(2).sum()
        for th in theta for i in range(r)
    ]).mean() / scales.s_F**2
    trans = torch.stack([
        (af_jvp(lambda gg, th=th: action.act(gg, th), g, h @ g, create_graph=True)[1]
         - _field(action, h, action.act(g, th))).pow(2).sum()
        for th, g, h in zip(theta, g_tr, h_tr)
    ]).mean() / m2
    comp = torch.stack([
        (action.act(b @ a, th) - action.act(b, action.act(a, th))).pow(2).sum() for th, a, b in zip(theta, g1, g2)
    ]).mean() / m2
    pres = torch.stack([
        (target(action.act(g, th)) - target(th)).pow(2).sum() for th, g in zip(theta, g_pres)
    ]).mean() / scales.s_F**2
    msq = torch.stack([torch.stack([fields_mu[n, i].div(scales.s_theta).pow(2).sum() for n in range(len(theta_mu))]).mean()
                       for i in range(r)])
    scale = ((msq - scales.beta**2) / scales.beta**2).pow(2).mean()
    div = theta.new_zeros(())
    for i in range(r):
        for j in range(r):
            if i != j:
                num = torch.stack([fields_mu[n, i] @ fields_mu[n, j] for n in range(len(theta_mu))]).mean()
                div = div + num**2 / (msq[i] * msq[j] * scales.s_theta**4)
    return {"inv": inv, "trans": trans, "comp": comp, "pres": pres, "scale": scale, "div": div}


def naive_step(trainer: Trainer, action, opt, step: int) -> float:
    """One hybrid step of the baseline (same batch composition, weights, clipping and Adam)."""
    cfg, sc = trainer.cfg, trainer.scales
    group = action.group
    rng = trainer.rng
    B = cfg.train.batch
    half = B // 2
    rho, mf = trainer.stage(step)
    theta_mu = trainer.problem.sample(B, rng, torch.float32)
    with torch.no_grad():
        q, _ = naive_sample(group, half, rho, mf, rng)
        pts = trainer.problem.sample(half, rng, torch.float32)
        theta_tr = torch.stack([action.act(qq, th) for qq, th in zip(q, pts)])
    theta = torch.cat([theta_mu[:half], theta_tr])
    # as in Trainer.losses: one set of elements g1 serves transport, composition and
    # preservation; g2 completes the composition pairs, a quarter of them inverse pairs g1⁻¹
    g1, f1 = naive_sample(group, B, rho, mf, rng)
    g2, _ = naive_sample(group, B, rho, mf, rng)
    n_inv = int(round(cfg.objective.inverse_fraction * B))
    g2 = torch.cat([naive_inverse(group, f1[:n_inv]), g2[n_inv:]])
    which = [int(torch.randint(0, group.num_generators, (1,), generator=rng)) for _ in range(B)]
    h = group.generators()[which]
    t = naive_losses(action, trainer.target, sc, theta_mu, theta, g1, h, g1, g2, g1)
    ob = cfg.objective
    total = (t["inv"] + ob.gamma_transport * t["trans"] + ob.gamma_finite * (t["comp"] + t["pres"])
             + ob.lambda_scale * t["scale"] + ob.lambda_div * t["div"])
    opt.zero_grad(set_to_none=True)
    total.backward()
    torch.nn.utils.clip_grad_norm_(action.parameters(), cfg.train.clip)
    opt.step()
    return float(total.detach())


# -- the previous step (the baseline of (a)) -----------------------------------------------------


def _previous_pass(action, gs, dgs, ts):
    """One dual pass of the previous step: every row its own primal and a full-width tangent."""
    g, dg, t = torch.cat(gs), torch.cat(dgs), torch.cat(ts)
    x = action._inputs(g, t)
    dx = torch.cat([dg.reshape(dg.shape[0], -1).to(t.dtype) / action.g_scale.to(t.dtype), t.new_zeros(t.shape[0], action.q)], -1)
    y, dy = action._dual(x, dx)
    scale = action.out_scale.to(t.dtype)
    return action.expand(y * scale), action.expand(dy * scale)


def previous_step_quantities(action, theta, theta_mu, g1, g2, h, *, infinitesimal: bool, finite: bool):
    """The previous fused step quantities (direct kind), as they were before issue 33, item 5."""
    dt = theta.dtype
    n, p = theta.shape
    gens = action.group.generators().to(dt)
    r, s = gens.shape[0], gens.shape[-1]
    eye = torch.eye(s, dtype=dt)
    zeros = torch.zeros_like(g1)
    m = theta_mu.shape[0]
    blocks_g, blocks_dg, blocks_t = [], [], []

    def add(g, dg, t):
        start = sum(x.shape[0] for x in blocks_g)
        blocks_g.append(g), blocks_dg.append(dg), blocks_t.append(t)
        return slice(start, start + g.shape[0])

    if infinitesimal:
        at_I = add(eye.expand(n * r, s, s), gens.repeat(n, 1, 1), theta.repeat_interleave(r, 0))
    else:
        at_I = add(eye.expand(n, s, s), zeros, theta)
    at_mu = add(eye.expand(m * r, s, s), gens.repeat(m, 1, 1), theta_mu.repeat_interleave(r, 0))
    at_g1 = add(g1, h @ g1 if infinitesimal else zeros, theta)
    at_g21 = add(g2 @ g1, zeros, theta) if finite else None
    b1, db1 = _previous_pass(action, blocks_g, blocks_dg, blocks_t)
    b_I = b1[at_I].reshape(n, -1, p)[:, 0] if infinitesimal else b1[at_I]
    moved = theta + (b1[at_g1] - b_I)
    q = StepQuantities(fields_mu=db1[at_mu].reshape(m, r, p), moved=moved)
    if infinitesimal:
        q.fields = db1[at_I].reshape(n, r, p)
        q.transported = db1[at_g1]
    if finite:
        q.direct = theta + (b1[at_g21] - b_I)
    blocks_g, blocks_dg, blocks_t = [], [], []
    at_I2 = add(eye.expand(n, s, s), h if infinitesimal else zeros, moved)
    at_g2 = add(g2, zeros, moved) if finite else None
    b2, db2 = _previous_pass(action, blocks_g, blocks_dg, blocks_t)
    if infinitesimal:
        q.field_at_moved = db2[at_I2]
    if finite:
        q.two_step = moved + (b2[at_g2] - b2[at_I2])
    return q


def previous_losses(trainer: Trainer, step: int) -> dict[str, torch.Tensor]:
    """The previous ``Trainer.losses`` (hybrid): the same draws of the trainer's generator, in order.

    Kept as the baseline on purpose, so its sampling mirrors ``Trainer.batch`` line for line; what
    differs is what is measured (four group-matrix calls, ``b(g, θ) − b(I, θ)`` expanded apart,
    :func:`previous_step_quantities`, ``F(θ)`` evaluated twice).
    """
    cfg, sc, a = trainer.cfg, trainer.scales, trainer.action
    group = a.group
    dt = a.theta_center.dtype
    B = cfg.train.batch
    half = B // 2
    rho, mf = trainer.stage(step)
    theta_mu = trainer._points(B).to(dt)
    with torch.no_grad():
        q = group.matrices(trainer._sample(half, rho, mf))
        pts = trainer._points(half).to(dt)
        theta_tr = pts + (a.b(q, pts) - a.b(torch.eye(q.shape[-1], dtype=q.dtype).expand_as(q), pts))
    theta = torch.cat([theta_mu[:half], theta_tr])
    s1, s2 = trainer._sample(B, rho, mf), trainer._sample(B, rho, mf)
    n_inv = int(round(cfg.objective.inverse_fraction * B))
    g1 = group.matrices(s1)
    g2 = torch.cat([group.matrices(s1.select(slice(0, n_inv)).inverse()), group.matrices(s2.select(slice(n_inv, B)))])
    which = torch.randint(0, group.num_generators, (B,), generator=trainer.rng)
    h = group.generators()[which]
    q = previous_step_quantities(a, theta, theta_mu, g1, g2, h, infinitesimal=True, finite=True)
    out = {"inv": O.invariance_loss(trainer.target, theta, q.fields, sc), "trans": O.transport_loss(q.transported, q.field_at_moved, sc),
           "comp": O.composition_loss(q.direct, q.two_step, sc), "pres": O.preservation_loss(trainer.target, theta, q.moved, sc),
           "scale": O.scale_penalty(q.fields_mu, sc), "div": O.diversity_penalty(q.fields_mu)}
    ob = cfg.objective
    w = ob.invariance_weight
    out["total"] = (w * out["inv"] + ob.gamma_transport * out["trans"] + ob.gamma_finite * (out["comp"] + w * out["pres"])
                    + ob.lambda_scale * out["scale"] + ob.lambda_div * out["div"])
    return out


def previous_step(trainer: Trainer, step: int) -> None:
    """``Trainer.step`` with :func:`previous_losses` (same learning rate, clipping and Adam)."""
    for grp in trainer.opt.param_groups:
        grp["lr"] = trainer.lr_at(step)
    total = previous_losses(trainer, step)["total"]
    trainer.opt.zero_grad(set_to_none=True)
    total.backward()
    torch.nn.utils.clip_grad_norm_(trainer.action.parameters(), trainer.cfg.train.clip)
    trainer.opt.step()


def verify_previous(trainer: Trainer) -> tuple[float, float]:
    """Max relative difference (loss terms, gradient) between :func:`previous_losses` and
    ``Trainer.losses`` in float64 on the same draws of the trainer's generator."""
    tr = copy.deepcopy(trainer)
    tr.action.double()
    tr.target = trainer.problem.target.to(torch.float64)
    state = tr.rng.get_state()
    step = tr.cfg.train.steps // 2
    results = []
    for fn in (lambda: tr.losses(step), lambda: previous_losses(tr, step)):
        tr.rng.set_state(state)
        tr.action.zero_grad()
        terms = fn()
        terms["total"].backward()
        grad = torch.cat([p.grad.reshape(-1) for p in tr.action.parameters() if p.grad is not None])
        results.append(({k: float(v.detach()) for k, v in terms.items() if k in LOSS_TERMS}, grad))
    (lt, lg), (pt, pg) = results
    term_err = max(abs(lt[k] - pt[k]) / max(abs(lt[k]), 1e-300) for k in pt)
    return term_err, float((lg - pg).norm() / lg.norm())


# -- checks and timing ----------------------------------------------------------------------------


def verify_baseline(trainer: Trainer) -> tuple[float, float]:
    """Max relative difference (loss terms, gradient) between the baseline and the library
    objectives on identical float64 inputs."""
    action = float64_copy(trainer.action)
    target = trainer.problem.target.to(torch.float64)
    sc = trainer.scales
    gen = torch.Generator().manual_seed(123)
    B = 6
    group = action.group
    theta_mu = trainer.problem.sample(B, gen, torch.float64)
    theta = trainer.problem.sample(B, gen, torch.float64)
    samples = [group.sample(B, 0.5, 3, generator=gen) for _ in range(4)]
    which = torch.arange(B) % group.num_generators

    def library(g_tr, g1, g2, g_pres, h):
        fields_mu = action.fields_all(theta_mu)
        return {"inv": O.invariance(action, target, theta, sc), "trans": O.transport(action, theta, g_tr, h, sc),
                "comp": O.composition(action, theta, g1, g2, sc), "pres": O.preservation(action, target, theta, g_pres, sc),
                "scale": O.scale_penalty(fields_mu, sc), "div": O.diversity_penalty(fields_mu)}

    def naive(g_tr, g1, g2, g_pres, h):
        return naive_losses(action, target, sc, theta_mu, theta, g_tr, h, g1, g2, g_pres)

    results = []
    for fn in (library, naive):
        action.zero_grad()
        # elements built inside, so that gradients reach learned generators through g and h
        terms = fn(*(group.matrices(x) for x in samples), group.generators()[which])
        sum(terms.values()).backward()
        grad = torch.cat([p.grad.reshape(-1) for p in action.parameters() if p.grad is not None])
        results.append(({k: float(v.detach()) for k, v in terms.items()}, grad))
    (lt, lg), (nt, ng) = results
    term_err = max(abs(lt[k] - nt[k]) / max(abs(lt[k]), 1e-300) for k in lt)
    grad_err = float((lg - ng).norm() / lg.norm())
    return term_err, grad_err


def time_it(fn, reps: int) -> float:
    """CPU seconds of this process per call (``time.process_time``: time spent waiting for a core
    while other processes run is not counted, so a loaded machine disturbs it far less than wall time)."""
    t0 = time.process_time()
    for _ in range(reps):
        fn()
    return (time.process_time() - t0) / reps


def network_rows(batch: int, r: int) -> tuple[int, int]:
    """``(rows of the step's network passes, rows of the forward+backward)``: primal and tangent rows
    (each one row of every GEMM). The step: ``b`` at ``(I, θ)``, ``(g1, θ)``, ``(g2 g1, θ)``,
    ``(I, a(g1, θ))``, ``(g2, a(g1, θ))`` (n = batch each) and ``(I, θ_μ)`` for the μ points not shared
    with θ (batch/2); tangents: r fields at θ and at those μ points, the transported tangent at
    ``(g1, θ)`` and the field at ``a(g1, θ)``. The forward+backward: ``b(g, θ)`` and ``b(I, θ)``."""
    half = batch - batch // 2
    primal = 5 * batch + half
    tangent = r * (batch + half) + 2 * batch
    return primal + tangent, 2 * batch


def gemms_alone(action, batch: int) -> callable:
    """The matrix products the step's two network passes cannot avoid, on random operands of their
    shapes and nothing else (no activation, no autograd): per layer and pass one forward product of
    the primal rows and one of the tangent rows, and in the backward the input and weight gradients
    of each (the tangents enter the first layer through its ``s²`` group columns only)."""
    r, s2 = action.group.num_generators, action.group.size ** 2
    half = batch - batch // 2
    lin = [m for m in action.net if isinstance(m, torch.nn.Linear)]
    passes = [(3 * batch + half, r * (batch + half) + batch), (2 * batch, batch)]  # (primal, tangent) rows
    gen = torch.Generator().manual_seed(0)
    ops = []
    for primal, tangent in passes:
        for i, layer in enumerate(lin):
            out, inp = layer.weight.shape
            t_in = s2 if i == 0 else inp
            for rows, k in ((primal, inp), (tangent, t_in)):
                x, w = torch.randn(rows, k, generator=gen), torch.randn(out, k, generator=gen)
                gy = torch.randn(rows, out, generator=gen)
                ops.append((x, w.T, gy, w))

    def run():
        for x, wt, gy, w in ops:
            torch.mm(x, wt), torch.mm(gy, w), torch.mm(gy.T, x)

    return run


def breakdown(trainer: Trainer, fwd_bwd, reps_fb: int, rounds: int) -> None:
    """Where one step's time goes, each part measured side by side with the forward+backward
    (adjacent windows, medians over ``rounds``), on the step's own batch; the parts run apart, so
    their sum misses only the glue (loss assembly, Python) that ``rest`` shows."""
    tr = copy.deepcopy(trainer)
    a, sc, cfg = tr.action, tr.scales, tr.cfg
    step_index = cfg.train.steps // 2
    rho, mf = tr.stage(step_index)
    B = cfg.train.batch
    b = tr.batch(step_index)
    d = {k: (v.detach() if torch.is_tensor(v) else v) for k, v in vars(b).items()}

    def network():  # both fused passes, forward and backward (inputs fixed, so no group-matrix graph)
        a.zero_grad(set_to_none=True)
        q = a.step_quantities(d["theta"], d["theta_mu"], d["g1"], d["g2"], d["h"], infinitesimal=True, finite=True,
                              shared=d["shared"], residuals=tr.residuals)
        outs = (q.moved, q.fields, q.fields_mu, q.transported, q.field_at_moved, q.direct, q.two_step, q.comp_residual,
                q.trans_residual)
        sum(x.pow(2).sum() for x in outs if x is not None).backward()

    q = a.step_quantities(d["theta"], d["theta_mu"], d["g1"], d["g2"], d["h"], infinitesimal=True, finite=True,
                          shared=d["shared"], residuals=tr.residuals)
    fields, moved = q.fields.detach().requires_grad_(), q.moved.detach().requires_grad_()

    def target_terms():  # L_inv's JVP of F (its primal F(θ) reused) and L_pres's F(a(g1, θ))
        inv, base = O.invariance_and_output(tr.target, d["theta"], fields, sc)
        (inv + O.preservation_loss(tr.target, d["theta"], moved, sc, base=base)).backward()

    s_q, s_1, s_2 = (a.group.sample(n, rho, mf, generator=torch.Generator().manual_seed(k)) for k, n in
                     ((1, B // 2), (2, B), (3, B)))

    def elements():  # the elements of the moved points (no graph), then g1, g2 with backward to the generators
        a.group.zero_grad(set_to_none=True)
        with torch.no_grad():
            a.group.matrices(s_q)
        both = GroupSamples(torch.cat([s_1.coeffs, s_2.coeffs]), torch.cat([s_1.index, s_2.index]))
        a.group.matrices(both).pow(2).sum().backward()  # one call, as in Trainer.batch

    def sampling():  # the draws of Trainer.batch, in its order
        tr._points(B), tr._sample(B // 2, rho, mf), tr._points(B // 2), tr._sample(B, rho, mf), tr._sample(B, rho, mf)
        torch.randint(0, a.group.num_generators, (B,), generator=tr.rng)

    def moved_points():
        with torch.no_grad():
            a.act_many(d["g1"][: B // 2], d["theta"][: B // 2])

    tr.step(step_index)  # gradients present for the optimizer part

    def optimizer():
        torch.nn.utils.clip_grad_norm_(a.parameters(), cfg.train.clip, foreach=True)
        tr.opt.step()

    parts = {"network passes (fwd+bwd)": network, "  of which GEMMs alone": gemms_alone(a, B), "target F terms (fwd+bwd)": target_terms,
             "group elements (fwd+bwd)": elements, "sampling": sampling, "moved points (no grad)": moved_points,
             "clip + Adam": optimizer, "whole step": lambda: tr.step(step_index)}
    ratios: dict[str, list[float]] = {k: [] for k in parts}
    for _ in range(rounds):
        for k, fn in parts.items():
            before, t, after = time_it(fwd_bwd, reps_fb), time_it(fn, 10), time_it(fwd_bwd, reps_fb)
            ratios[k].append(2 * t / (before + after))
    med = {k: statistics.median(v) for k, v in ratios.items()}
    total = sum(v for k, v in med.items() if k not in ("whole step", "  of which GEMMs alone"))
    floor = total - med["network passes (fwd+bwd)"] - med["clip + Adam"] + med["  of which GEMMs alone"]
    rows, rows_fb = network_rows(B, cfg.group.generators)
    print(f"   breakdown (each part / forward+backward, median of {rounds} side-by-side rounds):")
    for k, v in med.items():
        if k != "whole step":
            print(f"      {k:26s}: {v:5.2f}x")
    print(f"      {'sum of the parts':26s}: {total:5.2f}x  (whole step {med['whole step']:.2f}x, rest "
          f"{med['whole step'] - total:+.2f}x: loss assembly and Python glue)")
    print(f"      network rows per step {rows} vs {rows_fb} in the forward+backward: {rows / rows_fb:.2f}x")
    print(f"      floor (GEMMs alone + target F terms + group elements + sampling + moved points): {floor:.2f}x")


def bench(preset: str, extra: list[str], rounds: int, naive_reps: int, parts: bool = False) -> None:
    """One problem: agreement checks, then ``rounds`` interleaved rounds (``naive_reps = 0``: no naive baseline)."""
    problem = build_problem(preset)
    cfg = apply_overrides(DiscoverConfig.for_preset(preset), extra)
    scales = problem.scales(cfg.objective.beta, torch.Generator().manual_seed(10_000))
    trainer = Trainer(problem, cfg, scales)
    step_index = cfg.train.steps // 2  # the main curriculum stage: full ρ and product length
    rho, mf = trainer.stage(step_index)
    B = cfg.train.batch
    # warm-up training so the fields are not at their near-zero start
    for s in range(20):
        trainer.step(step_index + s)
    term_err, grad_err = verify_baseline(trainer) if naive_reps else (float("nan"), float("nan"))
    prev_term_err, prev_grad_err = verify_previous(trainer)
    previous = copy.deepcopy(trainer)  # the previous step trains its own copy
    before = copy.deepcopy(trainer)  # the step before this round (block form of the fused quantities)
    before.residuals = False

    naive_action = copy.deepcopy(trainer.action)
    naive_opt = torch.optim.Adam(naive_action.parameters(), lr=cfg.train.lr)
    gen = torch.Generator().manual_seed(1)
    theta = problem.sample(B, gen, torch.float32)
    g = trainer.action.group.matrices(trainer.action.group.sample(B, rho, mf, generator=gen)).detach()

    def fwd_bwd(tr: Trainer):
        tr.action.zero_grad(set_to_none=True)
        tr.action.act_many(g, theta).pow(2).sum().backward()

    def slow_step():
        naive_step(trainer, naive_action, naive_opt, step_index)

    steps = {"step": lambda: trainer.step(step_index), "before": lambda: before.step(step_index),
             "prev": lambda: previous_step(previous, step_index)}
    owners = {"step": trainer, "before": before, "prev": previous}
    # repetitions per timing window: about as long for the forward+backward as for the step
    t_fb, t_st = time_it(lambda: fwd_bwd(trainer), 5), time_it(steps["step"], 3)
    reps_fb, reps_st = max(5, round(10 * t_st / t_fb)), 10
    times: dict[str, list[float]] = {"fwd_bwd": [], "step": [], "before_fwd_bwd": [], "before": [], "prev_fwd_bwd": [],
                                     "prev": [], "naive": []}
    ratios: dict[str, list[float]] = {"step": [], "before": [], "prev": []}
    for _ in range(rounds):  # interleaved repetitions; each ratio from adjacent windows (fb, step, fb)
        for key in ("step", "before", "prev"):
            fb = lambda k=key: fwd_bwd(owners[k])  # noqa: E731
            t0, ts, t1 = time_it(fb, reps_fb), time_it(steps[key], reps_st), time_it(fb, reps_fb)
            times["fwd_bwd" if key == "step" else f"{key}_fwd_bwd"] += [t0, t1]
            times[key].append(ts)
            ratios[key].append(2 * ts / (t0 + t1))
        if naive_reps:
            times["naive"].append(time_it(slow_step, naive_reps))
    med = {k: statistics.median(v) for k, v in times.items() if v}
    r = cfg.group.generators
    print(f"\n== {preset}: p = {problem.target.p}, r = {r} generator(s) of size {cfg.group.size}, batch {B}, "
          f"width {cfg.action.width}×{cfg.action.depth}, rho = {rho}, up to {mf} factors; {rounds} interleaved rounds")
    if naive_reps:
        print(f"   baseline vs library objectives (float64, same inputs): terms agree to {term_err:.1e}, "
              f"gradient to {grad_err:.1e} (relative)")
    print(f"   previous step vs Trainer.losses (float64, same draws): terms agree to {prev_term_err:.1e}, "
          f"gradient to {prev_grad_err:.1e} (relative)")
    print(f"   forward+backward of the action : {med['fwd_bwd'] * 1e3:8.2f} ms  (median)")
    print(f"   Trainer.step (hybrid)          : {med['step'] * 1e3:8.2f} ms  = {1 / med['step']:7.1f} steps/s")
    print(f"   step before this round         : {med['before'] * 1e3:8.2f} ms  = {1 / med['before']:7.1f} steps/s  "
          "(block form of the fused quantities: Trainer.residuals = False)")
    print(f"   previous step (kept here)      : {med['prev'] * 1e3:8.2f} ms  = {1 / med['prev']:7.1f} steps/s")
    if naive_reps:
        print(f"   naive per-sample baseline step : {med['naive'] * 1e3:8.2f} ms  = {1 / med['naive']:7.1f} steps/s")
    rs, rb, rp = (statistics.median(ratios[k]) for k in ("step", "before", "prev"))
    print(f"   (a) step / forward+backward     : {rs:6.1f}x  (before this round: {rb:.1f}x; previous step: {rp:.1f}x; "
          f"aim <= 5x)  median of "
          f"per-round ratios; ratio of the fastest windows {min(times['step']) / min(times['fwd_bwd']):.1f}x "
          f"(previous {min(times['prev']) / min(times['prev_fwd_bwd']):.1f}x)")
    if naive_reps:
        print(f"   (b) speed-up over the baseline  : {med['naive'] / med['step']:6.1f}x  more steps per second")
    print(f"   (c) speed-up over the previous  : {med['prev'] / med['step']:6.2f}x  more steps per second "
          f"({med['before'] / med['step']:.2f}x over the step before this round)")
    spread = {k: (min(v) / med[k], max(v) / med[k]) for k, v in times.items() if v}
    print("   spread across rounds (min/median, max/median): "
          + ", ".join(f"{k} {a:.2f}-{b:.2f}" for k, (a, b) in spread.items()))
    if parts:
        breakdown(trainer, lambda: fwd_bwd(trainer), reps_fb, rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--naive-reps", type=int, default=1, help="naive steps per round (0: no naive baseline)")
    ap.add_argument("--transformer", action="store_true",
                    help="also the minilm-ffn-unit preset (all-MiniLM-L6-v2 weights, HF_HUB_OFFLINE=1; no naive baseline)")
    ap.add_argument("--breakdown", action="store_true",
                    help="also where the step's time goes, part by part, each side by side with the forward+backward")
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s)")
    # the default run's problem, and a non-commutative one with four generators (gl(2))
    bench("sigmoid-scalar", [], args.rounds, args.naive_reps, args.breakdown)
    bench("linear2x2", ["group.generators=4"], args.rounds, args.naive_reps, args.breakdown)
    if args.transformer:  # the learned transformer action's block (one FFN unit + its compensators)
        bench("minilm-ffn-unit", [], args.rounds, 0, args.breakdown)


if __name__ == "__main__":
    main()
