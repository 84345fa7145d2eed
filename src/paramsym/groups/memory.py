"""A memory budget for dense group computations: estimate before allocating.

Representations store one dense ``d x d`` float64 matrix per group element, so the regular
representation of a group of order ``n`` takes ``8 n^3`` bytes (954 GiB for ``S_7``). Every
constructor in :mod:`paramsym.groups.reps` (and the attention counts built on them) calls
:func:`check_memory` with its estimate first and raises :class:`~paramsym.errors.TooLargeError`
naming the estimate, the budget and what to do, instead of dying in the allocator.

The budget is a keyword ``max_memory`` wherever it applies; ``None`` means
:data:`DEFAULT_MAX_MEMORY` (2 GiB). Its one type and parser is :class:`MemoryBudget` (bytes,
an ``int`` > 0; ``"512MiB"``, ``"2GiB"`` or plain bytes; zero, negative and NaN refused by
:class:`~paramsym.errors.MemoryBudgetError`). On the command line, ``--max-memory 8GiB``.
"""

from __future__ import annotations

import math
import numbers
import re

from ..errors import TooLargeError

__all__ = ["DEFAULT_MAX_MEMORY", "MemoryBudget", "budget_bytes", "format_bytes", "check_memory", "parse_memory",
           "dense_bytes"]

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
    budget = budget_bytes(max_memory)
    if nbytes > budget:
        raise TooLargeError(
            f"{what} would need {format_bytes(nbytes)} of memory ({nbytes} bytes), more than the "
            f"budget of {format_bytes(budget)}. "
            + (hint + " " if hint else "")
            + "If the machine has the memory, raise the budget (--max-memory, or the max_memory "
            "keyword in Python)."
        )


class MemoryBudget(int):
    """A memory budget in bytes (an ``int`` > 0): the one type and parser of every
    ``--max-memory`` option and ``max_memory`` keyword.

    ``MemoryBudget(value)`` accepts a size with a unit — binary ``KiB``/``MiB``/``GiB``/``TiB``
    (powers of 2¹⁰), decimal ``kB``/``MB``/``GB``/``TB`` or the bare letters ``k``/``M``/``G``/``T``
    (powers of 10³), case-insensitive, optional space (``"512MiB"``, ``"2 GiB"``, ``"8G"``) — a
    number of bytes (``4096``, ``"1e9"``) or another budget. Fractions of a byte are dropped.

    Raises:
        MemoryBudgetError: anything else, and zero, negative, NaN or infinite sizes (the message
            names ``argument``, what was received and what to give).
    """

    def __new__(cls, value: str | int | float, argument: str = "--max-memory") -> MemoryBudget:
        return super().__new__(cls, _parse_bytes(value, argument))

    def __repr__(self) -> str:
        return f"MemoryBudget({int(self)})"


def _parse_bytes(value: str | int | float, argument: str) -> int:
    from ..errors import MemoryBudgetError

    expect = "a memory size > 0 such as 512MiB, 2GiB, 500MB or a number of bytes"
    if isinstance(value, bool) or not isinstance(value, (str, numbers.Real)):
        raise MemoryBudgetError(f"{argument}: expected {expect}; received {value!r} ({type(value).__name__}).")
    if not isinstance(value, str):
        number, unit = float(value), ""
    else:
        m = re.fullmatch(r"\s*([+-]?(?:[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?|nan|inf(?:inity)?))\s*([A-Za-z]*)\s*",
                         value, flags=re.IGNORECASE)
        if not m or m.group(2).lower() not in _UNITS:
            raise MemoryBudgetError(f"{argument}: expected {expect}; received {value!r}.")
        number, unit = float(m.group(1)), m.group(2).lower()
    nbytes = number * _UNITS[unit]
    if not math.isfinite(nbytes) or nbytes < 1:
        raise MemoryBudgetError(f"{argument}: the memory budget must be a finite size of at least 1 byte; received "
                                f"{value!r}. Give e.g. 2GiB.")
    return int(nbytes)


def parse_memory(value: str | int | float, argument: str = "--max-memory") -> MemoryBudget:
    """``"2GiB"``, ``"500MB"``, ``"4g"``, ``"1e9"`` or a number of bytes → a :class:`MemoryBudget`.

    Raises:
        MemoryBudgetError: anything else, or a size that is not > 0 and finite.
    """
    return MemoryBudget(value, argument)


def budget_bytes(max_memory: str | int | float | None, argument: str = "max_memory") -> MemoryBudget:
    """The budget of a ``max_memory`` keyword: ``None`` → :data:`DEFAULT_MAX_MEMORY`, anything else
    parsed by :class:`MemoryBudget` (so a keyword accepts ``"8GiB"`` as well as bytes).

    Raises:
        MemoryBudgetError: an invalid budget (zero, negative, NaN, not a size).
    """
    return MemoryBudget(DEFAULT_MAX_MEMORY if max_memory is None else max_memory, argument)
