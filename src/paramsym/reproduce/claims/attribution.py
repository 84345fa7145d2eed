"""[Attribution]'s claims, in the order of docs/reproductions.md, each with its experiment: the
annulus flows and the lifting criterion (§3.1, §2.2, App. C.2;
:mod:`paramsym.experiments.attribution.annulus.claims`), the lifting sanity checks (§2.2;
:mod:`~paramsym.experiments.attribution.sanity.claims`), the Hamiltonian walk and the Reynolds rule
(§3.2, App. C.1; App. A.5; :mod:`~paramsym.experiments.attribution.hamiltonian.claims`).
"""

from __future__ import annotations

from ...claims import Claim
from ...experiments.attribution.annulus import claims as annulus
from ...experiments.attribution.hamiltonian import claims as hamiltonian
from ...experiments.attribution.sanity import claims as sanity

__all__ = ["CLAIMS"]

CLAIMS: list[Claim] = [*annulus.CLAIMS, *sanity.CLAIMS, *hamiltonian.CLAIMS]
