"""The one completeness check of a loaded checkpoint (issue 36): every model-taking command
goes through :func:`paramsym.models.loading.load_model`, which calls :func:`check_loaded`.

A checkpoint is accepted only when

* every parameter and persistent buffer the architecture needs was stored (``missing`` is empty:
  transformers would otherwise fill it with freshly initialised weights and only warn);
* nothing stored is left unused, except the tensors of a head the loaded class does not have
  when the checkpoint's own class (``config.architectures``) has them (``AutoModel`` from a
  ``...ForMaskedLM`` checkpoint);
* no stored tensor had another shape than the architecture's;
* every stored tensor is floating point, except those stored for an integer buffer of the model
  (e.g. BERT's ``position_ids``), read from the safetensors headers (no tensor is read);
* every floating parameter and buffer of the loaded model is finite: :func:`check_finite_weights`
  scans each tensor in chunks of :data:`CHUNK` elements, stopping at the first non-finite chunk,
  so the cost is at most one pass over the weights and the extra memory at most one chunk.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..errors import CheckpointError, IncompleteCheckpointError, NonFiniteError

__all__ = ["CHUNK", "FLOAT_DTYPES", "LazyTensors", "check_finite_weights", "check_loaded", "check_weight_tensors", "read_header",
           "stored_dtypes", "StoredTensor"]

#: elements checked at once by :func:`check_finite_weights`
CHUNK = 1 << 20
#: safetensors dtype codes of floating-point tensors
FLOAT_DTYPES = frozenset({"F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2", "F8_E4M3FN", "F8_E5M2FNUZ",
                          "F8_E4M3FNUZ", "F8_E8M0"})


def _names(names: Iterable[str], limit: int = 6) -> str:
    names = sorted(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


@dataclass(frozen=True)
class StoredTensor:
    """One tensor of a checkpoint: its shard, shape, safetensors dtype and size in bytes."""

    name: str
    file: Path
    shape: tuple[int, ...]
    dtype: str
    nbytes: int


def read_header(path: Path) -> dict[str, StoredTensor]:
    """Every tensor of one safetensors file, from its header only (no tensor data is read).

    Raises:
        CheckpointError: a truncated or padded file, or a header that is not safetensors.
    """
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise CheckpointError(f"checkpoint shard {str(path)!r} is {size} bytes, shorter than a safetensors header; "
                                  "the file is truncated: copy or save it again.")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise CheckpointError(f"checkpoint shard {str(path)!r} declares a {n}-byte header but holds {size - 8} bytes "
                                  "after the length; the file is truncated or not safetensors: copy or save it again.")
        try:
            meta = json.loads(fh.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CheckpointError(f"checkpoint shard {str(path)!r}: unreadable safetensors header ({exc}); copy or save "
                                  "it again.") from None
    out, end = {}, 0
    for name, info in meta.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        end = max(end, int(hi))
        out[name] = StoredTensor(name, path, tuple(int(s) for s in info["shape"]), str(info["dtype"]), int(hi) - int(lo))
    if end != size - 8 - n:
        raise CheckpointError(f"checkpoint shard {str(path)!r}: its header places tensor data up to byte {end} but the "
                              f"file holds {size - 8 - n} data bytes; the shard is truncated or padded: copy or save "
                              "it again.")
    return out



class LazyTensors(Mapping[str, torch.Tensor]):
    """Stored tensors read on access, one at a time (``safe_open``), never cached: a read-only
    mapping ``name -> tensor`` over ``stored`` (e.g. :func:`paramsym.census.stored.read_checkpoint`'s
    headers), so code that walks a checkpoint tensor by tensor holds one tensor at a time."""

    def __init__(self, stored: Mapping[str, StoredTensor]):
        self.stored = dict(stored)

    def __getitem__(self, name: str) -> torch.Tensor:
        from safetensors import safe_open

        t = self.stored[name]
        with safe_open(str(t.file), framework="pt") as fh:
            return fh.get_tensor(name)

    def __iter__(self):
        return iter(self.stored)

    def __len__(self) -> int:
        return len(self.stored)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.stored[name].shape


def stored_dtypes(directory: str | os.PathLike) -> dict[str, str]:
    """``{tensor name: safetensors dtype code}`` of every ``*.safetensors`` file in ``directory``
    (headers only: no tensor data is read; :func:`read_header`)."""
    return {name: t.dtype for f in sorted(Path(directory).glob("*.safetensors")) for name, t in read_header(f).items()}


def check_finite_weights(named: Iterable[tuple[str, torch.Tensor]], argument: str = "model",
                         hint: str = "") -> None:
    """Refuse NaN or infinite entries in floating tensors ``named`` (``(name, tensor)`` pairs).

    Each tensor is scanned in chunks of :data:`CHUNK` elements and the scan of a tensor stops at
    its first non-finite chunk: at most one pass over the weights, at most one chunk of scratch.

    Raises:
        NonFiniteError: names the tensors with non-finite entries (the first few) and what to do.
    """
    bad: list[str] = []
    for name, t in named:
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.device.type == "meta":
            continue
        flat = t.detach().reshape(-1)
        for start in range(0, flat.numel(), CHUNK):
            if not bool(torch.isfinite(flat[start:start + CHUNK]).all()):
                bad.append(name)
                break
    if bad:
        raise NonFiniteError(f"{argument}: weights {_names(bad)} hold NaN or infinite entries; expected finite "
                             "weights. " + (hint or "Check the checkpoint (a diverged training run?) or save it again."))


def check_weight_tensors(tensors: Mapping[str, torch.Tensor], argument: str = "weights") -> None:
    """Refuse a dict of stored weights (a safetensors file read whole) holding a non-floating
    tensor or NaN/inf entries: the check :func:`check_loaded` applies to a checkpoint, for the
    commands that read plain tensor files (``align A.safetensors B.safetensors``,
    ``attention classify --weights``).

    Raises:
        IncompleteCheckpointError: a non-floating tensor (named, with its dtype).
        NonFiniteError: NaN or infinite entries (the tensors named).
    """
    wrong = {k: v.dtype for k, v in tensors.items() if not v.is_floating_point()}
    if wrong:
        shown = ", ".join(f"{k!r} ({str(d).replace('torch.', '')})" for k, d in sorted(wrong.items())[:6])
        raise IncompleteCheckpointError(f"{argument}: stores tensors of a non-floating dtype: {shown}; expected "
                                        "floating-point weights (float16, bfloat16, float32, float64); save them "
                                        "again as floats.")
    check_finite_weights(sorted(tensors.items()), argument)


def _head_names(archs: list[str], config, source: str) -> set[str]:
    """The state-dict names of the checkpoint's own class (``config.architectures``), built on
    the meta device (no memory), or an empty set when transformers lacks it."""
    import transformers

    if len(archs) != 1 or not isinstance(getattr(transformers, archs[0], None), type):
        return set()
    try:
        with torch.device("meta"):
            own = getattr(transformers, archs[0])._from_config(config, attn_implementation="eager")
    except Exception:  # noqa: BLE001 - a class that cannot be built from this config explains nothing
        return set()
    return set(own.state_dict())


def check_loaded(model: nn.Module, info: Mapping[str, object], source: str, argument: str = "model") -> None:
    """Refuse a loaded checkpoint that is not complete (module docstring).

    Args:
        model: the model ``from_pretrained`` returned.
        info: its loading info (``output_loading_info=True``): ``missing_keys``,
            ``unexpected_keys``, ``mismatched_keys``.
        source: the directory it was loaded from (its safetensors headers are read).
        argument: how the user named the model, for the messages.

    Raises:
        IncompleteCheckpointError: missing, unexpected, mis-shaped or non-floating tensors.
        NonFiniteError: NaN or infinite weights.
    """
    where = f"{argument}: the checkpoint {source!r}"
    todo = "give the complete directory written by save_pretrained for this architecture (nothing is filled in)."
    missing = set(info.get("missing_keys") or ())
    archs = list(getattr(model.config, "architectures", None) or [])
    if missing:
        other = (f" (it was saved from {archs[0]}, which has no such tensors: they would be random)"
                 if archs and archs != [type(model).__name__] else "")
        raise IncompleteCheckpointError(f"{where} lacks {len(missing)} tensor(s) that {type(model).__name__} needs: "
                                        f"{_names(missing)}{other}; {todo}")
    mismatched = [k[0] if isinstance(k, (tuple, list)) else k for k in (info.get("mismatched_keys") or ())]
    if mismatched:
        raise IncompleteCheckpointError(f"{where} stores {_names(mismatched)} with another shape than "
                                        f"{type(model).__name__} has; {todo}")
    unexpected = set(info.get("unexpected_keys") or ())
    if unexpected:
        if archs != [type(model).__name__]:
            own = _head_names(archs, model.config, source)
            unexpected = {k for k in unexpected if k not in own}
        if unexpected:
            raise IncompleteCheckpointError(f"{where} stores {len(unexpected)} tensor(s) that "
                                            f"{type(model).__name__} has no place for: {_names(unexpected)}; {todo}")
    if Path(source).is_dir():
        ints = [n for n, b in model.named_buffers() if not b.is_floating_point()]
        wrong = {k: d for k, d in stored_dtypes(source).items()
                 if d not in FLOAT_DTYPES and not any(k == b or k.endswith("." + b) for b in ints)}
        if wrong:
            shown = ", ".join(f"{k!r} ({d})" for k, d in sorted(wrong.items())[:6])
            raise IncompleteCheckpointError(f"{where} stores weights of a non-floating dtype: {shown}; expected "
                                            "floating-point weights (F16, BF16, F32, F64); save the model again "
                                            "with floating weights.")
    check_finite_weights([*model.named_parameters(), *model.named_buffers()], argument)
