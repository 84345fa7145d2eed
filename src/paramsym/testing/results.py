"""Results of the test-kit: :class:`MetricResult` (one metric of one cell) and
:class:`ActionCheck` (every metric of :func:`paramsym.testing.check_action`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .. import verdict as V
from ..errors import ConfigError

#: The verdict's one metric table (cell key → :class:`~paramsym.verdict.Metric`), re-exported.
METRICS = V.METRICS
#: Metrics a discrete action (finite ``order``, no Lie algebra) cannot be measured on.
_SKIPPED_DISCRETE = ("subdivision_err_p95", "transport_err_p95")
#: Short names of the judged metrics (``assert_invariant(metrics=...)``, ``tolerances=``).
_JUDGED = {m.name: m for m in METRICS.values() if m.judged}


@dataclass
class MetricResult:
    """One metric in one cell: its summary value against its tolerance, and the worst sample.

    ``bound`` is ``"<="`` for errors (95th percentile) and ``">="`` for motion and
    moving-output change (medians). ``enforced`` is False for motion in multi-factor cells
    (reported, not judged). ``worst`` describes the sample with the largest error (smallest
    motion): its index, value, the group element's coefficients ``t_j`` and generator indices
    ``i_j`` (factor 0 applied first) and ``‖θ‖``.
    """

    name: str
    key: str
    factors: int
    value: float
    tolerance: float
    bound: str
    enforced: bool
    worst: dict[str, Any]

    @property
    def passed(self) -> bool:
        return not self.enforced or METRICS[self.key].passes(self.value, self.tolerance)

    def describe(self) -> str:
        """``"composition error p95 = 0.31 > tolerance 0.01 (2 factors; worst sample #7: ...)"``."""
        m = METRICS[self.key]
        stat = m.statistic
        label = m.label.split(" (")[0].removesuffix(" " + stat)
        cmp = ("≥" if self.passed else "<") if self.bound == ">=" else ("≤" if self.passed else ">")
        w = self.worst
        g = f"P{w['permutation']}" if "permutation" in w else _element(w["coeffs"], w["index"])
        worst = f"worst sample #{w['sample']}: value {w['value']:.3g}, g = {g}"
        if "coeffs2" in w:
            worst += f", g2 = {_element(w['coeffs2'], w['index2'])}"
        if "generator" in w:
            worst += f", h = h{w['generator']}"
        worst += f", ‖θ‖ = {w['theta_norm']:.4g}"
        return (
            f"{label} {stat} = {self.value:.3g} {cmp} tolerance {self.tolerance:.3g} "
            f"({self.factors} factor{'s' if self.factors != 1 else ''}; {worst})"
        )


@dataclass
class ActionCheck:
    """Result of :func:`check_action`.

    Attributes:
        results: one :class:`MetricResult` per metric and factor count.
        cells: the verdict cells (same keys as :func:`paramsym.verdict.evaluate` cells,
            including ``fits`` from :func:`paramsym.verdict.cell_fits`).
        tolerances: the tolerances used.
        s_F, s_theta: the output and parameter scales used; ``scales_estimated`` says whether
            they were estimated from the points.
        rho, samples, seed: the settings of the check.
        skipped: metrics not measured (for a discrete action: ``subdivision`` and ``transport``,
            which need a Lie algebra).
    """

    results: list[MetricResult]
    cells: list[dict[str, float]]
    tolerances: dict[str, float]
    s_F: float
    s_theta: float
    scales_estimated: dict[str, bool]
    rho: float
    samples: int
    seed: int
    name: str = ""
    skipped: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """Every enforced metric meets its tolerance (equivalently: every cell fits)."""
        return all(r.passed for r in self.results)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def failures(self) -> list[MetricResult]:
        return [r for r in self.results if not r.passed]

    def value(self, metric: str, factors: int = 1) -> float:
        """The summary value of ``metric`` (short name or verdict key) in the ``factors`` cell."""
        key = _metric(metric).key
        for r in self.results:
            if r.key == key and r.factors == factors:
                return r.value
        raise KeyError(f"no metric {metric!r} with {factors} factor(s); have {sorted({(r.name, r.factors) for r in self.results})}.")

    def summary(self) -> str:
        """A readable table: one row per metric, one column per factor count."""
        facs = sorted({r.factors for r in self.results})
        head = (
            f"{'PASS' if self.passed else 'FAIL'}: {self.name or 'action'} at ρ = {self.rho}, "
            f"{self.samples} samples per cell, seed {self.seed}; s_F = {self.s_F:.4g}"
            f"{' (estimated)' if self.scales_estimated.get('s_F') else ''}, s_θ = {self.s_theta:.4g}"
            f"{' (estimated)' if self.scales_estimated.get('s_theta') else ''}"
        )
        cols = "".join(f"{f'{k} factor' + ('s' if k != 1 else ''):>16}" for k in facs)
        lines = [head, f"  {'metric':<22}{'tolerance':>14}{cols}"]
        names = list(dict.fromkeys(r.name for r in self.results))
        for name in names:
            rows = {r.factors: r for r in self.results if r.name == name}
            first = next(iter(rows.values()))
            tol = f"{METRICS[first.key].sign} {first.tolerance:.3g}"
            stat = METRICS[first.key].statistic
            cells = ""
            for k in facs:
                r = rows.get(k)
                if r is None:
                    cells += f"{'':>16}"
                    continue
                mark = "ok" if r.passed and r.enforced else ("--" if not r.enforced else "FAIL")
                cells += f"{f'{r.value:.3g} {mark}':>16}"
            lines.append(f"  {name + ' ' + stat:<22}{tol:>14}{cells}")
        lines.append("  (motion is judged on one-factor elements only; -- = reported, not judged)")
        if self.skipped:
            lines.append(f"  skipped (discrete group, no Lie algebra): {', '.join(self.skipped)}")
        for r in self.failures:
            lines.append("  ✗ " + r.describe())
        return "\n".join(lines)

    __str__ = summary

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: every field, plus ``passed`` overall and per result."""
        out = {"passed": self.passed, **asdict(self)}
        for r, d in zip(self.results, out["results"]):
            d["passed"] = r.passed
        return out


# -- inputs ---------------------------------------------------------------------------------------


def _metric(name: str) -> V.Metric:
    try:
        return V.metric(name)
    except KeyError:
        raise ConfigError(f"unknown metric {name!r}; valid: {list(_JUDGED)} or {list(V.TOLERANCES)}.") from None


def _element(coeffs: list[float], index: list[int]) -> str:
    return " · ".join(f"exp({t:+.4g} h{i})" for t, i in reversed(list(zip(coeffs, index))))
