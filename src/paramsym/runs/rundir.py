"""Run directories: every experiment writes one, and reports are regenerated from it.

Layout of a run directory::

    config.json       resolved configuration (after presets and overrides)
    env.json          {"starts": [...]}: one entry per start or resume (time, host, versions,
                      git SHA, seed, device, command line, resumed-from step)
    metrics.json      results (written last; its presence marks a finished run)
    history.json      loss curves (optional)
    checkpoint/       safetensors tensors + JSON state, replaced atomically
    figures/*.png     figures referenced by report.md
    report.md         human-readable report

All writes are atomic (write to a temporary file in the same directory, then ``os.replace``),
so a run killed at any moment leaves either the old or the new file, never a torn one. Files are
created with mode ``0o666 & ~umask`` (like ``open``), directories with ``0o777 & ~umask``.

A :class:`RunDir` is lazy: constructing one checks the path but creates nothing; the directory
appears with the first file written. Every failure to write or read a run file (permissions, a
path that is a file, a truncated or corrupt JSON or safetensors file) raises
:class:`~paramsym.errors.RunFileError`, a one-line named error naming the path, what was expected
and what to do.

Importing this module never imports torch (``paramsym attention table --out DIR`` writes a run
directory without it): torch and safetensors are imported by the functions that handle tensors,
and :func:`environment` reads package versions from the installed metadata unless the package is
already loaded.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import re
import secrets
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputFileError, RunDirError, RunFileError

if TYPE_CHECKING:
    import torch


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    torch = sys.modules.get("torch")  # a tensor can only exist once torch is loaded
    if torch is not None and isinstance(obj, torch.Tensor):
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


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def ensure_dir(path: str | os.PathLike) -> Path:
    """Create directory ``path`` (and parents) if missing.

    Raises:
        RunFileError: the path (or a parent) is an existing file, or cannot be created
            (permissions, read-only or virtual file system).
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise RunFileError(
            f"cannot create directory {str(path)!r}: {str(exc.filename or path)!r} exists and is not a directory; "
            "expected a directory path. Choose another output directory."
        ) from None
    except OSError as exc:
        raise RunFileError(
            f"cannot create directory {str(path)!r} ({_why(exc)}); expected a writable location. "
            "Choose an output directory you can write to."
        ) from None
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file + ``os.replace``).

    The file gets mode ``0o666 & ~umask``.

    Raises:
        RunFileError: the directory cannot be created or written (one line naming the path).
    """
    path = Path(path)
    ensure_dir(path.parent)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the kernel applies the umask
    except OSError as exc:
        raise RunFileError(
            f"cannot write {str(path)!r} ({_why(exc)}); expected a writable directory. "
            "Choose an output directory you can write to, or fix its permissions."
        ) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise RunFileError(
                f"cannot write {str(path)!r} ({_why(exc)}); expected a writable location with free space. "
                "Free some space or choose another output directory."
            ) from None
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Atomically write ``obj`` as pretty JSON (tensors and numpy values converted)."""
    text = json.dumps(_jsonable(obj), indent=2, sort_keys=False, allow_nan=False)
    atomic_write_bytes(path, (text + "\n").encode("utf-8"))


def _read_bytes(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise RunFileError(f"{str(path)!r} does not exist; expected {what}.") from None
    except OSError as exc:
        raise RunFileError(f"cannot read {str(path)!r} ({_why(exc)}); expected {what}. Fix its permissions.") from None


def read_json(path: str | os.PathLike, what: str = "a JSON file") -> Any:
    """Read a JSON file.

    Raises:
        RunFileError: missing, unreadable, truncated or not valid UTF-8 JSON (names the path).
    """
    path = Path(path)
    data = _read_bytes(path, what)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunFileError(
            f"{str(path)!r} is truncated or corrupt ({type(exc).__name__}: {exc}); expected {what}. "
            "Restore it, or delete the run directory and start the run again."
        ) from None


def tensors_to_bytes(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None) -> bytes:
    """Serialise a flat ``dict[str, Tensor]`` as safetensors bytes (CPU, contiguous), the same bytes for the
    same tensors and metadata.

    (``safetensors`` writes ``__metadata__`` in hash order, which changes from one process to the
    next; its entries are rewritten here in name order — the header keeps its length, since only
    the order of its keys changes.)
    """
    from safetensors.torch import save as _st_save

    clean = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    data = _st_save(clean, metadata=dict(metadata) if metadata else None)
    if not metadata or len(metadata) < 2:
        return data
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(text) > n or data[8 + len(text):8 + n].strip(b" "):  # not the compact form we expected: keep it
        return data
    return data[:8] + text + b" " * (n - len(text)) + data[8 + n:]


def save_tensors(path: str | os.PathLike, tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None) -> None:
    """Atomically save a flat ``dict[str, Tensor]`` as safetensors."""
    atomic_write_bytes(path, tensors_to_bytes(tensors, metadata))


def load_tensors(path: str | os.PathLike, user_file: str | None = None) -> dict[str, torch.Tensor]:
    """Load a safetensors file (never unpickles), its tensors in name order.

    (``safetensors`` returns them in no fixed order; sums over a dict of tensors would then round
    differently from one load to the next.)

    Args:
        path: the file.
        user_file: for a file the user supplied (not one a paramsym run wrote), what it should
            hold, e.g. ``"--weights: a safetensors state dict"``; the error then advises checking
            the file instead of restoring a run.

    Raises:
        RunFileError: missing, unreadable, truncated or not a safetensors file (names the path).
    """
    from safetensors.torch import load as _st_load

    path = Path(path)
    data = _read_bytes(path, "a safetensors file")
    try:
        tensors = _st_load(data)
    except Exception as exc:  # SafetensorError, or anything a corrupt header provokes
        if user_file:
            raise InputFileError(
                f"{str(path)!r} is truncated or not a safetensors file ({type(exc).__name__}: {exc}); expected "
                f"{user_file}. Check the file, or save it again with safetensors (safetensors.torch.save_file)."
            ) from None
        raise RunFileError(
            f"{str(path)!r} is truncated or not a safetensors file ({type(exc).__name__}: {exc}); "
            "expected the tensors a paramsym run saved. Restore it, or start the run again."
        ) from None
    return dict(sorted(tensors.items()))


def git_sha(start: str | os.PathLike | None = None) -> str | None:
    """The git SHA of the repository containing ``start`` (this package by default), if any."""
    cwd = Path(start) if start else Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5
        )
        if out.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def environment(seed: int | None = None, device: str | None = None) -> dict[str, Any]:
    """Time, host, versions, seed, git SHA and machine facts: one entry of ``env.json``.

    Never imports torch: where torch is not loaded (pure-math runs), ``torch_threads`` and
    ``cuda_available`` are ``None`` and the versions come from the installed metadata.
    """
    from .. import __version__

    torch = sys.modules.get("torch")
    env: dict[str, Any] = {
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "paramsym": __version__,
        "python": sys.version.split()[0],
        "torch": _version("torch"),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "cuda_available": torch.cuda.is_available() if torch is not None else None,
        "git_sha": git_sha(),
        "seed": seed,
        "device": device,
        "argv": list(sys.argv),
    }
    transformers = _version("transformers")
    if transformers is not None:
        env["transformers"] = transformers
    return env


def _version(name: str) -> str | None:
    """The version of package ``name``: of the loaded module if any, else from its installed metadata."""
    module = sys.modules.get(name)
    if module is not None and isinstance(getattr(module, "__version__", None), str):
        return module.__version__
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


_TENSOR_FILE = re.compile(r"tensors-\d{8}\.safetensors")


class RunDir:
    """A run directory (see module docstring). Creating one never deletes anything.

    Construction is lazy: it checks that ``path`` is not an existing file and creates nothing;
    the directory is created by the first write.

    Args:
        path: the directory.

    Raises:
        RunFileError: ``path`` exists and is not a directory.
        RunDirError: ``path`` contains a control character (newline, tab, ...).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if any(not c.isprintable() for c in str(path)):
            raise RunDirError(f"the run directory path {str(path)[:120]!r} contains a control character (a newline, tab, "
                              "...); expected a printable path. Choose another output directory (--out).")
        if os.path.lexists(self.path) and not os.path.isdir(self.path):
            raise RunFileError(
                f"{str(self.path)!r} exists and is not a directory; expected a run directory path. "
                "Choose another output directory."
            )

    @classmethod
    def fresh(cls, path: str | os.PathLike, command: str | None = None) -> RunDir:
        """A run directory for a new run: ``path`` must be missing or an empty directory.

        A non-empty directory is refused, never reused: a new run's files beside an old run's
        would mix two results. The message names the remedy: continue the old run with
        ``COMMAND --resume PATH`` (``command``, e.g. ``"paramsym census"``), or pass a fresh
        directory.

        Raises:
            RunFileError: ``path`` is a file or cannot be listed.
            RunDirError: ``path`` is a nonempty directory.
        """
        run = cls(path)
        try:
            nonempty = os.path.isdir(run.path) and any(os.scandir(run.path))
        except OSError as exc:
            raise RunFileError(f"cannot list {str(run.path)!r} ({_why(exc)}); expected a readable directory. "
                               "Choose another output directory.") from None
        if nonempty:
            how = f"`{command} --resume {run.path}`" if command else "the command's --resume"
            raise RunDirError(f"output directory {str(run.path)!r} is not empty; pass a new (or empty) --out "
                              f"directory, or continue the run in it with {how}.")
        return run

    @classmethod
    def open_existing(cls, path: str | os.PathLike) -> RunDir:
        """Open a run directory that must already hold a readable ``config.json`` with a ``kind``.

        Raises:
            RunDirError: no such directory or no ``config.json``.
            RunFileError: ``config.json`` is truncated, corrupt or has no ``kind``.
        """
        p = Path(path)
        if not os.path.isdir(p) or not os.path.isfile(p / "config.json"):
            raise RunDirError(
                f"{str(p)!r} is not a paramsym run directory (no config.json); pass the directory "
                "that a paramsym command created (its --out DIR, e.g. `paramsym discover` / `attribute` / `census`)."
            )
        run = cls(p)
        run.kind()
        return run

    def kind(self) -> str:
        """The run kind recorded in ``config.json`` (``"discovery"``, ``"attribution"``, ...).

        Raises:
            RunFileError: ``config.json`` is corrupt or is not an object with a string ``kind``.
        """
        cfg = self.read_json("config.json")
        if not isinstance(cfg, dict) or not isinstance(cfg.get("kind"), str):
            raise RunFileError(f"{str(self.file('config.json'))!r} is not a paramsym configuration (expected a JSON "
                               "object with a string 'kind'); restore it, or start the run again.")
        return cfg["kind"]

    def create(self) -> Path:
        """Create the directory now (it is otherwise created by the first write)."""
        return ensure_dir(self.path)

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
        if not os.path.exists(p):
            raise RunDirError(f"run directory {str(self.path)!r} has no {name}.")
        return read_json(p, f"the run's {name} (JSON)")

    def has(self, name: str) -> bool:
        return os.path.exists(self.path / name)

    # -- env.json: the history of starts ------------------------------------------------------
    def starts(self) -> list[dict[str, Any]]:
        """The recorded starts of this run (oldest first); ``[]`` before the first.

        Raises:
            RunFileError: ``env.json`` is corrupt or not of the expected form.
        """
        if not self.has("env.json"):
            return []
        env = self.read_json("env.json")
        if isinstance(env, Mapping) and isinstance(env.get("starts"), list):
            return list(env["starts"])
        if isinstance(env, Mapping):  # a single start written by an earlier version
            return [dict(env)]
        raise RunFileError(f"{str(self.file('env.json'))!r} is not of the form {{\"starts\": [...]}}; "
                           "restore it or move it aside.")

    def write_env(self, seed: int | None, device: str | None = None, **extra: Any) -> None:
        """Append one start (time, host, versions, git SHA, ``extra``) to ``env.json``."""
        starts = self.starts()
        env = environment(seed, device)
        env.update(extra)
        self.write_json("env.json", {"starts": [*starts, env]})

    def write_text(self, name: str, text: str) -> Path:
        atomic_write_bytes(self.path / name, text.encode("utf-8"))
        return self.path / name

    # -- checkpoints ---------------------------------------------------------------------
    def save_checkpoint(self, tensors: Mapping[str, torch.Tensor], state: Mapping[str, Any]) -> None:
        """Atomically save a checkpoint: tensors (safetensors) and JSON state.

        The JSON state names the tensor file it belongs to, and is written after it, so a crash
        between the two writes leaves the previous consistent checkpoint in place. The previous
        checkpoint (``tensors-*`` and its ``state-*.json``) is kept beside the new one, so a newest
        checkpoint damaged later still leaves an intact one to resume from (:meth:`load_checkpoint`).
        """
        ck = self.checkpoint_dir
        step = int(state.get("step", 0))
        tensor_name = f"tensors-{step:08d}.safetensors"
        save_tensors(ck / tensor_name, tensors)
        full_state = dict(state)
        full_state["tensor_file"] = tensor_name
        write_json(ck / f"state-{step:08d}.json", full_state)
        write_json(ck / "state.json", full_state)
        keep = {tensor_name, f"state-{step:08d}.json"}
        older = sorted(p.name for p in ck.glob("tensors-*.safetensors") if p.name != tensor_name)
        if older:  # the newest older checkpoint stays as the fallback
            keep |= {older[-1], "state-" + older[-1][len("tensors-"):-len(".safetensors")] + ".json"}
        for old in [*ck.glob("tensors-*.safetensors"), *ck.glob("state-*.json")]:
            if old.name not in keep:
                try:
                    old.unlink(missing_ok=True)
                except OSError:  # a stale file left behind costs only disk space
                    pass

    def load_checkpoint(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
        """Return ``(tensors, state)`` of the last complete checkpoint, or ``None``.

        When the newest checkpoint (``state.json`` or its tensor file) is truncated or corrupt and
        an older intact one is kept beside it (``state-NNNNNNNN.json`` + its tensors), that one is
        returned and a line on stderr says so (the run redoes the steps in between).

        Raises:
            RunFileError: ``state.json`` or the tensor file it names is truncated or corrupt, and
                no older checkpoint is intact.
        """
        ck = self.checkpoint_dir
        if not os.path.exists(ck / "state.json"):
            return None
        try:
            return self._load_state(ck / "state.json")
        except RunFileError as exc:
            for older in sorted(ck.glob("state-*.json"), reverse=True):
                try:
                    tensors, state = self._load_state(older)
                except RunFileError:
                    continue
                why = "state.json" if "state" in str(exc).split(";")[0] else "its tensor file"
                print(f"paramsym: the newest checkpoint in {str(ck)!r} is unreadable ({why} is truncated or corrupt); "
                      f"resuming from the intact checkpoint of step {state['step']} ({older.name}).", file=sys.stderr)
                return tensors, state
            raise

    def _load_state(self, path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        ck = self.checkpoint_dir
        state = read_json(path, "the checkpoint state (JSON)")
        ok = (isinstance(state, dict) and isinstance(state.get("step"), int) and not isinstance(state["step"], bool)
              and state["step"] >= 0 and isinstance(state.get("tensor_file"), str)
              and _TENSOR_FILE.fullmatch(state["tensor_file"]) is not None)
        if not ok:
            raise RunFileError(
                f"{str(path)!r} is not a paramsym checkpoint state (expected an object with an integer 'step' and "
                "'tensor_file': 'tensors-NNNNNNNN.safetensors'); restore it, or delete the checkpoint/ "
                "directory to restart the run from step 0."
            )
        tensors = load_tensors(ck / state["tensor_file"])
        return tensors, state


#: the record a ``paramsym reproduce --out ROOT`` run directory ``ROOT/<run>`` holds (its owner's mark)
REPRODUCE_RECORD = "reproduce.json"


def stored_run_kind(path: str | os.PathLike) -> str | None:
    """Who owns directory ``path``: the ``kind`` in its ``config.json``, ``"reproduce-run"`` for
    a ``paramsym reproduce`` run directory (``reproduce.json``, no ``config.json``), ``None``
    when it holds neither (missing, empty, or files of no paramsym run).

    Raises:
        RunFileError: ``config.json`` is truncated, corrupt or has no string ``kind``.
    """
    p = Path(path)
    if (p / "config.json").is_file():
        return RunDir(p).kind()
    if (p / REPRODUCE_RECORD).is_file():
        return "reproduce-run"
    return None


def default_run_dir(kind: str, name: str, root: str | os.PathLike = "runs") -> Path:
    """``runs/<kind>-<name>-<UTC timestamp>``; a numeric suffix avoids collisions."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    base = Path(root) / f"{kind}-{name}-{stamp}"
    path, i = base, 1
    while path.exists():
        path = Path(f"{base}-{i}")
        i += 1
    return path
