"""Validation of the command line's numeric and device options (standard library only).

Numeric options are read as text and checked here, so a bad value is a named one-line
:class:`~paramsym.errors.ConfigError` (which flag, what was expected, what was received) with
exit status 2, raised before any run directory is created.
"""

from __future__ import annotations

import math
import re

from ..errors import ConfigError

__all__ = ["int_option", "float_option", "seeds_option", "device_option"]


def int_option(raw: object, flag: str, minimum: int, maximum: int | None = None) -> int:
    """``raw`` as an integer in ``[minimum, maximum]``.

    Raises:
        ConfigError: ``raw`` is not an integer (``"1.5"``, ``"nan"``, ``"ten"``) or out of range.
    """
    want = f"an integer >= {minimum}" + ("" if maximum is None else f" and <= {maximum}")
    text = str(raw).strip()
    if not re.fullmatch(r"[+-]?\d{1,30}", text):
        raise ConfigError(f"{flag} must be {want}; received {str(raw)[:80]!r}.")
    value = int(text)
    if value < minimum or (maximum is not None and value > maximum):
        raise ConfigError(f"{flag} must be {want}; received {value}.")
    return value


def float_option(raw: object, flag: str, *, minimum: float | None = None, exclusive: bool = False) -> float:
    """``raw`` as a finite float, ``> minimum`` (``exclusive``) or ``>= minimum``.

    Raises:
        ConfigError: not a number, NaN or infinite, or below the minimum.
    """
    want = "a finite number" if minimum is None else f"a finite number {'>' if exclusive else '>='} {minimum:g}"
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ConfigError(f"{flag} must be {want}; received {str(raw)[:80]!r}.") from None
    low = minimum is not None and (value <= minimum if exclusive else value < minimum)
    if not math.isfinite(value) or low:
        raise ConfigError(f"{flag} must be {want}; received {str(raw)[:80]!r}.")
    return value


#: the largest seed torch.Generator.manual_seed accepts (a 64-bit unsigned integer)
MAX_SEED = 2**64 - 1


def seeds_option(raw: object, flag: str = "--seeds") -> list[int]:
    """A comma-separated list of distinct seeds ``0 <= s < 2**64``, e.g. ``0,1,2``.

    Raises:
        ConfigError: empty, not integers, negative, too large or repeated.
    """
    items = [x.strip() for x in str(raw).split(",")]
    if not any(items):
        raise ConfigError(f"{flag} must be comma-separated integers >= 0, e.g. 0,1,2; received {str(raw)[:80]!r}.")
    seeds = []
    for x in items:
        if not re.fullmatch(r"\+?\d{1,30}", x) or int(x) > MAX_SEED:
            raise ConfigError(f"{flag} must be comma-separated integers >= 0 (and < 2**64), e.g. 0,1,2; "
                              f"received {str(raw)[:80]!r} (bad item {x[:40]!r}).")
        seeds.append(int(x))
    dup = sorted({s for s in seeds if seeds.count(s) > 1})
    if dup:
        raise ConfigError(f"{flag} lists seed(s) {dup} more than once; give each seed once, e.g. 0,1,2.")
    return seeds


def device_option(raw: object, flag: str = "--device") -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` (checked for syntax here, for availability by the command).

    Raises:
        ConfigError: anything else.
    """
    text = str(raw).strip()
    if text in ("cpu", "cuda") or re.fullmatch(r"cuda:\d{1,4}", text):
        return text
    raise ConfigError(f"{flag} must be cpu, cuda or cuda:N (N a GPU index); received {str(raw)[:80]!r}.")
