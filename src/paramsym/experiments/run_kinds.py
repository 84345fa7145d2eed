"""The run kinds: what a run kind is (:class:`RunKind`, and :class:`KindSpec` once loaded), the
table of every kind (:data:`KINDS`) with the lazy loader of each, and :func:`get_kind`.

The run-kind protocol itself is described in :mod:`paramsym.experiments.registry`, which
re-exports every name here. This module also reads a run directory's ``config.json`` checked
for its kind (:func:`checked_config`), the first step of every dispatch by kind, and renders
attribution runs (their kind's renderer, from :mod:`.attribution_presets`). It imports only
that module of the registry, never :mod:`.runner`, :mod:`.run_reports` or ``registry``.
Cheap to import (no torch): every kind's modules load only when its ``load()`` is called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import RunDirError
from .attribution_presets import ATTRIBUTION_PRESETS

__all__ = ["KINDS", "KindSpec", "RunKind", "checked_config", "get_kind"]


@dataclass(frozen=True)
class KindSpec:
    """What a run kind is made of, once loaded.

    Attributes:
        config: its configuration dataclass, with ``quick()`` (``None`` where the run is built by
            its command only: ``attribution``, whose configuration is the preset's).
        run: ``run(cfg, out, *, progress) -> metrics`` (``None`` likewise).
        render: ``render(run_dir) -> str``, the markdown of ``report.md``.
        managed: :func:`~paramsym.experiments.runner.execute` writes ``config.json``, ``env.json``, ``metrics.json`` and
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


def get_kind(name: str | None) -> RunKind:
    """The run kind ``name``; :class:`RunDirError` lists the known kinds otherwise."""
    if name not in KINDS:
        raise RunDirError(f"unknown run kind {name!r} in config.json; known kinds: {sorted(KINDS)}. The directory was "
                          "made by another program or a newer paramsym; open it with the version that made it.")
    return KINDS[name]


def checked_config(run) -> dict[str, Any]:
    """``config.json`` of ``run``, checked to be an object with a string ``kind``
    (:meth:`paramsym.runs.RunDir.kind`; a corrupt file is a named :class:`RunFileError`)."""
    run.kind()
    return run.read_json("config.json")


def _render_attribution(run) -> str:
    from ..attribution.report import render as render_common

    preset = checked_config(run).get("preset")
    sections = ATTRIBUTION_PRESETS[preset].load().sections if preset in ATTRIBUTION_PRESETS else None
    return render_common(run, sections)
