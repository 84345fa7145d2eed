"""A claim and the papers' criteria: :class:`Claim`, :class:`Measured`, :class:`Printed`.

A :class:`Claim` reads the result dictionary of one run (:data:`~.runs.RUNS`) and returns a
:class:`Measured`: our number as text, the numbers themselves, and whether it meets the claim's
criterion (``criterion`` says it in words; ``measure`` applies the same rule in code).

**The papers' criteria.** A claim of ``kind="reproduction"`` holds when our number meets the
paper's *under the paper's protocol* (same radius, inputs and statistic), read at the paper's
printed precision (:class:`Printed`): a printed value ``v`` with its last digit in place ``u``
stands for ``v ± u/2``; a *measured* value printed with three or more significant digits stands
for ``v ± max(2 % of v, u/2)`` (seeds and hardware differ; the 2 % default of the issue); exact
numbers (counts, closed forms) use ``u/2`` only. Then

* a value is *reproduced* when ours lies within that range,
* a ratio (or factor) when ours is at least the range's lower end,
* an error (composition, drift, residual) when ours is at most the range's upper end;

a factor beyond that appears only where the registry text states and justifies it.
A claim measured by another method or model than the paper's (closed form where the paper
learned, all-MiniLM-L6-v2 where it used Pythia-1B, another radius ρ) is ``kind="related"``:
shown with the same comparison, never counted as a reproduction. Our own documented
measurements (:mod:`.measurements`) are ``kind="measurement"``.

At the ``--quick`` budget a claim read from a trained run (``RunSpec.exact`` false) is *not
evaluated*: its row has ``holds = None`` (:mod:`.engine`), never ``True``.

Paper keys: [Discovery], [Attribution], [Attention] (docs/papers.md).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["A", "D", "KINDS", "MINILM", "REL", "T", "Claim", "Measured", "Printed", "ROUNDING_RULE", "floor_bound", "missing_note", "pct",
           "sig"]

#: ``reproduction`` (counted), ``related`` (another method or model: shown, not counted),
#: ``measurement`` (our own documented measurement: shown, not counted)
KINDS = ("reproduction", "related", "measurement")


@dataclass(frozen=True)
class Measured:
    """Our side of a claim: ``ours`` (text for the table), ``values`` (numbers), ``holds`` (criterion met)."""

    ours: str
    holds: bool
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Claim:
    """One numbered claim.

    Attributes:
        id: stable id (``paramsym reproduce ID``).
        source: paper and location, e.g. ``[Discovery] §6.2, Table 1``.
        statement: what the paper says, in one line.
        paper: the paper's number(s), as the paper prints them.
        criterion: when ours counts as reproducing it, in words (``measure`` applies it).
        run: the :data:`~.runs.RUNS` entry it reads.
        measure: ``measure(result) -> Measured``.
        kind: one of :data:`KINDS`.
    """

    id: str
    source: str
    statement: str
    paper: str
    criterion: str
    run: str
    measure: Callable[[dict[str, Any]], Measured]
    kind: str = "reproduction"


_NUMBER = re.compile(r"^[~≈]?\s*([0-9][0-9,]*(?:\.[0-9]+)?)(?:e([-+]?[0-9]+))?\s*([%×]?)$")


@dataclass(frozen=True)
class Printed:
    """A number as a paper prints it (``"0.037%"``, ``"8.3×"``, ``"298"``, ``"1.631e96"``) and its range.

    ``value`` is the number (percentages as fractions); ``tol`` is half a unit of the last printed
    digit, or — for a measured value (``exact=False``) printed with ≥ 3 significant digits — the
    larger of that and 2 % of the value (module docstring).
    """

    text: str
    exact: bool = False

    def _parts(self) -> tuple[float, float, int, float]:
        m = _NUMBER.match(self.text.strip())
        if m is None:
            raise ValueError(f"not a printed number: {self.text!r}")
        mant, exp, unit = m.group(1).replace(",", ""), int(m.group(2) or 0), m.group(3)
        scale = (0.01 if unit == "%" else 1.0) * 10.0 ** exp
        decimals = len(mant.split(".")[1]) if "." in mant else 0
        sig = len(mant.replace(".", "").lstrip("0")) or 1
        return float(mant) * scale, 0.5 * 10.0 ** -decimals * scale, sig, scale

    @property
    def value(self) -> float:
        return self._parts()[0]

    @property
    def tol(self) -> float:
        v, half, sig, _ = self._parts()
        return half if self.exact or sig < 3 else max(half, 0.02 * abs(v))

    @property
    def low(self) -> float:
        return self.value - self.tol

    @property
    def high(self) -> float:
        return self.value + self.tol

    def near(self, x: float) -> bool:
        """``x`` within the printed range (a value)."""
        return bool(self.low <= x <= self.high)

    def at_most(self, x: float) -> bool:
        """``x`` at most the range's upper end (an error)."""
        return bool(x <= self.high)

    def at_least(self, x: float) -> bool:
        """``x`` at least the range's lower end (a ratio)."""
        return bool(x >= self.low)

    def _fmt(self, x: float) -> str:
        pct = self.text.strip().endswith("%")
        y = 100 * x if pct else x
        return f"{y:.5g}%" if pct else f"{y:.5g}"

    def range_text(self) -> str:
        return f"{self._fmt(self.low)} … {self._fmt(self.high)}"

    def le(self) -> str:
        return f"≤ {self._fmt(self.high)}"

    def ge(self) -> str:
        return f"≥ {self._fmt(self.low)}"


def pct(x: float, digits: int = 3) -> str:
    return f"{100 * x:.{digits}f}%"


def sig(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}"


#: how :func:`floor_bound` reports an error at the rounding floor (rendered beside the numbers)
ROUNDING_RULE = ("errors at float64 rounding are shown as bounds, not as the digits one machine printed: ≤ 10^k, "
                 "the smallest power of ten ≥ n·ε (n the dimension of the matrices, ε = 2.2e-16); a larger error "
                 "would be shown as measured")


def floor_bound(x: float, n: int = 1, eps: float = sys.float_info.epsilon) -> str:
    """An error of an exact float64 computation as a bound at its rounding floor.

    Below ``n·ε`` the printed digits are the machine's, not the method's (measured: the equivariance
    error of 16 copies of R[D4], n = 128, was 3.6e-15 on one machine and 1.8e-14 on another). So a
    value ``x ≤ B = 10^⌈log10(n ε)⌉`` is written ``"≤ B"``; a larger value is written as measured
    (two significant digits), so an error above the floor is never hidden (:data:`ROUNDING_RULE`).
    """
    bound = 10.0 ** math.ceil(math.log10(n * eps))
    return f"≤ {bound:.0e}".replace("e-0", "e-") if x <= bound else f"{x:.2g}"


def missing_note(present: Any, full: Any) -> str:
    """The note under a table rendered from a ``--quick`` run: the cases of ``full`` not in ``present``."""
    gone = [str(x) for x in full if str(x) not in present]
    return f"\n\nNot in this (`--quick`) run: {', '.join(gone)} — run the full budget for them." if gone else ""


#: the papers' keys in ``Claim.source`` (docs/papers.md)
D = "[Discovery]"
A = "[Attribution]"
T = "[Attention]"
REL = "related"
MINILM = ("related: measured on all-MiniLM-L6-v2, not Pythia-1B")
