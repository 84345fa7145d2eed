"""The sweep specification: a typed, validated description of a recipe search (YAML file).

A spec says, for one preset, which objective variants to tune, over which grid of
:class:`~paramsym.discovery.config.DiscoverConfig` override keys, with what stage budgets, how to
select, and on which seeds to validate and replicate. Every key is checked when the file is read:
an unknown key names the closest known one, a grid with no points, duplicate seeds or a value of
the wrong type raise :class:`~paramsym.errors.SweepSpecError` saying what to write instead.

Stages (see :mod:`paramsym.sweep.driver`)::

    candidates : every grid point × validation seed, candidate_steps each
    continue   : the continue_top best points per variant × validation seed, continue_steps
    replicate  : the selected point per variant × replication seed, replicate_steps
"""

from __future__ import annotations

import difflib
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import SweepSpecError

__all__ = ["METRICS", "VARIANTS", "SelectSpec", "SweepSpec", "load_spec", "spec_from_dict"]

VARIANTS = ("hybrid", "infinitesimal", "finite")
#: metrics of the verdict's declared cell a sweep can select on and reports (lower is better,
#: except the motion medians, which a selection maximises only with ``mode: max``)
METRICS = ("output_err_p95", "composition_err_p95", "inverse_err_p95", "subdivision_err_p95", "transport_err_p95",
           "motion_median", "motion_rel_median")
#: config keys a sweep sets itself (stage budgets, seeds, variant, preset): not searchable
RESERVED = {"seed": "validation_seeds / replication_seeds", "train.steps": "candidate_steps / continue_steps",
            "objective.variant": "variants", "problem.preset": "preset"}


@dataclass
class SelectSpec:
    """How candidates are ranked within a variant.

    Rank key (lexicographic, smaller first): ``(not fits on every validation seed`` when
    ``require_fits``, then ``metric`` (median over validation seeds; negated for ``mode: max``),
    then each ``tiebreak`` metric (minimised), then the grid order.
    """

    metric: str = "composition_err_p95"
    mode: str = "min"
    require_fits: bool = True
    tiebreak: list[str] = field(default_factory=lambda: ["output_err_p95"])


@dataclass
class SweepSpec:
    """A recipe search: grid × validation seeds → continue the best → replicate on fresh seeds.

    Attributes:
        name: names the default output directory ``runs/sweep-<name>-<time>``.
        preset: a discovery preset (``paramsym list``); each variant starts from its tuned recipe.
        variants: objective variants, each tuned separately.
        base: overrides applied to every trial before the grid point (``{"action.width": 64}``).
        quick: start from the :meth:`DiscoverConfig.quick` overrides (tiny verdict, narrow network).
        search: grid shared by every variant: ``{key: [values]}``, the cartesian product.
        variant_search: per-variant grids (``{hybrid: {key: [values]}}``), merged over ``search``.
        candidate_steps: training steps of each candidate.
        continue_top: how many best candidates per variant are continued (0: select on candidates).
        continue_steps: steps of a continued candidate.
        continue_from_checkpoint: continue from the candidate's final checkpoint (its run is
            resumed with the larger budget) instead of training the point anew.
        replicate_steps: steps of a replication (default: continue_steps, or candidate_steps
            when nothing is continued).
        select: ranking (:class:`SelectSpec`).
        validation_seeds: training seeds of the candidate and continue stages (distinct).
        replication_seeds: fresh seeds the selected recipe is trained on (distinct, disjoint
            from the validation seeds).
        figures: write each trial's figures (about 2-3 s of matplotlib per trial).
        device: ``cpu`` or ``cuda``.
    """

    name: str = "sweep"
    preset: str = "sigmoid-scalar"
    variants: list[str] = field(default_factory=lambda: ["hybrid", "finite"])
    base: dict[str, Any] = field(default_factory=dict)
    quick: bool = False
    search: dict[str, list[Any]] = field(default_factory=dict)
    variant_search: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    candidate_steps: int = 5000
    continue_top: int = 2
    continue_steps: int = 15000
    continue_from_checkpoint: bool = True
    replicate_steps: int | None = None
    select: SelectSpec = field(default_factory=SelectSpec)
    validation_seeds: list[int] = field(default_factory=lambda: [0])
    replication_seeds: list[int] = field(default_factory=lambda: [1, 2, 3])
    figures: bool = True
    device: str = "cpu"

    @property
    def final_steps(self) -> int:
        """Steps of a replication."""
        if self.replicate_steps is not None:
            return self.replicate_steps
        return self.continue_steps if self.continue_top > 0 else self.candidate_steps

    def grid(self, variant: str) -> list[dict[str, Any]]:
        """The grid points of ``variant`` in a fixed order (keys sorted, values as listed)."""
        space = {**self.search, **self.variant_search.get(variant, {})}
        keys = sorted(space)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(space[k] for k in keys))]

    def to_dict(self) -> dict[str, Any]:
        from ..config import to_dict

        return to_dict(self)


def _closest(word: str, known: list[str]) -> str:
    """`` Did you mean 'KEY'?`` for the known key closest to ``word``: the same leaf name in
    another section (``lr`` → ``train.lr``), a leaf the initials of ``word``'s leaf spell
    (``train.learning_rate`` → ``train.lr``), else the closest spelling."""
    leaf = word.rsplit(".", 1)[-1]
    initials = "".join(part[:1] for part in leaf.split("_") if part)
    by_leaf = [k for k in known if k.rsplit(".", 1)[-1] == leaf]
    by_initials = [k for k in known if len(initials) > 1 and k.rsplit(".", 1)[-1] == initials]
    close = by_leaf or sorted(by_initials, key=lambda k: not word.startswith(k.rsplit(".", 1)[0]))
    close = close or difflib.get_close_matches(word, known, n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


def _unknown(where: str, keys: list[str], known: list[str]) -> None:
    for k in keys:
        if k not in known:
            raise SweepSpecError(f"unknown key {k!r} in {where}.{_closest(k, known)} Known keys: {known}.")


def _int(where: str, v: Any, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise SweepSpecError(f"{where} must be an integer ≥ {lo}; received {v!r}.")
    return v


def _bool(where: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise SweepSpecError(f"{where} must be true or false; received {v!r}.")
    return v


def _str(where: str, v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise SweepSpecError(f"{where} must be a nonempty string; received {v!r}.")
    return v


def _seeds(where: str, v: Any) -> list[int]:
    if not isinstance(v, list) or not v:
        raise SweepSpecError(f"{where} must be a nonempty list of distinct integers ≥ 0, e.g. [1, 2, 3]; received {v!r}.")
    seeds = [_int(f"{where}[{i}]", s, 0) for i, s in enumerate(v)]
    dup = sorted({s for s in seeds if seeds.count(s) > 1})
    if dup:
        raise SweepSpecError(f"{where} lists seed(s) {dup} more than once; each seed must appear once "
                             f"(e.g. {sorted(set(seeds))}).")
    return seeds


def _scalar_ok(v: Any) -> bool:
    if isinstance(v, float) and not math.isfinite(v):
        return False
    if isinstance(v, list):
        return all(_scalar_ok(x) for x in v)
    return v is None or isinstance(v, (bool, int, float, str))


def _overrides(where: str, v: Any, config_keys: list[str]) -> dict[str, Any]:
    if not isinstance(v, Mapping):
        raise SweepSpecError(f"{where} must be a mapping of config keys to values (e.g. {{train.lr: 1e-3}}); "
                             f"received {v!r}.")
    for k, x in v.items():
        if not isinstance(k, str) or k not in config_keys:
            raise SweepSpecError(f"unknown config key {k!r} in {where}.{_closest(str(k), config_keys)} "
                                 "Keys are DiscoverConfig keys as for `paramsym discover --set`.")
        if k in RESERVED:
            raise SweepSpecError(f"{where} sets {k!r}, which the sweep sets itself; use {RESERVED[k]} instead.")
        if not _scalar_ok(x):
            raise SweepSpecError(f"{where}.{k} must be a finite number, string, boolean or list of them; received {x!r}.")
    return dict(v)


def _grid(where: str, v: Any, config_keys: list[str]) -> dict[str, list[Any]]:
    grid = _overrides(where, v, config_keys)
    for k, values in grid.items():
        if not isinstance(values, list):
            raise SweepSpecError(f"{where}.{k} must be a list of values to try (e.g. [{values!r}]); received {values!r}.")
        if not values:
            raise SweepSpecError(f"{where}.{k} is an empty list: the search space would have no points; "
                                 "give at least one value or remove the key.")
        if len({repr(x) for x in values}) != len(values):
            raise SweepSpecError(f"{where}.{k} lists a value more than once ({values!r}); list each value once.")
    return grid


def spec_from_dict(data: Any, where: str = "the sweep spec") -> SweepSpec:
    """Build and validate a :class:`SweepSpec` from a (YAML-loaded) mapping.

    Raises:
        SweepSpecError: unknown key (with the closest known one), wrong type, empty search space,
            duplicate or reused seeds, bad budgets or selection metric.
    """
    from ..config import flat_keys
    from ..discovery.config import DiscoverConfig

    if not isinstance(data, Mapping):
        raise SweepSpecError(f"{where} must be a mapping of keys (preset, variants, search, ...); "
                             f"received {type(data).__name__}.")
    known = [f.name for f in fields(SweepSpec)]
    _unknown(where, [str(k) for k in data], known)
    config_keys = flat_keys(DiscoverConfig())
    d = dict(data)
    s = SweepSpec()
    if "name" in d:
        s.name = _str("name", d["name"])
    if "preset" in d:
        s.preset = _str("preset", d["preset"])
    if "variants" in d:
        v = d["variants"]
        if not isinstance(v, list) or not v:
            raise SweepSpecError(f"variants must be a nonempty list among {list(VARIANTS)}; received {v!r}.")
        for x in v:
            if x not in VARIANTS:
                raise SweepSpecError(f"unknown variant {x!r} in variants.{_closest(str(x), list(VARIANTS))} "
                                     f"Known: {list(VARIANTS)}.")
        if len(set(v)) != len(v):
            raise SweepSpecError(f"variants lists a variant more than once ({v!r}).")
        s.variants = list(v)
    if "base" in d:
        s.base = _overrides("base", d["base"] or {}, config_keys)
    if "quick" in d:
        s.quick = _bool("quick", d["quick"])
    if "search" in d:
        s.search = _grid("search", d["search"] or {}, config_keys)
    if "variant_search" in d:
        vs = d["variant_search"] or {}
        if not isinstance(vs, Mapping):
            raise SweepSpecError(f"variant_search must map variants to grids (e.g. {{finite: {{train.lr: [1e-3]}}}}); "
                                 f"received {vs!r}.")
        for k in vs:
            if k not in s.variants:
                raise SweepSpecError(f"variant_search has a grid for {k!r}, which is not in variants {s.variants}."
                                     f"{_closest(str(k), s.variants)}")
        s.variant_search = {k: _grid(f"variant_search.{k}", g or {}, config_keys) for k, g in vs.items()}
    for v in s.variants:
        if not s.search and not s.variant_search.get(v):
            raise SweepSpecError(f"the search space of variant {v!r} is empty; give search: {{KEY: [values]}} "
                                 f"(shared) or variant_search: {{{v}: {{KEY: [values]}}}}, e.g. train.lr: [1e-3, 2e-3].")
    for k in ("candidate_steps", "continue_steps"):
        if k in d:
            setattr(s, k, _int(k, d[k], 1))
    if "continue_top" in d:
        s.continue_top = _int("continue_top", d["continue_top"], 0)
    if "continue_from_checkpoint" in d:
        s.continue_from_checkpoint = _bool("continue_from_checkpoint", d["continue_from_checkpoint"])
    if d.get("replicate_steps") is not None:
        s.replicate_steps = _int("replicate_steps", d["replicate_steps"], 1)
    if s.continue_top > 0 and s.continue_steps <= s.candidate_steps:
        raise SweepSpecError(f"continue_steps ({s.continue_steps}) must exceed candidate_steps ({s.candidate_steps}); "
                             "raise it, or set continue_top: 0 to select on the candidates.")
    if "select" in d:
        s.select = _select(d["select"])
    if "validation_seeds" in d:
        s.validation_seeds = _seeds("validation_seeds", d["validation_seeds"])
    if "replication_seeds" in d:
        s.replication_seeds = _seeds("replication_seeds", d["replication_seeds"])
    reused = sorted(set(s.validation_seeds) & set(s.replication_seeds))
    if reused:
        raise SweepSpecError(f"replication_seeds {reused} are also validation_seeds; replication needs fresh seeds "
                             "(choose seeds not used for selection).")
    if "figures" in d:
        s.figures = _bool("figures", d["figures"])
    if "device" in d:
        s.device = _str("device", d["device"])
        if s.device not in ("cpu", "cuda") and not s.device.startswith("cuda:"):
            raise SweepSpecError(f"device must be 'cpu' or 'cuda'; received {s.device!r}.")
    return s


def _select(v: Any) -> SelectSpec:
    if not isinstance(v, Mapping):
        raise SweepSpecError(f"select must be a mapping (metric, mode, require_fits, tiebreak); received {v!r}.")
    _unknown("select", [str(k) for k in v], [f.name for f in fields(SelectSpec)])
    sel = SelectSpec()
    if "metric" in v:
        sel.metric = _metric("select.metric", v["metric"])
    if "mode" in v:
        if v["mode"] not in ("min", "max"):
            raise SweepSpecError(f"select.mode must be 'min' or 'max'; received {v['mode']!r}.")
        sel.mode = v["mode"]
    if "require_fits" in v:
        sel.require_fits = _bool("select.require_fits", v["require_fits"])
    if "tiebreak" in v:
        tb = v["tiebreak"] or []
        if not isinstance(tb, list):
            raise SweepSpecError(f"select.tiebreak must be a list of metrics; received {tb!r}.")
        sel.tiebreak = [_metric(f"select.tiebreak[{i}]", m) for i, m in enumerate(tb)]
    return sel


def _metric(where: str, m: Any) -> str:
    if m not in METRICS:
        raise SweepSpecError(f"{where}: unknown metric {m!r}.{_closest(str(m), list(METRICS))} Known: {list(METRICS)}.")
    return m


def load_spec(path: str) -> SweepSpec:
    """Read and validate a sweep spec from a YAML (or JSON) file.

    Raises:
        SweepSpecError: unreadable file, invalid YAML, or an invalid spec (the message names
            the file, the key and what to write).
    """
    from ..config import read_document

    data = read_document(path, "sweep spec", SweepSpecError)
    try:
        return spec_from_dict(data)
    except SweepSpecError as exc:
        raise SweepSpecError(f"{path}: {exc}") from None
