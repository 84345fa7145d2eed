"""The polar-grid evaluator (library): Reynolds averages through it equal the direct ones."""

import math

import torch

from paramsym.attribution import SymmetryProblem, function_from_module, polar_grid, reynolds_x, so2
from paramsym.attribution.polar import PolarGrid, PolarGridFunction
from paramsym.models.mlp import mlp

D = torch.float64


def test_symmetry_problem_with_grid_equals_direct_evaluation():
    model = mlp([3, 8, 2], "tanh", generator=torch.Generator().manual_seed(0))
    fn, params = function_from_module(model)
    q = polar_grid(3, 8, 1.0)
    alphas = (0.7, -0.5)  # deliberately unsorted
    x = torch.cat([torch.cat([q, torch.full((q.shape[0], 1), a, dtype=D)], 1) for a in alphas])
    group = so2(input_dim=3, output_dim=2, output_plane=(0, 1), n_quadrature=16)
    grid = PolarGrid((1 / 3, 2 / 3, 1.0), math.lcm(8, 16), alphas)
    plain = SymmetryProblem(fn, params, x, group)
    fast = SymmetryProblem(fn, params, x, group, grid=grid)
    g = fast.function_of_x()
    assert isinstance(g, PolarGridFunction)
    direct = plain.delta()
    assert float((fast.delta() - direct).norm() / plain.values().norm()) < 1e-13
    hits = g.hits
    torch.testing.assert_close(reynolds_x(g, x, group), plain.values() - direct, rtol=0, atol=1e-12)
    assert g.hits > hits  # the cached node values were used
    # off-grid points: the function itself, bit for bit
    y = torch.randn(50, 3, generator=torch.Generator().manual_seed(1), dtype=D)
    assert torch.equal(g(y), plain.function_of_x()(y))
    # both problems lift to the same directions
    a, b = fast.lifts(), plain.lifts()
    assert float((a.b.direction - b.b.direction).norm() / b.b.direction.norm()) < 1e-8
