"""Numerical rank of a stacked linear system from its singular values (pure numpy).

Given singular values ``σ_1 ≥ … ≥ σ_k`` (the smallest ``k`` of a system, possibly not all of
them) and the largest singular value ``σ_max``, write ``u_i = σ_i / σ_max`` in *ascending*
order, ``u_(1) ≤ u_(2) ≤ …``. With a tolerance ``tol ∈ (0, 1)``:

* rule ``"threshold"``: ``d(tol) = #{i : σ_i ≤ tol · σ_max}``;
* rule ``"gap"`` (default): among the cuts ``c = 1 … d(tol)`` choose the one with the largest
  ratio ``u_(c+1) / max(u_(c), ε)`` (``ε`` = float64 machine epsilon); ``d = 0`` when no
  singular value is below ``tol · σ_max``. The largest-gap cut never exceeds the threshold cut, so
  a stray small singular value below ``tol`` does not enlarge the null space unless it sits
  in the widest gap.

The *gap* reported is the ratio across the chosen cut, ``u_(d+1) / max(u_(d), ε)`` (``inf`` when
every computed value is null, ``u_(1)/ε`` when ``d = 0``). The *tolerance table* lists
``d(tol)`` for ``tol = 10⁻¹ … 10⁻¹⁵`` (threshold rule), showing how the dimension moves with
the tolerance: a clean answer is flat over many decades.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, ToleranceError

__all__ = ["RankDecision", "check_tolerance", "decide_rank", "TOL_DECADES"]

EPS = float(np.finfo(np.float64).eps)
#: tolerances of the sensitivity table
TOL_DECADES = tuple(10.0 ** -e for e in range(1, 16))


def check_tolerance(tol: float, name: str = "tol") -> float:
    """``tol`` as a float, or :class:`ToleranceError` unless ``0 < tol < 1``."""
    try:
        t = float(tol)
    except (TypeError, ValueError):
        raise ToleranceError(f"{name} must be a number in (0, 1); received {tol!r}.") from None
    if not (0.0 < t < 1.0) or not np.isfinite(t):
        raise ToleranceError(
            f"{name} must lie strictly between 0 and 1 (a fraction of σ_max); received {tol!r}. "
            "Typical values: 1e-6 (default) to 1e-10."
        )
    return t


@dataclass
class RankDecision:
    """The null-space dimension chosen from a spectrum and how it depends on the tolerance."""

    dimension: int
    gap: float
    tol: float
    rule: str
    #: ``(tol, d(tol))`` pairs over :data:`TOL_DECADES` (threshold rule)
    table: list[tuple[float, int]]
    #: True when the chosen dimension uses every computed singular value (the true one may be larger)
    saturated: bool


def decide_rank(singular_values, sigma_max: float, tol: float = 1e-6, rule: str = "gap") -> RankDecision:
    """Choose the null-space dimension (module docstring for the formulas).

    Args:
        singular_values: the computed singular values (any order; the smallest ones of the system).
        sigma_max: the largest singular value of the whole system (> 0).
        tol: relative tolerance in (0, 1).
        rule: ``"gap"`` or ``"threshold"``.
    """
    tol = check_tolerance(tol)
    if rule not in ("gap", "threshold"):
        raise ConfigError(f"rule must be 'gap' or 'threshold'; received {rule!r}.")
    s = np.sort(np.asarray(singular_values, dtype=np.float64).reshape(-1))
    if s.size == 0 or not sigma_max > 0:
        return RankDecision(0, float("inf"), tol, rule, [(t, 0) for t in TOL_DECADES], False)
    u = s / float(sigma_max)
    n_tol = int(np.sum(u <= tol))
    ratios = np.append(u[1:], np.inf) / np.maximum(u, EPS)  # ratios[c-1] = u_(c+1)/u_(c)
    if n_tol == 0:
        d = 0
    elif rule == "threshold":
        d = n_tol
    else:
        d = int(np.argmax(ratios[:n_tol])) + 1
    gap = float(u[0] / EPS) if d == 0 else float(ratios[d - 1])
    table = [(t, int(np.sum(u <= t))) for t in TOL_DECADES]
    return RankDecision(d, gap, tol, rule, table, saturated=d == s.size)
