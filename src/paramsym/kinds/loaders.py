"""The loaders of every run kind (``KindSpec`` of its config, run and render), named by dotted path
in :data:`paramsym.runs.kinds.KINDS`: this module sits above the experiments and the areas, so the
run verb (:mod:`paramsym.runs`) knows a kind without importing it.
"""

from __future__ import annotations

from ..runs.kinds import KindSpec


def discovery() -> KindSpec:
    from ..discovery.config import DiscoverConfig
    from ..discovery.entry import train
    from ..discovery.report import render as render_discovery

    return KindSpec(DiscoverConfig, train, render_discovery, managed=True)


def objectives() -> KindSpec:
    from ..experiments.discovery.table1 import run as objectives

    return KindSpec(objectives.ObjectivesConfig, objectives.compute, objectives.render, managed=True)


def lifting() -> KindSpec:
    from ..experiments.discovery.lifting import run as lifting

    return KindSpec(lifting.LiftingConfig, lifting.compute, lifting.render, managed=True)


def transformer() -> KindSpec:
    from ..experiments.discovery.transformer import run as transformer_discovery

    return KindSpec(transformer_discovery.TransformerDiscoveryConfig, transformer_discovery.compute,
                    transformer_discovery.render, managed=True)


def attribution() -> KindSpec:
    from ..experiments.attribution.presets import AttributionConfig, render_run, run_kind

    return KindSpec(AttributionConfig, run_kind, render_run, managed=True)


def attention() -> KindSpec:
    from ..attention import commands, report
    from .math import runner

    return KindSpec(report.AttentionTableConfig, runner(commands.table_outputs), report.render, managed=True)


def _attention_command(config: str, outputs: str) -> KindSpec:
    from ..attention import commands
    from . import math as kind_math

    return KindSpec(getattr(commands, config), kind_math.runner(getattr(commands, outputs)), kind_math.render,
                    managed=True)


def attention_count() -> KindSpec:
    return _attention_command("CountConfig", "count_outputs")


def attention_clusterings() -> KindSpec:
    return _attention_command("ClusteringsConfig", "clusterings_outputs")


def attention_classify() -> KindSpec:
    return _attention_command("ClassifyConfig", "classify_outputs")


def attention_build() -> KindSpec:
    from ..attention import build
    from . import math as kind_math

    return KindSpec(build.BuildConfig, kind_math.run_build, kind_math.render, managed=True)


def group() -> KindSpec:
    from ..groups import cli as group_cli
    from . import math as kind_math

    return KindSpec(group_cli.DescribeConfig, kind_math.runner(group_cli.describe_outputs), kind_math.render,
                    managed=True)


def census() -> KindSpec:
    from . import census as kind_census

    return KindSpec(kind_census.CensusConfig, kind_census.run, kind_census.render, managed=True)


def census_export() -> KindSpec:
    from . import census_export as kind_export

    return KindSpec(kind_export.CensusExportConfig, kind_export.run, kind_export.render, managed=True)


def affine() -> KindSpec:
    from . import affine as kind_affine

    return KindSpec(kind_affine.AffineConfig, kind_affine.run, kind_affine.render, managed=True)


def compensate() -> KindSpec:
    from . import compensate as kind_compensate

    return KindSpec(kind_compensate.CompensateConfig, kind_compensate.run, kind_compensate.render, managed=True)


def teleport() -> KindSpec:
    from . import teleport as kind_teleport

    return KindSpec(kind_teleport.TeleportConfig, kind_teleport.run, kind_teleport.render, managed=True)


def teleport_learned() -> KindSpec:
    from . import teleport as kind_teleport

    return KindSpec(kind_teleport.LearnedTeleportConfig, kind_teleport.run_learned, kind_teleport.render_learned,
                    managed=True)


def align_census() -> KindSpec:
    from . import align_census

    return KindSpec(align_census.AlignCensusConfig, align_census.run, align_census.render, managed=True)


def align_stream() -> KindSpec:
    from . import align_stream

    return KindSpec(align_stream.AlignStreamConfig, align_stream.run, align_stream.render, managed=True)


def align() -> KindSpec:
    from . import align as kind_align

    return KindSpec(kind_align.AlignConfig, kind_align.run, kind_align.render, managed=True)
