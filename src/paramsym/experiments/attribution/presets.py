"""The attribution presets: the entries of ``paramsym attribute --preset`` (:data:`ATTRIBUTION_PRESETS`),
what one is once loaded (:class:`PresetSpec`: config class, run, report sections), and the
resolution of a preset's typed configuration (:func:`resolve_attribution_config`).

Also the kind's two functions: :func:`run_attribution` (a preset run into its directory, with its
report) and :func:`render_run` (``report.md`` of an attribution run). Cheap to import (no torch):
each preset's modules load only when its ``load()`` is called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError
from ...presets import Preset, PresetTable

__all__ = ["ANNULUS_STAGES", "ATTRIBUTION_PRESETS", "AttributionConfig", "PresetSpec", "attribution_preset_value",
           "check_preset_keys", "check_resumable", "get_attribution_preset", "render_run", "run_kind",
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


#: the config keys that only some presets have, and the flag that writes each (named when a preset lacks one)
_PRESET_KEYS = {"stage": "--stage", "weights": "--weights", "probes": "--probes"}


def attribution_preset_value(name: str, *, quick: bool = False, paper: bool = False) -> Any:
    """The named config value of preset ``name``: its config class's ``quick()`` (``quick``), ``paper(quick=quick)``
    (``paper``: the paper's protocol) or default, with the entry's fields; the base that the flags and
    ``--set`` (:func:`paramsym.options.config_from_flags`) or :func:`resolve_attribution_config` write keys into.

    Raises:
        ConfigError: unknown preset, or ``paper`` for a preset without a paper protocol of its own.
    """
    preset = get_attribution_preset(name)
    spec = preset.load()
    if paper and not hasattr(spec.config, "paper"):
        raise ConfigError(f"preset {name} has no paper protocol of its own (its default is the paper's run); drop "
                          "the paper option.")
    cfg = spec.config.paper(quick=quick) if paper else spec.config.quick() if quick else spec.config()
    return dataclasses.replace(cfg, **preset.fields)


def check_preset_keys(name: str, keys: Iterable[str]) -> None:
    """Refuse, by the flag's name, a key of :data:`_PRESET_KEYS` (``stage``, ``weights``, ``probes``) that
    preset ``name``'s config does not have (``--stage`` for a preset without stages, ``--weights`` for
    one that cannot analyse a user's network), however it is given (flag or ``--set``); a stage value
    the preset lacks is its config's ``validate`` refusal.

    Raises:
        ConfigError: the flag, the preset and what to do (drop it, or the presets that take it).
    """
    preset = get_attribution_preset(name)
    names = {f.name for f in dataclasses.fields(preset.load().config)}
    for key in keys:
        if key not in _PRESET_KEYS or key in names:
            continue
        if key == "stage":
            raise ConfigError(f"preset {name} has no stages (config key 'stage'); drop --stage.")
        able = [n for n, p in ATTRIBUTION_PRESETS.items() if key in {f.name for f in dataclasses.fields(p.load().config)}]
        raise ConfigError(f"preset {name} does not accept {_PRESET_KEYS[key]} (config key {key!r}); presets that "
                          f"analyse your own network: {able}.")


def resolve_attribution_config(
    name: str,
    *,
    stage: str | None = None,
    seed: int | None = None,
    quick: bool = False,
    paper: bool = False,
    flows: Iterable[str] | None = None,
    overrides: Iterable[str] | Mapping[str, Any] = (),
    weights: str | None = None,
    probes: str | None = None,
) -> Any:
    """The config of preset ``name`` from Python: :func:`attribution_preset_value` ← the keys ``stage``,
    ``seed``, ``flows`` (repeats dropped), ``weights``, ``probes`` (those not ``None``) ← ``overrides``
    (``"key=value"`` strings or a mapping), typed and validated by :class:`paramsym.config.Overrides`:
    the keys that ``paramsym attribute``'s flags write, so the same values give the same configuration
    as the command line.

    Raises:
        ConfigError: unknown preset, a stage the preset does not have, a bad override, or
            ``stage``/``weights``/``probes`` for a preset without those fields.
    """
    from ...config import Overrides

    base = attribution_preset_value(name, quick=quick, paper=paper)
    values = {key: value for key, value in (("stage", stage), ("seed", seed), ("weights", weights), ("probes", probes),
                                            ("flows", None if flows is None else tuple(dict.fromkeys(flows))))
              if value is not None}
    items = [overrides] if isinstance(overrides, str) else overrides
    check_preset_keys(name, [*values, *(items if isinstance(items, Mapping) else
                                        (str(item).split("=", 1)[0].strip() for item in items))])
    return (Overrides(values, config=type(base)) | Overrides.of(items, config=type(base))).apply(base)


@dataclass
class AttributionConfig:
    """The configuration of an ``attribution`` run: its preset and the preset's resolved
    configuration (``config.json`` = ``{"kind": "attribution", "preset", "config": {...},
    "provenance"}``). Read back by the one serializer: :func:`paramsym.config.from_dict` types
    ``config`` as the config class of the ``preset`` it is read with (:meth:`dependent_types`);
    nothing is converted at construction (:meth:`validate` names a ``config`` of another type)."""

    preset: str = "lifting-sanity"
    config: Any = None

    @classmethod
    def dependent_types(cls, data: Mapping[str, Any]) -> dict[str, type]:
        """The annotation of ``config`` given the fields ``data`` being read: the config class of its preset.

        Raises:
            ConfigError: an unknown preset (the valid names listed).
        """
        return {"config": get_attribution_preset(str(data.get("preset", cls.preset))).load().config}

    def validate(self) -> None:
        """Raises ConfigError: an unknown preset, or ``config`` not an instance of the preset's config class."""
        spec = get_attribution_preset(self.preset).load()
        if not isinstance(self.config, spec.config):
            raise ConfigError(f"preset {self.preset} takes a {spec.config.__name__} as config (e.g. "
                              f"resolve_attribution_config({self.preset!r}), or read with paramsym.config.from_dict); "
                              f"received {type(self.config).__name__}.")

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
    acfg.validate()
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
