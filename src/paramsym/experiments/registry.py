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
the attribution presets (:data:`ATTRIBUTION_PRESETS`), the others beside their concepts
(discovery problems, affine blocks, census models, compensation models, teleport and alignment
presets); :func:`all_presets` collects them for ``paramsym list``.

This module holds the kinds (:data:`KINDS`, :func:`get_kind`) and the preset list; the runner
(:func:`execute`, :func:`load_run_config`) is :mod:`.runner`, the reports (:func:`render`,
:func:`render_generic`, :func:`regenerate`) :mod:`.run_reports` and the attribution presets
(:data:`ATTRIBUTION_PRESETS`, :func:`resolve_attribution_config`, :func:`run_attribution`)
:mod:`.attribution_presets`; every name is importable from here.

Cheap to import (no torch): every heavy module is loaded by a function defined here, only when
used. The core packages never import this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import RunDirError
from ..presets import Preset
from .attribution_presets import (
    ATTRIBUTION_PRESETS,
    PresetSpec,
    _render_attribution,
    get_attribution_preset,
    resolve_attribution_config,
    run_attribution,
)
from .run_reports import regenerate, render, render_generic
from .runner import Outcome, config_from_json, execute, load_run_config

__all__ = [
    "ATTRIBUTION_PRESETS", "KINDS", "KindSpec", "Outcome", "Preset", "PresetInfo", "PresetSpec", "RunKind",
    "all_presets", "config_from_json", "execute", "get_attribution_preset", "get_kind", "load_run_config", "regenerate",
    "render", "render_generic", "resolve_attribution_config", "run_attribution",
]

#: a row of ``paramsym list`` is a :class:`~paramsym.presets.Preset` (the former name)
PresetInfo = Preset


@dataclass(frozen=True)
class KindSpec:
    """What a run kind is made of, once loaded.

    Attributes:
        config: its configuration dataclass, with ``quick()`` (``None`` where the run is built by
            its command only: ``attribution``, whose configuration is the preset's).
        run: ``run(cfg, out, *, progress) -> metrics`` (``None`` likewise).
        render: ``render(run_dir) -> str``, the markdown of ``report.md``.
        managed: :func:`execute` writes ``config.json``, ``env.json``, ``metrics.json`` and
            ``report.md`` around ``run`` (``False``: ``run`` writes them itself).
    """

    config: type | None
    run: Callable[..., dict[str, Any]] | None
    render: Callable[[Any], str]
    managed: bool = False


@dataclass(frozen=True)
class RunKind:
    """One run kind: its name, one line of help, the command making it, a lazy loader."""

    name: str
    help: str
    command: str
    load: Callable[[], KindSpec]
    #: the command takes ``--resume DIR``
    resumable: bool = False


# ------------------------------------------------------------------------------- loaders


def _discovery() -> KindSpec:
    from ..discovery.config import DiscoverConfig
    from ..discovery.report import render as render_discovery
    from ..discovery.run import run_discovery

    return KindSpec(DiscoverConfig, run_discovery, render_discovery)


def _objectives() -> KindSpec:
    from . import objectives

    return KindSpec(objectives.ObjectivesConfig, objectives.run, objectives.render)


def _lifting() -> KindSpec:
    from . import lifting

    return KindSpec(lifting.LiftingConfig, lifting.run, lifting.render)


def _transformer() -> KindSpec:
    from . import transformer_discovery

    return KindSpec(transformer_discovery.TransformerDiscoveryConfig, transformer_discovery.run,
                    transformer_discovery.render)


def _attribution() -> KindSpec:
    return KindSpec(None, None, _render_attribution)


def _attention() -> KindSpec:
    from ..attention import commands, report
    from .kind_math import runner

    return KindSpec(report.AttentionTableConfig, runner(commands.table_outputs), report.render, managed=True)


def _attention_command(config: str, outputs: str) -> Callable[[], KindSpec]:
    def load() -> KindSpec:
        from ..attention import commands
        from . import kind_math

        return KindSpec(getattr(commands, config), kind_math.runner(getattr(commands, outputs)), kind_math.render,
                        managed=True)

    return load


def _group() -> KindSpec:
    from ..groups import cli as group_cli
    from . import kind_math

    return KindSpec(group_cli.DescribeConfig, kind_math.runner(group_cli.describe_outputs), kind_math.render,
                    managed=True)


def _census() -> KindSpec:
    from . import kind_census

    return KindSpec(kind_census.CensusConfig, kind_census.run, kind_census.render, managed=True)


def _affine() -> KindSpec:
    from . import kind_affine

    return KindSpec(kind_affine.AffineConfig, kind_affine.run, kind_affine.render, managed=True)


def _compensate() -> KindSpec:
    from . import kind_compensate

    return KindSpec(kind_compensate.CompensateConfig, kind_compensate.run, kind_compensate.render, managed=True)


def _teleport() -> KindSpec:
    from . import kind_teleport

    return KindSpec(kind_teleport.TeleportConfig, kind_teleport.run, kind_teleport.render, managed=True)


def _teleport_learned() -> KindSpec:
    from . import kind_teleport

    return KindSpec(kind_teleport.LearnedTeleportConfig, kind_teleport.run_learned, kind_teleport.render_learned,
                    managed=True)


def _align() -> KindSpec:
    from . import kind_align

    return KindSpec(kind_align.AlignConfig, kind_align.run, kind_align.render, managed=True)


def _sweep() -> KindSpec:
    from .sweep import kind

    return KindSpec(kind.SweepConfig, kind.run, kind.render, managed=True)


KINDS: dict[str, RunKind] = {
    k.name: k
    for k in (
        RunKind("discovery", "learned symmetry of a parameter block, with its verdict", "paramsym discover", _discovery, True),
        RunKind("discovery-objectives", "hybrid vs finite objectives at the same step budget",
                "paramsym experiment objectives", _objectives),
        RunKind("discovery-lifting", "ReLU (2,8,8,1): one unit vs all weights, full-network error",
                "paramsym experiment lifting", _lifting),
        RunKind("transformer-discovery", "all-MiniLM-L6-v2 FFN unit + compensators: learned edits installed in the "
                "full model, drift vs random/uncompensated", "paramsym experiment transformer", _transformer),
        RunKind("attribution", "parameter-level attribution of a learned symmetry", "paramsym attribute",
                _attribution),
        RunKind("attention", "equivariant-attention component counts over a range of copies (table, figure)",
                "paramsym attention table", _attention, True),
        RunKind("attention-count", "c_(G,d)(V) and the Theorem 9 bound for one V = R^C ⊗ ρ",
                "paramsym attention count", _attention_command("CountConfig", "count_outputs"), True),
        RunKind("attention-clusterings", "partial G-clusterings of a set of heads (count and listing)",
                "paramsym attention clusterings", _attention_command("ClusteringsConfig", "clusterings_outputs"), True),
        RunKind("attention-classify", "the partial G-clustering of an attention layer, or the failing condition",
                "paramsym attention classify", _attention_command("ClassifyConfig", "classify_outputs"), True),
        RunKind("group", "a finite group: classes, character table, real irreps, a decomposition", "paramsym group",
                _group, True),
        RunKind("census", "every known parameter symmetry of a model, with its dimension, verified on the weights",
                "paramsym census", _census, True),
        RunKind("affine", "exact affine symmetry algebra of a named block", "paramsym affine", _affine, True),
        RunKind("compensate", "closed-form (or learned) compensating action on one FFN unit of a real model",
                "paramsym compensate", _compensate, True),
        RunKind("teleport", "training with and without symmetry teleports, over seeds (step ratio, level-set error)",
                "paramsym teleport", _teleport, True),
        RunKind("teleport-learned", "one teleport along the learned action of a discovery run",
                "paramsym teleport", _teleport_learned, True),
        RunKind("align", "two models aligned modulo their symmetries and merged (loss barriers)", "paramsym align",
                _align, True),
        RunKind("sweep", "recipe search: candidates, the best continued, replication on fresh seeds",
                "paramsym sweep", _sweep, True),
    )
}

# ------------------------------------------------------------------------------- lookups


def get_kind(name: str | None) -> RunKind:
    """The run kind ``name``; :class:`RunDirError` lists the known kinds otherwise."""
    if name not in KINDS:
        raise RunDirError(f"unknown run kind {name!r} in config.json; known kinds: {sorted(KINDS)}. The directory was "
                          "made by another program or a newer paramsym; open it with the version that made it.")
    return KINDS[name]


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
