"""The orthogonal group of a pre-norm transformer's residual stream, acting on its canonical form.

An RMS norm without a learned scale commutes with every orthogonal ``M``:
``n(M x) = M x / rms(M x) = M n(x)`` (``‖M x‖ = ‖x‖``). In the canonical form
(:func:`paramsym.census.canonical.canonical_form`: norm scales and biases folded into the
readers, LayerNorm's centring folded into the writers and the norm made RMS, the LM head
untied) every stream norm is such a norm, and

    E' = E Mᵀ (embedding rows),  W_read' = W_read Mᵀ,  W_write' = M W_write,  b_write' = M b_write

(and ``M`` along the stream axis of the other input writers: a ViT's patch convolution's output
channels and bias, its CLS token and position embeddings; and of a mixture of experts' banks:
every expert's input columns and output rows)
leaves the outputs unchanged (the computational invariance behind rotation-based compression
and quantisation, SliceGPT/QuaRot): the stream ``x`` becomes ``M x`` everywhere, every reader
sees ``W Mᵀ M n(x)``. The group is ``O(D)``, dimension ``D(D−1)/2``. It is a symmetry of the
canonical model, not of the given weights (there ``γ``, ``β`` and the centring do not commute
with ``M``). The refusals are the canonical form's (post-norm models, base models, …).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from .canonical import canonical_form, weight_name
from .spaces import Spaces, derive_spaces

__all__ = ["rotate_residual", "rotate_canonical", "random_orthogonal", "rotation_dimension"]


def rotation_dimension(width: int) -> int:
    """``dim O(D) = D(D−1)/2``."""
    return width * (width - 1) // 2


def random_orthogonal(n: int, generator: torch.Generator, dtype: torch.dtype = torch.float64) -> Tensor:
    """A Haar-random orthogonal ``n × n`` matrix (QR of a Gaussian, signs fixed by ``diag R``)."""
    a = torch.randn(n, n, generator=generator, dtype=dtype)
    q, r = torch.linalg.qr(a)
    return q * torch.sign(torch.diagonal(r))[None, :]


def rotate_residual(model: nn.Module, inputs: Mapping[str, Any], output: Callable[[Any], Tensor],
                    generator: torch.Generator, M: Tensor | None = None,
                    spaces: Spaces | None = None) -> tuple[nn.Module, Tensor]:
    """An equivalent copy of ``model`` in canonical form (:func:`~paramsym.census.canonical.canonical_form`,
    embeddings untied) with its residual stream rotated by ``M``.

    Args:
        model: an HF model with an LM head (float64 recommended).
        inputs, output: a batch and the output map, used to trace the spaces.
        generator: draws ``M`` (Haar) when none is given.
        M: the orthogonal ``D × D`` matrix (new stream = ``M`` · old stream).
        spaces: the traced spaces (traced here when ``None``).

    Returns:
        ``(rotated model, M)``; the model's outputs equal the original's (up to rounding).

    Raises:
        SymmetryNotApplicableError: the canonical form's refusals (a post-norm model, a base model
            whose output is its final norm's, a norm feeding no linear map, an unrecognised scale).
    """
    sp = spaces if spaces is not None else derive_spaces(model, inputs, output)
    new = canonical_form(model, inputs, output, untie=True, spaces=sp)
    if M is None:
        M = random_orthogonal(sp.hidden_size, generator)
    return rotate_canonical(new, sp, M), M


def rotate_canonical(model: nn.Module, sp: Spaces, M: Tensor) -> nn.Module:
    """``model`` (canonical, untied; traced as ``sp`` before the fold: the module and weight names
    are the same) with its stream rotated in place by ``M``: ``E ↦ E Mᵀ``, ``W_read ↦ W_read Mᵀ``,
    ``W_write ↦ M W_write``, ``b_write ↦ M b_write``, and ``M`` along the stream axis of every other
    input writer (a patch convolution's output channels and bias, a CLS token's and position
    embeddings' rows) and of every expert bank (each expert's input columns and output rows).
    Returns ``model``."""
    mods = dict(model.named_modules())
    params = dict(model.named_parameters())
    M = M.to(next(iter(params.values())).dtype)
    with torch.no_grad():
        for e in sp.embeddings:
            params[e].copy_(params[e] @ M.T)
        for n, ax in {**sp.input_writers, **sp.bank_axes()}.items():  # patch convolution's output channels, CLS,
            # position rows; an expert bank's input columns (W Mᵀ) and output rows (M W): M along the stream axis
            params[n].copy_(torch.tensordot(M, params[n].movedim(ax, 0), dims=1).movedim(0, ax))
        for r in sp.readers:
            W = mods[r].weight
            if sp.layouts.get(weight_name(model, W), "out_in") == "out_in":
                W.copy_(W @ M.T)
            else:
                W.copy_(M @ W)
        for wname in sp.writers:
            mod = mods[wname]
            if sp.layouts.get(weight_name(model, mod.weight), "out_in") == "out_in":
                mod.weight.copy_(M @ mod.weight)
            else:
                mod.weight.copy_(mod.weight @ M.T)
            if getattr(mod, "bias", None) is not None:
                mod.bias.copy_(M @ mod.bias)
    return model.eval()
