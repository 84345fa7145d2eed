"""Registry of run kinds and presets: what ``paramsym list``, ``report`` and every command dispatch on.

**The run-kind protocol.** Every command that computes something writes a run directory
(:class:`paramsym.runs.RunDir`) of one *run kind*, registered once in :data:`KINDS`. A kind has

* a typed configuration dataclass with a ``quick()`` classmethod (a small, fast configuration
  for smoke runs and tests) — the command's flags map onto its fields;
* ``run(cfg, out, *, progress) -> metrics``: compute into run directory ``out`` (it may write
  its own files there: tensors, figures, a checkpoint);
* ``render(run_dir) -> str``: the markdown of ``report.md``, from the run's files only.

Every run directory holds ``config.json`` (the resolved configuration with its ``"kind"``),
``metrics.json`` (the results; its presence marks a finished run), ``env.json`` (one entry per
start or resume) and ``report.md``, plus the kind's own files. For kinds registered with
``managed=True`` (the newer commands: ``census``, ``affine``, ``compensate``, ..., and the pure-math
``group`` and ``attention ...``) these four
files are written by :func:`execute`, the one runner: it records the provenance
(:func:`paramsym.provenance.provenance`: code version, config hash, command line, date) in
``config.json`` under ``"provenance"``, appends the start to ``env.json``, calls ``run`` and
writes ``metrics.json`` and ``report.md``. ``execute(..., resume=True)`` continues a run from
its directory: a finished run is returned as is; an unfinished one runs again with its saved
configuration, and ``run`` continues from its own checkpoint if it keeps one (e.g. the training
of ``compensate --learned``), so a resumed run ends with the same ``metrics.json``, byte for
byte, as an uninterrupted one. Metrics hold no wall-clock or CPU times (those go to
``timing.json``), so that comparison is exact. The older kinds (``discovery`` and the
experiments built on it, ``attribution``) write these files in their own ``run``.

:func:`render` / :func:`regenerate` re-render ``report.md`` of any run directory by its kind;
:func:`load_run_config` rebuilds the typed configuration of a run from its ``config.json``.

**Presets.** Every command's presets are :class:`paramsym.presets.Preset` values (one type):
the attribution presets in :mod:`.attribution_presets` (:data:`ATTRIBUTION_PRESETS`), the others beside their concepts
(discovery problems, affine blocks, census models, compensation models, teleport and alignment
presets); :func:`all_presets` collects them for ``paramsym list``.

The registry is one way down, in four modules whose names are all importable from here:
:mod:`.runner` (:func:`execute`, :func:`load_run_config`, :func:`run_attribution`) →
:mod:`.run_reports` (:func:`render`, :func:`regenerate`) → :mod:`.run_kinds` (:data:`KINDS`,
:func:`get_kind`) → :mod:`.attribution_presets` (:data:`ATTRIBUTION_PRESETS`,
:func:`resolve_attribution_config`). None of them imports this module; it adds only the list of
every command's presets (:func:`all_presets`).

Cheap to import (no torch): every heavy module is loaded by a function, only when used. The core
packages never import this module.
"""

from __future__ import annotations

from ..presets import Preset
from .attribution_presets import (
    ATTRIBUTION_PRESETS,
    PresetSpec,
    get_attribution_preset,
    resolve_attribution_config,
)
from .run_kinds import KINDS, KindSpec, RunKind, get_kind
from .run_reports import regenerate, render, render_generic
from .runner import Outcome, config_from_json, execute, load_run_config, run_attribution

__all__ = [
    "ATTRIBUTION_PRESETS", "KINDS", "KindSpec", "Outcome", "Preset", "PresetInfo", "PresetSpec", "RunKind",
    "all_presets", "config_from_json", "execute", "get_attribution_preset", "get_kind", "load_run_config", "regenerate",
    "render", "render_generic", "resolve_attribution_config", "run_attribution",
]

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
    from .kind_align import ALIGN_PRESETS
    from .kind_compensate import MODELS as COMPENSATE_MODELS
    from .kind_math import MATH_PRESETS
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

