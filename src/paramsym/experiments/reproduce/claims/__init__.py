"""Every numbered claim of the seed papers, with the paper's number, ours and a stated criterion.

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

The claims live one module per paper: :mod:`.discovery`, :mod:`.attribution`, :mod:`.attention`,
and :mod:`.census` (the census's known answers); :mod:`.base` holds the types and the criteria.
"""

from __future__ import annotations

from .attention import CLAIMS as ATTENTION_CLAIMS
from .attribution import CLAIMS as ATTRIBUTION_CLAIMS
from .base import KINDS, Claim, Measured, Printed
from .census import CLAIMS as CENSUS_CLAIMS
from .discovery import CLAIMS as DISCOVERY_CLAIMS

__all__ = ["CLAIMS", "KINDS", "Claim", "Measured", "Printed"]

#: every paper claim, in the order of docs/reproductions.md
CLAIMS: list[Claim] = [*DISCOVERY_CLAIMS, *ATTRIBUTION_CLAIMS, *ATTENTION_CLAIMS, *CENSUS_CLAIMS]
