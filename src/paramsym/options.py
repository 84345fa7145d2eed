"""The one place a command-line value is validated (standard library only).

Every command reads numeric options as text and checks them here, so a bad value is a named
one-line :class:`~paramsym.errors.ConfigError` (which flag, what was expected, what was
received) with exit status 2, raised before any run directory is created. The same checks
serve the ``paramsym`` sub-commands in :mod:`paramsym.cli` and those that live beside their
concepts (:mod:`paramsym.attention.cli`), so ``--seed``, ``--seeds``, ``--threads`` and
``--device`` mean and accept the same in every command:

* ``--seed N``: an integer ``0 <= N < 2**63`` (:data:`MAX_SEED`; torch's generators take a
  signed 64-bit seed: ``2**64``, ``2**63`` and negatives are refused);
* ``--seeds A,B,...``: distinct seeds, each as ``--seed``;
* ``--threads N``: torch CPU threads, ``1 <= N <= 4096``;
* ``--device``: ``cpu``, ``cuda`` or ``cuda:N``;
* ``--out`` / ``--resume``: a path, not empty, without control characters (:func:`path_option`).

Integers are ASCII digits only (an optional leading ``-`` for the range message): ``'٣'``,
``' 3'``, ``'+1'`` and ``'3\n'`` are refused, never read as 3. :func:`check_shared_options`
applies these checks once, before any command runs, to whichever of the shared flags the
command has.

The argparse side (adding the shared flags, the ``--out``/``--resume`` rule) is
:mod:`paramsym.cli.options`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

from .errors import ConfigError

__all__ = ["MAX_SEED", "MAX_THREADS", "Flag", "check_shared_options", "config_from_flags", "device_option",
           "flag_values", "float_option", "given_flags", "int_option", "path_option", "seed_option",
           "seeds_option", "threads_option"]

C = TypeVar("C")

#: an integer as the command line accepts it: ASCII digits, an optional leading minus (no spaces, no ``+``)
_INT = re.compile(r"-?[0-9]{1,30}")

#: the largest seed accepted: every seed fits torch's signed 64-bit ``manual_seed`` (and ``seed + 1``
#: the derived generators some commands use stays below ``2**64``)
MAX_SEED = 2**63 - 1
#: the largest ``--threads``
MAX_THREADS = 4096


def int_option(raw: object, flag: str, minimum: int, maximum: int | None = None) -> int:
    """``raw`` as an integer in ``[minimum, maximum]``.

    Raises:
        ConfigError: ``raw`` is not an integer (``"1.5"``, ``"nan"``, ``"ten"``) or out of range.
    """
    want = f"an integer >= {minimum}" + ("" if maximum is None else f" and <= {maximum}")
    if isinstance(raw, bool):
        raise ConfigError(f"{flag} must be {want}; received {raw!r}.")
    text = str(raw)
    if not _INT.fullmatch(text):
        raise ConfigError(f"{flag} must be {want}; received {str(raw)[:80]!r} (ASCII digits only).")
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


def seed_option(raw: object, flag: str = "--seed") -> int:
    """``raw`` as a seed ``0 <= seed < 2**63``.

    Raises:
        ConfigError: not an integer, negative, or ``>= 2**63`` (e.g. ``2**64``).
    """
    text = str(raw)
    if isinstance(raw, bool) or not _INT.fullmatch(text) or not 0 <= int(text) <= MAX_SEED:
        shown = text[:80] if re.fullmatch(r"-?[0-9]{1,80}", text) else repr(str(raw)[:80])
        raise ConfigError(f"{flag} must be an integer seed with 0 <= seed < 2**63 (ASCII digits only); received "
                          f"{shown}. Pass e.g. {flag} 0.")
    return int(text)


def seeds_option(raw: object, flag: str = "--seeds") -> list[int]:
    """A comma-separated list of distinct seeds ``0 <= s < 2**63``, e.g. ``0,1,2``.

    Raises:
        ConfigError: empty, not integers, negative, too large or repeated.
    """
    items = [x.strip() for x in str(raw).split(",")]
    if not any(items):
        raise ConfigError(f"{flag} must be comma-separated integers >= 0, e.g. 0,1,2; received {str(raw)[:80]!r}.")
    seeds = []
    for x in items:
        if not re.fullmatch(r"[0-9]{1,30}", x) or int(x) > MAX_SEED:
            raise ConfigError(f"{flag} must be comma-separated integers >= 0 (and < 2**63), e.g. 0,1,2; "
                              f"received {str(raw)[:80]!r} (bad item {x[:40]!r}).")
        seeds.append(int(x))
    dup = sorted({s for s in seeds if seeds.count(s) > 1})
    if dup:
        raise ConfigError(f"{flag} lists seed(s) {dup} more than once; give each seed once, e.g. 0,1,2.")
    return seeds


def threads_option(raw: object, flag: str = "--threads") -> int:
    """``raw`` as a torch CPU thread count ``1 <= N <= 4096``.

    Raises:
        ConfigError: not an integer or out of range.
    """
    return int_option(raw, flag, 1, MAX_THREADS)


def path_option(raw: object, flag: str = "--out") -> str:
    """``raw`` as a path given on the command line: not empty, no control characters.

    Raises:
        ConfigError: an empty path (it would write into the current directory) or one with a
            newline, tab or other control character.
    """
    text = str(raw)
    if not text.strip():
        raise ConfigError(f"{flag} must be a path; received an empty one {text!r} (it would write into the current "
                          f"directory). Pass e.g. {flag} runs/mine.")
    if any(not c.isprintable() for c in text):
        raise ConfigError(f"{flag} {text[:80]!r} contains a control character (a newline, tab, ...); expected a "
                          "printable path. Choose another path.")
    return text


def check_shared_options(args: Any) -> None:
    """Validate the shared flags a command has, once, before it runs (``paramsym.cli.main``).

    ``--seed``, ``--seeds``, ``--threads`` (as text: ``None`` means not given) and ``--out``,
    ``--resume``, ``--preset`` (not empty, no control characters; ``sweep --resume`` with no
    directory is stored as ``""`` and means the default one, so an empty ``--resume`` is left to
    the command); ``--resume DIR`` with another ``--out`` (it would be ignored).

    Raises:
        ConfigError: the first bad value, named by its flag.
    """
    for name, check in (("seed", seed_option), ("seeds", seeds_option), ("threads", threads_option)):
        raw = getattr(args, name, None)
        if raw is not None:
            check(raw, "--" + name)
    for name in ("out", "resume"):
        raw = getattr(args, name, None)
        if isinstance(raw, str) and (raw or name != "resume"):
            path_option(raw, "--" + name)
    resume, out = getattr(args, "resume", None), getattr(args, "out", None)
    if resume and isinstance(out, str):
        import os

        if os.path.abspath(out) != os.path.abspath(resume):
            raise ConfigError(f"--resume {resume!r} continues the run in that directory; drop --out {out!r} (or pass "
                              "the same directory).")
    preset = getattr(args, "preset", None)
    if isinstance(preset, str) and (not preset.strip() or any(not c.isprintable() for c in preset)):
        raise ConfigError(f"--preset must name a preset; received {preset[:80]!r}. List them with `paramsym list`, or "
                          "drop --preset for the command's default.")


def device_option(raw: object, flag: str = "--device") -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` (checked for syntax here, for availability by the command).

    Raises:
        ConfigError: anything else.
    """
    text = str(raw).strip()
    if text in ("cpu", "cuda") or re.fullmatch(r"cuda:\d{1,4}", text):
        return text
    raise ConfigError(f"{flag} must be cpu, cuda or cuda:N (N a GPU index); received {str(raw)[:80]!r}.")


class Flag(NamedTuple):
    """A command-line flag that writes config key ``key`` (dotted, e.g. ``train.steps``), its text
    parsed by ``check(raw, flag)`` (``None``: the value as argparse parsed it)."""

    key: str
    check: Callable[[Any, str], Any] | None = None


FlagTable = Mapping[str, "Flag | Callable[[Any, str], Any] | None"]


def _flag_spec(name: str, spec: Any) -> Flag:
    return spec if isinstance(spec, Flag) else Flag(name, spec)


def given_flags(args: Any, flags: FlagTable) -> list[str]:
    """The ``--flag`` names of ``flags`` (argument names) given on the command line (not ``None``/``False``),
    and ``--set`` when any override was given."""
    given = ["--" + name.replace("_", "-") for name in flags if getattr(args, name, None) not in (None, False)]
    return given + (["--set"] if getattr(args, "overrides", None) else [])


def flag_values(args: Any, flags: FlagTable) -> dict[str, Any]:
    """Config key → value of every flag of ``flags`` given on the command line, parsed by its check."""
    values: dict[str, Any] = {}
    for name, spec in flags.items():
        raw = getattr(args, name, None)
        if raw is None or raw is False:
            continue
        key, check = _flag_spec(name, spec)
        values[key] = check(raw, "--" + name.replace("_", "-")) if check is not None else raw
    return values


def config_from_flags(base: C, args: Any, flags: FlagTable) -> C:
    """``base`` (a config dataclass) with the command line applied: the one mapping of flags onto config keys.

    Every run command builds its configuration here (those in :mod:`paramsym.cli` and those beside their
    concepts): each flag of ``flags`` that was given writes its config key — ``name`` →
    ``Flag(key, check)``, or ``name`` → ``check`` for the key ``name`` itself (flag ``--some-field``,
    argument ``some_field``; argparse default ``None``, a ``store_true`` flag when ``True``) — and then
    every ``--set KEY=VALUE`` (``args.overrides``) writes its key, so a flag is sugar for ``--set``
    of its key: both give the same configuration (and ``config_hash``). The values are typed and the
    result validated by :class:`paramsym.config.Overrides`.

    Args:
        base: the starting configuration (``Config()``, ``Config.quick()`` or a preset's value).
        args: the parsed arguments (``args.overrides``: the ``--set`` strings, when the command has them).
        flags: argument name → :class:`Flag` or validator ``(raw, flag) -> value`` (``None``: as parsed).

    Raises:
        ConfigError: a bad flag value, an unknown or mistyped ``--set`` key, a flag and ``--set`` of the
            same key (give one), or a configuration its ``validate`` refuses.
    """
    from .config import Overrides

    values = flag_values(args, flags)
    sets = Overrides.parse(getattr(args, "overrides", None) or (), config=type(base))
    both = [k for k in values if k in sets]
    if both:
        names = {_flag_spec(n, s).key: "--" + n.replace("_", "-") for n, s in flags.items()}
        raise ConfigError(f"{names[both[0]]} and --set {both[0]}=... both set {both[0]!r}; give one of them.")
    return (Overrides(values, config=type(base)) | sets).apply(base)
