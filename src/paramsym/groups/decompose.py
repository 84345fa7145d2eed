"""Decomposing a real representation into real irreducibles, and equivariant maps.

For ``rho`` on ``R^d`` and the real irreducibles ``sigma_i`` (dimension ``d_i``, character
``psi_i``, ``e_i = dim End_G(sigma_i)``) the multiplicities are
``m_i = <chi_rho, psi_i> / e_i`` with ``<a, b> = (1/|G|) sum_g a(g) b(g)``.

The change of basis is built from intertwiners. The average
``Phi_i(X) = (1/|G|) sum_g rho(g) X sigma_i(g)^T`` maps any ``d x d_i`` matrix into
``Hom_G(sigma_i, rho)``; for ``T, T'`` in that space ``T^T T'`` lies in ``End_G(sigma_i)``, so
Gram–Schmidt "over the division algebra" (``T <- T - sum_b T_b T_b^T T``, then
``T <- T / sqrt(tr(T^T T) / d_i)``) yields isometric intertwiners ``T_1 .. T_{m_i}`` with
orthogonal images. Concatenating them over ``i`` gives an orthogonal ``Q`` with

    Q^T rho(g) Q = ⊕_i (I_{m_i} ⊗ sigma_i(g))     (blocks in real_irreps order, copies adjacent),

i.e. the blocks are exactly the matrices of :func:`~paramsym.groups.irreps.real_irreps`.

Equivariant maps: with decompositions ``Q_in, Q_out``,
``Hom_G(V_in, V_out) = ⊕_i Hom(R^{m_i^in}, R^{m_i^out}) ⊗ End_G(sigma_i)``, so the maps
``Q_out[:, copy b of i] E Q_in[:, copy a of i]^T`` over a Frobenius-orthonormal basis ``E`` of
``End_G(sigma_i)`` are a Frobenius-orthonormal basis of ``Hom_G``, of size
``sum_i m_i^in m_i^out e_i``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConvergenceError, RepresentationError
from .irreps import RealIrrep, real_irreps
from .progress import progress_bar
from .reps import Representation
from .reynolds import reynolds_matrices


@dataclass(eq=False)
class Decomposition:
    """``rho ≅ ⊕_i m_i sigma_i`` with an orthogonal change of basis.

    Attributes:
        rep: the decomposed representation.
        irreps: all real irreducibles of the group, in :func:`real_irreps` order.
        multiplicities: ``m_i`` for each (zeros included).
        basis: orthogonal ``Q`` (``d x d``); ``Q.T @ rho(g) @ Q`` is block diagonal with
            ``m_0`` copies of ``sigma_0(g)``, then ``m_1`` copies of ``sigma_1(g)``, ...
        orthogonality_error: ``max |Q^T Q - I|``.
        equivariance_error: ``max |rho(g) Q - Q B(g)|`` over ``checked_elements``.
        checked_elements: the elements that error was measured on (all, or the generators
            when ``|G| d^3`` is large).
    """

    rep: Representation
    irreps: list[RealIrrep]
    multiplicities: list[int]
    basis: np.ndarray
    orthogonality_error: float
    equivariance_error: float
    checked_elements: list[int]

    def summary(self) -> str:
        """``"A1 ⊕ A2 ⊕ B1 ⊕ B2 ⊕ 2E1"`` (irreps with nonzero multiplicity, in order)."""
        parts = [(f"{m}" if m > 1 else "") + r.name for r, m in zip(self.irreps, self.multiplicities) if m]
        return " ⊕ ".join(parts) if parts else "0"

    def present(self) -> list[tuple[RealIrrep, int]]:
        """``(irrep, multiplicity)`` for the irreps that occur."""
        return [(r, m) for r, m in zip(self.irreps, self.multiplicities) if m]

    def offsets(self) -> list[int]:
        """Column where irrep ``i``'s isotypic block starts in ``basis`` (length ``k + 1``)."""
        o = [0]
        for r, m in zip(self.irreps, self.multiplicities):
            o.append(o[-1] + m * r.dim)
        return o

    def isotypic_basis(self, i: int) -> np.ndarray:
        """``d x (m_i d_i)`` orthonormal basis of the ``sigma_i``-isotypic component."""
        o = self.offsets()
        return self.basis[:, o[i] : o[i + 1]]

    def copy_basis(self, i: int, a: int) -> np.ndarray:
        """``d x d_i`` isometric intertwiner ``T`` onto copy ``a`` of ``sigma_i``:
        ``rho(g) T = T sigma_i(g)``."""
        if not 0 <= a < self.multiplicities[i]:
            raise RepresentationError(
                f"{self.irreps[i].name} occurs {self.multiplicities[i]} times; copy {a} does not exist."
            )
        d = self.irreps[i].dim
        return self.isotypic_basis(i)[:, a * d : (a + 1) * d]

    def isotypic_projector(self, i: int) -> np.ndarray:
        """Orthogonal projector onto the ``sigma_i``-isotypic component."""
        b = self.isotypic_basis(i)
        return b @ b.T

    def block_matrices(self) -> np.ndarray:
        """``(order, d, d)``: ``⊕_i I_{m_i} ⊗ sigma_i(g)``, which equals ``Q^T rho(g) Q``."""
        g = self.rep.group
        out = np.zeros((g.order, self.rep.dim, self.rep.dim))
        o = 0
        for r, m in zip(self.irreps, self.multiplicities):
            for _ in range(m):
                out[:, o : o + r.dim, o : o + r.dim] = r.rep.matrices
                o += r.dim
        return out


def _inner(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b) / a.size


def multiplicities(rep: Representation, irreps: list[RealIrrep] | None = None) -> list[int]:
    """``m_i = <chi_rho, psi_i> / e_i`` for every real irreducible (in :func:`real_irreps` order).

    Needs only the character of ``rep`` (no change of basis), so it is what counts use.
    Raises :class:`RepresentationError` when a multiplicity is not a non-negative integer or the
    dimensions do not add up (``rep`` is not a representation of its group).
    """
    g = rep.group
    irreps = real_irreps(g) if irreps is None else irreps
    chi = rep.character()
    mults: list[int] = []
    for r in irreps:
        raw = _inner(chi, r.character) / r.endomorphism_dim
        m = int(round(raw))
        if abs(raw - m) > 1e-6 or m < 0:
            raise RepresentationError(
                f"multiplicity of {r.name} in {rep.name} is {raw:.6f}, not an integer: the "
                "matrices are not a representation of this group (run rep.check())."
            )
        mults.append(m)
    if sum(m * r.dim for m, r in zip(mults, irreps)) != rep.dim:
        raise RepresentationError(
            f"irreducible dimensions add up to {sum(m * r.dim for m, r in zip(mults, irreps))}, "
            f"not dim {rep.dim}: the matrices are not a representation of {g.name}."
        )
    return mults


def decompose(rep: Representation, seed: int = 0, *, progress: bool = False) -> Decomposition:
    """Decompose ``rep`` into real irreducibles; see the module docstring.

    Multiplicities come from characters (:func:`multiplicities`); the copies of each irreducible
    from Reynolds averages :func:`paramsym.groups.reynolds.reynolds_matrices` of random
    ``d x d_i`` matrices. ``progress`` shows a bar per irreducible (stderr, TTY only) for large
    ``|G| d^3``.

    Raises :class:`RepresentationError` when the multiplicities are not integers (``rep`` is not
    a representation) and :class:`ConvergenceError` if the change of basis is not orthogonal to
    ``1e-9``.
    """
    g = rep.group
    irreps = real_irreps(g)
    rng = np.random.default_rng(seed)
    mults = multiplicities(rep, irreps)
    cols = []
    bar = progress_bar(list(zip(irreps, mults)), total=len(irreps), desc=f"decompose {rep.name}",
                       enabled=progress and g.order * rep.dim**3 > 1e9)
    for r, m in bar:
        if m:
            cols.extend(_isometric_intertwiners(rep.matrices, r, m, rng))
    q = np.concatenate(cols, axis=1) if cols else np.zeros((rep.dim, 0))
    orth = float(np.abs(q.T @ q - np.eye(rep.dim)).max()) if rep.dim else 0.0
    if orth > 1e-9:
        raise ConvergenceError(f"decomposition of {rep.name}: change of basis orthogonal only to {orth:.2e}.")
    dec = Decomposition(rep=rep, irreps=irreps, multiplicities=mults, basis=q,
                        orthogonality_error=orth, equivariance_error=0.0, checked_elements=[])
    elems = list(range(g.order)) if g.order * rep.dim**3 <= 1e9 else list(g.generators)
    dec.equivariance_error = _equivariance_error(dec, elems)
    dec.checked_elements = elems
    return dec


def _equivariance_error(dec: Decomposition, elems: list[int]) -> float:
    """``max_g |rho(g) Q - Q B(g)|`` with ``Q B(g)`` assembled copy by copy (``T sigma(g)``)."""
    d = dec.rep.dim
    if d == 0:
        return 0.0
    rho = dec.rep.matrices[elems]
    lhs = (rho.reshape(-1, d) @ dec.basis).reshape(len(elems), d, d)
    o = 0
    for r, m in zip(dec.irreps, dec.multiplicities):
        sig = r.rep.matrices[elems]
        for _ in range(m):
            lhs[:, :, o : o + r.dim] -= dec.basis[:, o : o + r.dim] @ sig
            o += r.dim
    return float(np.abs(lhs).max())


def _isometric_intertwiners(rho: np.ndarray, irrep: RealIrrep, m: int,
                            rng: np.random.Generator) -> list[np.ndarray]:
    d, di = rho.shape[1], irrep.dim
    sigma = irrep.rep.matrices
    found: list[np.ndarray] = []
    for _attempt in range(4):
        # Reynolds average (1/|G|) sum_g rho(g) X sigma(g)^T: a batch of intertwiners sigma -> rho
        batch = reynolds_matrices(rng.standard_normal((m - len(found) + 2, d, di)), rho, sigma)
        for t in batch:
            scale = np.sqrt(np.sum(t * t) / di)
            for _pass in range(2):  # Gram–Schmidt over End_G(sigma), twice for accuracy
                for b in found:
                    t = t - b @ (b.T @ t)
            c = np.sum(t * t) / di
            if c <= (1e-8 * scale) ** 2:
                continue
            t = t / np.sqrt(c)
            # T^T T is a symmetric element of End_G(sigma), hence a multiple of I; re-isometrise
            u, _, vt = np.linalg.svd(t, full_matrices=False)
            found.append(u @ vt)
            if len(found) == m:
                return found
    raise ConvergenceError(
        f"found only {len(found)} of {m} copies of {irrep.name}; the representation may not be "
        "orthogonal or not a homomorphism."
    )


def equivariant_basis(rep_in: Representation, rep_out: Representation,
                      method: str = "decomposition") -> np.ndarray:
    """Frobenius-orthonormal basis of ``Hom_G(V_in, V_out) = {F : F rho_in(g) = rho_out(g) F}``.

    Args:
        rep_in, rep_out: representations of the same group object.
        method: ``"decomposition"`` (from both decompositions and ``End_G`` of the irreducibles;
            see the module docstring) or ``"nullspace"`` (SVD null space of the stacked
            constraints ``F rho_in(s) - rho_out(s) F = 0`` over generators ``s``; cost
            ``O((d_in d_out)^3)``, a reference for small sizes).

    Returns:
        ``(k, d_out, d_in)`` with ``sum_{ab} B_p[a, b] B_q[a, b] = delta_pq``.
    """
    if not rep_in.group.same_as(rep_out.group):
        raise RepresentationError(
            f"equivariant_basis: rep_in is a representation of {rep_in.group.name} and rep_out of "
            f"{rep_out.group.name}; they must be of the same group (same multiplication table)."
        )
    if method == "nullspace":
        return _nullspace_basis(rep_in, rep_out)
    if method != "decomposition":
        raise RepresentationError(f"method must be 'decomposition' or 'nullspace'; got {method!r}.")
    din, dout = decompose(rep_in), decompose(rep_out)
    out = []
    for i, r in enumerate(din.irreps):
        for b in range(dout.multiplicities[i]):
            tb = dout.copy_basis(i, b)
            for a in range(din.multiplicities[i]):
                ta = din.copy_basis(i, a)
                for e in r.endomorphisms:
                    out.append(tb @ e @ ta.T)
    if not out:
        return np.zeros((0, rep_out.dim, rep_in.dim))
    return np.array(out)


def _nullspace_basis(rep_in: Representation, rep_out: Representation) -> np.ndarray:
    di, do = rep_in.dim, rep_out.dim
    rows = []
    for s in rep_in.group.generators:
        # row-major vec: vec(F A) = (I ⊗ A^T) vec F, vec(B F) = (B ⊗ I) vec F
        rows.append(np.kron(np.eye(do), rep_in.matrices[s].T) - np.kron(rep_out.matrices[s], np.eye(di)))
    if not rows:  # trivial group: every map is equivariant
        return np.eye(do * di).reshape(do * di, do, di)
    lmat = np.concatenate(rows, axis=0)
    _, sv, vt = np.linalg.svd(lmat)
    sv = np.concatenate([sv, np.zeros(vt.shape[0] - sv.size)])
    null = vt[sv < 1e-9 * max(1.0, sv.max(initial=0.0))]
    return null.reshape(-1, do, di)
