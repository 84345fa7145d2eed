"""Complex character tables by the Burnside–Dixon method, and Frobenius–Schur indicators.

For conjugacy classes ``C_1 = {e}, .., C_k`` with representatives ``g_j`` and sizes ``h_j`` the
class sums multiply as ``C_i C_j = sum_l c_ijl C_l`` with
``c_ijl = #{x in C_i : x^-1 g_l in C_j}``. Every irreducible character ``chi`` gives a common
eigenvector ``w_l = h_l chi(g_l) / chi(1)`` of the matrices ``(M_i)_{jl} = c_ijl`` with
eigenvalue ``w_i``, and these ``k`` vectors are all the common eigenvectors. So one eigen-
decomposition of a random combination ``sum_i a_i M_i`` (distinct eigenvalues for generic
``a``) gives every ``w``; then ``chi(1)^2 = |G| / sum_l |w_l|^2 / h_l`` and
``chi(g_l) = chi(1) w_l / h_l``.

Checked invariants: the row orthogonality ``sum_l h_l chi(g_l) conj(psi(g_l)) = |G| delta`` to
``1e-8 |G|``; integral degrees; Frobenius–Schur indicators
``nu(chi) = (1/|G|) sum_g chi(g^2)`` in ``{-1, 0, 1}``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConvergenceError
from .finite import FiniteGroup


@dataclass(frozen=True)
class CharacterTable:
    """Irreducible complex characters of a finite group.

    Attributes:
        group: the group.
        values: ``(k, k)`` complex; ``values[i, j] = chi_i(g)`` for ``g`` in class ``j`` of
            ``group.conjugacy_classes()``. Row 0 is the trivial character; rows are sorted by
            degree, then by their values.
        degrees: ``chi_i(1)``.
        fs_indicators: Frobenius–Schur indicators (``1`` real, ``0`` complex, ``-1``
            quaternionic).
        conjugate: ``conjugate[i]`` is the row of ``conj(chi_i)``.
    """

    group: FiniteGroup
    values: np.ndarray
    degrees: np.ndarray
    fs_indicators: np.ndarray
    conjugate: np.ndarray

    def inner(self, a: np.ndarray, b: np.ndarray) -> complex:
        """``<a, b> = (1/|G|) sum_g a(g) conj(b(g))`` for class functions (per-class arrays)."""
        h = self.group.class_sizes()
        return complex(np.sum(h * a * np.conj(b)) / self.group.order)


def class_multiplication_constants(g: FiniteGroup) -> np.ndarray:
    """``c[i, j, l] = #{(x, y) in C_i x C_j : x y = g_l}`` for class representatives ``g_l``."""
    classes = g.conjugacy_classes()
    k = len(classes)
    cls = g.class_of
    c = np.zeros((k, k, k), dtype=np.int64)
    for l, rep in enumerate(g.class_representatives()):
        y = g.table[g.inverse, rep]  # y = x^-1 g_l for every x
        np.add.at(c[:, :, l], (cls, cls[y]), 1)
    return c


def character_table(g: FiniteGroup, seed: int = 0) -> CharacterTable:
    """The complex character table of ``g`` (cached on the group); see the module docstring."""
    if "character_table" in g._cache:
        return g._cache["character_table"]
    h = g.class_sizes().astype(float)
    k = h.size
    c = class_multiplication_constants(g).astype(float)
    rng = np.random.default_rng(seed)
    last_err = np.inf
    for _attempt in range(8):
        a = rng.standard_normal(k)
        mat = np.einsum("i,ijl->jl", a, c)
        evals, vecs = np.linalg.eig(mat)
        gaps = np.abs(evals[:, None] - evals[None, :])
        np.fill_diagonal(gaps, np.inf)
        if k > 1 and gaps.min() < 1e-6 * max(1.0, np.abs(evals).max()):
            continue  # a degenerate combination; draw another
        w = vecs / vecs[0:1, :]  # normalise w_{e} = 1 (class 0 is the identity)
        w = w.T  # rows: characters
        deg2 = g.order / np.sum(np.abs(w) ** 2 / h, axis=1)
        deg = np.rint(np.sqrt(deg2))
        vals = deg[:, None] * w / h[None, :]
        err = np.abs(vals @ (h[:, None] * vals.conj().T) - g.order * np.eye(k)).max()
        last_err = min(last_err, err)
        if err < 1e-8 * g.order and np.allclose(np.sqrt(deg2), deg, atol=1e-6):
            table = _finish(g, _snap(vals), deg.astype(int))
            g._cache["character_table"] = table
            return table
    raise ConvergenceError(
        f"character table of {g.name}: orthogonality relations hold only to {last_err:.2e} "
        f"(needed 1e-8 * |G|) after 8 random class-sum combinations."
    )


def _snap(vals: np.ndarray) -> np.ndarray:
    """Round parts within 1e-10 of an integer (or half-integer) to it; zero tiny parts."""
    out = vals.copy()
    for part in ("real", "imag"):
        x = getattr(out, part).copy()
        near = np.abs(2 * x - np.rint(2 * x)) < 1e-10
        x[near] = np.rint(2 * x[near]) / 2
        if part == "real":
            out = x + 1j * out.imag
        else:
            out = out.real + 1j * x
    return out


def _finish(g: FiniteGroup, vals: np.ndarray, deg: np.ndarray) -> CharacterTable:
    k = deg.size
    # sort: degree, then values (descending real parts, then imaginary parts), trivial first
    key = [(int(deg[i]), *[-round(v, 8) for v in vals[i].real], *[-round(v, 8) for v in vals[i].imag])
           for i in range(k)]
    order = sorted(range(k), key=lambda i: key[i])
    vals, deg = vals[order], deg[order]
    h = g.class_sizes()
    sq = g.power_map(2)
    nu_raw = (vals[:, sq] * h[None, :]).sum(axis=1) / g.order
    nu = np.rint(nu_raw.real).astype(int)
    if np.abs(nu_raw - nu).max() > 1e-8 or not set(nu.tolist()) <= {-1, 0, 1}:
        raise ConvergenceError(f"Frobenius–Schur indicators of {g.name} are not in {{-1, 0, 1}}: {nu_raw}")
    conj = np.array([int(np.argmin(np.abs(vals - vals[i].conj()[None, :]).max(axis=1))) for i in range(k)])
    return CharacterTable(group=g, values=vals, degrees=deg, fs_indicators=nu, conjugate=conj)
