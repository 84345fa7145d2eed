"""Our own measurements documented in docs/ (not paper claims): teleportation, alignment, compensation.

Same shape as the paper claims (:class:`~.claims.Claim` rows read from :class:`~.runs.RunSpec`
runs, rendered into generated blocks by :mod:`.docs`), with source ``[Measurement] PAGE`` and,
as ``paper``, the aim the page states (there is no paper number). Every run here calls a
documented ``paramsym`` command with ``--json`` in a subprocess (:func:`~.runs.run_cli`), so the
numbers are the command's. All are seeded and deterministic: ``--quick`` runs a subset of the
cases whose numbers are the full run's (``exact=True``); the renderers name the missing cases.

One module per area: :mod:`.actions` (the exact catalogue's verdicts), :mod:`.teleport`,
:mod:`.alignment`, :mod:`.alignment_pairs` (the transformer pairs of issue 35), :mod:`.census`, :mod:`.compensation` and :mod:`.transformer` (the learned transformer run's
every objective); each holds its runs (``RUNS``), claims (``CLAIMS``) and the renderers of its
docs blocks. This package joins them in the order of docs/reproductions.md.
"""

from __future__ import annotations

from dataclasses import replace

from ...claims import Claim
from ...experiments.discovery.transformer import claims as transformer
from ..runs import RunSpec
from . import actions, alignment, alignment_pairs, census, compensation, teleport
from .actions import render_actions
from .alignment import render_align, render_align_modadd, render_align_rebasin
from .alignment_pairs import render_align_pairs
from .census import render_census_mergekit
from .compensation import render_compensation
from .teleport import render_teleport, render_teleport_grad_norm, render_teleport_learned

__all__ = ["MEASUREMENT_CLAIMS", "MEASUREMENT_RUNS", "render_actions", "render_align", "render_align_modadd",
           "render_align_pairs",
           "render_align_rebasin", "render_census_mergekit", "render_compensation", "render_teleport", "render_teleport_grad_norm",
           "render_teleport_learned"]

_AREAS = (actions, teleport, alignment, census, compensation, alignment_pairs)
#: the order of docs/reproductions.md (runs and claims were listed in it before the split by area)
_RUN_ORDER = ("action-checks", "teleport-presets", "teleport-digits", "align-digits", "compensation-models",
    "teleport-grad-norm", "align-modadd", "teleport-learned", "census-mergekit", "align-rebasin", "align-pairs")
_CLAIM_ORDER = ("actions-verdict", "teleport-booth", "teleport-rosenbrock", "teleport-regression-mlp",
    "teleport-digits-mlp", "align-digits-mlp", "compensation-models", "teleport-grad-norm",
    "align-modadd-transformer", "teleport-learned", "census-mergekit", "align-rebasin", "transformer-learned-objectives",
    "transformer-flow-action",
    "align-transformer-pairs")
_RUNS = {r.name: r for area in _AREAS for r in getattr(area, "RUNS", ())}
_CLAIMS = {c.id: c for area in _AREAS for c in area.CLAIMS} | {c.id: c for c in transformer.MEASUREMENT_CLAIMS}

MEASUREMENT_RUNS: tuple[RunSpec, ...] = tuple(_RUNS[name] for name in _RUN_ORDER)
MEASUREMENT_CLAIMS: tuple[Claim, ...] = tuple(replace(_CLAIMS[cid], kind="measurement") for cid in _CLAIM_ORDER)
