"""The anchor paper's 2-D test functions with an exact SO(2) action on their level sets.

Both are sums of two squares, ``f(p) = ‖u(p)‖²`` with an invertible map ``u: R² → R²``, so the
rotations ``R ∈ SO(2)`` act by ``a(R, p) = u⁻¹(R u(p))`` and ``f(a(R, p)) = ‖R u‖² = f(p)``
exactly (the orbit of ``p`` is its whole level set):

* Booth ``f(x, y) = (x + 2y − 7)² + (2x + y − 5)² = ‖A p − b‖²`` with ``A = [[1, 2], [2, 1]]``,
  ``b = (7, 5)``: ``u = A p − b``, ``u⁻¹(w) = A⁻¹ (w + b)``.
* Rosenbrock ``f(x, y) = (1 − x)² + 100 (y − x²)² = ‖(1 − x, 10 (y − x²))‖²``:
  ``u = (1 − x, 10 (y − x²))``, ``u⁻¹(w) = (x, y)`` with ``x = 1 − w₁``, ``y = x² + w₂ / 10``.

The group is ``SO(2) = {exp(t J)}``, ``J = [[0, −1], [1, 0]]`` (one generator, the basis ``J / √2``
of :func:`paramsym.groups.lie.so2_basis`; ``exp(tJ)`` rotates ``u`` counter-clockwise). ``act`` accepts
any 2 × 2 matrix (the ambient convention of :class:`~paramsym.actions.base.GroupAction`);
invariance holds for orthogonal ones.
"""

from __future__ import annotations

import abc

import torch
from torch import Tensor

from ..actions.exact import ExactAction
from ..groups.lie import so2_basis

__all__ = ["booth", "rosenbrock", "BoothRotation", "RosenbrockRotation"]

_A = ((1.0, 2.0), (2.0, 1.0))
_B = (7.0, 5.0)


def booth(p: Tensor) -> Tensor:
    """``(x + 2y − 7)² + (2x + y − 5)²`` (minimum 0 at ``(1, 3)``)."""
    x, y = p[..., 0], p[..., 1]
    return (x + 2 * y - 7) ** 2 + (2 * x + y - 5) ** 2


def rosenbrock(p: Tensor) -> Tensor:
    """``(1 − x)² + 100 (y − x²)²`` (minimum 0 at ``(1, 1)``)."""
    x, y = p[..., 0], p[..., 1]
    return (1 - x) ** 2 + 100 * (y - x**2) ** 2


class _Rotation(ExactAction):
    dimension, size, p = 1, 2, 2

    def _basis(self, dtype: torch.dtype) -> Tensor:
        return so2_basis(dtype)

    @abc.abstractmethod
    def u(self, p: Tensor) -> Tensor:
        """The chart ``u(p)`` in which the loss is ``‖u‖²`` (rotations of ``u`` keep it)."""

    @abc.abstractmethod
    def u_inv(self, w: Tensor) -> Tensor:
        """The inverse chart ``p = u⁻¹(w)``."""

    def act(self, g: Tensor, theta: Tensor) -> Tensor:
        return self.u_inv(g.to(theta.dtype) @ self.u(theta))


class BoothRotation(_Rotation):
    """``a(R, p) = A⁻¹ (R (A p − b) + b)``: SO(2) on Booth's level sets (module docstring)."""

    kind = "booth_rotation"

    def u(self, p: Tensor) -> Tensor:
        A = torch.tensor(_A, dtype=p.dtype)
        return A @ p - torch.tensor(_B, dtype=p.dtype)

    def u_inv(self, w: Tensor) -> Tensor:
        A = torch.tensor(_A, dtype=w.dtype)
        return torch.linalg.solve(A, w + torch.tensor(_B, dtype=w.dtype))


class RosenbrockRotation(_Rotation):
    """``a(R, p) = u⁻¹(R u(p))`` with ``u = (1 − x, 10 (y − x²))``: SO(2) on Rosenbrock's level sets."""

    kind = "rosenbrock_rotation"

    def u(self, p: Tensor) -> Tensor:
        x, y = p[0], p[1]
        return torch.stack([1 - x, 10 * (y - x**2)])

    def u_inv(self, w: Tensor) -> Tensor:
        x = 1 - w[0]
        return torch.stack([x, x**2 + w[1] / 10])
