"""The full registry: the seed papers' claims (:mod:`.claims`) and our documented measurements (:mod:`.measurements`)."""

from __future__ import annotations

from .claims import CLAIMS as PAPER_CLAIMS
from .claims import Claim
from .measurements import MEASUREMENT_CLAIMS, MEASUREMENT_RUNS
from .runs import RUNS as PAPER_RUNS
from .runs import RunSpec

__all__ = ["CLAIMS", "RUNS"]

#: every claim, papers first then measurements (``paramsym reproduce all`` order)
CLAIMS: list[Claim] = [*PAPER_CLAIMS, *MEASUREMENT_CLAIMS]
#: every run the claims read
RUNS: dict[str, RunSpec] = {**PAPER_RUNS, **{r.name: r for r in MEASUREMENT_RUNS}}
