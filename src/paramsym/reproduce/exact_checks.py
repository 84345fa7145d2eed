"""Small exact computations behind claims that no experiment or command prints.

:func:`reynolds_mexican_hat` — [Attribution] App. A.5 ("Probe sets and quadrature") and C.1: the
64-point Reynolds rule on SO(2) "reproduces an exactly equivariant field to ~1e-15 relative error". The field is the
Mexican-hat force ``F(q; α) = −(α + ‖q‖²) q`` on the polar grid of 15 radii × 32 angles in
``‖q‖ ≤ 1``, stacked over the paper's eight training values ``α ∈ {±1.1, ±0.8, ±0.6, ±0.2}``
(3,840 points), SO(2) acting on ``q`` and on ``F``. Measured: ``‖P_E F − F‖ / ‖F‖``, the orbit
tangent ``‖η‖ / ‖F‖`` (zero for an equivariant field) and the equivariance error over 40 angles.

Run as ``python -m paramsym.reproduce.exact_checks`` to print the JSON.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ALPHAS", "reynolds_mexican_hat"]

#: the paper's training values of α ([Attribution] §3.2)
ALPHAS = (-1.1, -0.8, -0.6, -0.2, 0.2, 0.6, 0.8, 1.1)


def reynolds_mexican_hat(alphas: tuple[float, ...] = ALPHAS, radii: int = 15, angles: int = 32) -> dict[str, Any]:
    """Reynolds projection of the exactly equivariant Mexican-hat force (module docstring).

    Returns:
        ``relative_change`` ``‖P_E F − F‖/‖F‖``, ``eta_relative`` ``‖η‖/‖F‖``, ``equivariance_error``,
        ``points`` and ``alphas``.
    """
    import torch

    from ..attribution import equivariance_error_x, orbit_tangent_x, polar_grid, reynolds_x, so2

    def force(x: torch.Tensor) -> torch.Tensor:
        q, a = x[:, :2], x[:, 2:3]
        return -(a + (q * q).sum(1, keepdim=True)) * q

    q = polar_grid(radii, angles, 1.0)
    x = torch.cat([torch.cat([q, torch.full((q.shape[0], 1), a, dtype=torch.float64)], 1) for a in alphas])
    g = so2(input_dim=3, input_plane=(0, 1), output_dim=2, output_plane=(0, 1))
    f = force(x)
    rel = float((reynolds_x(force, x, g) - f).norm() / f.norm())
    eta = float(orbit_tangent_x(force, x, g).norm() / f.norm())
    return {"relative_change": rel, "eta_relative": eta, "equivariance_error": float(equivariance_error_x(force, x, g)),
            "points": int(x.shape[0]), "alphas": list(alphas), "quadrature": 64}


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(reynolds_mexican_hat(), indent=2))
