"""Weight matching against planted transformations, exact function preservation, the barrier formula."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from paramsym.actions import catalogue as cat
from paramsym.actions.permutation import HeadPermutationAction, HiddenPermutationAction
from paramsym.alignment.align import align, align_parameters, apply_permutation, apply_rescaling
from paramsym.alignment.arch import mlp_architecture
from paramsym.alignment.matching import (
    balance,
    distance,
    match_permutations,
    match_rescaling,
    permute,
    solve_quartic_scales,
)
from paramsym.alignment.path import barrier, path_curve
from paramsym.models.datasets import Split
from paramsym.models.mlp import mlp
from paramsym.params import ParameterBlock


def _params(widths, seed, dtype=torch.float64, activation="relu"):
    m = mlp(widths, activation, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    return {k: v.detach() for k, v in m.named_parameters()}


def _plant(a, arch, seed, scales=False):
    """B = (P, D)·A through the catalogue actions; returns B and the planted permutations."""
    gen = torch.Generator().manual_seed(seed)
    b, planted = dict(a), {}
    for g in arch.groups:
        perm = torch.randperm(g.size, generator=gen)
        planted[g.name] = perm
        b = apply_permutation(b, g, perm)
        if scales:
            b = apply_rescaling(b, g, torch.exp(torch.randn(g.size, generator=gen, dtype=torch.float64)))
    return b, planted


def test_matching_recovers_a_planted_permutation_exactly():
    a = _params([7, 12, 9, 4], 0)
    arch = mlp_architecture(a, "relu")
    b, planted = _plant(a, arch, 1)
    assert distance(a, b) > 1.0  # the plant moved the parameters
    perms, _ = match_permutations(a, b, arch.groups, generator=torch.Generator().manual_seed(0))
    for g in arch.groups:  # B's unit perm[i] is A's unit i: perm inverts the plant
        inv = torch.empty_like(planted[g.name])
        inv[planted[g.name]] = torch.arange(g.size)
        assert torch.equal(perms[g.name], inv)
    aligned = b
    for g in arch.groups:
        aligned = apply_permutation(aligned, g, perms[g.name])
    assert all(torch.equal(aligned[n], a[n]) for n in a)


def test_balanced_matching_recovers_planted_permutation_and_rescaling():
    a = _params([6, 10, 8, 3], 2)
    arch = mlp_architecture(a, "relu")
    b, _ = _plant(a, arch, 3, scales=True)
    stages, _, _ = align_parameters(arch, a, b, ["permutation", "rescaling"], start="balanced")
    full = stages["full"]
    assert distance(a, b) > 1.0
    assert max(float((full[n] - a[n]).abs().max()) for n in a) <= 1e-10


def test_balance_is_the_least_norm_point_of_the_orbit():
    a = _params([5, 6, 7, 2], 4)
    arch = mlp_architecture(a, "relu")
    c = balance(a, arch.groups)
    bal = dict(a)
    for g in arch.groups:
        bal = rescale_via(bal, g, c[g.name])
    zero = {n: torch.zeros_like(t) for n, t in a.items()}
    base = distance(zero, bal)
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):  # no random nearby orbit point has a smaller norm
        q = dict(bal)
        for g in arch.groups:
            q = rescale_via(q, g, torch.exp(0.05 * torch.randn(g.size, generator=gen, dtype=torch.float64)))
        assert distance(zero, q) >= base - 1e-12


def rescale_via(p, g, c):
    return apply_rescaling(p, g, c)


def test_rescaling_scales_minimise_the_quartic_objective_against_a_grid():
    rng = np.random.default_rng(0)
    uu, vv = rng.random(50) + 0.1, rng.random(50) + 0.1
    ua, vw = rng.normal(size=50), rng.normal(size=50)
    c = solve_quartic_scales(uu, ua, vw, vv)
    grid = np.exp(np.linspace(-6, 6, 100_001))
    for j in range(50):
        f = grid**2 * uu[j] - 2 * grid * ua[j] + vv[j] / grid**2 - 2 * vw[j] / grid
        fc = c[j] ** 2 * uu[j] - 2 * c[j] * ua[j] + vv[j] / c[j] ** 2 - 2 * vw[j] / c[j]
        assert fc <= f.min() + 1e-7
    assert np.all(solve_quartic_scales(np.zeros(3), np.ones(3), np.ones(3), np.ones(3)) == 1.0)  # dead units


def test_rescaling_never_increases_the_distance_and_moves_b():
    a, b = _params([6, 10, 8, 3], 5), _params([6, 10, 8, 3], 6)
    arch = mlp_architecture(a, "relu")
    scales, _ = match_rescaling(a, b, arch.groups)
    moved = dict(b)
    for g in arch.groups:
        moved = apply_rescaling(moved, g, scales[g.name])
    assert distance(a, moved) < distance(a, b)
    assert any(float((scales[g.name] - 1).abs().max()) > 1e-3 for g in arch.groups)


def test_aligned_b_computes_the_same_function_float64():
    a, b = _params([8, 16, 16, 5], 7), _params([8, 16, 16, 5], 8)
    arch = mlp_architecture(a, "relu")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(200, 8, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 5, (200,), generator=gen)
    res = align(arch, a, b, Split(x[:150], y[:150], x[150:], y[150:]), points=5)
    assert res.function_error["permutation"] <= 1e-10 and res.function_error["full"] <= 1e-10
    full = res.stages["full"]
    assert max(float((full[n] - b[n]).abs().max()) for n in b) > 1e-2  # B moved
    out_b, out_full = arch.forward(b, x), arch.forward(full, x)
    assert float((out_b - out_full).abs().max()) <= 1e-10 * float(out_b.abs().max())


def test_generic_permutation_equals_the_catalogue_actions():
    a = _params([5, 7, 3], 9)
    arch = mlp_architecture(a, "relu")
    g = arch.groups[0]
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(1))
    block = ParameterBlock.from_params(a, ["fc1.weight", "fc1.bias", "fc2.weight"])
    act = HiddenPermutationAction(block, "fc1.weight", "fc2.weight")
    theta = block.gather(a)
    via_matrix = block.scatter(act.act(cat.permutation_matrix(perm.tolist()), theta), a)
    via_index = block.scatter(act.act_permutation(perm, theta), a)
    generic = permute(a, g, perm)
    for n in a:
        assert torch.equal(via_matrix[n], via_index[n]) and torch.equal(via_index[n], generic[n])


def test_head_permutation_act_permutation_equals_act():
    gen = torch.Generator().manual_seed(0)
    params = {"w": torch.randn(6, 4 * 3, generator=gen, dtype=torch.float64),
              "o": torch.randn(4 * 3, 5, generator=gen, dtype=torch.float64)}
    block = ParameterBlock.from_params(params)
    act = HeadPermutationAction(block, 4, {"w": (6, 3), "o": (1, 15)})
    perm = torch.tensor([2, 0, 3, 1])
    theta = block.gather(params)
    assert torch.equal(act.act(cat.permutation_matrix(perm.tolist()), theta), act.act_permutation(perm, theta))


def test_barrier_formula_against_brute_force():
    a, b = _params([4, 6, 3], 10), _params([4, 6, 3], 11)
    arch = mlp_architecture(a, "relu")
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(40, 4, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (40,), generator=gen)
    data = Split(x[:30], y[:30], x[30:], y[30:])
    curve = path_curve(arch.forward, a, b, data, points=9)
    # brute force: an nn.Module per α, loss by hand, gaps by hand
    losses = []
    for k in range(9):
        al = k / 8
        m = mlp([4, 6, 3], "relu", dtype=torch.float64)
        m.load_state_dict({n: (1 - al) * a[n] + al * b[n] for n in a})
        with torch.no_grad():
            logp = torch.log_softmax(m(x[30:]), -1)
        losses.append(float(-logp[torch.arange(10), y[30:]].mean()))
    assert np.allclose(curve.test_loss, losses, rtol=1e-12, atol=0)
    gaps = [losses[k] - ((1 - k / 8) * losses[0] + (k / 8) * losses[-1]) for k in range(9)]
    value, at = barrier(curve.alphas, curve.test_loss)
    assert math.isclose(value, max(gaps), rel_tol=1e-12, abs_tol=1e-15)
    assert at == curve.alphas[int(np.argmax(gaps))]
    # a planted convex bump: barrier = bump height at the right α
    v, where = barrier([0, 0.25, 0.5, 0.75, 1], [1.0, 2.5, 3.0, 2.2, 2.0])
    assert math.isclose(v, 3.0 - 1.5) and where == 0.5


def test_barrier_refuses_a_grid_without_ends():
    from paramsym.errors import ConfigError

    with pytest.raises(ConfigError, match="grid"):
        barrier([0.1, 1.0], [1.0, 2.0])
