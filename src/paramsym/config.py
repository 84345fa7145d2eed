"""Typed configuration: nested dataclasses, typed overrides, YAML/JSON files.

A configuration is a dataclass whose fields are scalars, tuples/lists of scalars or nested
dataclasses. Overrides are parsed ONCE into types: :meth:`Overrides.parse` reads
``["train.lr=3e-4", "verdict.rhos=[0.1,0.5]"]`` (the ``--set`` strings) against the field
annotations of the configuration class and holds ``{"train.lr": 0.0003, "verdict.rhos": [0.1, 0.5]}``;
:meth:`Overrides.apply` returns a new, validated configuration (nested ``dataclasses.replace``,
no text round trip). ``apply_overrides(cfg, items)`` is the two steps at once. An unknown key
or a value of the wrong type raises :class:`ConfigError` naming the key, the expected type and
the valid keys.

A renamed field keeps its former key readable from files: a configuration class lists
``RENAMED = {old: (new, convert, hint)}`` (``convert(value, key)`` → the new field's value), and
:func:`from_dict` maps ``old`` to ``new`` (an old run's ``config.json`` loads as the same
configuration); :class:`Overrides` (``--set``) refuses the old key, naming the new one and ``hint``.
A retired key (``DROPPED = {old: hint}``, written by an older version but configuring nothing) is
left out when read from a file and refused by :class:`Overrides`.

A field whose type depends on another field's value (an attribution run's ``config``: the config
class of its ``preset``) is typed by the class's ``dependent_types(data)`` hook, so that
:func:`from_dict` types it too (no conversion at construction).

The one serializer: :func:`to_dict` (configuration → plain JSON data, what
:func:`~paramsym.runs.provenance.config_hash` hashes) and :func:`from_dict` (back, validated, renames
applied); a run's ``config.json`` is :func:`to_document` / :func:`from_document` (one flat shape:
``kind``, the fields, ``provenance``).
Memory budgets are :class:`~paramsym.groups.memory.MemoryBudget` fields (``2GiB``, ``512MiB``
or bytes, the grammar of every ``--max-memory``).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import json
import math
import os
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar, TypeVar

import yaml

from .errors import ConfigError
from .groups.memory import MemoryBudget

__all__ = ["DOCUMENT_KEYS", "Overrides", "apply_overrides", "did_you_mean", "flat_keys", "from_dict", "from_document", "load_file",
           "read_document", "to_dict", "to_document", "validate_tree"]

C = TypeVar("C")


def to_dict(cfg: Any) -> Any:
    """``cfg`` (a nested config dataclass, or any value in one) as plain JSON data: the one serializer.

    Dataclasses and mappings become dicts (string keys), sequences lists, sets sorted lists, enums
    their values, paths strings, non-finite floats their ``repr`` (JSON has none); scalars stay.
    What :func:`from_dict` reads back (validated, ``RENAMED`` keys applied) and what
    :func:`paramsym.runs.provenance.config_hash` hashes.
    """
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return {f.name: to_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    if isinstance(cfg, Mapping):
        return {str(k): to_dict(v) for k, v in cfg.items()}
    if isinstance(cfg, (list, tuple)):
        return [to_dict(v) for v in cfg]
    if isinstance(cfg, (set, frozenset)):
        return sorted(to_dict(v) for v in cfg)
    if isinstance(cfg, enum.Enum):
        return to_dict(cfg.value)
    if isinstance(cfg, os.PathLike):
        return os.fspath(cfg)
    if isinstance(cfg, float) and not math.isfinite(cfg):
        return repr(cfg)
    if cfg is None or isinstance(cfg, (bool, int, float, str)):
        return cfg
    return repr(cfg)


def flat_keys(cfg: Any, prefix: str = "") -> list[str]:
    """All dotted leaf keys of a config dataclass, e.g. ``["train.lr", "train.steps", ...]``."""
    keys: list[str] = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            keys.extend(flat_keys(value, prefix + f.name + "."))
        else:
            keys.append(prefix + f.name)
    return keys


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(key: str, raw: Any, annotation: Any) -> Any:
    """Coerce ``raw`` (a string from the command line or a YAML value) to ``annotation``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(raw, str) and annotation is not str:
        try:
            parsed = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            msg = " ".join(str(exc).split())
            raise ConfigError(f"--set {key}={raw!r}: cannot parse the value ({msg}).") from None
    else:
        parsed = raw
    if annotation is Any:
        return parsed
    if origin is typing.Union or origin is types.UnionType:
        # None from YAML's null (``null``, ``~``); other text that reads as nothing (" ") stays text where text fits
        text = isinstance(raw, str) and str in args and raw.strip() not in ("null", "Null", "NULL", "~")
        if parsed is None and type(None) in args and not text:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(key, raw, a)
            except ConfigError:
                continue
        raise ConfigError(f"{key}: value {raw!r} fits none of {annotation}.")
    if origin is typing.Literal:
        if parsed in args:
            return parsed
        if isinstance(raw, str) and raw in args:
            return raw
        raise ConfigError(f"{key}: expected one of {list(args)}, received {raw!r}.")
    if origin in (tuple, list):
        if not isinstance(parsed, (list, tuple)):
            parsed = [parsed]
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(key, v, args[0]) for v in parsed)
        if origin is tuple and args:
            if len(args) != len(parsed):
                raise ConfigError(f"{key}: expected {len(args)} values, received {len(parsed)}: {raw!r}.")
            return tuple(_coerce(key, v, a) for v, a in zip(parsed, args))
        inner = args[0] if args else Any
        return [_coerce(key, v, inner) for v in parsed]
    if origin in (dict, Mapping) or annotation is dict:
        if not isinstance(parsed, dict):
            raise ConfigError(f"{key}: expected a mapping, received {raw!r}.")
        return dict(parsed)
    if annotation is bool:
        if isinstance(parsed, bool):
            return parsed
        raise ConfigError(f"{key}: expected true or false, received {raw!r}.")
    if annotation is int:
        if (isinstance(parsed, bool) or not isinstance(parsed, (int, float))
                or (isinstance(parsed, float) and not math.isfinite(parsed)) or int(parsed) != parsed):
            raise ConfigError(f"{key}: expected an integer, received {raw!r}.")
        if not -(2**63) <= int(parsed) < 2**63:  # torch and numpy take 64-bit integers (seeds, sizes, threads)
            raise ConfigError(f"{key}: expected an integer of at most 64 bits (|n| < 2**63), received {raw!r}.")
        return int(parsed)
    if annotation is float:
        if isinstance(parsed, str):  # YAML 1.1 reads "3e-4" (no dot) as a string
            try:
                parsed = float(parsed) if math.isfinite(float(parsed)) else parsed
            except ValueError:
                pass
        if isinstance(parsed, bool) or not isinstance(parsed, (int, float)):
            raise ConfigError(f"{key}: expected a number, received {raw!r}.")
        if not math.isfinite(parsed):  # never a silent NaN (or infinity) in a configuration
            raise ConfigError(f"{key}: expected a finite number, received {raw!r}.")
        return float(parsed)
    if annotation is str:
        return str(raw) if not isinstance(raw, str) else raw
    if annotation is MemoryBudget:
        # the one memory grammar (``2GiB``, ``512MiB``, bytes); MemoryBudgetError (a ConfigError) names the key
        return MemoryBudget(raw if isinstance(raw, str) else parsed, key)
    if isinstance(annotation, type) and issubclass(annotation, Overrides):
        if isinstance(raw, annotation):
            return raw
        if isinstance(parsed, Mapping):
            return annotation(parsed)
        if isinstance(parsed, (list, tuple)) and all(isinstance(v, str) for v in parsed):  # "k=v" strings
            return annotation.parse(parsed)
        raise ConfigError(f"{key}: expected a mapping of config keys to values, received {raw!r}.")
    if dataclasses.is_dataclass(annotation):
        if not isinstance(parsed, Mapping):
            raise ConfigError(f"{key}: expected a mapping for {annotation.__name__}, received {raw!r}.")
        return from_dict(annotation, parsed, prefix=key + ".")
    return parsed


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` Did you mean 'KEY'?`` for the key of ``known`` closest to ``word`` (``""`` when none is close):
    the same leaf name in another section (``lr`` → ``train.lr``), a leaf the initials of ``word``'s
    leaf spell (``train.learning_rate`` → ``train.lr``), else the closest spelling."""
    import difflib

    known = list(known)
    leaf = word.rsplit(".", 1)[-1]
    initials = "".join(part[:1] for part in leaf.split("_") if part)
    by_leaf = [k for k in known if k.rsplit(".", 1)[-1] == leaf]
    by_initials = [k for k in known if len(initials) > 1 and k.rsplit(".", 1)[-1] == initials]
    close = by_leaf or sorted(by_initials, key=lambda k: not word.startswith(k.rsplit(".", 1)[0]))
    close = close or difflib.get_close_matches(word, known, n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


def from_dict(cls: type[C], data: Mapping[str, Any], prefix: str = "") -> C:
    """Build config dataclass ``cls`` from a (nested) mapping, validating keys and types (and the
    ``validate`` hook of ``cls``); ``RENAMED`` keys are read as their new ones.

    Raises:
        ConfigError: ``data`` not a mapping, an unknown key (the closest known one and the valid keys
            named), a value of the wrong type (the dotted key named), or a ``validate`` refusal.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or cls.__name__}: expected a mapping of {cls.__name__} keys, received "
                          f"{type(data).__name__}.")
    names = {f.name for f in dataclasses.fields(cls)}
    data = _renamed(cls, data, prefix)
    hints = _field_types(cls)
    dependent = getattr(cls, "dependent_types", None)
    if callable(dependent):  # a field whose type depends on another's value (an attribution run's config: its preset's)
        hints = {**hints, **dependent(data)}
    unknown = sorted(str(k) for k in set(data) - names)
    if unknown:
        raise ConfigError(
            f"unknown config key{'s' if len(unknown) > 1 else ''} {', '.join(repr(prefix + k) for k in unknown)}."
            f"{did_you_mean(prefix + unknown[0], sorted(prefix + n for n in names))} Valid keys here: "
            f"{sorted(prefix + n for n in names)}."
        )
    kwargs = {k: _coerce(prefix + k, v, hints[k]) for k, v in data.items()}
    cfg = cls(**kwargs)
    _validate(cfg)
    return cfg


#: the keys of a run's ``config.json`` beside its configuration's fields (:func:`to_document`)
DOCUMENT_KEYS = ("kind", "provenance")


def to_document(kind: str, cfg: Any, provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``config.json`` of a run: ``{"kind": kind, <to_dict(cfg)>, "provenance": {...}}`` (one flat shape;
    ``provenance`` omitted when ``None``). :func:`from_document` reads it back."""
    doc = {"kind": kind, **to_dict(cfg)}
    if provenance is not None:
        doc["provenance"] = dict(provenance)
    return doc


def from_document(cls: type[C], data: Any, where: str = "config.json") -> C:
    """The configuration ``cls`` of a run's ``config.json`` data (:func:`to_document`): its fields read
    by :func:`from_dict` (validated, ``RENAMED`` keys applied), ``kind`` and ``provenance`` set aside.

    Raises:
        ConfigFileError: ``data`` is not an object, or a field is unknown or of the wrong type (the
            message names ``where``, the key and what to do).
    """
    from .errors import ConfigFileError

    if not isinstance(data, Mapping):
        raise ConfigFileError(f"{where}: expected a JSON object of {cls.__name__} fields, found "
                              f"{type(data).__name__}; restore the file, or start the run again.")
    fields = {k: v for k, v in data.items() if k not in DOCUMENT_KEYS}
    try:
        return from_dict(cls, fields)
    except ConfigError as exc:
        raise ConfigFileError(f"{where}: {exc} Restore the file, or start the run again.") from None


def _renamed(cls: type, data: Mapping[str, Any], prefix: str = "") -> Mapping[str, Any]:
    """``data`` with the former keys of ``cls`` (its ``RENAMED``: old key → (new key, convert, hint))
    replaced by the new key and the converted value, and its retired keys (``DROPPED``: old key →
    hint; keys an old file holds that configure nothing) left out, so that a configuration file
    written before a field was renamed (an old run's ``config.json``) still reads as the same configuration.

    Raises:
        ConfigError: both the old and the new key are given, or the old value does not convert.
    """
    renamed = getattr(cls, "RENAMED", None) or {}
    dropped = getattr(cls, "DROPPED", None) or {}
    if not any(old in data for old in (*renamed, *dropped)):
        return data
    data = {k: v for k, v in data.items() if k not in dropped}
    for old, (new, convert, _) in renamed.items():
        if old in data:
            if new in data:
                raise ConfigError(f"{prefix}{old} and {prefix}{new} are both given; {old} is the former name of "
                                  f"{new}: keep only {prefix}{new}.")
            data[new] = convert(data.pop(old), prefix + old)
    return data


def _validate(cfg: Any) -> None:
    hook = getattr(cfg, "validate", None)
    if callable(hook):
        hook()


def validate_tree(cfg: Any) -> None:
    """Call the ``validate`` hook of every nested configuration (inner ones first), as :func:`from_dict` does."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            validate_tree(value)
    _validate(cfg)


def _normalized(cfg: C, prefix: str = "") -> C:
    """``cfg`` with every field coerced to its annotation (e.g. an int where a float is declared,
    a list where a tuple is) and every nested configuration validated, inner ones first: what
    :func:`from_dict` guarantees for a configuration read from a file, for one built in Python."""
    hints = _field_types(type(cfg))
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            new = _normalized(value, prefix + f.name + ".")
        else:
            plain = isinstance(value, (list, tuple, set, frozenset, Mapping)) and not isinstance(value, Overrides)
            new = _coerce(prefix + f.name, to_dict(value) if plain else value, hints[f.name])
        if new is not value:
            changes[f.name] = new
    cfg = dataclasses.replace(cfg, **changes) if changes else cfg
    _validate(cfg)
    return cfg


def _leaf_types(cls: type, prefix: str = "") -> dict[str, Any]:
    """Dotted leaf key → annotation of config class ``cls`` (nested dataclasses expanded)."""
    out: dict[str, Any] = {}
    hints = _field_types(cls)
    for f in dataclasses.fields(cls):
        ann = hints[f.name]
        if dataclasses.is_dataclass(ann) and isinstance(ann, type):
            out.update(_leaf_types(ann, prefix + f.name + "."))
        else:
            out[prefix + f.name] = ann
    return out


def _flatten(data: Mapping[str, Any], leaves: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted ``(key, value)`` pairs of a dotted or nested mapping (a mapping under a leaf key,
    e.g. a ``dict`` field, is that leaf's value)."""
    for k, v in data.items():
        key = prefix + str(k)
        if isinstance(v, Mapping) and not isinstance(v, Overrides) and key not in leaves:
            yield from _flatten(v, leaves, key + ".")
        else:
            yield key, v


def _refuse_renamed(cls: type, key: str) -> None:
    """Raise :class:`ConfigError` naming the new key when dotted ``key`` is the former name of a field
    (``RENAMED`` of the configuration class it belongs to); a typed override takes today's keys only."""
    parts = key.split(".")
    for part in parts[:-1]:
        hints = _field_types(cls) if dataclasses.is_dataclass(cls) else {}
        cls = hints.get(part)
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            return
    renamed = getattr(cls, "RENAMED", None) or {}
    dropped = getattr(cls, "DROPPED", None) or {}
    if parts[-1] in dropped:
        raise ConfigError(f"{key!r} is a retired key that configures nothing ({dropped[parts[-1]]}); drop it.")
    if parts[-1] in renamed:
        new = ".".join([*parts[:-1], renamed[parts[-1]][0]])
        raise ConfigError(f"{key!r} is the former name of {new!r}; set {new} instead ({renamed[parts[-1]][2]}).")


def _replace_path(obj: Any, parts: list[str], value: Any) -> Any:
    if len(parts) == 1:
        return dataclasses.replace(obj, **{parts[0]: copy.deepcopy(value)})
    return dataclasses.replace(obj, **{parts[0]: _replace_path(getattr(obj, parts[0]), parts[1:], value)})


class Overrides(Mapping[str, Any]):
    """Typed overrides of a configuration class: dotted key → value of that field's type.

    A typed partial configuration: ``Overrides({"train.lr": 3e-4}, config=DiscoverConfig)``
    (or nested, ``{"train": {"lr": 3e-4}}``) checks every key against the class and coerces
    every value to the field's annotation when it is built; :meth:`parse` builds one from
    ``--set`` strings (each value parsed once, as YAML); :meth:`apply` returns a new validated
    configuration. ``a | b`` merges (``b`` wins). A subclass fixes ``config`` so that a
    configuration field can be annotated with it (e.g. ``DiscoverOverrides``); ``to_dict``
    writes the dotted mapping, :func:`from_dict` reads it back (or the older list of strings).

    Raises:
        ConfigError: unknown key (the valid keys are listed) or a value of the wrong type.
    """

    #: the configuration class of a subclass (``None``: pass ``config=`` to the constructor)
    config: ClassVar[type | None] = None

    def __init__(self, values: Mapping[str, Any] | None = None, *, config: type | None = None):
        cls = config or type(self).config
        if cls is None:
            raise ConfigError("Overrides needs the configuration class (config=...).")
        self._config = cls
        types_ = _leaf_types(cls)
        self._values: dict[str, Any] = {}
        for key, raw in _flatten(values or {}, types_):
            if key not in types_:
                _refuse_renamed(cls, key)
                valid = list(types_)
                close = [k for k in valid if k.split(".")[-1] == key.split(".")[-1]]
                hint = f" Did you mean {close}?" if close else ""
                raise ConfigError(f"unknown config key {key!r}.{hint} Valid keys: {valid}.")
            self._values[key] = _coerce(key, raw, types_[key])

    @classmethod
    def parse(cls, items: Iterable[str] | str, *, config: type | None = None) -> Overrides:
        """Overrides from ``"key=value"`` strings (as ``--set``; later items win).

        Raises:
            ConfigError: an item without ``=``, an unknown key or a value of the wrong type.
        """
        values: dict[str, Any] = {}
        for item in [items] if isinstance(items, str) else items:
            if not isinstance(item, str) or "=" not in item:
                raise ConfigError(f"--set expects key=value, received {item!r}.")
            key, raw = item.split("=", 1)
            values.pop(key.strip(), None)
            values[key.strip()] = raw
        return cls(values, config=config)

    @classmethod
    def of(cls, overrides: Overrides | Mapping[str, Any] | Iterable[str] | None, *,
           config: type | None = None) -> Overrides:
        """``overrides`` as typed :class:`Overrides` (returned as is when it already is one of ``cls``)."""
        if isinstance(overrides, cls) and (config is None or overrides._config is config):
            return overrides
        if overrides is None:
            return cls(config=config)
        if isinstance(overrides, Mapping):
            return cls(overrides, config=config)
        return cls.parse(overrides, config=config)

    @classmethod
    def require(cls, value: Any, key: str) -> None:
        """Raise :class:`ConfigError` unless ``value`` (configuration field ``key``) is typed overrides of
        ``cls``: a configuration read by :func:`from_dict` or built by :meth:`apply` has them typed
        (the one place overrides are typed); one built in Python must pass ``cls.parse([...])`` or
        ``cls({...})``, never the raw strings or mapping.

        Raises:
            ConfigError: ``value`` is of another type (named, with how to type it).
        """
        if not isinstance(value, cls):
            raise ConfigError(f"{key} must be {cls.__name__} (typed once: {cls.__name__}.parse(['k=v', ...]) or "
                              f"{cls.__name__}({{'k': v}}), or read the configuration with paramsym.config.from_dict); "
                              f"received {type(value).__name__} {str(value)[:80]}.")

    def apply(self, cfg: C) -> C:
        """A copy of ``cfg`` with these values set, every field checked against its type and every
        nested configuration validated (as :func:`from_dict` does for a file).

        Raises:
            ConfigError: ``cfg`` is not of the configuration class, or a ``validate`` hook refuses the result.
        """
        if not isinstance(cfg, self._config):
            raise ConfigError(f"overrides of {self._config.__name__} cannot apply to a {type(cfg).__name__}.")
        for key, value in self._values.items():
            cfg = _replace_path(cfg, key.split("."), value)
        return _normalized(cfg)

    def __or__(self, other: Overrides | Mapping[str, Any] | Iterable[str]) -> Overrides:
        other = type(self).of(other, config=self._config)
        return type(self)({**self._values, **other._values}, config=self._config)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Overrides):
            return self._config is other._config and self._values == other._values
        return isinstance(other, Mapping) and self._values == dict(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._values!r})"


def apply_overrides(cfg: C, overrides: Iterable[str] | Mapping[str, Any] | Overrides) -> C:
    """Return a copy of ``cfg`` with dotted overrides applied and validated.

    Args:
        cfg: a config dataclass instance.
        overrides: ``"section.key=value"`` strings (values parsed once as YAML scalars/lists),
            a mapping of dotted keys to values, or :class:`Overrides`.

    Raises:
        ConfigError: unknown key (the valid keys are listed), malformed item or bad value.
    """
    return Overrides.of(overrides, config=type(cfg)).apply(cfg)


def read_document(path: str, what: str = "config file", error: type[ConfigError] = ConfigError) -> Any:
    """The data of a YAML or JSON file (JSON by the ``.json`` suffix; safe loaders only).

    Raises:
        ConfigError (or ``error``): unreadable file or invalid syntax, naming ``what`` and the path.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what} {path!r} ({exc}); expected a readable YAML or JSON file.") from None
    try:
        return json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        msg = " ".join(str(exc).split())
        raise error(f"{what} {path!r} is not valid {'JSON' if str(path).endswith('.json') else 'YAML'} "
                    f"({msg}); fix its syntax.") from None


def load_file(cls: type[C], path: str, what: str = "config file", error: type[ConfigError] = ConfigError) -> C:
    """Load config dataclass ``cls`` from a YAML or JSON file (safe loaders only) by :func:`from_dict`.

    Raises:
        ConfigError (or ``error``): an unreadable file, invalid syntax, or a configuration
            :func:`from_dict` refuses; the message begins with the path and names the key.
    """
    data = read_document(path, what, error)
    try:
        return from_dict(cls, {} if data is None else data)
    except ConfigError as exc:
        raise error(f"{path}: {exc}") from None
