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

__all__ = ["ANNULUS_STAGES", "ATTRIBUTION_PRESETS", "AttributionConfig", "PresetSpec", "check_resumable",
           "get_attribution_preset", "render_run", "run_kind",
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


@dataclass
class AttributionConfig:
    """The configuration of an ``attribution`` run: its preset and the preset's resolved
    configuration (``config.json`` = ``{"kind": "attribution", "preset", "config": {...},
    "provenance"}``; a mapping ``config``, read back from that file, is rebuilt as the preset's
    config class)."""

    preset: str = "lifting-sanity"
    config: Any = None

    def __post_init__(self) -> None:
        from ...config import from_dict

        spec = get_attribution_preset(self.preset).load()
        if self.config is None:
            self.config = spec.config()
        elif isinstance(self.config, dict):
            self.config = from_dict(spec.config, self.config)
        elif not isinstance(self.config, spec.config):
            raise ConfigError(f"preset {self.preset} takes a {spec.config.__name__}; received "
                              f"{type(self.config).__name__}.")

    @classmethod
    def quick(cls) -> AttributionConfig:
        """The ``lifting-sanity`` preset at its quick budget (seconds)."""
        return cls("lifting-sanity", resolve_attribution_config("lifting-sanity", quick=True))

    @property
    def seed(self) -> int | None:
        return getattr(self.config, "seed", None)


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted(set(old) | set(new), key=str)
                for d in _differences(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [prefix.rstrip(".")]


def check_resumable(out, cfg: AttributionConfig) -> bool:
    """Whether ``out`` holds a run of this very configuration to continue (``False``: empty, or
    holding only the record of ``paramsym reproduce``): finished flows and a trained model are
    reused, so they must come from ``cfg``.

    Raises:
        RunDirError: ``out`` holds files without a ``config.json``, or the run of another
            configuration (the differing keys are named); nothing is touched.
    """
    from ...config import to_dict
    from ...errors import RunDirError
    from ...runs.reuse import RECORD

    if not out.path.is_dir() or not any(p.name != RECORD for p in out.path.iterdir()):
        return False
    if not out.has("config.json"):
        raise RunDirError(f"--out {str(out.path)!r} is not empty and holds no config.json (not a run of this preset); "
                          "its files would be mixed with this run's. Choose a new or empty --out.")
    old = out.read_json("config.json")
    old = {k: v for k, v in old.items() if k != "provenance"} if isinstance(old, dict) else old
    diff = (_differences(to_dict(old), {"kind": "attribution", **to_dict(cfg)}) if isinstance(old, dict)
            else ["(not a configuration)"])
    if diff:
        shown = ", ".join(diff[:6]) + (f" (+{len(diff) - 6} more)" if len(diff) > 6 else "")
        raise RunDirError(f"--out {str(out.path)!r} holds a run with another configuration (differs in: {shown}); its "
                          "finished flows would be mixed with this run's. Choose a new --out, or rerun with the "
                          "original options to resume it.")
    return True


def run_kind(cfg: AttributionConfig, out, *, progress: bool = True) -> dict[str, Any]:
    """The ``run`` of the ``attribution`` kind: the preset's run (finished flows and a trained model
    in ``out`` reused); returns its metrics (with ``"summary"``), which the run verb writes to
    ``metrics.json`` (the one writer)."""
    return get_attribution_preset(cfg.preset).load().run(cfg.config, out, progress=progress)


def run_attribution(name: str, cfg: Any, out, *, progress: bool = True, resume: bool | None = None,
                    command: str | None = None) -> dict[str, Any]:
    """Run attribution preset ``name`` with ``cfg`` into ``out`` through the run verb
    (:func:`paramsym.runs.execute.execute`: ``config.json`` with provenance, ``env.json``,
    ``metrics.json``, ``report.md``); return the summary.

    ``resume``: continue the run in ``out`` (``None``: when ``out`` holds a run of this very
    configuration, :func:`check_resumable`, as `paramsym reproduce` re-enters its directories).
    """
    from ...runs.execute import execute

    acfg = cfg if isinstance(cfg, AttributionConfig) else AttributionConfig(name, cfg)
    if resume is None:
        resume = check_resumable(out, acfg)
    outcome = execute("attribution", acfg, out, resume=resume, command=command, progress=progress, seed=acfg.seed)
    return outcome.metrics["summary"]


def render_run(run) -> str:
    """``report.md`` of an attribution run: the common sections, then its preset's own."""
    from ...attribution.report import render as render_common
    from ...runs.kinds import checked_config

    preset = checked_config(run).get("preset")
    sections = ATTRIBUTION_PRESETS[preset].load().sections if preset in ATTRIBUTION_PRESETS else None
    return render_common(run, sections)
