"""The orthogonal group of an RMSNorm model's residual stream, as a transformation returning an equivalent model.

An RMS norm without a learned scale commutes with every orthogonal ``M``:
``n(M x) = M x / rms(M x) = M n(x)`` (``‖M x‖ = ‖x‖``). A learned scale ``γ`` breaks this, but
it can be **folded** into the linear maps that read the norm: ``W diag(γ) n(x) = W' n(x)``
with ``W' = W diag(γ)`` and the norm's scale set to 1. After folding every norm on the stream,

    E' = E Mᵀ (embedding rows),  W_read' = W_read diag(γ) Mᵀ,  W_write' = M W_write,  b_write' = M b_write

leaves the outputs unchanged (the computational invariance behind rotation-based compression
and quantisation): the stream ``x`` becomes ``M x`` everywhere, every reader sees
``W diag(γ) Mᵀ M n(x)``. The group is ``O(D)``, dimension ``D(D−1)/2``.

Requirements (refused with :class:`~paramsym.errors.SymmetryNotApplicableError` otherwise): every
norm on the stream is RMS-type (not centred) without a bias, and every norm's output is read only
by linear maps (so a base model whose output *is* the final norm's output is refused: load it with
its LM head). The learned scale is ``γ = w`` or ``γ = 1 + w`` (Gemma), whichever reproduces the
norm's output on a probe (:func:`paramsym.census.tracing.scale_form`, recorded as
:attr:`~paramsym.census.tracing.NormInfo.scale_offset`); the folded norm's weight is set so that ``γ = 1``. Tied input/output
embeddings are untied (the LM head absorbs the final norm's scale).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import SymmetryNotApplicableError
from .spaces import Spaces, derive_spaces

__all__ = ["rotate_residual", "random_orthogonal", "rotation_dimension"]


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
    """An equivalent copy of ``model`` with its norm scales folded and its residual stream rotated by ``M``.

    Args:
        model: an HF model with an LM head (float64 recommended).
        inputs, output: a batch and the output map, used to trace the spaces.
        generator: draws ``M`` (Haar) when none is given.
        M: the orthogonal ``D × D`` matrix (new stream = ``M`` · old stream).
        spaces: the traced spaces (traced here when ``None``).

    Returns:
        ``(rotated model, M)``; the model's outputs equal the original's (up to rounding).

    Raises:
        SymmetryNotApplicableError: a centred norm (LayerNorm) or a norm bias on the stream, a norm
            whose output is the model's output, or an unrecognised scale parametrisation.
    """
    sp = spaces if spaces is not None else derive_spaces(model, inputs, output)
    D = sp.hidden_size
    if sp.output_in_stream:
        raise SymmetryNotApplicableError("residual rotation: the model's output is a norm's output over the stream (a base "
                                         "model); load it with its LM head (head='causal-lm') so the final norm's scale can "
                                         "be folded into it.")
    bad = [n for n, info in sp.norms.items() if info.centred or info.bias is not None]
    if bad:
        raise SymmetryNotApplicableError(f"residual rotation needs RMS norms without bias on the stream; {bad} are centred "
                                         "(LayerNorm) or carry a bias (only permutations of the stream apply there).")
    if M is None:
        M = random_orthogonal(D, generator)
    new = copy.deepcopy(model)
    if getattr(new.config, "tie_word_embeddings", False):
        new.config.tie_word_embeddings = False
        out_emb = new.get_output_embeddings()
        if out_emb is not None and out_emb.weight is new.get_input_embeddings().weight:
            out_emb.weight = nn.Parameter(out_emb.weight.detach().clone())
    params = dict(new.named_parameters())
    mods = dict(new.named_modules())
    M = M.to(next(iter(params.values())).dtype)
    readers_of: dict[str, list[str]] = {}
    rec: dict[str, Tensor] = {}
    nrec: dict[str, Tensor] = {}

    def keep(store: dict[str, Tensor], name: str, t: Tensor) -> None:  # a hook returning None keeps the output
        store.setdefault(name, t.detach())

    hooks = [mods[r].register_forward_hook(lambda m, a, o, r=r: keep(rec, r, a[0])) for r in sp.readers if r in mods]
    hooks += [mods[n].register_forward_hook(lambda m, a, o, n=n: keep(nrec, n, o[0] if isinstance(o, tuple) else o))
              for n in sp.norms]
    # re-find which norm each reader reads on the copy (the lm head of an untied model included)
    try:
        with torch.no_grad():
            new(**inputs)
    finally:
        for h in hooks:
            h.remove()
    for r, x in rec.items():
        for n, y in nrec.items():
            if (x.shape == y.shape and torch.equal(x, y)) or (x.dim() == y.dim() - 1 and torch.equal(x, y[:, 0])):
                readers_of.setdefault(n, []).append(r)
    lm = new.get_output_embeddings() if hasattr(new, "get_output_embeddings") else None
    with torch.no_grad():
        for n, info in sp.norms.items():
            w = params[info.weight]
            if info.scale_offset is None:
                raise SymmetryNotApplicableError(f"residual rotation: the norm {n} is neither x/rms(x)·w nor x/rms(x)·(1+w) "
                                                 "(probed); its scale cannot be folded.")
            gamma = (w + info.scale_offset).clone()
            for r in readers_of.get(n, []):
                W = mods[r].weight
                if sp.layouts.get(_pname(new, W), "out_in") == "out_in":
                    W.mul_(gamma[None, :])
                else:
                    W.mul_(gamma[:, None])
            if not readers_of.get(n) and not (lm is not None and n in nrec):
                raise SymmetryNotApplicableError(f"residual rotation: the norm {n} feeds no linear map to fold its scale into.")
            w.fill_(1.0 - info.scale_offset)
        for e in sp.embeddings:
            params[e].copy_(params[e] @ M.T)
        for r in sp.readers:
            W = mods[r].weight
            if sp.layouts.get(_pname(new, W), "out_in") == "out_in":
                W.copy_(W @ M.T)
            else:
                W.copy_(M @ W)
        for wname in sp.writers:
            mod = mods[wname]
            if sp.layouts.get(_pname(new, mod.weight), "out_in") == "out_in":
                mod.weight.copy_(M @ mod.weight)
            else:
                mod.weight.copy_(mod.weight @ M.T)
            if getattr(mod, "bias", None) is not None:
                mod.bias.copy_(M @ mod.bias)
    return new.eval(), M


def _pname(model: nn.Module, p: Tensor) -> str:
    for n, q in model.named_parameters():
        if q is p:
            return n
    return ""
