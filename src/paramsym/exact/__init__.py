"""Exact symmetries: the affine-field solver (:mod:`~paramsym.exact.affine`, its settings one
:class:`AffineSolverConfig`; the null space in :mod:`~paramsym.exact.nullspace`), its ansätze
(:mod:`~paramsym.exact.ansatz`), rank decisions (:mod:`~paramsym.exact.spectrum`) and named
blocks (:mod:`~paramsym.exact.presets`). See docs/exact.md."""

from .affine import (
           AffineAlgebra,
           AffineSolverConfig,
           affine_memory,
           jacobians,
           required_samples,
           solve_affine,
)
from .ansatz import Ansatz, CrossMap, FullAffine, RowMaps, Translations
from .spectrum import RankDecision, decide_rank

__all__ = ["AffineAlgebra", "AffineSolverConfig", "Ansatz", "affine_memory", "CrossMap", "FullAffine", "RankDecision", "RowMaps",
           "Translations", "decide_rank", "jacobians", "required_samples", "solve_affine"]
