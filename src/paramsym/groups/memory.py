"""A memory budget for dense group computations: estimate before allocating.

Representations store one dense ``d x d`` float64 matrix per group element, so the regular
representation of a group of order ``n`` takes ``8 n^3`` bytes (954 GiB for ``S_7``). Every
constructor in :mod:`paramsym.groups.reps` (and the attention counts built on them) calls
:func:`check_memory` with its estimate first and raises :class:`~paramsym.errors.TooLargeError`
naming the estimate, the budget and what to do, instead of dying in the allocator.

The budget is a keyword ``max_memory`` (bytes) wherever it applies; ``None`` means
:data:`DEFAULT_MAX_MEMORY` (2 GiB). On the command line, ``--max-memory 8GiB``.
"""

from __future__ import annotations

import re

from ..errors import ConfigError, TooLargeError

__all__ = ["DEFAULT_MAX_MEMORY", "format_bytes", "check_memory", "parse_memory", "dense_bytes"]

#: Default budget in bytes for one dense array (2 GiB).
DEFAULT_MAX_MEMORY = 2 * 2**30

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def format_bytes(n: float) -> str:
    """``1.02e12 -> "954 GiB"``: binary units, three significant digits."""
    n = float(n)
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def dense_bytes(*shape: int, itemsize: int = 8) -> int:
    """Bytes of a dense array of this shape (float64 by default), as an exact integer."""
    total = itemsize
    for s in shape:
        total *= int(s)
    return total


def check_memory(nbytes: int, what: str, max_memory: int | None = None, hint: str = "") -> None:
    """Raise :class:`TooLargeError` if ``nbytes`` exceeds the budget ``max_memory``.

    Args:
        nbytes: the estimate (bytes) of what is about to be allocated.
        what: what it is, e.g. ``"the regular representation of S7 (5040 matrices 5040x5040)"``.
        max_memory: the budget in bytes; ``None`` for :data:`DEFAULT_MAX_MEMORY`.
        hint: what else to do (appended to the message).
    """
    budget = DEFAULT_MAX_MEMORY if max_memory is None else int(max_memory)
    if nbytes > budget:
        raise TooLargeError(
            f"{what} would need {format_bytes(nbytes)} of memory ({nbytes} bytes), more than the "
            f"budget of {format_bytes(budget)}. "
            + (hint + " " if hint else "")
            + "If the machine has the memory, raise the budget (--max-memory, or the max_memory "
            "keyword in Python)."
        )


def parse_memory(text: str | int | float) -> int:
    """``"2GiB"``, ``"500MB"``, ``"4g"``, ``"1e9"`` or a number of bytes -> bytes (> 0).

    Raises :class:`~paramsym.errors.ConfigError` for anything else.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        if not m or m.group(2).lower() not in _UNITS:
            raise ConfigError(
                f"--max-memory {text!r}: expected a size such as 2GiB, 500MB, 8G or a number of "
                "bytes."
            )
        value, unit = float(m.group(1)), m.group(2).lower()
    nbytes = value * _UNITS[unit]
    if not nbytes > 0 or nbytes != nbytes or nbytes == float("inf"):
        raise ConfigError(f"--max-memory {text!r}: the memory budget must be > 0.")
    return int(nbytes)
