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
the attribution presets here (:data:`ATTRIBUTION_PRESETS`), the others beside their concepts
(discovery problems, affine blocks, census models, compensation models, teleport and alignment
presets); :func:`all_presets` collects them for ``paramsym list``.

Cheap to import (no torch): every heavy module is loaded by a function defined here, only when
used. The core packages never import this module.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, ParamsymError, RunDirError, RunFileError
from ..presets import Preset, PresetTable

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


@dataclass(frozen=True)
class PresetSpec:
    """An attribution preset, once loaded: config class (with ``quick()``), run, report sections."""

    config: type
    run: Callable[..., dict[str, Any]]
    sections: Callable[[Any], str] | None = None


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


def _annulus() -> PresetSpec:
    from . import annulus, annulus_report

    return PresetSpec(annulus.AnnulusConfig, annulus.run, annulus_report.report_sections)


def _sanity() -> PresetSpec:
    from . import sanity

    return PresetSpec(sanity.SanityConfig, sanity.run)


def _hamiltonian() -> PresetSpec:
    from . import hamiltonian, hamiltonian_config

    return PresetSpec(hamiltonian_config.HamiltonianConfig, hamiltonian.run, hamiltonian.report_sections)


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


# ------------------------------------------------------------------------------- lookups


def get_kind(name: str | None) -> RunKind:
    """The run kind ``name``; :class:`RunDirError` lists the known kinds otherwise."""
    if name not in KINDS:
        raise RunDirError(f"unknown run kind {name!r} in config.json; known kinds: {sorted(KINDS)}. The directory was "
                          "made by another program or a newer paramsym; open it with the version that made it.")
    return KINDS[name]


def get_attribution_preset(name: str) -> Preset:
    """The attribution preset ``name``; :class:`ConfigError` lists the valid names otherwise."""
    try:
        return ATTRIBUTION_PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; valid presets: {sorted(ATTRIBUTION_PRESETS)} "
                          "(see `paramsym list`).") from None


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


# ------------------------------------------------------------------------------- the runner


@dataclass(frozen=True)
class Outcome:
    """What :func:`execute` returns: the metrics, the run directory, and whether the run had
    already finished before this call (``--resume`` of a finished run)."""

    metrics: dict[str, Any]
    run: Any
    already_finished: bool = False


def _field_value(tp: Any, value: Any) -> Any:
    """``value`` (read from JSON) as the type hint ``tp`` of a config field: lists become tuples
    where the field is a tuple, nested dataclasses are rebuilt."""
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp) and isinstance(value, dict):
        return config_from_json(tp, value)
    if (tp is tuple or origin is tuple) and isinstance(value, list):
        return tuple(value)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", typing.Union)):
        for arg in typing.get_args(tp):
            if arg is not type(None):
                converted = _field_value(arg, value)
                if converted is not value:
                    return converted
    return value


def config_from_json(cls: type, data: dict[str, Any]) -> Any:
    """The dataclass ``cls`` from the JSON object of its fields (other keys, e.g. ``kind``, ignored).

    Raises:
        RunFileError: ``data`` is not an object or lacks a field without a default.
    """
    if not isinstance(data, dict):
        raise RunFileError(f"a {cls.__name__} is stored as a JSON object; found {type(data).__name__}. Restore "
                           "config.json, or start the run again.")
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    values = {f.name: _field_value(hints.get(f.name), data[f.name]) for f in dataclasses.fields(cls) if f.name in data}
    try:
        return cls(**values)
    except TypeError as exc:
        raise RunFileError(f"config.json does not hold a {cls.__name__} ({exc}); restore it, or start the run "
                           "again.") from None


def load_run_config(run) -> Any:
    """The typed configuration of run directory ``run`` (by the kind in its ``config.json``).

    Raises:
        RunDirError: unknown kind, or a kind without a configuration class.
        RunFileError: ``config.json`` corrupt, or edited since the run started (its ``config_hash``
            no longer matches the configuration).
    """
    from ..provenance import config_hash

    data = _config(run)
    kind = get_kind(data.get("kind"))
    spec = kind.load()
    if spec.config is None:
        raise RunDirError(f"{str(run.path)!r} is a {kind.name} run, whose configuration is its preset's; rerun it "
                          f"with `{kind.command}`.")
    cfg = config_from_json(spec.config, data)
    stored = (data.get("provenance") or {}).get("config_hash") if isinstance(data.get("provenance"), dict) else None
    if stored is not None and stored != config_hash(cfg):
        raise RunFileError(f"{str(run.file('config.json'))!r} was edited after the run started (its config_hash "
                           f"{stored!r} no longer matches the configuration); restore it, or start a fresh run with "
                           "--out NEWDIR.")
    return cfg


def _discard(out) -> None:
    """Remove the files :func:`execute` wrote into a fresh run directory (and it, when left empty)."""
    import os

    for name in ("config.json", "env.json", "timing.json"):
        try:
            os.unlink(out.file(name))
        except OSError:
            pass
    try:
        os.rmdir(out.path)
    except OSError:  # not empty (the kind's own files) or already gone
        pass


def execute(kind: str, cfg: Any, out, *, resume: bool = False, command: str | None = None, progress: bool = True,
            seed: int | None = None, options: dict[str, Any] | None = None, env: dict[str, Any] | None = None
            ) -> Outcome:
    """Run a managed kind: the one place its run directory's common files are written.

    A fresh run writes ``config.json`` = ``{"kind": kind, <fields of cfg>, "provenance": {...}}``
    (:func:`paramsym.provenance.provenance` of ``cfg`` and ``command``), appends a start to
    ``env.json``, calls the kind's ``run(cfg, out, progress=...)`` and writes its metrics to
    ``metrics.json`` and the rendered ``report.md``. With ``resume=True`` the run in ``out``
    continues: a finished run (``metrics.json`` present) is returned unchanged; otherwise the
    start is recorded (``resumed: true``) and ``run`` runs again with ``cfg`` (which must be the
    run's saved configuration, :func:`load_run_config`), continuing from its checkpoint if it
    keeps one.

    Args:
        kind: a key of :data:`KINDS` registered with ``managed=True``.
        cfg: its configuration (an instance of the kind's config class).
        out: the :class:`~paramsym.runs.RunDir` (empty for a fresh run).
        resume: continue the run in ``out``.
        command: the command line, recorded in the provenance.
        progress: show progress bars.
        seed: the seed recorded in ``env.json``.
        options: run-time options passed on to ``run`` that are not configuration (they do not
            change the metrics: e.g. the sweep's backend and worker count).
        env: extra entries of this start in ``env.json`` (e.g. those options).

    Raises:
        RunDirError: ``kind`` is not a managed kind, or ``out`` holds another kind's run.
    """
    from ..provenance import canonical, provenance

    spec = get_kind(kind).load()
    if not spec.managed or spec.config is None or not isinstance(cfg, spec.config):
        raise RunDirError(f"run kind {kind!r} is not run through execute() with a {type(cfg).__name__}.")
    if resume:
        have = out.kind()
        if have != kind:
            raise RunDirError(f"{str(out.path)!r} holds a {have} run, not a {kind} run; resume it with "
                              f"`{get_kind(have).command} --resume {out.path}`.")
        if out.has("metrics.json"):
            return Outcome(out.read_json("metrics.json"), out, already_finished=True)
    else:
        out.write_json("config.json", {"kind": kind, **canonical(cfg), "provenance": provenance(cfg, command=command)})
    out.write_env(seed, **{"resumed": resume, **(env or {})})
    try:
        metrics = spec.run(cfg, out, progress=progress, **(options or {}))
    except ParamsymError:
        if not resume:  # bad input found late (e.g. a layer the model lacks): leave no half-made run behind
            _discard(out)
        raise
    out.write_json("metrics.json", metrics)
    out.write_text("report.md", render(out))
    return Outcome(out.read_json("metrics.json"), out)


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


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (dict, list)):
        text = json.dumps(v, sort_keys=True)
        return text if len(text) <= 80 else text[:77] + "..."
    return str(v)


def render_generic(run, title: str | None = None) -> str:
    """A plain report of any run: its configuration and its scalar metrics as tables
    (what a kind without its own renderer shows, and the appendix of those with one)."""
    cfg = _config(run)
    metrics = run.read_json("metrics.json") if run.has("metrics.json") else {}
    lines = [f"# {title or cfg['kind'] + ' run'}", "", "## Configuration", "", "| key | value |", "|---|---|"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in cfg.items() if k not in ("kind", "provenance")]
    prov = cfg.get("provenance")
    if isinstance(prov, dict):
        lines += ["", f"Code `{prov.get('code_version')}`, config hash `{prov.get('config_hash')}`, "
                  f"command `{prov.get('command')}`, {prov.get('date_utc')}."]
    lines += ["", "## Metrics", "", "| key | value |", "|---|---|"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in metrics.items()]
    return "\n".join(lines) + "\n"


def regenerate(run):
    """Re-render ``report.md`` (and its figures) from the files in ``run``; return its path.

    Raises:
        RunDirError: unknown kind, or the run has no ``metrics.json`` (it did not finish).
    """
    if not run.has("metrics.json"):
        kind = get_kind(_config(run).get("kind"))
        how = f"Continue it with `{kind.command} --resume {run.path}`, or rerun it" if kind.resumable else (
            f"Rerun it with `{kind.command}`")
        raise RunDirError(f"{run.path} has no metrics.json: the run did not finish. {how}.")
    return run.write_text("report.md", render(run))
