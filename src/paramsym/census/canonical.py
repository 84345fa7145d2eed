"""The canonical form of a pre-norm transformer: norm scales and biases folded, LayerNorm made RMS.

A pre-norm transformer reads its residual stream ``x`` only through norms,
``N(x) = γ ⊙ n(x) + β``, whose outputs only linear maps read, ``W N(x) + b``. The canonical form
computes the same function with every norm at unit gain and no bias:

* **scale and bias** go into the readers: ``W N(x) + b = (W diag γ) n(x) + (W β + b)`` —
  ``W' = W diag γ``, ``b' = b + W β`` (a reader without a bias that needs one is given one:
  GPT-2's LM head, StableLM's q/k/v; the only place ``β`` can go while the stream rotates); a
  mixture-of-experts block's readers are its router and its expert bank, whose ``(E, 2h, D)``
  parameter takes ``diag γ`` on every expert's input columns (Mixtral);
* **LayerNorm → RMS norm.** A LayerNorm is ``n(x) = C x / rms(C x)`` with the centring
  ``C = I − 𝟙𝟙ᵀ/D``; an RMS norm is ``x / rms(x)``. The centring is **folded into the writers**
  (SliceGPT): every embedding row and every writer's output (weight rows, bias) is centred,
  ``E' = E C``, ``W_write' = C W_write``, ``b_write' = C b_write`` — and so is every other input
  writer (:attr:`~paramsym.census.tracing.Spaces.input_writers`: a Vision Transformer's patch
  convolution along its output channels with its bias, its CLS token and position embeddings; an
  expert bank's ``(E, D, h)`` output rows). The stream is a sum of those,
  so it lies in ``𝟙⊥`` and ``C x = x``: the LayerNorm's centring is the identity there and the
  module becomes an ``nn.RMSNorm`` (same ``ε``: ``var(x) = mean(x²)`` on ``𝟙⊥``). Centring is
  exact because every reader of the stream is a centred norm, which discards ``𝟙`` anyway.
  Why not keep an explicit centring (a LayerNorm at unit gain)? ``C`` commutes only with the
  orthogonal maps fixing ``𝟙`` (``O(D−1) × O(1)``), so the stream's group would shrink by
  ``D − 1`` dimensions; with the centring folded, the whole ``O(D)`` acts
  (:func:`paramsym.census.rotation.rotate_residual`). (The canonical weights are still a valid
  checkpoint of the LayerNorm class — on a centred stream LayerNorm at unit gain *is* the RMS
  norm — and so are their rotations by ``Q`` with ``Q 𝟙 = ±𝟙``; a general ``Q`` needs the RMS module.)
  A **parameter-free** LayerNorm (OLMo) has nothing to fold: it becomes a parameter-free
  ``nn.RMSNorm`` (its ``ε`` measured from its output where the module states none), the stream centred
  as above;
* **tied embeddings.** A tied LM head ``E`` reads the final norm; its scale can be folded only
  into an untied head, so with ``untie=False`` a tied model whose final scale is not 1 is
  refused (``untie=True`` gives the head its own copy ``E diag γ``). Centring ``E`` is harmless
  for a tied head: it reads ``n(x) ∈ 𝟙⊥``.

After the fold, ``E ↦ E Mᵀ``, ``W_read ↦ W_read Mᵀ``, ``W_write ↦ M W_write``, ``b_write ↦ M b_write``
leaves the outputs unchanged for every orthogonal ``M`` (``n(M x) = M n(x)``).

Refusals (:class:`~paramsym.errors.SymmetryNotApplicableError`, naming the norm and why): a
**post-norm** model (BERT, RoBERTa, DistilBERT: a norm's output is also the residual, so scaling
it is not absorbed by its readers — probed by scaling each norm by a random ``d`` and its
readers by ``1/d``); a norm whose output feeds no linear map (the post-norms of Gemma2 and OLMo2,
added to the stream; a base model's final norm — load it with its LM head; a width-``D`` q/k norm
over a whole projection); centred and uncentred norms mixed on one stream; an unrecognised scale
parametrisation; a norm bias that would have to go into an expert bank (no bias there); tied
embeddings with ``untie=False`` as above; and a canonical model whose output moved beyond rounding.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ..errors import NonFiniteError, SymmetryNotApplicableError
from ..targets.base import model_output
from .precision import compute_dtype, float64_throughout, rounding_tolerance
from .spaces import Spaces, derive_spaces
from .tracing import is_centred, out_tensor, same_tensor
from .verifying import PROBE_TOL

__all__ = ["canonical_form", "canonical_tolerance", "norm_centring", "readers_of", "weight_name"]


def canonical_tolerance(model: nn.Module, spaces: Spaces) -> float:
    """Relative output change allowed between a model and its canonical form: the census's one rule
    (:mod:`paramsym.census.precision`) in its a-priori form, ``rounding_tolerance`` of what the
    model computes in (float32 where it runs in float32 or its norms compute in float32 inside),
    ``L`` layers, width ``D`` (the fold is checked once, with nothing measured)."""
    dtype = compute_dtype(next(model.parameters()).dtype, spaces.float32_inside)
    return rounding_tolerance(dtype, len(spaces.layout.layers), spaces.hidden_size)


def norm_centring(model: nn.Module, sp: Spaces) -> dict[str, bool]:
    """Every norm over the stream (with parameters: traced; without, OLMo's: probed here by
    :func:`~paramsym.census.tracing.is_centred`) → whether it centres (a LayerNorm, which the
    canonical form replaces by an ``nn.RMSNorm``)."""
    mods = dict(model.named_modules())
    x = torch.randn(4, sp.hidden_size, generator=torch.Generator().manual_seed(0), dtype=next(model.parameters()).dtype)
    return {**{n: info.centred for n, info in sp.norms.items()}, **{n: is_centred(mods[n], x) for n in sp.free_norms}}


def weight_name(model: nn.Module, p: Tensor) -> str:
    """The name under which ``model`` holds the parameter ``p`` ("" if it does not)."""
    for n, q in model.named_parameters():
        if q is p:
            return n
    return ""


def readers_of(model: nn.Module, inputs: Mapping[str, Any], sp: Spaces) -> dict[str, list[str]]:
    """Norm module (with or without parameters) → the reader modules whose input is its output
    (a linear map or an expert bank; the whole output, its token-0 slice or its tokens flattened:
    a mixture-of-experts block's router and bank), found on ``model`` (a copy of the traced one:
    an untied LM head included) by one forward pass with hooks."""
    mods = dict(model.named_modules())
    rec: dict[str, Tensor] = {}
    nrec: dict[str, Tensor] = {}

    def keep(store: dict[str, Tensor], name: str, t: Tensor) -> None:  # a hook returning None keeps the output
        store.setdefault(name, t.detach())

    hooks = [mods[r].register_forward_hook(lambda m, a, o, r=r: keep(rec, r, a[0]))
             for r in [*sp.readers, *sp.banks] if r in mods]
    hooks += [mods[n].register_forward_hook(lambda m, a, o, n=n: keep(nrec, n, o[0] if isinstance(o, tuple) else o))
              for n in [*sp.norms, *sp.free_norms]]
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in hooks:
            h.remove()
    out: dict[str, list[str]] = {}
    for r, x in rec.items():
        for n, y in nrec.items():
            if same_tensor(x, y):
                out.setdefault(n, []).append(r)
    return out


def _rel(a: Tensor, b: Tensor) -> float:
    return float((a - b).norm() / b.norm())


def canonical_form(model: nn.Module, inputs: Mapping[str, Any],
                   output: Callable[[Any], Tensor] = model_output, *, untie: bool = False,
                   spaces: Spaces | None = None) -> nn.Module:
    """An equivalent copy of the pre-norm transformer ``model`` in canonical form (module docstring).

    Args:
        model: an HF model with an LM head, or an image classifier (a pre-norm ViT: its final norm
            folds into the classifier; float64 recommended; float32 works).
        inputs, output: a batch (``input_ids``, ≥ 2 tokens; e.g. random token ids from
            :func:`paramsym.census.walk.default_inputs`; ``pixel_values`` for a ViT) and the output
            map (default the logits),
            used to trace the spaces, probe the norms and verify the result.
        untie: give a tied LM head its own weight so the final norm's scale can be folded into it.
        spaces: the traced spaces of ``model`` (traced here when ``None``).

    Returns:
        The canonical copy, in eval mode: every stream norm an RMS norm at unit gain without bias
        (LayerNorms replaced by ``nn.RMSNorm``; RMS norms keep their class with the identity
        scale, ``w = 1`` or ``w = 0`` for ``γ = 1 + w``); outputs equal to
        :func:`canonical_tolerance`.

    Raises:
        NonFiniteError: a parameter holds NaN or inf (named).
        SymmetryNotApplicableError: the refusals of the module docstring, each naming the norm.
    """
    bad = [n for n, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    if bad:
        raise NonFiniteError(f"canonical form of {type(model).__name__}: the parameters {bad[:3]} hold NaN or inf "
                             f"({len(bad)} tensors); fix or reload the checkpoint.")
    sp = spaces if spaces is not None else derive_spaces(model, inputs, output)
    name = type(model).__name__
    if sp.output_in_stream:
        raise SymmetryNotApplicableError(f"canonical form of {name}: the model's output is a norm's output over the "
                                         "stream (a base model); load it with its LM head (head='causal-lm') so the "
                                         "final norm's scale can be folded into it.")
    if not sp.norms and not sp.free_norms:
        raise SymmetryNotApplicableError(f"canonical form of {name}: no norm over the residual stream was found.")
    kinds = norm_centring(model, sp)
    free = {n: kinds[n] for n in sp.free_norms}  # parameter-free norm → centred
    centred = set(kinds.values())
    if len(centred) > 1:
        raise SymmetryNotApplicableError(f"canonical form of {name}: the stream norms mix centred (LayerNorm) and "
                                         f"uncentred (RMS) ones {sorted([*sp.norms, *free])}; centring the stream would "
                                         "change what the RMS norms read.")
    odd = [n for n, info in sp.norms.items() if info.scale_offset is None]
    if odd:
        raise SymmetryNotApplicableError(f"canonical form of {name}: the norms {odd} compute neither n(x)·w nor "
                                         "n(x)·(1+w) (probed); their scales cannot be folded.")
    new = copy.deepcopy(model).eval()
    emb_in = new.get_input_embeddings()
    head = new.get_output_embeddings() if hasattr(new, "get_output_embeddings") else None
    tied = head is not None and head.weight is getattr(emb_in, "weight", None)
    if tied and untie:
        new.config.tie_word_embeddings = False
        head.weight = nn.Parameter(head.weight.detach().clone())
        tied = False
    mods = dict(new.named_modules())
    read = readers_of(new, inputs, sp)
    for n in [*sp.norms, *free]:
        if not read.get(n):
            raise SymmetryNotApplicableError(
                f"canonical form of {name}: the norm {n} (width {sp.hidden_size}) feeds no linear map, so its scale has "
                "nowhere to go (a post-norm whose output is added to the stream: OLMo2, Gemma2; a norm inside attention "
                "over a whole projection, such as a width-D q/k norm; or a final norm read by no LM head).")
    params = dict(new.named_parameters())
    with torch.no_grad():
        base = output(new(**inputs))
    gammas = {n: (params[info.weight] + info.scale_offset).detach().clone() for n, info in sp.norms.items()}
    _probe_pre_norm(new, inputs, output, sp, read, base, tied, head, name)
    if tied:
        final = [n for n, rs in read.items() if head in (mods[r] for r in rs)]
        if any(n in gammas and not torch.all(gammas[n] == 1) for n in final):  # a parameter-free norm: γ = 1
            raise SymmetryNotApplicableError(f"canonical form of {name}: the LM head is tied to the input embedding and "
                                             f"the final norm {final} has a scale ≠ 1, which only an untied head can "
                                             "absorb; pass untie=True (paramsym census --canonical always unties).")
    with torch.no_grad():
        for n, info in sp.norms.items():
            beta = params[info.bias].detach().clone() if info.bias else None
            for r in read[n]:
                _fold_into_reader(new, r, gammas[n], beta, sp, name)
            if info.centred:
                _set_module(new, n, _rms_like(mods[n], sp.hidden_size, params[info.weight], True, name))
            else:
                params[info.weight].fill_(1.0 - info.scale_offset)
        for n, c in free.items():  # nothing to fold; a parameter-free LayerNorm becomes a parameter-free RMS norm
            if c:
                _set_module(new, n, _rms_like(mods[n], sp.hidden_size, next(new.parameters()), False, name))
        if centred == {True}:  # after the fold: a tied head's b + E β uses the uncentred E
            _centre_stream(new, sp, mods, params)
        got = output(new(**inputs))
    err, tol = _rel(got, base), canonical_tolerance(model, sp)
    if not err <= tol:
        raise SymmetryNotApplicableError(f"canonical form of {name}: the folded model's output differs by {err:.2e} "
                                         f"relative (> {tol:.1e}); something reads the stream other than through its "
                                         f"norms (modules not followed: {[u['module'] for u in sp.unfollowed]}).")
    return new.eval()


def _probe_pre_norm(model, inputs, output, sp: Spaces, read, base, tied, head, name) -> None:
    """Refuse a norm whose scale its readers do not absorb: scale it by a random ``d ∈ [1.5, 2.5]``
    (``γ ↦ d⊙γ``, ``β ↦ d⊙β``) and its readers' input columns by ``1/d``; in a pre-norm model the
    output stays put (the readers are the norm's only consumers), in a post-norm one the residual
    carries the scaled output on."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    mods = dict(model.named_modules())
    g = torch.Generator().manual_seed(0)
    tol = PROBE_TOL if base.dtype == torch.float64 else 1e-4
    for n, info in sp.norms.items():
        if tied and any(mods[r] is head for r in read[n]):
            continue  # the head's columns are the embedding's: checked by the final verification instead
        d = 1.5 + torch.rand(info.size, generator=g, dtype=base.dtype)
        p = dict(params)
        p[info.weight] = d * (params[info.weight] + info.scale_offset) - info.scale_offset
        if info.bias:
            p[info.bias] = d * params[info.bias]
        for r in read[n]:
            w, ax = _read_axis(model, sp, r)
            p[w] = params[w] / _along(d, ax, params[w].dim())
        with torch.no_grad():
            err = _rel(output(functional_call(model, p, (), dict(inputs))), base)
        if err > tol:
            raise SymmetryNotApplicableError(
                f"canonical form of {name}: scaling the norm {n} by d and its readers {read[n]} by 1/d changes the output "
                f"by {err:.2e} relative: its output is also the residual stream (a post-norm model: BERT, RoBERTa, "
                "DistilBERT), so its scale cannot be folded; only permutations of the stream apply.")


def _layout(model: nn.Module, sp: Spaces, weight: Tensor) -> str:
    return sp.layouts.get(weight_name(model, weight), "out_in")


def _along(v: Tensor, axis: int, dim: int) -> Tensor:
    """``v`` shaped to broadcast along ``axis`` of a ``dim``-dimensional tensor."""
    return v.reshape([-1 if a == axis else 1 for a in range(dim)])


def _read_axis(model: nn.Module, sp: Spaces, reader: str) -> tuple[str, int]:
    """The weight through which the module ``reader`` reads the stream and its stream axis: a
    linear map's input axis (``1`` for ``out_in``, ``0`` for ``in_out``), an expert bank's
    ``(E, 2h, D)`` parameter's last axis."""
    if reader in sp.banks:
        return next((p, a) for p, a in sp.bank_axes().items() if p.startswith(reader + ".") and a == 2)
    w = weight_name(model, model.get_submodule(reader).weight)
    return w, 1 if sp.layouts.get(w, sp.layouts.get(sp.readers.get(reader, ""), "out_in")) == "out_in" else 0


def _centre_stream(model: nn.Module, sp: Spaces, mods, params) -> None:
    """``E ↦ E C`` (embedding rows), ``W ↦ C W``, ``b ↦ C b`` (writers' outputs, a convolutional input
    embedding's output channels), ``P ↦ P C`` (parameters added to the stream: CLS token, position
    embeddings), ``C = I − 𝟙𝟙ᵀ/D``."""
    for e in sp.embeddings:
        params[e].sub_(params[e].mean(1, keepdim=True))
    for n, ax in {**sp.input_writers, **{p: a for p, a in sp.bank_axes().items() if a == 1}}.items():
        params[n].sub_(params[n].mean(ax, keepdim=True))  # input writers; an expert bank's (E, D, h) output rows
    for w in sp.writers:
        mod = mods[w]
        ax = 0 if _layout(model, sp, mod.weight) == "out_in" else 1
        mod.weight.sub_(mod.weight.mean(ax, keepdim=True))
        if getattr(mod, "bias", None) is not None:
            mod.bias.sub_(mod.bias.mean())


def _fold_into_reader(model: nn.Module, reader: str, gamma: Tensor, beta: Tensor | None, sp: Spaces, name: str) -> None:
    """``b ↦ b + W β`` (with the original ``W``; a bias created where there is none), then ``W ↦ W diag γ``
    (along the stream axis: an expert bank's every expert at once)."""
    mod = model.get_submodule(reader)
    w, ax = _read_axis(model, sp, reader)
    W = dict(model.named_parameters())[w]
    if beta is not None and bool(beta.any()):
        shift = torch.tensordot(W, beta, dims=([ax], [0]))
        if reader in sp.banks or (getattr(mod, "bias", None) is None and not isinstance(mod, nn.Linear)):
            raise SymmetryNotApplicableError(f"canonical form of {name}: the norm bias has to go into the reader "
                                             f"{reader} ({type(mod).__name__}), which has no bias and is no nn.Linear.")
        if getattr(mod, "bias", None) is None:
            mod.bias = nn.Parameter(shift.clone())
        else:
            mod.bias.add_(shift)
    W.mul_(_along(gamma, ax, W.dim()))


def _rms_like(ln: nn.Module, width: int, like: Tensor, affine: bool, name: str) -> nn.Module:
    """An ``nn.RMSNorm`` of ``width`` with the LayerNorm's ``ε`` (device and dtype of ``like``): at
    unit gain (``affine``), or without parameters (replacing a parameter-free one)."""
    eps = getattr(ln, "eps", getattr(ln, "variance_epsilon", None))
    eps = float(eps) if eps is not None else _measured_eps(ln, width, like.dtype, name)
    return nn.RMSNorm(width, eps=eps, elementwise_affine=affine, device=like.device, dtype=like.dtype)


def _measured_eps(ln: nn.Module, width: int, dtype: torch.dtype, name: str) -> float:
    """The ``ε`` of a LayerNorm stating none (OLMo's parameter-free norm has it in its code): on
    centred rows ``x`` of mean square ``v ≈ 10⁻⁶`` (where ``ε`` matters), ``n(x) = x / √(v + ε)``
    has mean square ``v / (v + ε)``, so ``ε = v (1 / ms(n(x)) − 1)`` (computed in float64 throughout)."""
    z = torch.randn(4, width, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    z -= z.mean(-1, keepdim=True)
    x = (1e-3 * z / z.pow(2).mean(-1, keepdim=True).sqrt()).to(dtype)
    with torch.no_grad():
        y = out_tensor(float64_throughout(lambda: ln(x)))
    if y is None or y.shape != x.shape:
        raise SymmetryNotApplicableError(f"canonical form of {name}: the LayerNorm {type(ln).__name__} states no ε "
                                         "(eps / variance_epsilon) and its ε could not be measured; the RMS norm "
                                         "replacing it needs the same ε.")
    xc = x.double() - x.double().mean(-1, keepdim=True)
    v = xc.pow(2).mean(-1)
    return max(float((v * (1 / y.double().pow(2).mean(-1) - 1)).mean()), 0.0)


def _set_module(model: nn.Module, path: str, mod: nn.Module) -> None:
    parent, _, leaf = path.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, mod)
