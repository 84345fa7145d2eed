"""Provenance of a result: which code, which configuration, which command, when.

One definition each, used by every run directory and every reproduction row:

* ``code_version()`` — the git SHA of the checkout holding this package, with
  ``-dirty.<hash>`` when a tracked file of the package (``src/paramsym``) is modified (``<hash>``:
  12 hex digits of ``sha256`` of ``git diff HEAD -- src/paramsym``, so two different
  modifications never share a version; docs, tests and the changelog do not count); outside a
  git checkout ``paramsym-<version>`` (an installed wheel).
* ``config_hash(cfg)`` — ``sha256`` of the canonical JSON of the *resolved* configuration
  (:func:`paramsym.config.to_dict`, the one serializer of a configuration: dataclasses → dicts;
  keys sorted, floats by ``repr``), first 16 hex digits. Two runs have
  the same hash iff their resolved configurations are equal as data; a recipe is part of the
  configuration, so editing a recipe value changes the hash.
* ``provenance(cfg, command=..., budget=...)`` — the record stored with a result:
  ``code_version``, ``config_hash``, ``command``, ``budget``, ``date_utc``.
* ``stale_reason(record, cfg)`` — why a stored record may **not** be reused for ``cfg`` under
  the current code (``None`` when it may): reuse requires equal ``config_hash`` and
  ``code_version`` (a bare ``-dirty`` suffix, without the diff hash, never matches).

Standard library and :mod:`paramsym.config` only; never imports torch.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import to_dict

__all__ = ["code_version", "config_hash", "provenance", "stale_reason"]


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``<git sha>[-dirty.<diff hash>]`` of the checkout holding this package, else ``paramsym-<version>``.

    Only the package's own files count (``git diff HEAD -- <package dir>``): regenerated docs, a
    changelog or a test edit do not change the version of the code that computes results.
    """
    from .. import __version__
    from .rundir import git_sha

    here = Path(__file__).resolve().parent.parent  # the package (src/paramsym), not this sub-package
    sha = git_sha(here)
    if not sha:
        return f"paramsym-{__version__}"
    sha = sha.removesuffix("-dirty")
    try:
        diff = subprocess.run(["git", "diff", "HEAD", "--", "."], cwd=here, capture_output=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return sha + "-dirty"
    return sha + ("-dirty." + hashlib.sha256(diff).hexdigest()[:12] if diff.strip() else "")


def config_hash(cfg: Any) -> str:
    """First 16 hex digits of ``sha256`` of the canonical JSON of ``cfg`` (module docstring)."""
    text = json.dumps(to_dict(cfg), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def provenance(cfg: Any, *, command: str | None = None, budget: str | None = None) -> dict[str, Any]:
    """The provenance record of a result computed from resolved config ``cfg`` by the current code."""
    return {
        "code_version": code_version(),
        "config_hash": config_hash(cfg),
        "command": command,
        "budget": budget,
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def stale_reason(record: Mapping[str, Any] | None, cfg: Any) -> str | None:
    """Why ``record`` (a stored provenance) may not be reused for ``cfg`` now; ``None`` if it may."""
    if not isinstance(record, Mapping):
        return "it has no provenance record (made by an older version of paramsym)"
    want_hash, have_hash = config_hash(cfg), record.get("config_hash")
    if have_hash != want_hash:
        return f"its config_hash {have_hash!r} differs from this configuration's {want_hash!r}"
    want_code, have_code = code_version(), record.get("code_version")
    if not isinstance(have_code, str) or have_code.endswith("-dirty"):
        return f"its code_version {have_code!r} does not identify the code that made it"
    if have_code != want_code:
        return f"it was made by code {have_code!r}, not by the current {want_code!r}"
    return None
