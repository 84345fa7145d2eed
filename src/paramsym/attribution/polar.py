"""Fast evaluation of a function on the orbit of a polar probe grid (Reynolds averages).

Reynolds averages over SO(2) on a polar probe grid evaluate a function at ``M`` rotated copies
of the grid. When the quadrature's and the grid's angle counts have least common multiple
``L``, all those points lie on the ``L``-angle node set :class:`PolarGrid` (rotated as a whole
by a common offset), so :class:`PolarGridFunction` evaluates the function once per offset on
the node set and gathers, instead of once per quadrature point. Results equal the direct
evaluation up to the rounding of the node coordinates (~1e-16 relative; tested).

Use it through :class:`paramsym.attribution.SymmetryProblem`'s ``grid`` argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class PolarGrid:
    """Nodes ``(r cos 2πi/L, r sin 2πi/L, α)`` for ``r`` in ``radii``, ``i < n_angles = L``, α in
    ``alphas``: the orbit of a polar probe grid under a cyclic quadrature (``L`` = lcm of the
    grid's and the quadrature's angle counts), possibly rotated as a whole by a common angle."""

    radii: tuple[float, ...]
    n_angles: int
    alphas: tuple[float, ...]

    @property
    def size(self) -> int:
        return len(self.radii) * self.n_angles * len(self.alphas)


class PolarGridFunction:
    """``x ↦ g(x)`` that evaluates ``g`` once on a rotated copy of a :class:`PolarGrid` and gathers.

    Reynolds averages of a function on a polar probe grid evaluate it at ``M`` rotated copies of
    the grid — points that all lie on the ``L``-angle node set (and, for a prediction rotated by
    ``τ``, on the node set rotated by ``τ``). For a batch ``x`` whose points all sit within
    ``tol`` of such nodes (common angular offset, radius and α on the grid) this returns the
    cached node values (computed by one call of ``g`` per offset), otherwise ``g(x)`` itself. The
    result equals ``g(x)`` up to the rounding of the node coordinates (~1e-16 relative), which
    the tests check against the direct evaluation.
    """

    def __init__(self, g: Callable[[Tensor], Tensor], grid: PolarGrid, *, tol: float = 1e-11, max_offsets: int = 8):
        self.g, self.grid, self.tol, self.max_offsets = g, grid, tol, max_offsets
        self.radii = torch.tensor(sorted(grid.radii), dtype=torch.float64)
        self.alphas = torch.tensor(sorted(grid.alphas), dtype=torch.float64)
        self.cache: dict[float, Tensor] = {}
        self.hits = 0

    def _nodes(self, offset: float) -> Tensor:
        L = self.grid.n_angles
        ang = 2 * math.pi * (torch.arange(L, dtype=torch.float64) + offset) / L
        r, a, al = torch.meshgrid(self.radii, ang, self.alphas, indexing="ij")
        x = torch.stack([r * torch.cos(a), r * torch.sin(a), al], -1).reshape(-1, 3)
        y = self.g(x)
        return y.reshape(len(self.radii), L, len(self.alphas), -1)

    def _index(self, x: Tensor) -> tuple[float, Tensor, Tensor, Tensor] | None:
        if x.dim() != 2 or x.shape[1] != 3 or x.shape[0] < self.grid.size:
            return None
        r = x[:, :2].norm(dim=1)
        ir = torch.bucketize(r, (self.radii[1:] + self.radii[:-1]) / 2)
        a = x[:, 2].contiguous()
        ia = torch.bucketize(a, (self.alphas[1:] + self.alphas[:-1]) / 2) if len(self.alphas) > 1 \
            else torch.zeros(x.shape[0], dtype=torch.long)
        if float((r - self.radii[ir]).abs().max()) > self.tol or float((a - self.alphas[ia]).abs().max()) > self.tol:
            return None
        L = self.grid.n_angles
        u = torch.atan2(x[:, 1], x[:, 0]) * (L / (2 * math.pi))
        offset = float(u[0] - torch.round(u[0]))
        w = u - offset
        i = torch.round(w)
        if float(((w - i) * r).abs().max()) * (2 * math.pi / L) > self.tol:
            return None
        return round(offset, 12), ir, torch.remainder(i.long(), L), ia

    def __call__(self, x: Tensor) -> Tensor:
        found = self._index(x)
        if found is None:
            return self.g(x)
        offset, ir, ii, ia = found
        if offset not in self.cache:
            if len(self.cache) >= self.max_offsets:
                self.cache.pop(next(iter(self.cache)))
            self.cache[offset] = self._nodes(offset)
        self.hits += 1
        return self.cache[offset][ir, ii, ia]
