"""Registry of ``paramsym attribute`` presets and the contract every preset follows.

A preset is a lazily imported function (``"module:function"``) with exactly this signature::

    def run(request: PresetRequest, out: RunDir) -> dict:
        ...

It must

1. honour ``request`` — ``request.flows`` (subset of ``("resolved", "fixed")``, from
   ``--flow``), ``request.stage`` (one of the preset's ``stages``, from ``--stage``),
   ``request.overrides`` (``key=value`` strings for its Config, from ``--set``; unknown keys
   raise :class:`~paramsym.errors.ConfigError`), ``request.quick`` (a small, fast version for
   tests), ``request.progress`` (tqdm bars on/off), ``request.options`` (the fixed keyword
   options of the registry entry, e.g. ``{"data": "wedge"}``) and ``request.seed``;
2. write into the run directory ``out``: ``config.json`` with ``"kind": "attribution"``,
   ``"preset": <name>`` and its resolved configuration; figures under ``out.figures``;
   ``metrics.json`` holding at least ``{"summary": <the returned dict>}`` (anything else it
   wants the report to show may sit beside it); ``env.json`` (``out.write_env(seed)``);
3. return the **summary** (a JSON-able dict), which ``paramsym attribute --json`` prints::

       {
         "preset": str, "stage": str | None,
         "lifts": [LiftRecord.to_json(), ...],      # c*, b* at the start (residual, rank, verdict)
         "flows": [FlowRecord.to_json(), ...],      # one per (flow mode, direction)
         "paper": {...} | None                      # the source's numbers, for side-by-side
       }

   where each flow record has ``flow`` (``"resolved"``/``"fixed"``), ``direction`` (``"+c"``,
   ``"-b"``), ``delta_start``, ``delta_end``, ``delta_predicted`` (‖δ‖ on the probe set at the
   start, at the end, and the exact function-space prediction at the end), ``residual_start``,
   ``residual_end`` (relative lifting residuals of the direction at the first and last solve)
   and optional extras (see :class:`FlowRecord`). Build records with
   :func:`paramsym.attribution.flows.flow_record` or by hand.

The report (``report.md``) is rendered by :func:`paramsym.attribution.report.render` from the
run directory; a preset may add its own sections through ``Preset.report`` (a
``"module:function"`` taking the :class:`~paramsym.runs.RunDir` and returning markdown).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ConfigError

FLOW_MODES = ("resolved", "fixed")
DIRECTIONS = ("+c", "-b")


@dataclass(frozen=True)
class Preset:
    """One registry entry.

    Attributes:
        name: the ``--preset`` value.
        target: ``"module:function"`` of the run function (imported only when used).
        help: one line for ``--help``.
        options: fixed keyword options passed as ``PresetRequest.options``.
        stages: accepted ``--stage`` values, the first being the default (``()`` = no stages).
        report: optional ``"module:function"`` adding preset-specific report sections.
    """

    name: str
    target: str
    help: str
    options: Mapping[str, Any] = field(default_factory=dict)
    stages: tuple[str, ...] = ()
    report: str | None = None


@dataclass(frozen=True)
class PresetRequest:
    """What the command line asked of a preset (see the module docstring)."""

    preset: str
    options: Mapping[str, Any] = field(default_factory=dict)
    flows: tuple[str, ...] = FLOW_MODES
    stage: str | None = None
    overrides: tuple[str, ...] = ()
    quick: bool = False
    progress: bool = True
    seed: int | None = None


@dataclass
class LiftRecord:
    """A lift at the start of the experiment (for the summary)."""

    name: str  # "c*" or "b*"
    target: str  # "eta" or "-delta"
    residual: float
    rank: int | None
    target_norm: float
    direction_norm: float
    liftable: bool
    verdict: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FlowRecord:
    """Start, end and predicted ‖δ‖ of one flow, and its residuals (the ``--json`` rows)."""

    flow: str
    direction: str
    delta_start: float
    delta_end: float
    delta_predicted: float | None
    residual_start: float | None
    residual_end: float | None
    t_end: float | None = None
    steps: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        d.update(extra)
        return d


ANNULUS_STAGES = ("trained", "init")

PRESETS: dict[str, Preset] = {
    "annulus-wedge": Preset(
        name="annulus-wedge",
        target="paramsym.experiments.annulus:run",
        help="annulus classifier trained on a 90° wedge of the outer band (stage init|trained)",
        options={"data": "wedge"},
        stages=ANNULUS_STAGES,
        report="paramsym.experiments.annulus:report_sections",
    ),
    "annulus-full": Preset(
        name="annulus-full",
        target="paramsym.experiments.annulus:run",
        help="annulus classifier trained on the full 360° outer band (stage init|trained)",
        options={"data": "full"},
        stages=ANNULUS_STAGES,
        report="paramsym.experiments.annulus:report_sections",
    ),
    "lifting-sanity": Preset(
        name="lifting-sanity",
        target="paramsym.attribution.sanity:run",
        help="known answer: MLP fitted to a rotation-invariant target, first layer trainable "
        "(η liftable) vs frozen (not liftable) (stage trainable|frozen)",
        stages=("trainable", "frozen"),
    ),
    "hamiltonian": Preset(
        name="hamiltonian",
        target="paramsym.experiments.hamiltonian:run",
        help="separable learned Hamiltonian on the Mexican-hat potential: α sweep, stacked "
        "α system, resolved/fixed walks, perturbation sweep",
        report="paramsym.experiments.hamiltonian:report_sections",
    ),
}


def _load(spec: str, what: str) -> Callable[..., Any]:
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{what} {spec!r}: module {module_name} has no attribute {attr!r}.") from None


def get_preset(name: str) -> Preset:
    """The registry entry ``name``; :class:`ConfigError` lists the valid names otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; valid presets: {sorted(PRESETS)}.") from None


def load_runner(name: str) -> Callable[..., dict[str, Any]]:
    """Import and return the run function of preset ``name``."""
    return _load(get_preset(name).target, f"preset {name}")


def load_report_sections(name: str) -> Callable[..., str] | None:
    """Import the preset's report-sections function, or ``None`` if it has none."""
    spec = get_preset(name).report
    if spec is None:
        return None
    try:
        return _load(spec, f"report of preset {name}")
    except (ImportError, ConfigError):
        return None


def finish_run(
    out,
    *,
    preset: str,
    config: Any,
    summary: Mapping[str, Any],
    metrics: Mapping[str, Any] | None = None,
    seed: int | None = None,
    **config_extra: Any,
) -> None:
    """Write ``config.json`` (``kind = "attribution"``), ``env.json`` and ``metrics.json``.

    Args:
        out: the :class:`~paramsym.runs.RunDir`.
        preset: preset name.
        config: the resolved configuration (a dataclass or a mapping).
        summary: the ``--json`` summary (stored as ``metrics["summary"]``).
        metrics: further metrics for the report (merged beside ``summary``).
        seed: recorded in ``env.json``.
        config_extra: extra top-level config keys (e.g. ``stage``).
    """
    from ..config import to_dict

    cfg = to_dict(config) if not isinstance(config, Mapping) else dict(config)
    out.write_json("config.json", {"kind": "attribution", "preset": preset, **config_extra, "config": cfg})
    out.write_env(seed)
    full = dict(metrics or {})
    full["summary"] = dict(summary)
    out.write_json("metrics.json", full)
