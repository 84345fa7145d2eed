"""Run directories: every experiment writes one, and reports are regenerated from it.

Layout of a run directory::

    config.json       resolved configuration (after presets and overrides)
    env.json          versions, seed, git SHA, device, command line
    metrics.json      results (written last; its presence marks a finished run)
    history.json      loss curves (optional)
    checkpoint/       safetensors tensors + JSON state, replaced atomically
    figures/*.png     figures referenced by report.md
    report.md         human-readable report

All writes are atomic (write to a temporary file in the same directory, then ``os.replace``),
so a run killed at any moment leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file as _st_load
from safetensors.torch import save_file as _st_save

from .errors import RunDirError


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return _jsonable(obj.detach().cpu().tolist())
    if hasattr(obj, "item") and hasattr(obj, "dtype"):  # numpy scalar
        return _jsonable(obj.item())
    if hasattr(obj, "tolist"):
        return _jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else (1e308 if obj > 0 else -1e308)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file + ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Atomically write ``obj`` as pretty JSON (tensors and numpy values converted)."""
    text = json.dumps(_jsonable(obj), indent=2, sort_keys=False, allow_nan=False)
    atomic_write_bytes(path, (text + "\n").encode("utf-8"))


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def save_tensors(path: str | os.PathLike, tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None) -> None:
    """Atomically save a flat ``dict[str, Tensor]`` as safetensors."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        clean = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
        _st_save(clean, tmp, metadata=dict(metadata) if metadata else None)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_tensors(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Load a safetensors file (never unpickles)."""
    if not Path(path).exists():
        raise RunDirError(f"tensor file {str(path)!r} does not exist.")
    return _st_load(str(path))


def git_sha(start: str | os.PathLike | None = None) -> str | None:
    """The git SHA of the repository containing ``start`` (this package by default), if any."""
    cwd = Path(start) if start else Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    sha = out.stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True
    )
    return sha + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def environment(seed: int | None = None, device: str | None = None) -> dict[str, Any]:
    """Versions, seed, git SHA and machine facts for ``env.json``."""
    import numpy
    import scipy

    from . import __version__

    env: dict[str, Any] = {
        "paramsym": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda_available": torch.cuda.is_available(),
        "git_sha": git_sha(),
        "seed": seed,
        "device": device,
        "argv": list(sys.argv),
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        import transformers

        env["transformers"] = transformers.__version__
    except ImportError:
        pass
    return env


class RunDir:
    """A run directory (see module docstring). Creating one never deletes anything.

    Args:
        path: the directory; created if missing.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.figures.mkdir(exist_ok=True)

    @classmethod
    def open_existing(cls, path: str | os.PathLike) -> RunDir:
        """Open a run directory that must already hold ``config.json``."""
        p = Path(path)
        if not (p / "config.json").exists():
            raise RunDirError(
                f"{str(p)!r} is not a paramsym run directory (no config.json); pass the directory "
                "that a `paramsym discover` / `attribute` run created."
            )
        return cls(p)

    @property
    def figures(self) -> Path:
        return self.path / "figures"

    @property
    def checkpoint_dir(self) -> Path:
        return self.path / "checkpoint"

    def file(self, name: str) -> Path:
        return self.path / name

    def write_json(self, name: str, obj: Any) -> Path:
        write_json(self.path / name, obj)
        return self.path / name

    def read_json(self, name: str) -> Any:
        p = self.path / name
        if not p.exists():
            raise RunDirError(f"run directory {str(self.path)!r} has no {name}.")
        return read_json(p)

    def has(self, name: str) -> bool:
        return (self.path / name).exists()

    def write_env(self, seed: int | None, device: str | None = None, **extra: Any) -> None:
        env = environment(seed, device)
        env.update(extra)
        self.write_json("env.json", env)

    def write_text(self, name: str, text: str) -> Path:
        atomic_write_bytes(self.path / name, text.encode("utf-8"))
        return self.path / name

    # -- checkpoints ---------------------------------------------------------------------
    def save_checkpoint(self, tensors: Mapping[str, torch.Tensor], state: Mapping[str, Any]) -> None:
        """Atomically save a checkpoint: tensors (safetensors) and JSON state.

        The JSON state names the tensor file it belongs to, and is written after it, so a crash
        between the two writes leaves the previous consistent checkpoint in place.
        """
        ck = self.checkpoint_dir
        ck.mkdir(exist_ok=True)
        step = int(state.get("step", 0))
        tensor_name = f"tensors-{step:08d}.safetensors"
        save_tensors(ck / tensor_name, tensors)
        full_state = dict(state)
        full_state["tensor_file"] = tensor_name
        write_json(ck / "state.json", full_state)
        for old in ck.glob("tensors-*.safetensors"):
            if old.name != tensor_name:
                old.unlink(missing_ok=True)

    def load_checkpoint(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
        """Return ``(tensors, state)`` of the last complete checkpoint, or ``None``."""
        ck = self.checkpoint_dir
        if not (ck / "state.json").exists():
            return None
        state = read_json(ck / "state.json")
        tensors = load_tensors(ck / state["tensor_file"])
        return tensors, state


def default_run_dir(kind: str, name: str, root: str | os.PathLike = "runs") -> Path:
    """``runs/<kind>-<name>-<UTC timestamp>``; a numeric suffix avoids collisions."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    base = Path(root) / f"{kind}-{name}-{stamp}"
    path, i = base, 1
    while path.exists():
        path = Path(f"{base}-{i}")
        i += 1
    return path
