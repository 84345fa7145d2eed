"""``paramsym reproduce``: every numbered claim of the seed papers, the paper's number beside ours.

* :mod:`.claims` — the registry (:data:`CLAIMS`): id, paper and location, the paper's number, a
  criterion in words and in code.
* :mod:`.runs` — the runs the claims read (:data:`RUNS`), at the full and ``--quick`` budgets,
  each calling an existing experiment's ``run(cfg, out)`` or a documented ``paramsym`` command.
* :mod:`.measurements` — our own documented measurements (teleport, alignment, compensation) in
  the same form; :mod:`.registry` joins both (:data:`CLAIMS`, :data:`RUNS`).
* :mod:`.engine` — :func:`reproduce` (rows with ``claim``, ``paper``, ``ours``, ``holds``, …).
* :mod:`.docs` — ``docs/reproductions.md`` and the generated blocks of the other docs pages.
"""

from .claims import Claim, Measured
from .engine import claim_ids, get_claims, markdown, reproduce
from .registry import CLAIMS, RUNS
from .runs import RunSpec

__all__ = ["CLAIMS", "RUNS", "Claim", "Measured", "RunSpec", "claim_ids", "get_claims", "markdown", "reproduce"]
