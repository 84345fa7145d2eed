"""Equivariant multi-head self-attention: the structure theorem and component counting.

Modules:

- :mod:`~paramsym.attention.rmhsa` — MHSA, reduced MHSA (``rmhsa(x, M, R)``), conversion from
  ``torch.nn.MultiheadAttention``.
- :mod:`~paramsym.attention.equivariance` — representations on tokens and the numerical
  equivariance check.
- :mod:`~paramsym.attention.clusterings` — partial G-clusterings, enumeration and counting up to
  isomorphism (and up to relabelling of heads).
- :mod:`~paramsym.attention.structure` — the structure theorem in both directions: build an
  equivariant RMHSA from a clustering, recover the clustering from parameters or name the
  failing condition; the two-token exception.
- :mod:`~paramsym.attention.components` — ``c_{G,d}(V)``, the Theorem 9 bound, D4 closed forms,
  tables.
- :mod:`~paramsym.attention.loading`, :mod:`~paramsym.attention.cli`,
  :mod:`~paramsym.attention.report` — files, ``paramsym attention ...`` and run directories.

The names below are re-exported lazily (nothing heavy is imported with the package).
"""

from __future__ import annotations

from ..lazy import lazy_exports

_EXPORTS = {
    "mhsa": "rmhsa",
    "reduce_mhsa": "rmhsa",
    "from_multihead_attention": "rmhsa",
    "MHAConversion": "rmhsa",
    "equivariance_error": "equivariance",
    "equivariance_errors": "equivariance",
    "PartialClustering": "clusterings",
    "enumerate_partial_clusterings": "clusterings",
    "count_partial_clusterings": "clusterings",
    "build_equivariant_rmhsa": "structure",
    "recover_clustering": "structure",
    "Recovery": "structure",
    "two_token_exception": "structure",
    "count_components": "components",
    "maximal_subrepresentations": "components",
    "component_count": "components",
    "theorem9_bound": "components",
    "d4_components_closed_form": "components",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
