"""A permutation spec applied to a sharded checkpoint one tensor at a time (issue 34).

:func:`permute_checkpoint` writes the checkpoint in ``source`` with one element of the group of a
permutation spec (:mod:`paramsym.census.permspec`: ``{"perms": {ID: n}, "axes": {stored name:
[entry per axis]}}``, the stored names as :mod:`paramsym.census.stored` resolves them) applied:
each tensor ``T`` is read alone (``safe_open``), permuted on every axis its entry names
(:func:`~paramsym.census.permspec.apply_spec` on that one tensor) and written at its place in the
output shard of the same name, with the same dtype and shape; the index
(``model.safetensors.index.json``), ``config.json`` and every other file are copied. So the memory
is one tensor (and its permuted copy), whatever the model's size — scrambling or aligning a
billion-parameter checkpoint needs no more than its largest tensor.

A safetensors shard is ``u64 N`` (little-endian), an ``N``-byte JSON header (``{name: {dtype,
shape, data_offsets}}``, ``__metadata__``; padded with spaces to a multiple of 8) and the tensors'
bytes in header order; the header is written first from the stored shapes, then each tensor's
bytes as it is produced.

Everything is checked before a byte is written: the checkpoint (the index and shards agree, no
shard truncated: :func:`~paramsym.census.stored.read_checkpoint`), the spec (every tensor it
names stored, with as many axes, every slice a multiple of its permutation's size), the
permutations (one per ID, a permutation of ``0..n−1``), the output (a new or empty directory).
The shards are written to a temporary sibling directory renamed to ``out`` at the end, so a
failure leaves nothing at ``out``.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..errors import CheckpointError, ConfigError, OutputFileError, ShapeError
from .permspec import apply_spec, axis_parts
from .stored import read_checkpoint

__all__ = ["permute_checkpoint"]


def _check(spec: Mapping[str, Any], perms: Mapping[str, Tensor], stored: Mapping[str, Any]) -> None:
    sizes = dict(spec["perms"])
    for pid, p in perms.items():
        if pid not in sizes:
            raise ConfigError(f"permutation {pid!r} is no ID of the spec (its IDs: {sorted(sizes)[:6]}).")
        n = int(sizes[pid])
        if not isinstance(p, Tensor) or p.dim() != 1 or not torch.equal(torch.sort(p.long()).values, torch.arange(n)):
            raise ConfigError(f"permutation {pid!r} must be a permutation of 0..{n - 1} (a 1-d integer tensor); "
                              f"received {p if not isinstance(p, Tensor) else tuple(p.shape)}.")
    for name, axes in dict(spec["axes"]).items():
        if name not in stored:
            raise CheckpointError(f"the permutation spec names {name!r}, which the checkpoint does not store; nothing "
                                  "written. Export the spec from this checkpoint.")
        shape = stored[name].shape
        if len(axes) != len(shape):
            raise ShapeError(f"the permutation spec gives {name!r} {len(axes)} axes; the checkpoint stores it with shape "
                             f"{shape}; nothing written.")
        for ax, entry in enumerate(axes):
            for _, _, size, pid in axis_parts(entry, tuple(shape), ax, f"axis {ax} of {name!r}"):
                if pid is not None and (pid not in sizes or size % int(sizes[pid])):
                    raise ShapeError(f"axis {ax} of {name!r}: a slice of length {size} carries {pid!r}, which the spec "
                                     f"{'lacks' if pid not in sizes else f'sizes {sizes[pid]}'}; nothing written.")


def _write_shard(src: Path, dst: Path, names: list[str], produce) -> None:
    """Write shard ``dst`` holding ``names`` (in order) with ``src``'s dtypes, shapes and
    metadata; ``produce(name)`` gives each tensor, called one at a time."""
    from safetensors import safe_open

    with safe_open(str(src), framework="pt") as fh:
        meta = fh.metadata() or {}
    from ..models.checks import read_header

    info = read_header(src)
    header: dict[str, Any] = {"__metadata__": dict(sorted(meta.items()))} if meta else {}  # same bytes every run
    pos = 0
    for n in names:
        t = info[n]
        header[n] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [pos, pos + t.nbytes]}
        pos += t.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(dst, "wb") as out:
        out.write(struct.pack("<Q", len(raw)))
        out.write(raw)
        for n in names:
            t = produce(n)
            if tuple(t.shape) != info[n].shape:
                raise ShapeError(f"tensor {n!r} came out with shape {tuple(t.shape)}, not {info[n].shape}.")
            data = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            if len(data) != info[n].nbytes:
                raise ShapeError(f"tensor {n!r}: {len(data)} bytes, the header says {info[n].nbytes}.")
            out.write(data)


def permute_checkpoint(source: str | os.PathLike, spec: Mapping[str, Any], perms: Mapping[str, Tensor],
                       out: str | os.PathLike) -> dict[str, Any]:
    """Write ``source`` with ``perms`` (``{ID: permutation}``; IDs left out stay unpermuted) applied
    through ``spec`` to ``out``, one tensor at a time (module docstring). Returns ``{"shards",
    "tensors", "permuted", "largest_tensor_bytes"}``.

    Raises:
        CheckpointError: a bad checkpoint, or a spec naming a tensor it does not store.
        ShapeError: a spec whose axes do not fit the stored shapes.
        ConfigError: a permutation that is not one, or of an ID the spec lacks.
        OutputFileError: ``out`` exists and is not an empty directory.
    """
    from safetensors import safe_open

    src, dst = Path(source), Path(out)
    stored = read_checkpoint(src)
    _check(spec, perms, stored)
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise OutputFileError(f"output {str(dst)!r} exists and is not an empty directory; the permuted checkpoint is "
                              "never written over anything: choose a new directory.")
    axes = dict(spec["axes"])
    perms = {k: v.long() for k, v in perms.items()}
    files: dict[Path, list[str]] = {}
    for name, t in sorted(stored.items(), key=lambda kv: kv[0]):
        files.setdefault(t.file, []).append(name)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    permuted = 0
    try:
        for f, names in files.items():
            with safe_open(str(f), framework="pt") as fh:
                def produce(n: str, fh=fh) -> Tensor:
                    nonlocal permuted
                    t = fh.get_tensor(n)
                    if n not in axes:
                        return t
                    permuted += 1
                    return apply_spec({n: t}, {"perms": spec["perms"], "axes": {n: axes[n]}}, perms)[n]

                _write_shard(f, tmp / f.name, names, produce)
        for extra in src.iterdir():
            if extra.is_file() and not extra.name.endswith(".safetensors"):
                shutil.copy2(extra, tmp / extra.name)
        if dst.exists():
            dst.rmdir()
        tmp.rename(dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"shards": len(files), "tensors": len(stored), "permuted": permuted,
            "largest_tensor_bytes": max(t.nbytes for t in stored.values())}
