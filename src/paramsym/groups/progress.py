"""Progress bars for long group computations: tqdm on stderr, only when asked and on a TTY.

Library functions take ``progress: bool = False``; the command line turns it on unless
``--quiet`` is given. Output never goes to stdout (which may be piped JSON).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["progress_bar", "warn"]

T = TypeVar("T")


def progress_bar(items: Iterable[T], *, total: int | None = None, desc: str = "",
                 enabled: bool = False) -> Iterator[T]:
    """``items``, wrapped in a tqdm bar on stderr when ``enabled`` and stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield from items
        return
    from tqdm import tqdm

    yield from tqdm(items, total=total, desc=desc, file=sys.stderr, leave=False)


def warn(message: str, *, enabled: bool = True) -> None:
    """One line on stderr (``paramsym: note: ...``) when ``enabled``."""
    if enabled:
        print(f"paramsym: note: {message}", file=sys.stderr)
