"""Shared pieces of the discovery tests: hand-written actions with closed-form behaviour.

* :class:`QuadraticShift` — the spec's counterexample ``a(t, θ) = θ + t + t²`` (added to every
  entry) on the 1×1 matrix group, ``t = log g``: exact identity, compatible generator, but not an
  action (composition defect ``2 s t``).
* :class:`Translation` — ``a(t, θ) = θ + t z`` on the same group: an exact action of (R, +),
  a symmetry only of targets that are constant along ``z``.
* :class:`LinearAction` — ``a(g, θ) = g θ`` for a matrix group acting on ``R^s`` (p = s).
* :class:`IdentityAction` — ``a(g, θ) = θ``: satisfies every error metric, moves nothing.

"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from paramsym.actions.base import GroupAction
from paramsym.groups.lie import MatrixLieGroup


def line_group() -> MatrixLieGroup:
    """The 1×1 matrix group ``{e^t}`` with generator ``h = [[1]]`` (float64)."""
    return MatrixLieGroup.supplied(torch.ones(1, 1, 1, dtype=torch.float64))


class QuadraticShift(GroupAction):
    """``a(g, θ) = θ + (t + t²) 1`` with ``t = log g``."""

    def __init__(self, p: int):
        super().__init__()
        self.group = line_group()
        self.p = p

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        t = torch.log(g[0, 0]).to(theta.dtype)
        return theta + (t + t * t)


class Translation(GroupAction):
    """``a(g, θ) = θ + t z`` with ``t = log g``."""

    def __init__(self, z: Tensor):
        super().__init__()
        self.group = line_group()
        self.register_buffer("z", z.clone())
        self.p = int(z.numel())

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        t = torch.log(g[0, 0]).to(theta.dtype)
        return theta + t * self.z.to(theta.dtype)


class LinearAction(GroupAction):
    """``a(g, θ) = g θ`` on ``R^s``."""

    def __init__(self, group: MatrixLieGroup):
        super().__init__()
        self.group = group
        self.p = group.size

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        return g.to(theta.dtype) @ theta


class IdentityAction(GroupAction):
    """``a(g, θ) = θ`` (a valid but trivial action)."""

    def __init__(self, group: MatrixLieGroup, p: int):
        super().__init__()
        self.group = group
        self.p = p

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        return theta + 0.0 * g.sum().to(theta.dtype)


@pytest.fixture
def actions():
    """The hand-written action classes (fixtures cannot be imported across test files)."""

    class _NS:
        QuadraticShift = QuadraticShift
        Translation = Translation
        LinearAction = LinearAction
        IdentityAction = IdentityAction
        line_group = staticmethod(line_group)

    return _NS
