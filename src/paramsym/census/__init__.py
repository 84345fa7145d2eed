"""The symmetry census: every known symmetry of a model, with its dimension, verified on the weights.

See :mod:`paramsym.census.walk` (the census and how dimensions are counted),
:mod:`paramsym.census.finders` (pluggable :class:`SymmetryFinder` s) and
:mod:`paramsym.census.presets` (models for ``paramsym census --preset``) and
:mod:`paramsym.census.canonical` (the canonical form of pre-norm transformers, on which the
residual stream's orthogonal group is exact).
"""

from .canonical import canonical_form
from .finders import (
    DEFAULT_FINDERS,
    AttentionFinder,
    Candidate,
    CensusContext,
    FFNPermutationFinder,
    HeadPermutationFinder,
    KeyBiasFinder,
    NormScaleFinder,
    SequentialMLPFinder,
    SymmetryFinder,
    ValueBiasFinder,
)
from .walk import CensusEntry, CensusResult, census, default_inputs

__all__ = ["DEFAULT_FINDERS", "AttentionFinder", "Candidate", "CensusContext", "CensusEntry", "CensusResult",
           "FFNPermutationFinder", "HeadPermutationFinder", "KeyBiasFinder", "NormScaleFinder", "SequentialMLPFinder",
           "SymmetryFinder", "ValueBiasFinder", "canonical_form", "census", "default_inputs"]
