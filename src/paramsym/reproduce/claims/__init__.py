"""Every numbered claim of the seed papers, with the paper's number, ours and a stated criterion.

A :class:`Claim` reads the result dictionary of one run (:data:`~paramsym.reproduce.runs.RUNS`)
and returns a :class:`Measured`; when ours counts as reproducing the paper's number (the papers'
criteria, :class:`Printed`, and the claim kinds) is stated in :mod:`.base`.

The claims live one module per paper: :mod:`.discovery`, :mod:`.attribution`, :mod:`.attention`,
and :mod:`.census` (the census's known answers).
"""

from __future__ import annotations

from ...claims import KINDS, Claim, Measured, Printed
from .attention import CLAIMS as ATTENTION_CLAIMS
from .attribution import CLAIMS as ATTRIBUTION_CLAIMS
from .census import CLAIMS as CENSUS_CLAIMS
from .discovery import CLAIMS as DISCOVERY_CLAIMS

__all__ = ["CLAIMS", "KINDS", "Claim", "Measured", "Printed"]

#: every paper claim, in the order of docs/reproductions.md
CLAIMS: list[Claim] = [*DISCOVERY_CLAIMS, *ATTRIBUTION_CLAIMS, *ATTENTION_CLAIMS, *CENSUS_CLAIMS]
