"""Benchmark: decomposing C copies of the D4 regular representation (and a few other groups).

Prints, side by side in one process (the machine is noisy, so compare ratios), the time and
accuracy of

* ``paramsym.groups.decompose.decompose`` (intertwiner averaging + Gram–Schmidt over
  ``End_G``; blocks equal to the irreps' own matrices), and
* a textbook baseline: dense isotypic projectors ``P_i = (d_i / (e_i |G|)) sum_g psi_i(g) rho(g)``,
  an eigendecomposition of each ``P_i`` for an isotypic basis, then the eigenspaces of a
  group-averaged random symmetric matrix restricted to it to split the copies (blocks are
  irreducible but in an arbitrary basis, so the accuracy reported is that of the invariant
  subspaces: ``max |(I - T T^T) rho(g) T|``).

The issue's bound: every C <= 16 under 1 s.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/reps_decompose.py``
"""

from __future__ import annotations

import numpy as np
from _timing import timed

from paramsym.groups.decompose import decompose
from paramsym.groups.finite import dihedral, group_by_name
from paramsym.groups.irreps import real_irreps
from paramsym.groups.reps import copies, regular


def baseline_decompose(rep, seed: int = 0):
    """Isotypic projectors + eigh of a random symmetric commutant element (dense d x d)."""
    g = rep.group
    rng = np.random.default_rng(seed)
    rho = rep.matrices
    blocks = []
    for r in real_irreps(g):
        e = r.endomorphism_dim
        proj = (r.dim / (e * g.order)) * np.tensordot(r.character, rho, axes=1)
        w, v = np.linalg.eigh((proj + proj.T) / 2)
        u = v[:, w > 0.5]
        if u.shape[1] == 0:
            continue
        s = rng.standard_normal((rep.dim, rep.dim))
        s = s + s.T
        a = np.matmul(rho @ s, rho.transpose(0, 2, 1)).sum(axis=0) / g.order
        w2, v2 = np.linalg.eigh(u.T @ a @ u)
        t = u @ v2
        for k in range(0, t.shape[1], r.dim):
            blocks.append(t[:, k : k + r.dim])
    q = np.concatenate(blocks, axis=1)
    err = max(np.abs(rho @ t - t @ np.matmul(t.T, rho @ t)).max() for t in blocks)
    return q, float(err)


def main() -> None:
    g = dihedral(4)
    real_irreps(g)  # cache the irreducibles (built once per group)
    base = regular(g)
    print("C copies of R[D4]: ours (s, max error) | baseline (s, max error) | baseline/ours")
    total_ours = 0.0
    worst_ours = 0.0
    for c in [1, 2, 4, 8, 12, 16, 32]:
        rep = copies(base, c)
        t_ours, dec = timed(lambda rep=rep: decompose(rep))
        t_base, (_, berr) = timed(lambda rep=rep: baseline_decompose(rep), repeat=1 if c > 16 else 3)
        err = max(dec.equivariance_error, dec.orthogonality_error)
        if c <= 16:
            total_ours += t_ours
            worst_ours = max(worst_ours, t_ours)
        print(f"  C={c:3d} d={rep.dim:4d}: {t_ours:8.4f} s {err:.1e} | {t_base:8.4f} s {berr:.1e} | "
              f"{t_base / t_ours:6.1f}x   {dec.summary()}")
    t_all, _ = timed(lambda: [decompose(copies(base, c)) for c in range(1, 17)])
    print(f"all C = 1..16 in one go: {t_all:.3f} s (issue bound: each under 1 s; slowest single "
          f"{worst_ours:.4f} s)")

    print("\nregular representations of other groups:")
    for name in ["S4", "A5", "Q8", "D4xC2", "S5"]:
        grp = group_by_name(name)
        t_irr, _ = timed(lambda grp=grp: real_irreps(grp), repeat=1)
        rep = regular(grp)
        t_ours, dec = timed(lambda rep=rep: decompose(rep))
        t_base, (_, berr) = timed(lambda rep=rep: baseline_decompose(rep))
        print(f"  {name:6s} |G|={grp.order:4d}: irreps {t_irr:.3f} s; ours {t_ours:.3f} s "
              f"{max(dec.equivariance_error, dec.orthogonality_error):.1e} | baseline {t_base:.3f} s "
              f"{berr:.1e} | {t_base / t_ours:5.1f}x")


if __name__ == "__main__":
    main()
