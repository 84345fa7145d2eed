"""Equivariant attention: count, build, recognise (guide: docs/guide/attention.md).

For a finite group G acting on tokens through a real representation ρ:

1. ``component_count``: ``c_{G,d}(V)`` and the Theorem 9 bound for V = R^C ⊗ R[D4] and 8 heads;
2. ``count_partial_clusterings`` / ``enumerate_partial_clusterings``: the partial G-clusterings of
   the heads (the structure theorem's classification), counted by formula and by listing;
3. ``build_equivariant_rmhsa``: a random G-equivariant RMHSA layer for one clustering, checked
   numerically (``equivariance_errors``) and recognised again (``recover_clustering``); a small
   perturbation of one head breaks equivariance and recovery says which condition fails.

    python examples/attention_structure.py [--smoke]

The last line of the output is a JSON summary.
"""

from __future__ import annotations

import argparse
import json

import torch

from paramsym.attention import (
    build_equivariant_rmhsa,
    component_count,
    count_partial_clusterings,
    enumerate_partial_clusterings,
    equivariance_errors,
    recover_clustering,
)
from paramsym.groups.finite import group_by_name
from paramsym.groups.reps import copies, regular


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="fewer copies and clusterings (CI)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    D4 = group_by_name("D4")
    rho = regular(D4)                                    # R[D4], dimension 8
    counts = {C: component_count(rho, heads=8, copies=C) for C in ((1, 2) if args.smoke else (1, 2, 3, 4, 96))}
    for C, res in counts.items():
        print(f"D4, C = {C}, 8 heads: c = {res.c}, Theorem 9 bound c^16/8! = {float(res.bound):.4g}")

    C6 = group_by_name("C6")
    by_formula = count_partial_clusterings(C6, 3)
    by_listing = sum(1 for _ in enumerate_partial_clusterings(C6, 3))
    print(f"partial C6-clusterings of 3 heads: {by_formula} (formula), {by_listing} (listed)")

    # build a layer for every partial D4-clustering of 2 heads (smoke) or 3 heads, on V = R^2 ⊗ R[D4]
    rep = copies(rho, 2)
    heads = 2 if args.smoke else 3
    gen = torch.Generator().manual_seed(0)
    worst, recovered, rejected, total = 0.0, 0, 0, 0
    for clustering in enumerate_partial_clusterings(D4, heads):
        M, R = build_equivariant_rmhsa(clustering, rep, generator=gen)      # (H, d, d) each
        worst = max(worst, float(equivariance_errors(M, R, rep, n_tokens=3).max()))
        rec = recover_clustering(M, R, rep)
        recovered += int(rec.equivariant and rec.clustering == clustering)
        # perturb one constrained head (an X_0 head's M is free: perturb its R instead)
        R_bad = R.clone()
        R_bad[0] += 1e-3 * torch.randn(R.shape[1:], generator=gen, dtype=R.dtype)
        rejected += int(not recover_clustering(M, R_bad, rep).equivariant)
        total += 1
    print(f"{total} layers built: worst equivariance error {worst:.3g}, "
          f"{recovered} recovered exactly, {rejected} perturbed layers rejected")
    last = recover_clustering(M, R_bad, rep)
    print("the last perturbed layer:", last.summary().splitlines()[0])

    print(json.dumps({
        "components": {str(C): res.c for C, res in counts.items()},
        "bound_log10": {str(C): res.to_dict().get("log10_bound") for C, res in counts.items()},
        "clusterings_C6_3_formula": by_formula,
        "clusterings_C6_3_listed": by_listing,
        "layers": total,
        "max_equivariance_error": worst,
        "recovered": recovered,
        "perturbed_rejected": rejected,
    }))


if __name__ == "__main__":
    main()
