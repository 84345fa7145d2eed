"""Groups acting on functions: orbit tangents, Reynolds projection, equivariance defect.

A group ``G`` acts on inputs ``x ∈ R^{dimX}`` by matrices ``τ_g`` and on outputs by a
representation ``ρ(g)``; on functions ([Attribution] §2.1)

    [Π(g) f](x) = ρ(g) f(τ_{g⁻¹} x).

``τ`` may act on a subset of the input coordinates only (a rotation of ``q`` inside
``x = (q, α)``, identity on ``α``): it is always a full ``dimX × dimX`` matrix.

* Orbit tangent (generator ``ξ`` with input matrix ``A = τ'(ξ)`` and output matrix
  ``B = ρ'(ξ)``):  ``η_ξ(x) = d/dt Π(exp tξ) f |_{t=0} (x) = B f(x) − D_x f(x) · (A x)``,
  computed by one ``torch.func.jvp`` in the input.
* Reynolds projection (compact ``G``, normalised Haar measure ``μ``):
  ``[P_E f](x) = ∫_G ρ(g)⁻¹ f(τ_g x) dμ(g)`` — an exact average for finite groups, the
  ``M``-point equally spaced rule for SO(2) (``M = 64`` by default; it integrates the Fourier
  modes ``|k| < M`` of ``g ↦ ρ(g)⁻¹ f(τ_g x)`` exactly and is itself a projection, because the
  points form the subgroup ``C_M``).
* Equivariance defect ``δ = f − P_E f``; ``P_E δ = 0`` and ``δ = 0`` iff ``f`` is equivariant
  (on the quadrature subgroup).

SO(2) convention ([Attribution] App. C.1): the generator is ``Ω = [[0, 1], [−1, 0]]``, so
``exp(tΩ) = R_{−t}`` and ``Π(exp tΩ) f = ρ(R_{−t}) f ∘ R_t``; for an invariant ``f`` moving along
``η_Ω`` rotates the function as ``f_t = f_0 ∘ R_t`` (t in radians), the paper's prediction.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor
from torch.func import jvp

from ..errors import ShapeError
from ..groups.reynolds import reynolds_function
from .function_groups import (  # noqa: F401 (the group constructors are re-exported here)
    OMEGA,
    REFLECTION,
    FunctionGroup,
    cyclic,
    dihedral,
    finite_group,
    function_group,
    lie_group,
    o2,
    rotation,
    so2,
)
from .jacobian import ParamFunction, check_outputs

#: a function of the inputs only: ``g(x) -> Tensor[N, dimY]``
InputFunction = Callable[[Tensor], Tensor]

#: relative probe-set leak above which a finite-group Reynolds average warns
LEAK_WARN = 1e-6


class ProbeSetWarning(UserWarning):
    """The probe set is not invariant under the finite group (cross-talk between η and δ)."""


# --------------------------------------------------------------------------------------------
# η, Reynolds, δ
# --------------------------------------------------------------------------------------------


def _bind(fn: ParamFunction, params: Mapping[str, Tensor]) -> InputFunction:
    return lambda x: fn(params, x)


def orbit_tangent_x(g: InputFunction, x: Tensor, group: FunctionGroup, xi: int | Tensor = 0) -> Tensor:
    """``η_ξ(x_n) = ρ'(ξ) g(x_n) − D_x g(x_n)·(τ'(ξ) x_n)`` for a function of ``x`` only."""
    group.check_input(x)
    A, B = group.generator(xi)
    A = A.to(x.dtype)
    y, dy = jvp(g, (x,), (x @ A.T,))
    group.check_output(y)
    check_outputs(y)
    return y @ B.to(y.dtype).T - dy


def orbit_tangent(
    fn: ParamFunction, params: Mapping[str, Tensor], x: Tensor, group: FunctionGroup, xi: int | Tensor = 0
) -> Tensor:
    """Orbit tangent ``η_ξ`` of ``f_θ`` on the probe set, shape ``[N, dimY]`` (see module doc)."""
    return orbit_tangent_x(_bind(fn, params), x, group, xi)


def probe_leak(x: Tensor, group: FunctionGroup) -> float:
    """How far the probe set is from invariance under the quadrature elements.

    ``leak = max_g max_n min_m ‖τ_g x_n − x_m‖ / max_n ‖x_n‖`` — zero iff every ``τ_g`` maps the
    probe set onto itself.
    """
    group.check_input(x)
    xs = x.to(torch.float64)
    scale = float(xs.norm(dim=1).max()) or 1.0
    worst = 0.0
    for tau in group.taus:
        d = torch.cdist(xs @ tau.T, xs, compute_mode="donot_use_mm_for_euclid_dist")
        worst = max(worst, float(d.min(dim=1).values.max()))
    return worst / scale


def reynolds_x(g: InputFunction, x: Tensor, group: FunctionGroup, *, chunk: int = 16, warn: bool = True) -> Tensor:
    """``[P_E g](x_n) = Σ_k w_k ρ_k⁻¹ g(τ_k x_n)`` for a function of ``x`` only.

    The average is :func:`paramsym.groups.reynolds.reynolds_function` (the one Reynolds average
    of the library) over the group's quadrature; this adds the named checks (probe set, output
    shape, finite outputs). For a finite group whose elements do not map the probe set onto
    itself a :class:`ProbeSetWarning` reports the measured :func:`probe_leak`.
    """
    group.check_input(x)
    group.require_quadrature()
    if warn and group.finite:
        leak = probe_leak(x, group)
        if leak > LEAK_WARN:
            warnings.warn(
                f"the probe set is not invariant under {group.name}: leak {leak:.3g} (max distance "
                "of a transformed probe point to the set, relative to the set's radius); η and δ "
                "will cross-talk. Use a probe set closed under the group (e.g. a polar grid whose "
                "angle count is a multiple of the rotation order).",
                ProbeSetWarning,
                stacklevel=2,
            )

    def check(y: Tensor) -> None:
        check_outputs(y, "model output on the transformed probe points")
        group.check_output(y.reshape(y.shape[0], -1) if y.dim() >= 1 else y)

    return reynolds_function(
        g, x, group.taus.to(x.dtype), torch.linalg.inv(group.rhos).to(x.dtype), group.weights.to(x.dtype),
        chunk=chunk, check=check,
    )


def reynolds(
    fn: ParamFunction, params: Mapping[str, Tensor], x: Tensor, group: FunctionGroup, *, warn: bool = True
) -> Tensor:
    """Reynolds projection ``P_E f_θ`` on the probe set, shape ``[N, dimY]``."""
    return reynolds_x(_bind(fn, params), x, group, warn=warn)


def equivariance_defect(
    fn: ParamFunction, params: Mapping[str, Tensor], x: Tensor, group: FunctionGroup, *, warn: bool = True
) -> Tensor:
    """``δ_θ = f_θ − P_E f_θ`` on the probe set, shape ``[N, dimY]``."""
    g = _bind(fn, params)
    return check_outputs(g(x)) - reynolds_x(g, x, group, warn=warn)


def equivariance_error_x(g: InputFunction, x: Tensor, group: FunctionGroup, angles: Sequence[float] | int = 40) -> float:
    """``max_α max_n |ρ(g_α)⁻¹ g(τ_{g_α} x_n) − g(x_n)|`` over fixed rotation angles.

    For SO(2)/O(2) ``angles`` is a list of angles or a count (``2πk/count``, k = 0..count−1, the
    seed's 40); for other groups the quadrature elements are used.
    """
    group.check_input(x)
    y0 = g(x)
    if group.dim == 1 and group.meta.get("kind") in ("so2", "o2"):
        if isinstance(angles, int):
            angles = [2 * math.pi * k / angles for k in range(angles)]
        elems = [group.exp(-a) for a in angles]  # exp(−aΩ) = R_a
    else:
        elems = list(zip(group.taus, group.rhos))
    worst = 0.0
    for tau, rho in elems:
        y = g(x @ tau.to(x.dtype).T)
        diff = y @ torch.linalg.inv(rho).to(y.dtype).T - y0
        worst = max(worst, float(diff.abs().max()))
    return worst


def transform_x(g: InputFunction, group: FunctionGroup, t: float, xi: int | Tensor = 0) -> InputFunction:
    """``Π(exp tξ) g``: ``x ↦ ρ(exp tξ) g(τ(exp(−tξ)) x)`` (the +c flow's exact prediction)."""
    tau_inv, _ = group.exp(-t, xi)
    _, rho = group.exp(t, xi)

    def h(x: Tensor) -> Tensor:
        return g(x @ tau_inv.to(x.dtype).T) @ rho.to(x.dtype).T

    return h


def polar_grid(n_radii: int, n_angles: int, r_max: float = 1.0, *, r_min: float | None = None,
               dtype: torch.dtype = torch.float64) -> Tensor:
    """Polar probe grid ``[n_radii·n_angles, 2]``, radii ``r_max·k/n_radii`` (k = 1..n_radii)
    unless ``r_min`` is given (then equally spaced in ``[r_min, r_max]``); invariant under
    ``C_{n_angles}`` and ``D_{n_angles}``."""
    if n_radii < 1 or n_angles < 1:
        raise ShapeError(f"polar grid needs n_radii ≥ 1 and n_angles ≥ 1, received {n_radii}, {n_angles}.")
    if r_min is None:
        radii = r_max * torch.arange(1, n_radii + 1, dtype=dtype) / n_radii
    else:
        radii = torch.linspace(r_min, r_max, n_radii, dtype=dtype)
    phi = 2 * math.pi * torch.arange(n_angles, dtype=dtype) / n_angles
    r, p = torch.meshgrid(radii, phi, indexing="ij")
    return torch.stack([r * torch.cos(p), r * torch.sin(p)], -1).reshape(-1, 2)
