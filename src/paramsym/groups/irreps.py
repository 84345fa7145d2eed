"""Real irreducible representations of finite groups, with their type.

Every real irreducible W is one of three types, read off its endomorphism algebra
``End_G(W) = R, C or H`` (dimension ``e = <psi, psi> = (1/|G|) sum_g psi(g)^2 = 1, 2, 4`` for its
character ``psi``), equivalently off the Frobenius–Schur indicator ``nu`` of its complex
constituents:

* real (``nu = 1``): ``W ⊗ C = chi`` irreducible, ``dim W = chi(1)``, ``psi = chi``;
* complex (``nu = 0``): ``W ⊗ C = chi ⊕ conj(chi)``, ``dim W = 2 chi(1)``, ``psi = 2 Re chi``;
* quaternionic (``nu = -1``): ``W ⊗ C = 2 chi``, ``dim W = 2 chi(1)``, ``psi = 2 chi``.

Matrices: cyclic and dihedral groups get the textbook orthogonal forms (rotations by
``2 pi j k / n`` and the reflection ``diag(1, -1)``) and the usual names — ``A1`` trivial,
``A2`` (``s -> -1``), ``B1``, ``B2`` (``r -> -1``), ``E_j`` (rotation by ``2 pi j / n``) — so
``R[D4] = A1 ⊕ A2 ⊕ B1 ⊕ B2 ⊕ 2 E1`` and ``C4`` has ``A1, A2, E1``. Other groups: W is cut out of
the regular representation: the isotypic projector ``P = (dim W / (e |G|)) sum_g psi(g) rho(g)``
has range ``m`` copies of W (``m = dim W / e``), on which a random symmetric element of the
commutant (right translations) has ``m`` eigenvalues of multiplicity ``dim W`` whose eigenspaces
are irreducible; the first is W. Such irreps are named by dimension (``A`` 1, ``E`` 2, ``T`` 3,
``G`` 4, ``H`` 5, else ``R<d>_``) and numbered (``A1, A2, .., E1, ..``).

Order (stable): trivial first, then by dimension, then by character values (descending).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ConvergenceError, TooLargeError
from .characters import character_table
from .finite import FiniteGroup
from .progress import progress_bar
from .reps import Representation

#: Largest order for which irreducibles are cut out of the regular representation.
MAX_IRREP_ORDER = 1000

_TYPES = {1: "real", 2: "complex", 4: "quaternionic"}
_FS = {"real": 1, "complex": 0, "quaternionic": -1}


@dataclass(eq=False)
class RealIrrep:
    """A real irreducible orthogonal representation.

    Attributes:
        name: ``"A1"``, ``"E1"``, ...
        dim: real dimension.
        type: ``"real"``, ``"complex"`` or ``"quaternionic"``.
        rep: the orthogonal matrices.
        fs_indicator: Frobenius–Schur indicator of its complex constituents (1, 0, -1).
        character: ``(order,)`` real character ``psi``.
        endomorphisms: ``(e, dim, dim)`` Frobenius-orthonormal basis of ``End_G(W)``
            (``e = 1, 2, 4``), the first element ``I / sqrt(dim)``.
        complex_constituents: rows of :func:`~paramsym.groups.characters.character_table` that
            make up ``W ⊗ C``.
        index: position in :func:`real_irreps`.
    """

    name: str
    dim: int
    type: str
    rep: Representation
    fs_indicator: int
    character: np.ndarray = field(repr=False)
    endomorphisms: np.ndarray = field(repr=False)
    complex_constituents: list[int] = field(default_factory=list)
    index: int = 0

    @property
    def endomorphism_dim(self) -> int:
        """``dim_R End_G(W)``: 1, 2 or 4."""
        return int(self.endomorphisms.shape[0])


def real_irreps(group: FiniteGroup, seed: int = 0, *, progress: bool = False) -> list[RealIrrep]:
    """All real irreducible representations of ``group`` (cached on the group).

    ``progress`` shows a progress bar (stderr, TTY only) while irreducibles are cut out of the
    regular representation (groups without a closed form). Raises :class:`TooLargeError` for a group without a closed form and of order above
    :data:`MAX_IRREP_ORDER`.
    """
    if "real_irreps" in group._cache:
        return group._cache["real_irreps"]
    fam = group.family[0] if group.family else None
    if fam == "dihedral":
        named = _dihedral(group, group.family[1])
    elif fam == "cyclic":
        named = _cyclic(group, group.family[1])
    else:
        named = _from_regular(group, seed, progress)
    out = [_finish(group, name, mats, k, seed) for k, (name, mats) in enumerate(named)]
    group._cache["real_irreps"] = out
    return out


def _rot(theta: np.ndarray) -> np.ndarray:
    c, s = np.cos(theta), np.sin(theta)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


def _dihedral(g: FiniteGroup, n: int) -> list[tuple[str, np.ndarray]]:
    k = np.arange(2 * n) % n
    e = np.arange(2 * n) // n  # element n*e + k is r^k s^e
    one = lambda v: v.astype(float).reshape(-1, 1, 1)  # noqa: E731
    out = [("A1", one(np.ones(2 * n))), ("A2", one((-1.0) ** e))]
    if n % 2 == 0:
        out += [("B1", one((-1.0) ** k)), ("B2", one((-1.0) ** (k + e)))]
    refl = np.where(e[:, None, None] == 1, np.diag([1.0, -1.0]), np.eye(2))
    for j in range(1, (n + 1) // 2):
        out.append((f"E{j}", _rot(2 * np.pi * j * k / n) @ refl))
    return out


def _cyclic(g: FiniteGroup, n: int) -> list[tuple[str, np.ndarray]]:
    k = np.arange(n)
    out = [("A1", np.ones((n, 1, 1)))]
    if n % 2 == 0:
        out.append(("A2", ((-1.0) ** k).reshape(-1, 1, 1)))
    for j in range(1, (n + 1) // 2):
        out.append((f"E{j}", _rot(2 * np.pi * j * k / n)))
    return out


def _real_characters(group: FiniteGroup) -> list[tuple[np.ndarray, int, list[int]]]:
    """Real irreducible characters per class: (psi, e, complex rows), one per real irrep."""
    t = character_table(group)
    out = []
    for i in range(len(t.degrees)):
        nu = int(t.fs_indicators[i])
        if nu == 1:
            out.append((t.values[i].real, 1, [i]))
        elif nu == -1:
            out.append((2 * t.values[i].real, 4, [i]))
        elif i < t.conjugate[i]:
            out.append((2 * t.values[i].real, 2, [i, int(t.conjugate[i])]))
    return out


def _letter(dim: int) -> str:
    return {1: "A", 2: "E", 3: "T", 4: "G", 5: "H"}.get(dim, f"R{dim}_")


def _from_regular(group: FiniteGroup, seed: int, progress: bool = False) -> list[tuple[str, np.ndarray]]:
    if group.order > MAX_IRREP_ORDER:
        raise TooLargeError(
            f"real irreducibles of {group.name} (order {group.order}) are cut out of the regular "
            f"representation, which is limited to order {MAX_IRREP_ORDER} "
            "(paramsym.groups.irreps.MAX_IRREP_ORDER); use a smaller group or a closed form "
            "(cyclic, dihedral)."
        )
    chars = _real_characters(group)
    keyed = sorted(chars, key=lambda c: (round(c[0][0]), *(-np.round(c[0], 8))))
    rng = np.random.default_rng(seed)
    out, count = [], {}
    bar = progress_bar(keyed, total=len(keyed), desc=f"real irreps of {group.name}", enabled=progress)
    for psi_cls, e, _rows in bar:
        dim = int(round(psi_cls[0]))
        letter = _letter(dim)
        count[letter] = count.get(letter, 0) + 1
        mats = _cut_from_regular(group, psi_cls[group.class_of], dim, e, rng)
        out.append((f"{letter}{count[letter]}", mats))
    return out


def _cut_from_regular(group: FiniteGroup, psi: np.ndarray, dim: int, e: int,
                      rng: np.random.Generator) -> np.ndarray:
    n, t, inv = group.order, group.table, group.inverse
    # isotypic projector on R^G: P[x, y] = (dim / (e |G|)) psi(x y^-1)
    proj = (dim / (e * n)) * psi[t[:, inv]]
    r = dim * dim // e  # rank: m = dim / e copies of W
    u, _ = np.linalg.qr(proj @ rng.standard_normal((n, r)))
    u, _ = np.linalg.qr(proj @ u)  # re-project for accuracy
    for _attempt in range(6):
        c = rng.standard_normal(n)
        # A = sum_h c_h (R_h + R_h^T), (R_h U)[y] = U[y h^-1]; A commutes with left translations
        au = np.zeros_like(u)
        for h in range(n):
            au += c[h] * (u[t[:, inv[h]]] + u[t[:, h]])
        small = u.T @ au
        w, v = np.linalg.eigh((small + small.T) / 2)
        scale = max(1.0, np.abs(w).max())
        if w[dim - 1] - w[0] < 1e-9 * scale and (r == dim or w[dim] - w[dim - 1] > 1e-5 * scale):
            b = u @ v[:, :dim]
            # sigma(g) = B^T rho(g) B with (rho(g) B)[x] = B[g^-1 x]
            mats = np.einsum("xi,gxj->gij", b, b[t[inv, :]])
            return _polish(mats)
    raise ConvergenceError(
        f"could not split an isotypic component of dimension {r} of R[{group.name}] into "
        f"irreducibles of dimension {dim} (no simple eigenvalue cluster in 6 random draws)."
    )


def _polish(mats: np.ndarray) -> np.ndarray:
    """Nearest orthogonal matrices (polar factor) to remove round-off."""
    u, _, vt = np.linalg.svd(mats)
    return u @ vt


def _endomorphisms(mats: np.ndarray, e: int, rng: np.random.Generator) -> np.ndarray:
    """Frobenius-orthonormal basis of ``{X : X rho(g) = rho(g) X}`` starting with ``I/sqrt(d)``."""
    d = mats.shape[1]
    basis = [np.eye(d) / np.sqrt(d)]
    for _ in range(8 * e):
        if len(basis) == e:
            break
        x = np.einsum("gij,jk,glk->il", mats, rng.standard_normal((d, d)), mats) / mats.shape[0]
        for _pass in range(2):
            for b in basis:
                x = x - np.sum(b * x) * b
        nrm = np.linalg.norm(x)
        if nrm > 1e-6:
            basis.append(x / nrm)
    if len(basis) != e:
        raise ConvergenceError(f"End_G(W) should have dimension {e}; found {len(basis)}.")
    return np.array(basis)


def _finish(group: FiniteGroup, name: str, mats: np.ndarray, index: int, seed: int) -> RealIrrep:
    dim = mats.shape[1]
    rep = Representation(group, mats, name=name, tol=1e-9)
    psi = rep.character()
    e = int(round(float(psi @ psi) / group.order))
    if e not in _TYPES:
        raise ConvergenceError(f"{name} of {group.name}: <psi, psi> = {psi @ psi / group.order:.3f}, not 1, 2 or 4.")
    t = character_table(group)
    coeffs = (t.values.conj() @ (group.class_sizes() * psi[group.class_representatives()])) / group.order
    rows = [int(i) for i in np.flatnonzero(np.abs(coeffs) > 0.5)]
    fs = int(t.fs_indicators[rows[0]]) if rows else 1
    typ = _TYPES[e]
    if fs != _FS[typ]:
        raise ConvergenceError(f"{name} of {group.name}: <psi, psi> = {e} but the Frobenius–Schur indicator is {fs}.")
    endo = _endomorphisms(mats, e, np.random.default_rng(seed + 1000 + index))
    return RealIrrep(name=name, dim=dim, type=typ, rep=rep, fs_indicator=fs, character=psi,
                     endomorphisms=endo, complex_constituents=rows, index=index)
