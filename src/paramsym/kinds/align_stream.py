"""The ``align-stream`` run kind: ``paramsym align A B --stream --out DIR [--merge ALPHA]
[--max-memory SIZE]`` — two saved safetensors checkpoints (sharded or not) of the same architecture
aligned by weight matching over the census's permutation group, and merged, with both read one
tensor at a time and the results written shard by shard (issue 34).

:func:`align_streamed`:

1. reads both checkpoints' **headers** (:func:`paramsym.census.stored.read_checkpoint`: a shard
   missing from the index or the directory, a truncated shard, an index naming a tensor no shard
   holds are :class:`~paramsym.errors.CheckpointError` s) and ``config.json``; A and B must store
   the same tensor names with the same shapes and dtypes, and have the same ``model_type``
   (:class:`~paramsym.errors.ArchitectureMismatchError`);
2. checks the peak estimate against ``max_memory`` **before any tensor is read**
   (:class:`~paramsym.errors.TooLargeError`): the runtime
   (:data:`paramsym.census.streaming.RUNTIME_BYTES`) plus
   :func:`paramsym.alignment.streamed.match_memory` of the largest stored tensor (and, once the
   spec is known, of the widest permutation);
3. derives the permutation spec from A's config and headers
   (:func:`paramsym.census.configspec.spec_without_weights`: a two-layer copy traced at the real
   widths and verified through the file, its own estimate checked against ``max_memory``; no
   weight read), and checks the estimate again with the spec's widest permutation;
4. weight-matches B to A over the spec's group with both read on demand
   (:func:`paramsym.alignment.streamed.match_streamed` over
   :class:`paramsym.models.checks.LazyTensors`);
5. writes ``aligned_b/`` = π·B (:func:`paramsym.census.rewrite.permute_checkpoint`: B's shards,
   index and files, each tensor permuted alone) and, with ``alpha``, ``merged/`` =
   ``(1 − α)·A + α·π(B)`` (:func:`paramsym.census.rewrite.map_checkpoint` over A, each tensor
   merged alone by :func:`paramsym.alignment.streamed.merged_tensor` in float32 or wider and
   stored in A's dtype): both ``from_pretrained``-loadable with the source's shard layout;
6. writes ``permutation_spec.json``, ``permutations.safetensors`` (``{ID: int64 permutation}``,
   new unit ``i`` = B's unit ``perm[i]``) and ``alignment.json`` (the record; written last).

``--resume`` of a run interrupted before ``alignment.json`` aligns again (an interrupted attempt's
``aligned_b/`` / ``merged/`` moved aside, never deleted); after it, reads it back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ArchitectureMismatchError, ConfigError, OutputFileError
from ..groups.memory import MemoryBudget

__all__ = ["KIND", "AlignStreamConfig", "align_streamed", "render", "run", "summary_line"]

KIND = "align-stream"
#: the checkpoints a run writes (and moves aside when resuming an interrupted attempt)
OUTPUTS = ("aligned_b", "merged")


@dataclass(frozen=True)
class AlignStreamConfig:
    """Attributes:
        models: the two checkpoints A and B (``save_pretrained`` directories with safetensors).
        merge: α of the merged checkpoint ``(1 − α)·A + α·π(B)`` in [0, 1] (``None``: none written).
        max_memory: refuse, before reading a tensor, when the peak estimate exceeds it (``None``: no budget).
        seed: seed of the spec's tracing inputs and of the matching's visiting order.
        dtype: dtype the spec's two-layer copy is traced and verified in (``float64`` or ``float32``).
    """

    models: tuple[str, ...] = ()
    merge: float | None = None
    max_memory: MemoryBudget | None = None
    seed: int = 0
    dtype: str = "float64"

    @classmethod
    def quick(cls) -> AlignStreamConfig:
        """all-MiniLM-L6-v2 aligned with itself and merged at α = ½ (the identity and A are the answers)."""
        return cls(models=("minilm", "minilm"), merge=0.5)

    def validate(self) -> None:
        if len(self.models) != 2:
            raise ConfigError(f"--stream aligns two checkpoints A B; received {len(self.models)}.")
        if self.merge is not None and not 0.0 <= float(self.merge) <= 1.0:
            raise ConfigError(f"--merge must be a number α in [0, 1] (0 = A, 1 = the aligned B); received {self.merge!r}.")
        if self.dtype not in ("float64", "float32"):
            raise ConfigError(f"dtype (the spec's tracing dtype) must be float64 or float32; received {self.dtype!r}.")
        if self.max_memory is not None:
            MemoryBudget(self.max_memory, "--max-memory")


def _model_type(directory: Path, which: str) -> str | None:
    try:
        return json.loads((directory / "config.json").read_text()).get("model_type")
    except (OSError, json.JSONDecodeError, AttributeError) as exc:
        raise ConfigError(f"checkpoint {which} {str(directory)!r}: no readable config.json ({type(exc).__name__}); "
                          "give a directory written by save_pretrained.") from None


def _same_layout(a: Path, b: Path, sa: dict, sb: dict) -> None:
    """A and B store the same names, shapes and dtypes, and have the same model_type (else a named error)."""
    ta, tb = _model_type(a, "A"), _model_type(b, "B")
    if ta != tb:
        raise ArchitectureMismatchError(f"A is a {ta!r} checkpoint and B a {tb!r} one; --stream aligns two checkpoints "
                                        "of the same architecture. Nothing written.")
    only = sorted(set(sa) ^ set(sb))
    if only:
        raise ArchitectureMismatchError(f"A and B store different tensors ({only[:3]}{' ...' if len(only) > 3 else ''} "
                                        "in one only); --stream aligns two checkpoints of the same architecture and "
                                        "size. Nothing written.")
    for n in sorted(sa):
        if (sa[n].shape, sa[n].dtype) != (sb[n].shape, sb[n].dtype):
            raise ArchitectureMismatchError(f"A stores {n!r} as {sa[n].dtype} {sa[n].shape} and B as {sb[n].dtype} "
                                            f"{sb[n].shape}; --stream aligns two checkpoints of the same architecture, "
                                            "size and dtype. Nothing written.")


def align_streamed(a: str | Path, b: str | Path, out: str | Path, *, alpha: float | None = None, seed: int = 0,
                   max_memory: int | None = None, dtype: str = "float64") -> dict[str, Any]:
    """Align checkpoint ``b`` to ``a`` one tensor at a time and write ``out/aligned_b`` (and with
    ``alpha`` ``out/merged``), ``out/permutation_spec.json`` and ``out/permutations.safetensors``
    (module docstring); return the record.

    Raises:
        CheckpointError: a bad checkpoint (from the headers, before any read).
        ArchitectureMismatchError: A and B differ in model type, tensor names, shapes or dtypes.
        TooLargeError: the estimate exceeds ``max_memory`` (before any tensor is read).
        OutputFileError: ``out`` already holds ``aligned_b`` or ``merged``.
        ConfigError, ToleranceError, TraceError: from the spec (:func:`spec_without_weights`).
    """
    import time

    import torch
    from safetensors.torch import save_file

    from ..alignment.streamed import match_memory, match_streamed, merged_tensor
    from ..census.configspec import spec_without_weights
    from ..census.rewrite import map_checkpoint, permute_checkpoint
    from ..census.stored import read_checkpoint
    from ..census.streaming import RUNTIME_BYTES
    from ..groups.memory import check_memory, format_bytes
    from ..models.checks import LazyTensors

    t0 = time.perf_counter()
    a, b, out = Path(a), Path(b), Path(out)
    sa, sb = read_checkpoint(a), read_checkpoint(b)
    _same_layout(a, b, sa, sb)
    taken = [n for n in OUTPUTS if (out / n).exists()]
    if taken:
        raise OutputFileError(f"{str(out)!r} already holds {taken}; write the alignment to a new directory.")
    largest = max(sa.values(), key=lambda t: t.nbytes)
    numel = max(int(torch.Size(t.shape).numel()) for t in sa.values())
    what = (f"aligning two {len(sa)}-tensor checkpoints one tensor at a time (largest {largest.name!r} "
            f"{largest.shape}; the runtime {format_bytes(RUNTIME_BYTES)} plus 8 float32 copies of it")
    if max_memory is not None:
        check_memory(RUNTIME_BYTES + match_memory(numel), what + ")", max_memory)
    spec, spec_info = spec_without_weights(a, seed=seed, max_memory=max_memory, dtype=getattr(torch, dtype))
    sizes = {k: int(v) for k, v in spec["perms"].items()}
    estimate = RUNTIME_BYTES + match_memory(numel, sizes.values())
    if max_memory is not None:
        check_memory(estimate, what + f" and 4 float64 {max(sizes.values(), default=0)}² score matrices)", max_memory)
    A, B = LazyTensors(sa), LazyTensors(sb)
    perms, match = match_streamed(A, B, spec, generator=torch.Generator().manual_seed(int(seed)))
    out.mkdir(parents=True, exist_ok=True)
    (out / "permutation_spec.json").write_text(json.dumps(spec, indent=1) + "\n")
    written = permute_checkpoint(b, spec, perms, out / "aligned_b")
    info: dict[str, Any] = {"aligned_b": str(out / "aligned_b"), "merged": None, "alpha": alpha}
    if alpha is not None:
        aligned = LazyTensors(read_checkpoint(out / "aligned_b"))
        map_checkpoint(a, out / "merged", lambda n, t: merged_tensor(t, aligned[n], float(alpha)), stored=sa)
        info["merged"] = str(out / "merged")
    save_file({k: v.contiguous() for k, v in sorted(perms.items())}, str(out / "permutations.safetensors"))
    moved = sorted(k for k, p in perms.items() if not torch.equal(p, torch.arange(p.numel())))
    return info | {
        "perms": len(sizes), "moved": len(moved), "sweeps": match["sweeps"], "changed_per_sweep": match["changed"],
        "distance_before": match["distance_before"], "distance_after": match["distance_after"],
        "shards": written["shards"], "tensors": written["tensors"], "permuted_tensors": written["permuted"],
        "largest_tensor": largest.name, "largest_tensor_bytes": written["largest_tensor_bytes"],
        "estimate_bytes": estimate, "estimate": format_bytes(estimate),
        "spec": {k: spec_info[k] for k in ("layers", "traced_layers", "estimate")},
        "seconds": time.perf_counter() - t0}


def run(cfg: AlignStreamConfig, out, *, progress: bool = True) -> dict[str, Any]:
    """Align B to A streamed into the run directory ``out``; return the record (``alignment.json``)."""
    from ..models.loading import resolve_model_path

    cfg.validate()
    a, b = (Path(resolve_model_path(m, w)) for m, w in zip(cfg.models, "AB"))
    if out.has("alignment.json"):  # resumed after the alignment finished (written last)
        return out.read_json("alignment.json")
    from ..runs.reuse import move_aside

    for partial in OUTPUTS:  # an interrupted attempt's outputs: kept beside, never mixed
        if out.has(partial):
            move_aside(out.file(partial))
    info = align_streamed(a, b, out.path, alpha=cfg.merge, seed=cfg.seed, max_memory=cfg.max_memory, dtype=cfg.dtype)
    info = info | {"A": cfg.models[0], "B": cfg.models[1]}
    out.write_json("alignment.json", info)
    return info


def summary_line(info: dict[str, Any]) -> str:
    """The line ``paramsym align --stream`` prints."""
    merged = f" and {info['merged']} (α = {info['alpha']:g})" if info.get("merged") else ""
    return (f"aligned B to A one tensor at a time over {info['perms']} permutation groups ({info['moved']} moved, "
            f"{info['sweeps']} sweeps): distance {info['distance_before']:.4g} -> {info['distance_after']:.4g}; wrote "
            f"{info['aligned_b']}{merged} shard by shard ({info['shards']} shards, peak estimate {info['estimate']})")


def render(run_dir) -> str:
    """``report.md``: the summary line, then the configuration and the scalar metrics."""
    from ..runs.reports import render_generic

    info = run_dir.read_json("metrics.json")
    head = f"# Streamed alignment of two checkpoints\n\n{summary_line(info)}.\n\n"
    return head + render_generic(run_dir, "Run").split("\n", 1)[1]
