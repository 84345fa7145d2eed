"""The sweep specification: a typed, validated description of a recipe search (YAML file).

A spec says, for one preset, which objective variants to tune, over which grid of
:class:`~paramsym.discovery.config.DiscoverConfig` override keys, with what stage budgets, how to
select, and on which seeds to validate and replicate. A spec is read by the one serializer of every
configuration (:func:`paramsym.config.from_dict`: keys and types, the closest known key named for an
unknown one, ``RENAMED`` keys read as their new ones), then checked by :meth:`SweepSpec.validate`
(a grid with no points, duplicate or reused seeds, unknown variants and metrics, config keys of
the grids): the same reading for a spec file (:func:`load_spec`), ``--set`` over it, and a sweep's
``config.json``. A bad spec is a :class:`~paramsym.errors.SweepSpecError` naming the file and the
key and saying what to write instead (in a sweep's ``config.json``: a
:class:`~paramsym.errors.ConfigFileError`, as every run's).

Stages (see :mod:`paramsym.sweep.driver`)::

    candidates : every grid point × validation seed, candidate_steps each
    continue   : the continue_top best points per variant × validation seed, continue_steps
    replicate  : the selected point per variant × replication seed, replicate_steps
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import did_you_mean
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

    def validate(self) -> None:
        """Raises SweepSpecError: an unknown metric (the closest named) or mode."""
        _metric("select.metric", self.metric)
        if self.mode not in ("min", "max"):
            raise SweepSpecError(f"select.mode must be 'min' or 'max'; received {self.mode!r}.")
        for i, m in enumerate(self.tiebreak):
            _metric(f"select.tiebreak[{i}]", m)


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

    def validate(self) -> None:
        """What the types do not say (:func:`paramsym.config.from_dict` checked those): nonempty names,
        known distinct variants, grids of known and searchable config keys with distinct finite values,
        a nonempty search space per variant, budgets, distinct seeds with fresh replication seeds, the
        device.

        Raises:
            SweepSpecError: the first problem, naming the key and what to write instead.
        """
        from ..config import flat_keys
        from ..discovery.config import DiscoverConfig

        for key in ("name", "preset"):
            if not getattr(self, key):
                raise SweepSpecError(f"{key} must be a nonempty string; received {getattr(self, key)!r}.")
        if not self.variants:
            raise SweepSpecError(f"variants must be a nonempty list among {list(VARIANTS)}; received {self.variants!r}.")
        for x in self.variants:
            if x not in VARIANTS:
                raise SweepSpecError(f"unknown variant {x!r} in variants.{did_you_mean(str(x), VARIANTS)} "
                                     f"Known: {list(VARIANTS)}.")
        if len(set(self.variants)) != len(self.variants):
            raise SweepSpecError(f"variants lists a variant more than once ({self.variants!r}).")
        config_keys = flat_keys(DiscoverConfig())
        _overrides("base", self.base, config_keys)
        _grid("search", self.search, config_keys)
        for k, grid in self.variant_search.items():
            if k not in self.variants:
                raise SweepSpecError(f"variant_search has a grid for {k!r}, which is not in variants {self.variants}."
                                     f"{did_you_mean(str(k), self.variants)}")
            _grid(f"variant_search.{k}", grid, config_keys)
        for v in self.variants:
            if not self.search and not self.variant_search.get(v):
                raise SweepSpecError(f"the search space of variant {v!r} is empty; give search: {{KEY: [values]}} "
                                     f"(shared) or variant_search: {{{v}: {{KEY: [values]}}}}, e.g. train.lr: [1e-3, "
                                     "2e-3].")
        for key, lo in (("candidate_steps", 1), ("continue_steps", 1), ("continue_top", 0), ("replicate_steps", 1)):
            _at_least(key, getattr(self, key), lo)
        if self.continue_top > 0 and self.continue_steps <= self.candidate_steps:
            raise SweepSpecError(f"continue_steps ({self.continue_steps}) must exceed candidate_steps "
                                 f"({self.candidate_steps}); raise it, or set continue_top: 0 to select on the candidates.")
        _seeds("validation_seeds", self.validation_seeds)
        _seeds("replication_seeds", self.replication_seeds)
        reused = sorted(set(self.validation_seeds) & set(self.replication_seeds))
        if reused:
            raise SweepSpecError(f"replication_seeds {reused} are also validation_seeds; replication needs fresh seeds "
                                 "(choose seeds not used for selection).")
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise SweepSpecError(f"device must be 'cpu' or 'cuda'; received {self.device!r}.")


def _at_least(where: str, v: int | None, lo: int) -> None:
    if v is not None and v < lo:
        raise SweepSpecError(f"{where} must be an integer ≥ {lo}; received {v!r}.")


def _seeds(where: str, seeds: list[int]) -> None:
    if not seeds:
        raise SweepSpecError(f"{where} must be a nonempty list of distinct integers ≥ 0, e.g. [1, 2, 3]; received "
                             f"{seeds!r}.")
    for i, s in enumerate(seeds):
        _at_least(f"{where}[{i}]", s, 0)
    dup = sorted({s for s in seeds if seeds.count(s) > 1})
    if dup:
        raise SweepSpecError(f"{where} lists seed(s) {dup} more than once; each seed must appear once "
                             f"(e.g. {sorted(set(seeds))}).")


def _scalar_ok(v: Any) -> bool:
    if isinstance(v, float) and not math.isfinite(v):
        return False
    if isinstance(v, list):
        return all(_scalar_ok(x) for x in v)
    return v is None or isinstance(v, (bool, int, float, str))


def _overrides(where: str, v: Any, config_keys: list[str]) -> None:
    """``v``: a mapping of searchable DiscoverConfig keys to finite scalars or lists of them."""
    if not isinstance(v, Mapping):
        raise SweepSpecError(f"{where} must be a mapping of config keys to values (e.g. {{train.lr: 1e-3}}); "
                             f"received {v!r}.")
    for k, x in v.items():
        if not isinstance(k, str) or k not in config_keys:
            raise SweepSpecError(f"unknown config key {k!r} in {where}.{did_you_mean(str(k), config_keys)} "
                                 "Keys are DiscoverConfig keys as for `paramsym discover --set`.")
        if k in RESERVED:
            raise SweepSpecError(f"{where} sets {k!r}, which the sweep sets itself; use {RESERVED[k]} instead.")
        if not _scalar_ok(x):
            raise SweepSpecError(f"{where}.{k} must be a finite number, string, boolean or list of them; received {x!r}.")


def _grid(where: str, grid: Any, config_keys: list[str]) -> None:
    """``grid``: as :func:`_overrides`, each value a nonempty list of distinct values to try."""
    _overrides(where, grid, config_keys)
    for k, values in grid.items():
        if not isinstance(values, list):
            raise SweepSpecError(f"{where}.{k} must be a list of values to try (e.g. [{values!r}]); received {values!r}.")
        if not values:
            raise SweepSpecError(f"{where}.{k} is an empty list: the search space would have no points; "
                                 "give at least one value or remove the key.")
        if len({repr(x) for x in values}) != len(values):
            raise SweepSpecError(f"{where}.{k} lists a value more than once ({values!r}); list each value once.")


def _metric(where: str, m: str) -> None:
    if m not in METRICS:
        raise SweepSpecError(f"{where}: unknown metric {m!r}.{did_you_mean(str(m), METRICS)} Known: {list(METRICS)}.")


def spec_from_dict(data: Any, where: str = "the sweep spec") -> SweepSpec:
    """A :class:`SweepSpec` from a (YAML-loaded) mapping, read by the one serializer
    (:func:`paramsym.config.from_dict`: keys, types, renames, then :meth:`SweepSpec.validate`).

    Raises:
        SweepSpecError: not a mapping, an unknown key (with the closest known one), a wrong type, an
            empty search space, duplicate or reused seeds, bad budgets or selection metric (the message
            begins with ``where``).
    """
    from ..config import from_dict
    from ..errors import ConfigError

    try:
        return from_dict(SweepSpec, data)
    except ConfigError as exc:
        raise SweepSpecError(f"{where}: {exc}") from None


def load_spec(path: str) -> SweepSpec:
    """Read and validate a sweep spec from a YAML (or JSON) file (:func:`paramsym.config.load_file`).

    Raises:
        SweepSpecError: unreadable file, invalid YAML, or an invalid spec (the message names
            the file, the key and what to write).
    """
    from ..config import load_file

    return load_file(SweepSpec, path, "sweep spec", SweepSpecError)
