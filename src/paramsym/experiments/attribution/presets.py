"""The attribution presets: the entries of ``paramsym attribute --preset`` (:data:`ATTRIBUTION_PRESETS`),
what one is once loaded (:class:`PresetSpec`: config class, run, report sections), and the
resolution of a preset's typed configuration (:func:`resolve_attribution_config`).

Also the kind's two functions: :func:`run_attribution` (a preset run into its directory, with its
report) and :func:`render_run` (``report.md`` of an attribution run). Cheap to import (no torch):
each preset's modules load only when its ``load()`` is called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError
from ...presets import Preset, PresetTable

__all__ = ["ANNULUS_STAGES", "ATTRIBUTION_PRESETS", "PresetSpec", "get_attribution_preset", "render_run",
           "resolve_attribution_config", "run_attribution"]


@dataclass(frozen=True)
class PresetSpec:
    """An attribution preset, once loaded: config class (with ``quick()``), run, report sections."""

    config: type
    run: Callable[..., dict[str, Any]]
    sections: Callable[[Any], str] | None = None


def _annulus() -> PresetSpec:
    from .annulus import report as annulus_report
    from .annulus import run as annulus

    return PresetSpec(annulus.AnnulusConfig, annulus.run, annulus_report.report_sections)


def _sanity() -> PresetSpec:
    from .sanity import run as sanity

    return PresetSpec(sanity.SanityConfig, sanity.run)


def _hamiltonian() -> PresetSpec:
    from .hamiltonian import config as hamiltonian_config
    from .hamiltonian import run as hamiltonian

    return PresetSpec(hamiltonian_config.HamiltonianConfig, hamiltonian.run, hamiltonian.report_sections)


ANNULUS_STAGES = ("trained", "init")


def _attribution_preset(name: str, summary: str, load: Callable[[], PresetSpec], stages: tuple[str, ...] = (),
                        fields: dict[str, Any] | None = None) -> Preset:
    return Preset(name, "attribution", "paramsym attribute --preset " + name, summary, stages=stages,
                  fields=fields or {}, load=load)


#: the ``paramsym attribute --preset`` entries; ``load()`` returns the :class:`PresetSpec`, ``fields``
#: are the entry's fixed config fields, the stage is the config field ``stage``
ATTRIBUTION_PRESETS: PresetTable = PresetTable("attribution preset", (
    _attribution_preset("annulus-wedge", "annulus classifier trained on a 90° wedge of the outer band "
                        "(stage init|trained)", _annulus, ANNULUS_STAGES, {"data": "wedge"}),
    _attribution_preset("annulus-full", "annulus classifier trained on the full 360° outer band "
                        "(stage init|trained)", _annulus, ANNULUS_STAGES, {"data": "full"}),
    _attribution_preset("lifting-sanity", "known answer: MLP fitted to a rotation-invariant target, first "
                        "layer trainable (η liftable) vs frozen (not liftable) (stage trainable|frozen)",
                        _sanity, ("trainable", "frozen")),
    _attribution_preset("hamiltonian", "separable learned Hamiltonian on the Mexican-hat potential: α sweep, "
                        "stacked α system, resolved/fixed walks, perturbation sweep", _hamiltonian),
))


def get_attribution_preset(name: str) -> Preset:
    """The attribution preset ``name``; :class:`ConfigError` lists the valid names otherwise."""
    try:
        return ATTRIBUTION_PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; valid presets: {sorted(ATTRIBUTION_PRESETS)} "
                          "(see `paramsym list`).") from None


def resolve_attribution_config(
    name: str,
    *,
    stage: str | None = None,
    seed: int | None = None,
    quick: bool = False,
    paper: bool = False,
    flows: Iterable[str] | None = None,
    overrides: Iterable[str] = (),
    weights: str | None = None,
    probes: str | None = None,
) -> Any:
    """The config of preset ``name``: ``quick()`` or defaults (``paper``: the config's ``paper(quick=quick)``,
    the paper's protocol) ← entry fields ← stage, seed, flows ← overrides.

    ``weights`` / ``probes`` (``--weights`` / ``--probes``) set the config fields of the same
    name for presets that can analyse a user's network (the annulus presets).

    Raises:
        ConfigError: unknown preset, a stage the preset does not have, a bad override, or
            ``weights``/``probes`` for a preset without those fields.
    """
    from ...config import apply_overrides

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
    if paper and not hasattr(spec.config, "paper"):
        raise ConfigError(f"preset {name} has no paper protocol of its own (its default is the paper's run); drop "
                          "the paper option.")
    cfg = spec.config.paper(quick=quick) if paper else spec.config.quick() if quick else spec.config()
    cfg = dataclasses.replace(cfg, **values)
    return apply_overrides(cfg, list(overrides))


def run_attribution(name: str, cfg: Any, out, *, progress: bool = True) -> dict[str, Any]:
    """Run attribution preset ``name`` with ``cfg`` into ``out``, write ``report.md``; return the summary."""
    from ...runs.reports import render

    spec = get_attribution_preset(name).load()
    summary = spec.run(cfg, out, progress=progress)
    out.write_text("report.md", render(out))
    return summary


def render_run(run) -> str:
    """``report.md`` of an attribution run: the common sections, then its preset's own."""
    from ...attribution.report import render as render_common
    from ...runs.kinds import checked_config

    preset = checked_config(run).get("preset")
    sections = ATTRIBUTION_PRESETS[preset].load().sections if preset in ATTRIBUTION_PRESETS else None
    return render_common(run, sections)
