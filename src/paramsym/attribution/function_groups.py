"""Groups acting on functions ``R^{dimX} → R^{dimY}``: :class:`FunctionGroup` and constructors.

A :class:`FunctionGroup` holds input matrices ``τ_g`` and output matrices ``ρ(g)`` (the action
``[Π(g) f](x) = ρ(g) f(τ_{g⁻¹} x)``, see :mod:`paramsym.attribution.symmetry`), Lie-algebra
generators for orbit tangents and a Haar quadrature for the Reynolds projection.

Finite groups are built from :mod:`paramsym.groups`: :func:`function_group` takes a
:class:`~paramsym.groups.finite.FiniteGroup` and two of its
:class:`~paramsym.groups.reps.Representation` (on inputs and on outputs); the group axioms and
the homomorphism property are checked there, once. :func:`cyclic`, :func:`dihedral` and
:func:`finite_group` are thin constructors through it (``finite_group`` builds the abstract
group from the given matrices with :func:`paramsym.groups.finite.from_matrices`). Continuous
groups: :func:`so2`, :func:`o2`, :func:`lie_group`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from ..errors import GroupError, RepresentationError, ShapeError
from ..groups import finite as finite_groups
from ..groups.lie import rotation, so2_generator
from ..groups.reps import Representation
from .jacobian import check_probes

__all__ = ["OMEGA", "REFLECTION", "FunctionGroup", "cyclic", "dihedral", "finite_group", "function_group", "lie_group",
           "o2", "so2"]

#: SO(2) generator of [Attribution] App. C.1: ``Ω = −J = Jᵀ = [[0, 1], [−1, 0]]`` with the one
#: so(2) generator ``J`` of :func:`paramsym.groups.lie.so2_generator` (``exp(tJ) = R_t``,
#: counter-clockwise), so ``exp(tΩ) = R_{−t}``. Attribution keeps the paper's sign: its
#: sensitivities c*, b* and flows are stated along Ω. (``Jᵀ`` rather than ``−J``: no −0 entries.)
OMEGA = so2_generator(torch.float64).T.contiguous()
#: reflection ``(u, v) ↦ (u, −v)`` of a plane
REFLECTION = torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=torch.float64)


def _place(out: Tensor, block: Tensor, plane: Sequence[int] | None) -> Tensor:
    """``out`` with the 2×2 ``block`` written on the coordinates ``plane`` (unchanged if ``None``)."""
    if plane is None:
        return out
    i, j = plane
    idx = torch.tensor([i, j])
    out[idx.unsqueeze(1), idx.unsqueeze(0)] = block.to(torch.float64)
    return out


def _embed(block: Tensor, dim: int, plane: Sequence[int] | None) -> Tensor:
    """Identity of size ``dim`` with the 2×2 ``block`` placed on coordinates ``plane``."""
    return _place(torch.eye(dim, dtype=torch.float64), block, plane)


def _embed_alg(block: Tensor, dim: int, plane: Sequence[int] | None) -> Tensor:
    """Zero matrix of size ``dim`` with the 2×2 algebra element ``block`` on ``plane``."""
    return _place(torch.zeros(dim, dim, dtype=torch.float64), block, plane)


def _planar_matrices(mats, input_dim, input_plane, output_dim, output_plane) -> tuple[Tensor, Tensor]:
    """``(τ, ρ)`` stacks of the 2×2 matrices ``mats`` embedded on the input and output planes."""
    taus = torch.stack([_embed(m, input_dim, input_plane) for m in mats])
    rhos = torch.stack([_embed(m, output_dim, output_plane) for m in mats])
    return taus, rhos


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
        structure: for a finite group, the abstract :class:`~paramsym.groups.finite.FiniteGroup`
            (quadrature point ``i`` is its element ``meta["elements"][i]``, or ``i`` when absent).
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
    structure: finite_groups.FiniteGroup | None = field(default=None, compare=False, repr=False)

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


def _uniform(name: str, taus: Tensor, rhos: Tensor, tau_generators: Tensor, rho_generators: Tensor,
             **extra) -> FunctionGroup:
    """A :class:`FunctionGroup` whose quadrature gives every one of its ``m`` points weight ``1/m``
    (dimensions from the matrices)."""
    m = taus.shape[0]
    return FunctionGroup(name=name, input_dim=taus.shape[1], output_dim=rhos.shape[1], tau_generators=tau_generators,
                         rho_generators=rho_generators, taus=taus, rhos=rhos,
                         weights=torch.full((m,), 1.0 / m, dtype=torch.float64), **extra)


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
    taus, rhos = _planar_matrices([rotation(a) for a in angles], input_dim, input_plane, output_dim, output_plane)
    return _uniform("SO(2)", taus, rhos, _embed_alg(OMEGA, input_dim, input_plane).unsqueeze(0),
                    _embed_alg(OMEGA, output_dim, output_plane).unsqueeze(0),
                    meta={"input_plane": tuple(input_plane), "output_plane": output_plane, "kind": "so2"})


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
    return _uniform("O(2)", taus, rhos, g.tau_generators, g.rho_generators, meta={**g.meta, "kind": "o2"})


def function_group(
    group: finite_groups.FiniteGroup,
    rep_in: Representation,
    rep_out: Representation,
    *,
    name: str | None = None,
    meta: Mapping[str, object] | None = None,
) -> FunctionGroup:
    """The finite :class:`FunctionGroup` of ``group`` acting by ``τ_g = rep_in(g)`` on inputs and
    ``ρ(g) = rep_out(g)`` on outputs; quadrature = every element with weight ``1/|G|`` (exact).

    The group axioms and the homomorphism and orthogonality of both representations are
    checked by :mod:`paramsym.groups` (:meth:`Representation.check`).

    Raises:
        GroupError: a representation of another group.
        RepresentationError: a representation that is not an orthogonal homomorphism.
    """
    for what, rep in (("rep_in", rep_in), ("rep_out", rep_out)):
        if not isinstance(rep, Representation):
            raise GroupError(f"{what} must be a paramsym.groups.reps.Representation, received {type(rep).__name__}.")
        if not group.same_as(rep.group):
            raise GroupError(
                f"{what} is a representation of {rep.group.name} (order {rep.group.order}), not of "
                f"{group.name} (order {group.order}); build both representations on the same group."
            )
        rep.check()
    d_in, d_out = rep_in.dim, rep_out.dim
    return _uniform(name or group.name, torch.from_numpy(np.array(rep_in.matrices, dtype=np.float64)),
                    torch.from_numpy(np.array(rep_out.matrices, dtype=np.float64)),
                    torch.zeros(0, d_in, d_in, dtype=torch.float64), torch.zeros(0, d_out, d_out, dtype=torch.float64),
                    finite=True, meta=dict(meta or {"kind": "finite"}), structure=group)


def _planar_reps(group, rotations_of, input_dim, input_plane, output_dim, output_plane):
    """Input/output representations of a planar rotation-reflection group, element by element."""
    taus, rhos = _planar_matrices(rotations_of, input_dim, input_plane, output_dim, output_plane)
    return Representation(group, taus.numpy(), name="tau"), Representation(group, rhos.numpy(), name="rho")


def cyclic(
    n: int,
    input_dim: int = 2,
    input_plane: Sequence[int] = (0, 1),
    output_dim: int = 1,
    output_plane: Sequence[int] | None = None,
) -> FunctionGroup:
    """``C_n``: rotations by ``2πk/n`` (exact average over ``n`` elements).

    Built through :func:`function_group` on :func:`paramsym.groups.finite.cyclic` (element ``k``
    is ``r^k``, acting as the rotation by ``2πk/n``).
    """
    _planar(input_dim, input_plane, output_dim, output_plane)
    if n < 1:
        raise GroupError(f"cyclic group order must be ≥ 1, received {n}.")
    G = finite_groups.cyclic(n)
    mats = [rotation(2 * math.pi * k / n) for k in range(n)]
    rep_in, rep_out = _planar_reps(G, mats, input_dim, input_plane, output_dim, output_plane)
    return function_group(G, rep_in, rep_out, name=f"C_{n}", meta={"kind": "cyclic", "n": n})


def dihedral(
    n: int,
    input_dim: int = 2,
    input_plane: Sequence[int] = (0, 1),
    output_dim: int = 1,
    output_plane: Sequence[int] | None = None,
) -> FunctionGroup:
    """``D_n`` (order ``2n``): ``C_n`` and its compositions with the reflection ``v ↦ −v``.

    Built through :func:`function_group` on :func:`paramsym.groups.finite.dihedral` (element
    ``k`` is ``r^k``, element ``n + k`` is ``r^k s``; ``s`` acts as the reflection).
    """
    _planar(input_dim, input_plane, output_dim, output_plane)
    if n < 1:
        raise GroupError(f"dihedral group D_n needs n ≥ 1 (order 2n), received {n}.")
    G = finite_groups.dihedral(n)
    rots = [rotation(2 * math.pi * k / n) for k in range(n)]
    mats = rots + [r @ REFLECTION for r in rots]
    rep_in, rep_out = _planar_reps(G, mats, input_dim, input_plane, output_dim, output_plane)
    return function_group(G, rep_in, rep_out, name=f"D_{n}", meta={"kind": "dihedral", "n": n})


def finite_group(taus: Tensor, rhos: Tensor, name: str = "finite group", atol: float = 1e-9) -> FunctionGroup:
    """A finite group given by all its elements (pairs ``(τ_g, ρ_g)``), checked for closure.

    The abstract group is generated from the block matrices ``diag(τ_g, ρ_g)`` by
    :func:`paramsym.groups.finite.from_matrices` (matrices identified to ``atol``); the list
    must be exactly its element set. The quadrature keeps the given order.

    Raises:
        GroupError: if the pairs are not closed under multiplication, repeat an element, or are
            singular.
    """
    taus = torch.as_tensor(taus, dtype=torch.float64)
    rhos = torch.as_tensor(rhos, dtype=torch.float64)
    if taus.dim() != 3 or rhos.dim() != 3 or taus.shape[0] != rhos.shape[0] or taus.shape[0] == 0:
        raise GroupError(
            f"expected taus [m, dimX, dimX] and rhos [m, dimY, dimY] with the same m ≥ 1, "
            f"received {tuple(taus.shape)} and {tuple(rhos.shape)}."
        )
    m, dx, dy = taus.shape[0], taus.shape[1], rhos.shape[1]
    blocks = torch.zeros(m, dx + dy, dx + dy, dtype=torch.float64)
    blocks[:, :dx, :dx], blocks[:, dx:, dx:] = taus, rhos
    decimals = max(1, int(round(-math.log10(atol))) - 1)
    G = finite_groups.from_matrices(list(blocks.numpy()), name=name, decimals=decimals)
    if G.order > m:
        raise GroupError(
            f"{name}: the {m} matrix pairs generate a group of order {G.order} (not closed under "
            "multiplication); pass every element of the group."
        )
    dist = np.abs(G.matrices[None, :] - blocks.numpy()[:, None]).max(axis=(2, 3))  # [given, element]
    where = dist.argmin(axis=1)
    if G.order < m or len(set(where.tolist())) != m:
        raise GroupError(f"{name}: the element list repeats elements ({m} pairs, {G.order} distinct); pass each once.")
    order = np.empty(m, dtype=np.int64)
    order[where] = np.arange(m)  # element j of G is given pair order[j]
    try:
        rep_in = Representation(G, taus.numpy()[order], name="tau", tol=max(atol, 1e-9))
        rep_out = Representation(G, rhos.numpy()[order], name="rho", tol=max(atol, 1e-9))
    except RepresentationError as exc:
        raise GroupError(f"{name}: {exc}") from None
    fg = function_group(G, rep_in, rep_out, name=name, meta={"kind": "finite", "elements": tuple(int(j) for j in where)})
    return dataclasses.replace(fg, taus=taus, rhos=rhos)


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


