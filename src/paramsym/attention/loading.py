"""Reading attention weights named on the command line.

Groups (``--group``) and representations on tokens (``--rep``) are read by the one grammar of
:meth:`paramsym.groups.finite.FiniteGroup.parse` and
:meth:`paramsym.groups.reps.Representation.parse`.

Weights: a safetensors file with RMHSA matrices ``M`` and ``R`` (``(H, d, d)`` each) or
``nn.MultiheadAttention`` weights (``in_proj_weight``, ``out_proj.weight``, optional biases,
``num_heads`` in the metadata).

Only this module and :mod:`~paramsym.attention.cli` read files; the library functions take
objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputFileError

if TYPE_CHECKING:  # torch is imported only when weights are read
    import torch

__all__ = ["LoadedWeights", "load_weights"]


@dataclass
class LoadedWeights:
    """RMHSA parameters read from a file (see :func:`load_weights`)."""

    M: torch.Tensor
    R: torch.Tensor
    offset: torch.Tensor | None
    source: str  # "rmhsa" or "multihead_attention"
    notes: list[str] = field(default_factory=list)
    stored_dtype: torch.dtype | None = None  # dtype of the tensors in the file


def load_weights(path: str | Path, *, num_heads: int | None = None, bias_tol: float = 0.0) -> LoadedWeights:
    """Read ``M``/``R`` or ``nn.MultiheadAttention`` weights from a safetensors file.

    For MultiheadAttention weights the number of heads comes from ``num_heads`` or the file's
    metadata key ``num_heads``; the ``1/√d_h`` scaling is folded into ``M`` and the biases are
    handled by :func:`~paramsym.attention.rmhsa.from_multihead_attention`.
    """
    from safetensors import SafetensorError, safe_open

    from .rmhsa import check_qk_ov, from_multihead_attention

    path = Path(path)
    if not path.exists():
        raise InputFileError(f"weights file {str(path)!r} does not exist.")
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    except (SafetensorError, OSError) as exc:
        raise InputFileError(f"cannot read {str(path)!r} as safetensors: {exc}") from exc
    from ..models.checks import check_weight_tensors

    check_weight_tensors(tensors, f"--weights {str(path)!r}")  # integer or NaN/inf weights: named, before any work
    if "M" in tensors and "R" in tensors:
        M, R = check_qk_ov(tensors["M"], tensors["R"])
        offset = tensors.get("offset")
        return LoadedWeights(
            M, R, offset, "rmhsa", [f"read RMHSA matrices M, R {tuple(M.shape)}"], M.dtype
        )
    if "in_proj_weight" in tensors or "q_proj_weight" in tensors:
        heads = num_heads
        if heads is None and "num_heads" in meta:
            try:
                heads = int(meta["num_heads"])
            except ValueError as exc:
                raise InputFileError(f"{path}: metadata num_heads={meta['num_heads']!r} is not an integer.") from exc
        if heads is None:
            raise InputFileError(
                f"{path}: MultiheadAttention weights need the number of heads; store it as "
                "safetensors metadata {'num_heads': 'H'} or pass --num-heads H."
            )
        conv = from_multihead_attention(tensors, heads, bias_tol=bias_tol)
        stored = tensors["in_proj_weight" if "in_proj_weight" in tensors else "q_proj_weight"].dtype
        notes = conv.notes + [f"weights stored as {stored}, converted to float64"]
        return LoadedWeights(conv.M, conv.R, conv.offset, "multihead_attention", notes, stored)
    raise InputFileError(
        f"{path}: expected tensors 'M' and 'R' (RMHSA) or 'in_proj_weight' and 'out_proj.weight' "
        f"(nn.MultiheadAttention); found {sorted(tensors)}."
    )
