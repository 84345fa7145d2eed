"""The one preset type: a named, ready-made configuration of a command (standard library only).

Every command that takes ``--preset NAME`` (or a model name) defines its entries as
:class:`Preset` values in a :class:`PresetTable`, beside the concept they configure (the affine
blocks in :mod:`paramsym.exact.presets`, the census models in :mod:`paramsym.census.presets`,
the attribution studies in :mod:`paramsym.kinds.catalog`, ...). ``paramsym list``
collects them all (:func:`paramsym.kinds.catalog.all_presets`) and prints one row per
preset in one vocabulary: ``name``, ``kind`` (the run kind the command writes), ``summary``,
``default``, ``stages``, ``command``.

A preset's heavy part (building a model, importing an experiment) is behind ``load``, called
only when the preset is used, so listing presets imports neither torch nor transformers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .errors import ConfigError

__all__ = ["Preset", "PresetTable"]


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Preset:
    """One named configuration of a command.

    Attributes:
        name: the ``--preset`` value (or model name).
        kind: the run kind the command writes (the ``"kind"`` of its ``config.json``).
        command: how to run it, e.g. ``"paramsym affine --preset relu242"``.
        summary: one line for ``--help`` and ``paramsym list``.
        default: the command's default preset.
        stages: accepted ``--stage`` values, the first the default (``()``: none).
        fields: config fields this preset fixes (e.g. ``{"data": "wedge"}``, ``{"samples": 96}``).
        info: facts shown beside the preset, not config (e.g. ``{"expected": 16}``).
        load: returns what the preset is made of (a model builder, an experiment's spec); ``None``
            where the command's config alone defines it.
    """

    name: str
    kind: str
    command: str
    summary: str
    default: bool = False
    stages: tuple[str, ...] = ()
    fields: Mapping[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)
    load: Callable[[], Any] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(self.stages))
        object.__setattr__(self, "fields", _frozen(self.fields))
        object.__setattr__(self, "info", _frozen(self.info))

    @property
    def help(self) -> str:
        """The summary (the name ``--help`` texts use)."""
        return self.summary

    def to_json(self) -> dict[str, Any]:
        """The ``paramsym list --json`` row: ``name, kind, summary, default, stages, command`` (+ ``info``)."""
        row = {"name": self.name, "kind": self.kind, "summary": self.summary, "default": self.default,
               "stages": list(self.stages), "command": self.command}
        if self.info:
            row["info"] = dict(self.info)
        return row


class PresetTable(Mapping[str, Preset]):
    """The presets of one command, by name, in definition order.

    Args:
        what: how the command calls them (``"affine preset"``), for error messages.
        flag: the flag that takes the name (``"--preset"``).
        presets: the entries (names must be distinct).
    """

    def __init__(self, what: str, presets: Iterable[Preset], *, flag: str = "--preset"):
        self.what, self.flag = what, flag
        self._items: dict[str, Preset] = {}
        for p in presets:
            if p.name in self._items:
                raise ValueError(f"duplicate {what} {p.name!r}")
            self._items[p.name] = p

    def __getitem__(self, name: str) -> Preset:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def get_preset(self, name: str) -> Preset:
        """The preset ``name``.

        Raises:
            ConfigError: an unknown name (the valid ones are listed).
        """
        if name not in self._items:
            raise ConfigError(f"{self.flag} {str(name)[:80]!r} is not a known {self.what}; valid: "
                              f"{sorted(self._items)} (see `paramsym list`).")
        return self._items[name]

    @property
    def default(self) -> Preset | None:
        """The preset marked ``default`` (``None`` if none is)."""
        return next((p for p in self._items.values() if p.default), None)
