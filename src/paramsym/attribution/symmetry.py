"""Groups acting on functions: orbit tangents, Reynolds projection, equivariance defect.

A group ``G`` acts on inputs ``x ∈ R^{dimX}`` by matrices ``τ_g`` and on outputs by a
representation ``ρ(g)``; on functions (seed 003, §2.1)

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

SO(2) convention (seed 003, App. C.1): the generator is ``Ω = [[0, 1], [−1, 0]]``, so
``exp(tΩ) = R_{−t}`` and ``Π(exp tΩ) f = ρ(R_{−t}) f ∘ R_t``; for an invariant ``f`` moving along
``η_Ω`` rotates the function as ``f_t = f_0 ∘ R_t`` (t in radians), the paper's prediction.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor
from torch.func import jvp

from ..errors import GroupError, ShapeError
from .jacobian import ParamFunction, check_outputs, check_probes

#: a function of the inputs only: ``g(x) -> Tensor[N, dimY]``
InputFunction = Callable[[Tensor], Tensor]

#: relative probe-set leak above which a finite-group Reynolds average warns
LEAK_WARN = 1e-6


class ProbeSetWarning(UserWarning):
    """The probe set is not invariant under the finite group (cross-talk between η and δ)."""


def rotation(angle: float | Tensor, dtype: torch.dtype = torch.float64) -> Tensor:
    """``R_φ = [[cos φ, −sin φ], [sin φ, cos φ]]`` (counter-clockwise)."""
    a = torch.as_tensor(angle, dtype=dtype)
    c, s = torch.cos(a), torch.sin(a)
    return torch.stack([torch.stack([c, -s]), torch.stack([s, c])])


#: SO(2) generator of seed 003, App. C.1: ``exp(tΩ) = R_{−t}``
OMEGA = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
#: reflection ``(u, v) ↦ (u, −v)`` of a plane
REFLECTION = torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=torch.float64)


def _embed(block: Tensor, dim: int, plane: Sequence[int] | None) -> Tensor:
    """Identity of size ``dim`` with the 2×2 ``block`` placed on coordinates ``plane``."""
    out = torch.eye(dim, dtype=torch.float64)
    if plane is None:
        return out
    i, j = plane
    idx = torch.tensor([i, j])
    out[idx.unsqueeze(1), idx.unsqueeze(0)] = block.to(torch.float64)
    return out


def _embed_alg(block: Tensor, dim: int, plane: Sequence[int] | None) -> Tensor:
    """Zero matrix of size ``dim`` with the 2×2 algebra element ``block`` on ``plane``."""
    out = torch.zeros(dim, dim, dtype=torch.float64)
    if plane is None:
        return out
    i, j = plane
    idx = torch.tensor([i, j])
    out[idx.unsqueeze(1), idx.unsqueeze(0)] = block.to(torch.float64)
    return out


def _check_plane(name: str, plane, dim: int) -> None:
    if plane is None:
        return
    if len(plane) != 2 or plane[0] == plane[1] or not all(0 <= int(k) < dim for k in plane):
        raise GroupError(
            f"{name}={tuple(plane)} must be two distinct coordinates in [0, {dim}); "
            f"the space has dimension {dim}."
        )


@dataclass(frozen=True)
class FunctionGroup:
    """A matrix group acting on functions ``R^{dimX} → R^{dimY}`` by ``τ`` and ``ρ``.

    Attributes:
        name: human-readable name (``"SO(2)"``, ``"D_4"`` ...).
        input_dim, output_dim: ``dimX`` and ``dimY``.
        tau_generators, rho_generators: Lie-algebra bases ``[k, dimX, dimX]`` and
            ``[k, dimY, dimY]`` (``k = 0`` for finite groups).
        taus, rhos, weights: quadrature of the normalised Haar measure, ``[m, dimX, dimX]``,
            ``[m, dimY, dimY]``, ``[m]`` (weights sum to 1); empty when unknown.
        finite: the quadrature lists every element (exact average).
        exp: optional ``exp(t, generator_index) -> (τ, ρ)`` for one-parameter subgroups (used
            for the flows' exact predictions); by default the matrix exponential.
    """

    name: str
    input_dim: int
    output_dim: int
    tau_generators: Tensor
    rho_generators: Tensor
    taus: Tensor
    rhos: Tensor
    weights: Tensor
    finite: bool = False
    meta: Mapping[str, object] = field(default_factory=dict)

    # ---- basic facts -----------------------------------------------------------------
    @property
    def dim(self) -> int:
        """Dimension of the Lie algebra (0 for finite groups)."""
        return int(self.tau_generators.shape[0])

    @property
    def order(self) -> int:
        """Number of quadrature points (the group order for finite groups)."""
        return int(self.taus.shape[0])

    def generator(self, xi: int | Tensor = 0) -> tuple[Tensor, Tensor]:
        """``(τ'(ξ), ρ'(ξ))`` for a basis index or a coefficient vector ``ξ`` (length ``dim``)."""
        if self.dim == 0:
            raise GroupError(
                f"{self.name} is finite and has no Lie algebra; orbit tangents need a Lie group "
                "(so2, o2 or lie_group)."
            )
        if isinstance(xi, int):
            if not 0 <= xi < self.dim:
                raise GroupError(f"generator index {xi} out of range for {self.name} (dimension {self.dim}).")
            return self.tau_generators[xi], self.rho_generators[xi]
        c = torch.as_tensor(xi, dtype=torch.float64).reshape(-1)
        if c.numel() != self.dim:
            raise GroupError(f"ξ has {c.numel()} coefficients; {self.name} has dimension {self.dim}.")
        return (
            torch.einsum("k,kij->ij", c, self.tau_generators),
            torch.einsum("k,kij->ij", c, self.rho_generators),
        )

    def exp(self, t: float, xi: int | Tensor = 0) -> tuple[Tensor, Tensor]:
        """``(τ(exp tξ), ρ(exp tξ))`` by the matrix exponential."""
        A, B = self.generator(xi)
        return torch.linalg.matrix_exp(t * A), torch.linalg.matrix_exp(t * B)

    def check_input(self, x: Tensor, name: str = "probe set") -> None:
        """Named errors for an empty, non-finite or wrongly sized probe set."""
        check_probes(x, name)
        if x.dim() != 2 or x.shape[1] != self.input_dim:
            raise ShapeError(
                f"{self.name} acts on inputs of dimension {self.input_dim}, but the {name} has "
                f"shape {tuple(x.shape)}; build the group with input_dim={x.shape[-1]} and the "
                "plane it rotates (e.g. so2(input_dim=3, input_plane=(0, 1)))."
            )

    def check_output(self, y: Tensor) -> None:
        if y.dim() != 2 or y.shape[1] != self.output_dim:
            raise ShapeError(
                f"{self.name} acts on outputs of dimension {self.output_dim} by ρ, but the model "
                f"returns shape {tuple(y.shape)}; pass output_dim={y.shape[-1] if y.dim() else 1} "
                "(and output_plane for a vector output)."
            )

    def require_quadrature(self) -> None:
        if self.order == 0:
            raise GroupError(
                f"{self.name} has no Haar quadrature, so the Reynolds projection is undefined; "
                "pass quadrature=(taus, rhos, weights) to lie_group(...) (e.g. Haar samples)."
            )


# --------------------------------------------------------------------------------------------
# Constructors
# --------------------------------------------------------------------------------------------


def _finite_group(name, input_dim, output_dim, taus, rhos, meta=None) -> FunctionGroup:
    m = taus.shape[0]
    return FunctionGroup(
        name=name,
        input_dim=input_dim,
        output_dim=output_dim,
        tau_generators=torch.zeros(0, input_dim, input_dim, dtype=torch.float64),
        rho_generators=torch.zeros(0, output_dim, output_dim, dtype=torch.float64),
        taus=taus,
        rhos=rhos,
        weights=torch.full((m,), 1.0 / m, dtype=torch.float64),
        finite=True,
        meta=dict(meta or {}),
    )


def _planar(input_dim, input_plane, output_dim, output_plane):
    _check_plane("input_plane", input_plane, input_dim)
    _check_plane("output_plane", output_plane, output_dim)
    if input_plane is None:
        raise GroupError("input_plane must name the two input coordinates the group rotates.")


def so2(
    input_dim: int = 2,
    input_plane: Sequence[int] = (0, 1),
    output_dim: int = 1,
    output_plane: Sequence[int] | None = None,
    n_quadrature: int = 64,
) -> FunctionGroup:
    """SO(2) rotating ``input_plane`` of the input (identity elsewhere).

    The output transforms trivially (``output_plane=None``: invariant functions) or by the same
    rotation on ``output_plane`` (equivariant vector fields, e.g. a force). The Reynolds
    quadrature is the equally spaced rule on ``n_quadrature`` angles (the subgroup ``C_M``).
    """
    _planar(input_dim, input_plane, output_dim, output_plane)
    if n_quadrature < 1:
        raise GroupError(f"n_quadrature must be ≥ 1, received {n_quadrature}.")
    angles = 2 * math.pi * torch.arange(n_quadrature, dtype=torch.float64) / n_quadrature
    taus = torch.stack([_embed(rotation(a), input_dim, input_plane) for a in angles])
    rhos = torch.stack([_embed(rotation(a), output_dim, output_plane) for a in angles])
    return FunctionGroup(
        name="SO(2)",
        input_dim=input_dim,
        output_dim=output_dim,
        tau_generators=_embed_alg(OMEGA, input_dim, input_plane).unsqueeze(0),
        rho_generators=_embed_alg(OMEGA, output_dim, output_plane).unsqueeze(0),
        taus=taus,
        rhos=rhos,
        weights=torch.full((n_quadrature,), 1.0 / n_quadrature, dtype=torch.float64),
        meta={"input_plane": tuple(input_plane), "output_plane": output_plane, "kind": "so2"},
    )


def o2(
    input_dim: int = 2,
    input_plane: Sequence[int] = (0, 1),
    output_dim: int = 1,
    output_plane: Sequence[int] | None = None,
    n_quadrature: int = 64,
) -> FunctionGroup:
    """O(2) = SO(2) ⋊ {1, reflection}; quadrature ``C_M`` and its reflections (``2M`` points)."""
    g = so2(input_dim, input_plane, output_dim, output_plane, n_quadrature)
    ref_in = _embed(REFLECTION, input_dim, input_plane)
    ref_out = _embed(REFLECTION, output_dim, output_plane)
    taus = torch.cat([g.taus, g.taus @ ref_in])
    rhos = torch.cat([g.rhos, g.rhos @ ref_out])
    m = taus.shape[0]
    return FunctionGroup(
        name="O(2)",
        input_dim=input_dim,
        output_dim=output_dim,
        tau_generators=g.tau_generators,
        rho_generators=g.rho_generators,
        taus=taus,
        rhos=rhos,
        weights=torch.full((m,), 1.0 / m, dtype=torch.float64),
        meta={**g.meta, "kind": "o2"},
    )


def cyclic(
    n: int,
    input_dim: int = 2,
    input_plane: Sequence[int] = (0, 1),
    output_dim: int = 1,
    output_plane: Sequence[int] | None = None,
) -> FunctionGroup:
    """``C_n``: rotations by ``2πk/n`` (exact average over ``n`` elements)."""
    _planar(input_dim, input_plane, output_dim, output_plane)
    if n < 1:
        raise GroupError(f"cyclic group order must be ≥ 1, received {n}.")
    angles = [2 * math.pi * k / n for k in range(n)]
    taus = torch.stack([_embed(rotation(a), input_dim, input_plane) for a in angles])
    rhos = torch.stack([_embed(rotation(a), output_dim, output_plane) for a in angles])
    return _finite_group(f"C_{n}", input_dim, output_dim, taus, rhos, {"kind": "cyclic", "n": n})


def dihedral(
    n: int,
    input_dim: int = 2,
    input_plane: Sequence[int] = (0, 1),
    output_dim: int = 1,
    output_plane: Sequence[int] | None = None,
) -> FunctionGroup:
    """``D_n`` (order ``2n``): ``C_n`` and its compositions with the reflection ``v ↦ −v``."""
    c = cyclic(n, input_dim, input_plane, output_dim, output_plane)
    ref_in = _embed(REFLECTION, input_dim, input_plane)
    ref_out = _embed(REFLECTION, output_dim, output_plane)
    taus = torch.cat([c.taus, c.taus @ ref_in])
    rhos = torch.cat([c.rhos, c.rhos @ ref_out])
    return _finite_group(f"D_{n}", input_dim, output_dim, taus, rhos, {"kind": "dihedral", "n": n})


def finite_group(taus: Tensor, rhos: Tensor, name: str = "finite group", atol: float = 1e-9) -> FunctionGroup:
    """A finite group given by all its elements (pairs ``(τ_g, ρ_g)``), checked for closure.

    Raises:
        GroupError: if the pairs are not closed under multiplication or lack the identity.
    """
    taus = torch.as_tensor(taus, dtype=torch.float64)
    rhos = torch.as_tensor(rhos, dtype=torch.float64)
    if taus.dim() != 3 or rhos.dim() != 3 or taus.shape[0] != rhos.shape[0] or taus.shape[0] == 0:
        raise GroupError(
            f"expected taus [m, dimX, dimX] and rhos [m, dimY, dimY] with the same m ≥ 1, "
            f"received {tuple(taus.shape)} and {tuple(rhos.shape)}."
        )
    flat = torch.cat([taus.flatten(1), rhos.flatten(1)], 1)

    def index(v):
        d = (flat - v).abs().amax(1)
        k = int(d.argmin())
        return k if float(d[k]) <= atol else None

    eye = torch.cat([torch.eye(taus.shape[1]).flatten(), torch.eye(rhos.shape[1]).flatten()]).double()
    if index(eye) is None:
        raise GroupError(f"{name}: the element list does not contain the identity.")
    for a in range(taus.shape[0]):
        for b in range(taus.shape[0]):
            prod = torch.cat([(taus[a] @ taus[b]).flatten(), (rhos[a] @ rhos[b]).flatten()])
            if index(prod) is None:
                raise GroupError(
                    f"{name}: elements {a} and {b} multiply to a matrix pair not in the list "
                    "(not closed under multiplication); pass every element of the group."
                )
    return _finite_group(name, taus.shape[1], rhos.shape[1], taus, rhos, {"kind": "finite"})


def lie_group(
    tau_generators: Tensor,
    rho_generators: Tensor,
    *,
    quadrature: tuple[Tensor, Tensor, Tensor] | None = None,
    name: str = "Lie group",
) -> FunctionGroup:
    """A matrix Lie group given by Lie-algebra generators ``[k, dimX, dimX]``, ``[k, dimY, dimY]``.

    Orbit tangents need only the generators. The Reynolds projection needs a Haar quadrature
    ``(taus, rhos, weights)`` (e.g. Haar samples of a compact group with weights ``1/m``);
    without one :func:`reynolds` raises :class:`GroupError`.
    """
    A = torch.as_tensor(tau_generators, dtype=torch.float64)
    B = torch.as_tensor(rho_generators, dtype=torch.float64)
    if A.dim() == 2:
        A = A.unsqueeze(0)
    if B.dim() == 2:
        B = B.unsqueeze(0)
    if A.dim() != 3 or B.dim() != 3 or A.shape[0] != B.shape[0] or A.shape[1] != A.shape[2] or B.shape[1] != B.shape[2]:
        raise GroupError(
            f"expected square generators [k, dimX, dimX] and [k, dimY, dimY] with the same k, "
            f"received {tuple(A.shape)} and {tuple(B.shape)}."
        )
    if quadrature is None:
        taus = torch.zeros(0, A.shape[1], A.shape[1], dtype=torch.float64)
        rhos = torch.zeros(0, B.shape[1], B.shape[1], dtype=torch.float64)
        weights = torch.zeros(0, dtype=torch.float64)
    else:
        taus, rhos, weights = (torch.as_tensor(t, dtype=torch.float64) for t in quadrature)
        if taus.shape[1:] != A.shape[1:] or rhos.shape[1:] != B.shape[1:] or weights.shape != (taus.shape[0],):
            raise GroupError("quadrature shapes do not match the generators.")
        if abs(float(weights.sum()) - 1.0) > 1e-9:
            raise GroupError(f"quadrature weights sum to {float(weights.sum())}; expected 1.")
    return FunctionGroup(name, A.shape[1], B.shape[1], A, B, taus, rhos, weights, meta={"kind": "lie"})


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

    For a finite group whose elements do not map the probe set onto itself a
    :class:`ProbeSetWarning` reports the measured :func:`probe_leak`.
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
    taus = group.taus.to(x.dtype)
    rhos_inv = torch.linalg.inv(group.rhos).to(x.dtype)
    w = group.weights.to(x.dtype)
    n = x.shape[0]
    total = None
    for s in range(0, group.order, chunk):
        t = taus[s : s + chunk]
        xs = torch.einsum("kij,nj->kni", t, x).reshape(-1, x.shape[1])
        y = g(xs)
        check_outputs(y, "model output on the transformed probe points")
        y = y.reshape(t.shape[0], n, -1)
        group.check_output(y[0])
        part = torch.einsum("k,kab,knb->na", w[s : s + chunk], rhos_inv[s : s + chunk], y)
        total = part if total is None else total + part
    return total


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
