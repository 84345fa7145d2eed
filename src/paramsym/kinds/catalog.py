"""Every command's presets, for ``paramsym list`` (:func:`all_presets`).

**Presets.** A preset is one thing: a named configuration value, a :class:`paramsym.presets.Preset`
row (name, kind, command, summary, its fields). The attribution presets live in
:mod:`paramsym.experiments.attribution.presets`, the others beside their concepts (discovery
problems, affine blocks, census models, compensation models, teleport and alignment presets,
the papers' cases of the pure-math commands); this module only collects them.

The run-kind protocol (what a run directory holds, :func:`~paramsym.runs.execute.execute`,
``--resume``) is described in :mod:`paramsym.runs`.
"""

from __future__ import annotations

from ..experiments.attribution.presets import ATTRIBUTION_PRESETS
from ..presets import Preset

__all__ = ["PresetInfo", "all_presets"]

#: a row of ``paramsym list`` is a :class:`~paramsym.presets.Preset` (the former name)
PresetInfo = Preset


def _discovery_presets() -> list[Preset]:
    from ..discovery.problems import PRESETS

    return list(PRESETS.values())


def all_presets() -> list[Preset]:
    """Every command's presets, as one list of :class:`~paramsym.presets.Preset` rows (discovery,
    attribution, affine, census, compensate, teleport, align, and the papers' cases of the
    pure-math commands ``group`` and ``attention ...``)."""
    from ..census.presets import PRESETS as CENSUS_PRESETS
    from ..exact.presets import AFFINE_PRESETS
    from .align import ALIGN_PRESETS
    from .compensate import MODELS as COMPENSATE_MODELS
    from .math import MATH_PRESETS
    from .teleport_presets import TELEPORT_PRESETS

    rows = _discovery_presets()
    rows += list(ATTRIBUTION_PRESETS.values())
    rows += list(AFFINE_PRESETS.values())
    rows += list(CENSUS_PRESETS.values())
    rows += list(COMPENSATE_MODELS.values())
    rows += list(TELEPORT_PRESETS.values())
    rows += list(ALIGN_PRESETS.values())
    rows += list(MATH_PRESETS.values())
    return rows

