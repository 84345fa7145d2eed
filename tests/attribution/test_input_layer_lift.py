"""The closed-form lift through the input layer (``SymmetryProblem.input_layer_direction``):
``η = J · vec(−W ξ)`` for any weights, checked against the dense Jacobian and, independently of
``J``, by central finite differences of the function along the direction."""

from __future__ import annotations

import pytest
import torch

from paramsym.attribution import SymmetryProblem, function_from_module, polar_grid, so2
from paramsym.errors import ParameterNameError, ShapeError
from paramsym.models.mlp import layer_names, mlp


def _problem(trainable=None, **group):
    model = mlp([2, 6, 3, 1], "tanh", generator=torch.Generator().manual_seed(0))  # untrained: holds for any weights
    fn, params = function_from_module(model, trainable(model) if trainable else None)
    return SymmetryProblem(fn, params, polar_grid(5, 12, 1.5), so2(**group))


def test_direction_reaches_eta_exactly():
    prob = _problem()
    z = prob.input_layer_direction("fc1.weight")
    eta = prob.eta().reshape(-1)
    assert float((prob.jacobian() @ z - eta).norm() / eta.norm()) < 1e-12
    moved = prob.layout.unflatten(z)
    assert all(float(v.abs().max()) == 0 for k, v in moved.items() if k != "fc1.weight")
    assert float(moved["fc1.weight"].abs().max()) > 0
    # independent of J: f(θ + h z) − f(θ − h z) ≈ 2h η
    h, th = 1e-5, prob.theta0
    fd = ((prob.values(th + h * z) - prob.values(th - h * z)) / (2 * h)).reshape(-1)
    assert float((fd - eta).norm() / eta.norm()) < 1e-8


def test_refusals_are_named():
    frozen = _problem(lambda m: layer_names(m, [2, 3]))
    with pytest.raises(ParameterNameError, match="'fc1.weight' is not a trainable tensor"):
        frozen.input_layer_direction("fc1.weight")
    with pytest.raises(ShapeError, match=r"shape \(3, 6\); expected \(h, 2\)"):
        _problem().input_layer_direction("fc2.weight")
    model = mlp([2, 4, 2], "tanh", generator=torch.Generator().manual_seed(1))
    fn, params = function_from_module(model)
    equivariant = SymmetryProblem(fn, params, polar_grid(3, 8, 1.0), so2(output_dim=2, output_plane=(0, 1)))
    with pytest.raises(ShapeError, match="also acts on the outputs"):
        equivariant.input_layer_direction("fc1.weight")
