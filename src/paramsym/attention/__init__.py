"""Equivariant multi-head self-attention (the structure theorem and component counting).

Modules (import the one you need; this package imports nothing heavy at import time):

- :mod:`~paramsym.attention.rmhsa` — MHSA, reduced MHSA, conversion from
  ``torch.nn.MultiheadAttention``.
- :mod:`~paramsym.attention.equivariance` — representations on tokens and the numerical
  equivariance check.
- :mod:`~paramsym.attention.clusterings` — partial G-clusterings, enumeration and counting up to
  isomorphism.
- :mod:`~paramsym.attention.structure` — the structure theorem in both directions: build an
  equivariant RMHSA from a clustering, recover the clustering from parameters.
- :mod:`~paramsym.attention.components` — ``c_{G,d}(V)``, the Theorem 9 bound, D4 closed forms.
"""
