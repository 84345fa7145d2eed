"""Typed configuration: nested dataclasses, ``key=value`` overrides, YAML/JSON round trips.

A configuration is a dataclass whose fields are scalars, tuples/lists of scalars or nested
dataclasses. ``apply_overrides(cfg, ["train.lr=3e-4", "verdict.rhos=[0.1,0.5]"])`` returns a
new configuration; an unknown key or a value of the wrong type raises :class:`ConfigError`
naming the key, the expected type and the valid keys.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import yaml

from .errors import ConfigError

C = TypeVar("C")


def to_dict(cfg: Any) -> dict[str, Any]:
    """Convert a (nested) config dataclass into plain JSON-able Python objects."""
    if dataclasses.is_dataclass(cfg):
        return {f.name: to_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    if isinstance(cfg, (list, tuple)):
        return [to_dict(v) for v in cfg]
    if isinstance(cfg, dict):
        return {k: to_dict(v) for k, v in cfg.items()}
    return cfg


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
        if parsed is None and type(None) in args:
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
    if dataclasses.is_dataclass(annotation):
        if not isinstance(parsed, Mapping):
            raise ConfigError(f"{key}: expected a mapping for {annotation.__name__}, received {raw!r}.")
        return from_dict(annotation, parsed, prefix=key + ".")
    return parsed


def from_dict(cls: type[C], data: Mapping[str, Any], prefix: str = "") -> C:
    """Build config dataclass ``cls`` from a (nested) mapping, validating keys and types."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, received {type(data).__name__}.")
    hints = _field_types(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"unknown config key(s) {[prefix + k for k in unknown]}; valid keys here: "
            f"{sorted(prefix + n for n in names)}."
        )
    kwargs = {k: _coerce(prefix + k, v, hints[k]) for k, v in data.items()}
    cfg = cls(**kwargs)
    _validate(cfg)
    return cfg


def _validate(cfg: Any) -> None:
    hook = getattr(cfg, "validate", None)
    if callable(hook):
        hook()


def apply_overrides(cfg: C, overrides: Iterable[str]) -> C:
    """Return a copy of ``cfg`` with dotted ``key=value`` overrides applied and validated.

    Args:
        cfg: a config dataclass instance.
        overrides: strings ``"section.key=value"``; values are parsed as YAML scalars/lists.

    Raises:
        ConfigError: unknown key (the valid keys are listed), malformed item or bad value.
    """
    data = to_dict(cfg)
    valid = flat_keys(cfg)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, received {item!r}.")
        key, raw = item.split("=", 1)
        key = key.strip()
        if key not in valid:
            close = [k for k in valid if k.split(".")[-1] == key.split(".")[-1]]
            hint = f" Did you mean {close}?" if close else ""
            raise ConfigError(f"unknown config key {key!r}.{hint} Valid keys: {valid}.")
        node = data
        parts = key.split(".")
        for p in parts[:-1]:
            node = node[p]
        node[parts[-1]] = raw  # coerced against the annotation by from_dict below
    return from_dict(type(cfg), data)


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


def load_file(cls: type[C], path: str) -> C:
    """Load a config dataclass from a YAML or JSON file (safe loaders only)."""
    return from_dict(cls, read_document(path) or {})
