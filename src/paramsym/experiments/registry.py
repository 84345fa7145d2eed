"""Registry of run kinds and presets: what ``paramsym list``, ``report`` and ``attribute`` dispatch on.

Two tables, both cheap to import (no torch; every heavy module is loaded by a function defined
here, only when used):

* :data:`KINDS` — every run kind a run directory can hold (the ``"kind"`` key of its
  ``config.json``): ``discovery``, ``discovery-objectives``, ``discovery-lifting``,
  ``attribution``, ``attention``. Each has a loader returning a :class:`KindSpec` (its config
  class, ``run(cfg, out, progress=...)`` and report renderer) and the command that makes it.
* :data:`ATTRIBUTION_PRESETS` — the ``paramsym attribute --preset`` entries. Each names its
  stages and fixed config fields, and a loader returning a :class:`PresetSpec` (config class
  with ``quick()``, ``run(cfg, out, progress=...)``, optional report sections).

Discovery presets are defined with their problems (:data:`paramsym.discovery.problems.PRESETS`)
and listed from there by :func:`all_presets`. The core packages never import this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, RunDirError

__all__ = [
    "ATTRIBUTION_PRESETS", "KINDS", "AttributionPreset", "KindSpec", "PresetInfo", "PresetSpec", "RunKind",
    "all_presets", "get_attribution_preset", "get_kind", "regenerate", "render", "resolve_attribution_config",
    "run_attribution",
]


@dataclass(frozen=True)
class KindSpec:
    """What a run kind is made of, once loaded.

    Attributes:
        config: its configuration dataclass (``None`` where the run is built by its command only).
        run: ``run(cfg, out, progress=...) -> dict`` (``None`` likewise).
        render: ``render(run_dir) -> str``, the markdown of ``report.md``.
    """

    config: type | None
    run: Callable[..., dict[str, Any]] | None
    render: Callable[[Any], str]


@dataclass(frozen=True)
class RunKind:
    """One run kind: its name, one line of help, the command making it, a lazy loader."""

    name: str
    help: str
    command: str
    load: Callable[[], KindSpec]


@dataclass(frozen=True)
class PresetSpec:
    """An attribution preset, once loaded: config class (with ``quick()``), run, report sections."""

    config: type
    run: Callable[..., dict[str, Any]]
    sections: Callable[[Any], str] | None = None


@dataclass(frozen=True)
class AttributionPreset:
    """One ``paramsym attribute --preset`` entry.

    Attributes:
        name: the ``--preset`` value.
        help: one line for ``--help`` and ``paramsym list``.
        load: returns the :class:`PresetSpec` (imports the experiment module).
        stages: accepted ``--stage`` values, the first being the default (``()`` = no stages);
            the stage is the config field ``stage``.
        fields: fixed config fields of this entry (e.g. ``{"data": "wedge"}``).
    """

    name: str
    help: str
    load: Callable[[], PresetSpec]
    stages: tuple[str, ...] = ()
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PresetInfo:
    """A row of ``paramsym list``: preset name, kind, one line, default flag, stages, command."""

    name: str
    kind: str
    summary: str
    default: bool
    stages: tuple[str, ...]
    command: str

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "stages": list(self.stages)}


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
    from ..attention import report

    return KindSpec(report.AttentionTableConfig, report.run, report.render)


def _annulus() -> PresetSpec:
    from . import annulus, annulus_report

    return PresetSpec(annulus.AnnulusConfig, annulus.run, annulus_report.report_sections)


def _sanity() -> PresetSpec:
    from . import sanity

    return PresetSpec(sanity.SanityConfig, sanity.run)


def _hamiltonian() -> PresetSpec:
    from . import hamiltonian, hamiltonian_config

    return PresetSpec(hamiltonian_config.HamiltonianConfig, hamiltonian.run, hamiltonian.report_sections)


KINDS: dict[str, RunKind] = {
    k.name: k
    for k in (
        RunKind("discovery", "learned symmetry of a parameter block, with its verdict", "paramsym discover", _discovery),
        RunKind("discovery-objectives", "hybrid vs finite objectives at the same step budget",
                "paramsym experiment objectives", _objectives),
        RunKind("discovery-lifting", "ReLU (2,8,8,1): one unit vs all weights, full-network error",
                "paramsym experiment lifting", _lifting),
        RunKind("transformer-discovery", "all-MiniLM-L6-v2 FFN unit + compensators: learned edits installed in the "
                "full model, drift vs random/uncompensated", "paramsym experiment transformer", _transformer),
        RunKind("attribution", "parameter-level attribution of a learned symmetry", "paramsym attribute",
                _attribution),
        RunKind("attention", "equivariant-attention component counts", "paramsym attention table --out DIR",
                _attention),
    )
}

ANNULUS_STAGES = ("trained", "init")

ATTRIBUTION_PRESETS: dict[str, AttributionPreset] = {
    p.name: p
    for p in (
        AttributionPreset("annulus-wedge", "annulus classifier trained on a 90° wedge of the outer band "
                          "(stage init|trained)", _annulus, ANNULUS_STAGES, {"data": "wedge"}),
        AttributionPreset("annulus-full", "annulus classifier trained on the full 360° outer band "
                          "(stage init|trained)", _annulus, ANNULUS_STAGES, {"data": "full"}),
        AttributionPreset("lifting-sanity", "known answer: MLP fitted to a rotation-invariant target, first "
                          "layer trainable (η liftable) vs frozen (not liftable) (stage trainable|frozen)",
                          _sanity, ("trainable", "frozen")),
        AttributionPreset("hamiltonian", "separable learned Hamiltonian on the Mexican-hat potential: α sweep, "
                          "stacked α system, resolved/fixed walks, perturbation sweep", _hamiltonian),
    )
}


# ------------------------------------------------------------------------------- lookups


def get_kind(name: str | None) -> RunKind:
    """The run kind ``name``; :class:`RunDirError` lists the known kinds otherwise."""
    if name not in KINDS:
        raise RunDirError(f"unknown run kind {name!r} in config.json; known kinds: {sorted(KINDS)}.")
    return KINDS[name]


def get_attribution_preset(name: str) -> AttributionPreset:
    """The attribution preset ``name``; :class:`ConfigError` lists the valid names otherwise."""
    try:
        return ATTRIBUTION_PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; valid presets: {sorted(ATTRIBUTION_PRESETS)} "
                          "(see `paramsym list`).") from None


def all_presets() -> list[PresetInfo]:
    """Every preset, discovery then attribution, with its kind (imports the discovery problems)."""
    from ..discovery.problems import DEFAULT_PRESET, PRESETS

    rows = [PresetInfo(name, "discovery", summary, name == DEFAULT_PRESET, (), "paramsym discover --preset " + name)
            for name, (_, summary) in PRESETS.items()]
    rows += [PresetInfo(p.name, "attribution", p.help, False, p.stages, "paramsym attribute --preset " + p.name)
             for p in ATTRIBUTION_PRESETS.values()]
    return rows


# ------------------------------------------------------------------------------- running


def resolve_attribution_config(
    name: str,
    *,
    stage: str | None = None,
    seed: int | None = None,
    quick: bool = False,
    flows: Iterable[str] | None = None,
    overrides: Iterable[str] = (),
    weights: str | None = None,
    probes: str | None = None,
) -> Any:
    """The config of preset ``name``: ``quick()`` or defaults ← entry fields ← stage, seed, flows ← overrides.

    ``weights`` / ``probes`` (``--weights`` / ``--probes``) set the config fields of the same
    name for presets that can analyse a user's network (the annulus presets).

    Raises:
        ConfigError: unknown preset, a stage the preset does not have, a bad override, or
            ``weights``/``probes`` for a preset without those fields.
    """
    from ..config import apply_overrides

    preset = get_attribution_preset(name)
    values = dict(preset.fields)
    if preset.stages:
        stage = stage or preset.stages[0]
        if stage not in preset.stages:
            raise ConfigError(f"--stage {stage!r} is not a stage of preset {name}; valid: {list(preset.stages)}.")
        values["stage"] = stage
    elif stage is not None:
        raise ConfigError(f"preset {name} has no stages; drop --stage {stage!r}.")
    if seed is not None:
        values["seed"] = int(seed)
    spec = preset.load()
    names = {f.name for f in dataclasses.fields(spec.config)}
    if flows is not None and "flows" in names:
        values["flows"] = tuple(dict.fromkeys(flows))
    for key, val in (("weights", weights), ("probes", probes)):
        if val is None:
            continue
        if key not in names:
            able = [n for n, p in ATTRIBUTION_PRESETS.items() if n.startswith("annulus")]
            raise ConfigError(f"preset {name} does not accept --{key}; presets that analyse your own network: {able}.")
        values[key] = str(val)
    cfg = spec.config.quick() if quick else spec.config()
    cfg = dataclasses.replace(cfg, **values)
    return apply_overrides(cfg, list(overrides))


def run_attribution(name: str, cfg: Any, out, *, progress: bool = True) -> dict[str, Any]:
    """Run attribution preset ``name`` with ``cfg`` into ``out``, write ``report.md``; return the summary."""
    spec = get_attribution_preset(name).load()
    summary = spec.run(cfg, out, progress=progress)
    out.write_text("report.md", render(out))
    return summary


# ------------------------------------------------------------------------------- reports


def _config(run) -> dict[str, Any]:
    """``config.json`` of ``run``, checked to be an object with a string ``kind``
    (:meth:`paramsym.runs.RunDir.kind`; a corrupt file is a named :class:`RunFileError`)."""
    run.kind()
    return run.read_json("config.json")


def _render_attribution(run) -> str:
    from ..attribution.report import render as render_common

    preset = _config(run).get("preset")
    sections = ATTRIBUTION_PRESETS[preset].load().sections if preset in ATTRIBUTION_PRESETS else None
    return render_common(run, sections)


def render(run) -> str:
    """The markdown report of run directory ``run``, by the kind in its ``config.json``.

    Raises:
        RunFileError: a file of the run holds valid JSON of another form than its renderer reads
            (e.g. ``curves.json`` = ``null``): the renderers read the run's own files, so a
            ``KeyError``/``TypeError``/... while rendering means a damaged run, named here in one line.
    """
    from ..errors import RunFileError

    renderer = get_kind(_config(run).get("kind")).load().render
    try:
        return renderer(run)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
        raise RunFileError(
            f"{str(run.path)!r}: a file of the run is not of the form its report reads ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}); restore the run's files, or rerun the command that made it."
        ) from exc


def regenerate(run):
    """Re-render ``report.md`` (and its figures) from the files in ``run``; return its path.

    Raises:
        RunDirError: unknown kind, or the run has no ``metrics.json`` (it did not finish).
    """
    get_kind(_config(run).get("kind"))
    if not run.has("metrics.json"):
        raise RunDirError(
            f"{run.path} has no metrics.json: the run did not finish. Continue it with "
            f"`paramsym discover --resume {run.path}` (discovery) or rerun it."
        )
    return run.write_text("report.md", render(run))
