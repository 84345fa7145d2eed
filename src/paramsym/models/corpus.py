"""A real text corpus available offline on every machine: the Python standard library's own sources.

The files are the top-level ``*.py`` files of ``sysconfig.get_paths()["stdlib"]`` (the running
interpreter's standard library), in sorted name order, each read as bytes. Tokens are bytes
(vocabulary 256: a byte-level tokenizer needs no vocabulary file). The train/test split is **by
file**: file ``i`` (0-based, in the sorted list) is a test file when ``i % test_every ==
test_every − 1``, so no test byte comes from a file seen in training. The corpus is as fixed as
the interpreter: :attr:`ByteCorpus.sha256` (of the file names and bytes) and the Python version
are recorded with every result built on it.

* :func:`stdlib_corpus` — the two token streams (train files concatenated, test files
  concatenated, each file followed by a newline byte);
* :func:`lm_windows` — next-token windows ``x = s[i : i + T]``, ``y = s[i + 1 : i + T + 1]`` at
  seeded random starts (training batches) or evenly spaced starts (evaluation sets).
"""

from __future__ import annotations

import hashlib
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..errors import ConfigError

__all__ = ["ByteCorpus", "lm_windows", "stdlib_corpus", "stdlib_files"]


def stdlib_files() -> list[Path]:
    """The sorted top-level ``*.py`` files of the running interpreter's standard library."""
    return sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"), key=lambda p: p.name)


@dataclass(frozen=True)
class ByteCorpus:
    """Byte token streams of the train and test files (module docstring)."""

    train: Tensor
    test: Tensor
    train_files: tuple[str, ...]
    test_files: tuple[str, ...]
    sha256: str
    python: str

    def describe(self) -> dict:
        """Provenance: file counts, token counts, the corpus hash and the Python version."""
        return {"source": "python stdlib top-level *.py files (sorted)", "train_files": len(self.train_files),
                "test_files": len(self.test_files), "train_bytes": int(self.train.numel()),
                "test_bytes": int(self.test.numel()), "sha256": self.sha256, "python": self.python}


def stdlib_corpus(test_every: int = 5, max_files: int | None = None) -> ByteCorpus:
    """The standard-library corpus split by file (module docstring).

    Args:
        test_every: every ``test_every``-th file is a test file (≥ 2).
        max_files: use only the first ``max_files`` files of the sorted list (``None``: all).

    Raises:
        ConfigError: ``test_every`` < 2, or no train or no test file.
    """
    if isinstance(test_every, bool) or not isinstance(test_every, int) or test_every < 2:
        raise ConfigError(f"test_every must be an integer >= 2 (every n-th file is a test file); received {test_every!r}.")
    files = stdlib_files()[:max_files]
    h = hashlib.sha256()
    parts: dict[bool, list[bytes]] = {False: [], True: []}
    names: dict[bool, list[str]] = {False: [], True: []}
    for i, f in enumerate(files):
        data = f.read_bytes() + b"\n"
        h.update(f.name.encode() + b"\0" + data)
        test = i % test_every == test_every - 1
        parts[test].append(data)
        names[test].append(f.name)
    if not names[False] or not names[True]:
        raise ConfigError(f"the standard library at {sysconfig.get_paths()['stdlib']!r} gave {len(files)} files: too few "
                          f"for a split with test_every={test_every}; use more files.")

    def stream(chunks: list[bytes]) -> Tensor:
        return torch.frombuffer(bytearray(b"".join(chunks)), dtype=torch.uint8).long()

    return ByteCorpus(stream(parts[False]), stream(parts[True]), tuple(names[False]), tuple(names[True]),
                      h.hexdigest(), platform.python_version())


def lm_windows(tokens: Tensor, context: int, count: int, generator: torch.Generator | None = None
               ) -> tuple[Tensor, Tensor]:
    """``count`` next-token windows ``(x, y)``, each ``(count, context)``: at starts drawn from
    ``generator`` (uniform over the valid starts), or evenly spaced over the stream without one.

    Raises:
        ConfigError: a stream shorter than ``context + 1`` tokens, or ``count``/``context`` < 1.
    """
    n = int(tokens.numel()) - context - 1
    if context < 1 or count < 1 or n < 0:
        raise ConfigError(f"lm_windows needs context >= 1, count >= 1 and a stream of more than context tokens; received "
                          f"context={context}, count={count}, {tokens.numel()} tokens.")
    if generator is not None:
        starts = torch.randint(0, n + 1, (count,), generator=generator)
    else:
        starts = torch.linspace(0, n, count).round().long()
    idx = starts[:, None] + torch.arange(context + 1)[None]
    w = tokens[idx]
    return w[:, :-1].contiguous(), w[:, 1:].contiguous()
