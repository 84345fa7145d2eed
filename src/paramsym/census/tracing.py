"""Tracing: what each module with parameters computes, from one recorded forward pass.

:func:`trace_roles` runs the model once with forward hooks and classifies every module with
parameters by its recorded input and output (never by its name): an ``nn.Embedding``; a
*linear* map (output ``x Wᵀ + b`` → layout ``out_in``; ``x W + b`` → ``in_out``, GPT-2's
``Conv1D``); a *norm* over the last axis (*centred* — LayerNorm — when ``x ↦ x + c·1`` leaves
its output unchanged, RMS-type otherwise; its scale parametrisation ``w`` or ``1 + w`` and
whether it computes in float32 inside: :func:`scale_form`). The residual stream (width ``D`` =
the input embedding's: an ``nn.Embedding``'s width or a patch convolution's output channels) is
*read* by the linear maps whose input is a norm's output (or its token-0 slice), *written* by the
other linear maps with ``D`` outputs, and at the input by the embeddings and the *input writers*
(:attr:`Spaces.input_writers`: a patch convolution, parameters whose rows are added to the stream).
:func:`dataflow` says, with every reader's output an autograd leaf, which reader features reach
each writer at the same token and which reach later tokens. The rest of the derivation (hypotheses, probes) is in
:mod:`paramsym.census.proposing` and :mod:`paramsym.census.verifying`; :func:`paramsym.census.spaces.derive_spaces`
puts them together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from ..errors import TraceError
from ..models.adapters import ModelLayout, Projection
from .precision import float64_throughout

__all__ = ["NormInfo", "Spaces", "Roles", "trace_roles", "head_count", "activation_name", "scale_form", "ScaleForm", "dataflow",
           "is_centred", "same_tensor", "pre_norm", "projection", "common_prefix", "first_tensor", "out_tensor"]

_HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads")
_ACT_KEYS = ("hidden_act", "hidden_activation", "activation_function", "activation")


@dataclass(frozen=True)
class NormInfo:
    """A norm over the residual stream: parameter names, centred (LayerNorm) or RMS-type."""

    module: str
    weight: str
    bias: str | None
    centred: bool
    size: int
    float32_inside: bool = False  # computes in float32 even for float64 inputs (HF's RMSNorm upcast)
    scale_offset: float | None = 0.0  # γ = weight + scale_offset (1: Gemma's 1 + w; None: unrecognised)


@dataclass
class Spaces:
    """What :func:`derive_spaces` found.

    Attributes:
        layout: per-layer attention/FFN projections (as the adapters give them).
        hidden_size: the residual-stream width ``D``.
        stream: ``(parameter name, axis)`` pairs indexed by the residual stream.
        embeddings: embedding weights (rows = tokens/positions, columns = the stream).
        norms: norms over the stream, by module name.
        readers, writers: linear modules reading / writing the stream, by module name → weight name.
        layouts: linear modules' storage layout (``out_in`` / ``in_out``) by weight name.
        unfollowed: modules with parameters that no role fits (module, type, why).
        output_in_stream: the compared output is a norm's output over the stream (a base model's
            ``last_hidden_state``): a stream permutation permutes it too (equivariance).
        reader_norm: reader module → the norm (with or without parameters) whose output it reads.
        direct_readers: readers whose input is the stream itself (post-norm models: OLMo2).
        free_norms: norms over the stream without parameters (OLMo's LayerNorm without scale).
        banks: mixture-of-experts banks (Mixtral's ``experts``: 3-D ``(E, 2h, D)`` and ``(E, D, h)``).
        refused: ``{module, kind, reason}`` of entries the tracer refuses (the census lists them).
        input_writers: parameters other than ``nn.Embedding`` rows written into the stream at the
            input → their stream axis: a convolutional input embedding's weight (output channels,
            axis 0) and bias (ViT's patch projection), parameters whose rows are added to or
            concatenated with the stream (ViT's CLS token and position embeddings, last axis).
    """

    layout: ModelLayout
    hidden_size: int
    stream: list[tuple[str, int]]
    embeddings: list[str]
    norms: dict[str, NormInfo]
    readers: dict[str, str]
    writers: dict[str, str]
    layouts: dict[str, str]
    unfollowed: list[dict[str, Any]] = field(default_factory=list)
    output_in_stream: bool = False
    reader_norm: dict[str, str] = field(default_factory=dict)  # reader → the norm whose output it takes
    direct_readers: list[str] = field(default_factory=list)  # readers of the stream itself (post-norm: OLMo2)
    free_norms: list[str] = field(default_factory=list)  # stream norms without parameters (OLMo)
    banks: list[str] = field(default_factory=list)  # mixture-of-experts banks (3-D parameters: Mixtral)
    refused: list[dict[str, Any]] = field(default_factory=list)  # entries the tracer refuses, with the reason
    islands: bool = False  # measured: the float64 output differs from the same forward in float64 throughout
    input_writers: dict[str, int] = field(default_factory=dict)

    @property
    def float32_inside(self) -> bool:
        """Some part of the model computes in float32 even in a float64 run: a norm on the stream
        (probed per norm) or anything else (``islands``: softmax, parameter-free norms), so its
        outputs are exact only to float32 rounding."""
        return self.islands or any(n.float32_inside for n in self.norms.values())

    def bank_axes(self) -> dict[str, int]:
        """Expert-bank parameter → its stream axis: ``2`` for the ``(E, 2h, D)`` bank reading the
        stream (each expert's input columns), ``1`` for the ``(E, D, h)`` one writing it (output rows)."""
        pre = tuple(b + "." for b in self.banks)
        return {n: a for n, a in self.stream if n.startswith(pre)} if pre else {}

    def stream_axes(self) -> dict[str, list[int]]:
        """Parameter name → its axes indexed by the residual stream."""
        out: dict[str, list[int]] = {}
        for n, a in self.stream:
            out.setdefault(n, []).append(a)
        return out


def head_count(config: Any) -> int:
    """The number of query heads from an HF config (``num_attention_heads`` or an alias).

    Raises:
        TraceError: no known key.
    """
    for k in _HEAD_KEYS:
        v = getattr(config, k, None)
        if isinstance(v, int) and v > 0:
            return v
    raise TraceError(f"config {type(config).__name__}: no head count under any of {list(_HEAD_KEYS)}; the tracer needs "
                     "the number of query heads.")


def activation_name(config: Any) -> str:
    """The FFN activation's HF name from the config (``"unknown"`` when absent)."""
    for k in _ACT_KEYS:
        v = getattr(config, k, None)
        if isinstance(v, str):
            return v
    return "unknown"


def first_tensor(args: tuple, kwargs: dict) -> Tensor | None:
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, Tensor):
            return a
    return None


def out_tensor(out: Any) -> Tensor | None:
    if isinstance(out, Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], Tensor):
        return out[0]
    return None


def _close(a: Tensor, b: Tensor) -> bool:
    """Equal to rounding: 1e-9 relative in float64, 1e-5 in lower precision."""
    tol = 1e-9 if b.dtype == torch.float64 else 1e-5
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=tol, atol=tol * (1 + float(b.detach().abs().max()))))


def is_centred(mod: nn.Module, x: Tensor) -> bool:
    """Whether the norm module ``mod`` centres its input (a LayerNorm): its output on ``x`` does not
    change under ``x ↦ x + 1.5·𝟙`` (to :func:`_close` at ``x``'s precision: ``x + 1.5`` is rounded
    in it), computed in float64 throughout (a norm computing in float32 inside, Cohere's or OLMo's,
    is still centred)."""
    with torch.no_grad():
        y1, y2 = (out_tensor(float64_throughout(lambda z=z: mod(z))) for z in (x, x + 1.5))
    return y1 is not None and y2 is not None and _close(y2.to(x.dtype), y1.to(x.dtype))


class ScaleForm(NamedTuple):
    """How a norm applies its learned scale (:func:`scale_form`).

    Attributes:
        offset: the scale is ``γ = w + offset`` — ``0`` (``w``) or ``1`` (``1 + w``, Gemma); ``None``
            when neither reproduces the norm's output (to 1e-5 relative).
        float32_inside: a float64 input misses the float64 reference by more than 1e-11 (the
            module computes in float32 inside; HF's RMSNorm upcasts).
        scale_exact: scaling ``γ`` by ``d`` (and the bias) scales the float64 output by ``d`` to
            1e-12 (false where the scale itself is multiplied in float32: Gemma's ``(1 + w)``).
    """

    offset: float | None
    float32_inside: bool
    scale_exact: bool


def scale_form(mod: nn.Module, w: Tensor, b: Tensor | None, centred: bool | None = None) -> ScaleForm:
    """Probe the norm module ``mod`` (weight ``w``, bias ``b``; ``centred=None`` tries both) on a
    random ``4 × n`` input in ``w``'s dtype: ``y = n(x) ⊙ (w + offset) + b`` with
    ``n(x) = x̃ / rms(x̃)``, ``x̃ = x − mean(x)`` when centred (:class:`ScaleForm`)."""
    from torch.func import functional_call

    g = torch.Generator().manual_seed(0)
    x = 1e3 * torch.randn(4, w.numel(), generator=g, dtype=w.dtype)
    with torch.no_grad():
        y = out_tensor(mod(x))
    if y is None:
        return ScaleForm(None, False, False)
    found: tuple[float, float] | None = None
    for c in ((centred,) if centred is not None else (True, False)):
        xc = x - x.mean(-1, keepdim=True) if c else x
        n = xc / xc.pow(2).mean(-1, keepdim=True).sqrt()
        for off in (0.0, 1.0):
            ref = n * (w.detach() + off) + (0 if b is None else b.detach())
            err = float((y - ref).norm() / ref.norm())
            if err < 1e-5 and (found is None or err < found[1]):
                found = (off, err)
    if found is None:  # neither form: conservatively treated as computing in float32 inside
        return ScaleForm(None, w.dtype == torch.float64, False)
    off, err = found
    d = 1.5 + torch.rand(w.numel(), generator=g, dtype=w.dtype)
    new = {"weight": d * (w.detach() + off) - off, **({"bias": d * b.detach()} if b is not None else {})}
    with torch.no_grad():
        y2 = out_tensor(functional_call(mod, new, (x,)))
    exact = y2 is not None and float((y2 - d * y).norm() / (d * y).norm()) < 1e-12
    return ScaleForm(off, w.dtype == torch.float64 and err > 1e-11, exact)


@dataclass
class Roles:
    """What one recorded forward pass says about the modules (:func:`trace_roles`)."""

    base: Tensor  # the compared output
    hidden_size: int
    stream: list[tuple[str, int]]
    embeddings: list[str]
    norms: dict[str, tuple[NormInfo, Tensor]]  # module -> (info, recorded output)
    stream_norms: dict[str, NormInfo]
    linears: dict[str, tuple[dict[str, str], str, Tensor, Tensor]]  # module -> (param names, layout, x, y)
    layouts: dict[str, str]
    readers: dict[str, str]
    writers: dict[str, str]
    reader_norm: dict[str, str]
    unfollowed: list[dict[str, Any]] = field(default_factory=list)
    direct_readers: list[str] = field(default_factory=list)  # read the stream itself (post-norm: OLMo2)
    free_norms: dict[str, Tensor] = field(default_factory=dict)  # norms without parameters (OLMo) -> output
    over_reader: dict[str, str] = field(default_factory=dict)  # norm -> the reader whose whole output it normalises
    banks: dict[str, dict[str, str]] = field(default_factory=dict)  # expert banks: module -> {"gate_up", "down"}
    input_writers: dict[str, int] = field(default_factory=dict)


def _input_width(model: nn.Module, mods: Mapping[str, nn.Module]) -> tuple[int, str | None]:
    """The stream width ``D`` from the input embedding (``get_input_embeddings()``): an
    ``nn.Embedding``'s width, or the output channels of the one convolution inside it (a patch
    embedding: each output channel is a stream coordinate, so its weight rows and bias write the
    stream); with the convolution's module name (``None`` for an ``nn.Embedding``).

    Raises:
        TraceError: neither.
    """
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if isinstance(emb, nn.Embedding):
        return emb.embedding_dim, None
    convs = [] if not isinstance(emb, nn.Module) else [m for m in emb.modules() if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d))]
    if len(convs) != 1:
        raise TraceError(f"{type(model).__name__}: the input embedding (get_input_embeddings(): {type(emb).__name__}) is "
                         f"neither an nn.Embedding nor holds exactly one convolution (found {len(convs)}); the tracer "
                         "takes the residual-stream width from it.")
    name = next(n for n, m in mods.items() if m is convs[0])
    return convs[0].out_channels, name


def _added_to_stream(model: nn.Module, inputs: Mapping[str, Any], pname: str, norm: str, x0: Tensor) -> bool:
    """Whether the rows (last axis, width ``D``) of the parameter ``pname`` are added to (or
    concatenated with) the stream unchanged: with ``P ↦ P + Δ`` (random ``Δ``) the input of the first
    stream norm ``norm`` (recorded ``x0``) changes, token by token, either not at all or by exactly
    one row of ``Δ`` (to rounding) — and somewhere by one."""
    from torch.func import functional_call

    P = dict(model.named_parameters())[pname].detach()
    g = torch.Generator().manual_seed(7)
    delta = (1.0 + float(P.abs().max())) * torch.randn(P.shape, generator=g, dtype=P.dtype)
    got: list[Tensor] = []
    h = model.get_submodule(norm).register_forward_pre_hook(
        lambda m, a, k: got.append(first_tensor(a, k).detach()) if not got else None, with_kwargs=True)
    try:
        with torch.no_grad():
            functional_call(model, {pname: P + delta}, (), dict(inputs))
    finally:
        h.remove()
    if not got or got[0].shape != x0.shape:
        return False
    diff, rows = (got[0] - x0).reshape(-1, x0.shape[-1]), delta.reshape(-1, x0.shape[-1])
    tol = (1e-9 if P.dtype == torch.float64 else 1e-5) * (1.0 + float(delta.abs().max()) + float(x0.abs().max()))
    dist = torch.cdist(diff, torch.cat([rows, torch.zeros_like(rows[:1])]), p=float("inf")).min(dim=1).values
    return bool((dist <= tol).all()) and bool((diff.abs().amax(1) > tol).any())


def trace_roles(model: nn.Module, inputs: Mapping[str, Any], output: Callable[[Any], Tensor]) -> Roles:
    """Classify the modules and place the residual stream (module docstring).

    The stream's input writers are the input embedding — an ``nn.Embedding`` (rows = tokens) or
    a convolution (output channels = the stream: a patch embedding) — and parameters whose rows
    the first stream norm's input receives unchanged (:func:`_added_to_stream`: a CLS token,
    learned position embeddings held as a parameter).

    Raises:
        TraceError: the input embedding is neither an ``nn.Embedding`` nor holds one convolution.
    """
    named = dict(model.named_parameters())
    pid = {id(p): n for n, p in named.items()}
    mods = dict(model.named_modules())
    records: dict[str, tuple[Tensor, Tensor]] = {}
    hooks = []

    def recorder(name: str):
        def hook(mod, args, kwargs, out):
            x, y = first_tensor(args, kwargs), out_tensor(out)
            if x is not None and y is not None and name not in records:
                records[name] = (x.detach().clone(), y.detach().clone())  # clones: models add in place (Falcon)
        return hook

    D, conv = _input_width(model, mods)
    own = {name: {n: p for n, p in m.named_parameters(recurse=False)} for name, m in mods.items()}
    own = {k: v for k, v in own.items() if v}
    free = [n for n, m in mods.items() if n and n not in own and not any(True for _ in m.children())]
    layer_list = _layers(mods)
    for name in [*own, *free, *layer_list]:
        hooks.append(mods[name].register_forward_hook(recorder(name), with_kwargs=True))
    try:
        with torch.no_grad():
            base = output(model(**inputs))
    finally:
        for h in hooks:
            h.remove()

    embeddings, norms, linears, layouts, unfollowed = [], {}, {}, {}, []
    input_writers: dict[str, int] = {}
    added: dict[str, list[str]] = {}  # module -> its parameters that may be added to the stream (probed below)
    banks: dict[str, dict[str, str]] = {}
    for name, ps in own.items():
        mod = mods[name]
        canon = {k: pid[id(p)] for k, p in ps.items()}
        rec = records.get(name)
        if name == conv:  # output channels = stream coordinates
            input_writers.update({canon[k]: 0 for k in ("weight", "bias") if k in canon})
            continue
        if isinstance(mod, nn.Embedding):
            if mod.embedding_dim == D:
                embeddings.append(canon["weight"])
            else:
                unfollowed.append({"module": name, "type": type(mod).__name__, "why": f"embedding width {mod.embedding_dim} ≠ {D}"})
            continue
        if rec is not None and _bank(ps, rec, D) is not None:
            banks[name] = {role: canon[k] for role, k in _bank(ps, rec, D).items()}
            continue
        if set(ps) - {"weight", "bias"} or "weight" not in ps:
            cand = [canon[k] for k, p in ps.items() if p.dim() >= 2 and p.shape[-1] == D]
            if cand and len(cand) == len(ps):
                added[name] = cand
                continue
            unfollowed.append({"module": name, "type": type(mod).__name__, "why": f"parameters {sorted(ps)}"})
            continue
        if rec is None:
            unfollowed.append({"module": name, "type": type(mod).__name__, "why": "not called in the forward pass"})
            continue
        x, y = rec
        W, b = ps["weight"], ps.get("bias")
        if W.dim() == 2 and x.is_floating_point():
            lay = None
            if x.shape[-1] == W.shape[1] and _close(y, x @ W.T + (0 if b is None else b)):
                lay = "out_in"
            elif x.shape[-1] == W.shape[0] and _close(y, x @ W + (0 if b is None else b)):
                lay = "in_out"
            if lay is not None:
                linears[name] = (canon, lay, x, y)
                layouts[canon["weight"]] = lay
                continue
        if W.dim() == 1 and x.is_floating_point() and x.shape[-1] == W.shape[0] and y.shape == x.shape:
            centred = is_centred(mod, x)
            form = scale_form(mod, W, b, centred)
            info = NormInfo(name, canon["weight"], canon.get("bias"), centred, W.shape[0],
                            x.dtype == torch.float64 and form.float32_inside, form.offset)
            norms[name] = (info, y)
            continue
        unfollowed.append({"module": name, "type": type(mod).__name__,
                           "why": "neither an embedding, a linear map (output ≠ x Wᵀ + b) nor a norm over the last axis"})

    free_outs = {n: records[n][1] for n in free if n in records and _free_norm(*records[n], D)}
    states = _stream_states(records, layer_list, D)
    inside: set[str] = set()  # D-wide norms over a reader's output (OLMo2's q/k norms over the whole projection)
    for _ in range(2):
        stream_norms = {n: info for n, (info, _) in norms.items() if info.size == D and n not in inside}
        norm_outs = {**{n: norms[n][1] for n in stream_norms}, **free_outs}
        readers, writers, reader_norm, direct = _place(linears, norm_outs, states, D)
        outs = [linears[r][3] for r in readers]
        inside = {n for n in stream_norms if any(same_tensor(records[n][0], y) for y in outs)}
        if not inside & set(stream_norms):
            break
    for name in sorted(set(linears) - set(readers) - set(writers)):
        y = linears[name][3]
        unfollowed.append({"module": name, "type": type(mods[name]).__name__,
                           "why": f"a linear map neither reading the stream (its input is no norm's output and no "
                                  f"state of the stream) nor writing it (out features {y.shape[-1]} ≠ {D})"})
    first = next((n for n in records if n in stream_norms), None)  # records keep the call order
    for name, cand in added.items():
        ok = first is not None and all(_added_to_stream(model, inputs, c, first, records[first][0]) for c in cand)
        if ok:
            input_writers.update({c: named[c].dim() - 1 for c in cand})
        else:
            unfollowed.append({"module": name, "type": type(mods[name]).__name__,
                               "why": f"parameters {sorted(own[name])} not added to the stream row by row"})

    stream: list[tuple[str, int]] = [(w, 1) for w in embeddings] + list(input_writers.items())
    for info in stream_norms.values():
        stream += [(info.weight, 0)] + ([(info.bias, 0)] if info.bias else [])
    for w in readers.values():
        stream.append((w, 1 if layouts[w] == "out_in" else 0))
    for name, w in writers.items():
        stream.append((w, 0 if layouts[w] == "out_in" else 1))
        b = linears[name][0].get("bias")
        if b is not None:
            stream.append((b, 0))
    for bank in banks.values():  # (E, 2h, D) reads the stream on its last axis, (E, D, h) writes it on axis 1
        stream += [(bank["gate_up"], 2), (bank["down"], 1)]
    over = {n: r for n in norms for r in readers if records[n][0].shape == linears[r][3].shape
            and torch.equal(records[n][0], linears[r][3])}
    return Roles(base, D, stream, embeddings, norms, stream_norms, linears, layouts, readers, writers, reader_norm,
                 unfollowed, sorted(direct), free_outs, over, banks, input_writers)


def _bank(ps: dict[str, Tensor], rec: tuple[Tensor, Tensor], D: int) -> dict[str, str] | None:
    """A mixture-of-experts bank (Mixtral's ``experts``): two 3-D parameters over ``E`` experts,
    ``(E, 2h, D)`` reading the stream (each expert's fused ``[gate | up]`` rows) and ``(E, D, h)``
    writing it, with a recorded ``D``-wide input and output. ``{"gate_up": name, "down": name}``
    (parameter names within the module), else ``None``; which half is ``up`` is verified later."""
    x, y = rec
    if len(ps) != 2 or any(p.dim() != 3 for p in ps.values()) or x.shape[-1] != D or y.shape[-1] != D:
        return None
    (a, pa), (b, pb) = ps.items()
    for (n1, p1), (n2, p2) in (((a, pa), (b, pb)), ((b, pb), (a, pa))):
        E, two_h, d_in = p1.shape
        if p2.shape == (E, D, two_h // 2) and d_in == D and two_h % 2 == 0:
            return {"gate_up": n1, "down": n2}
    return None


def _layers(mods: dict[str, nn.Module]) -> list[str]:
    """The children of the longest ``nn.ModuleList`` (the decoder layers), by module name."""
    lists = [(n, m) for n, m in mods.items() if isinstance(m, nn.ModuleList)]
    if not lists:
        return []
    prefix, lst = max(lists, key=lambda nm: len(nm[1]))
    return [f"{prefix}.{i}" if prefix else str(i) for i in range(len(lst))]


def same_tensor(x: Tensor, y: Tensor) -> bool:
    """``x`` is ``y`` (bit for bit), or its token-0 slice, or its tokens flattened (OPT, MoE blocks)."""
    if x.shape == y.shape:
        return torch.equal(x, y)
    if x.dim() == y.dim() - 1 and x.shape == y[:, 0].shape and torch.equal(x, y[:, 0]):
        return True
    return x.dim() == 2 and y.dim() == 3 and x.numel() == y.numel() and torch.equal(x, y.reshape(x.shape))


def _free_norm(x: Tensor, y: Tensor, D: int) -> bool:
    """A module without parameters computing a norm over the last axis of width ``D`` without scale
    (OLMo): every row of ``y`` points along its (centred, for a LayerNorm) input row — cosine
    ≥ 1 − 1e-6, whatever the module's ``ε`` — with root mean square in ``[1 − 10⁻³, 1]`` (``ε``
    at most ~10⁻³ of the row's variance); the identity (``y = x``, dropout in eval) is none."""
    if not (x.is_floating_point() and x.shape == y.shape and x.shape[-1] == D) or torch.equal(x, y):
        return False
    rms = y.pow(2).mean(-1).sqrt()
    if not bool(((rms >= 1 - 1e-3) & (rms <= 1 + 1e-6)).all()):
        return False
    for c in (True, False):
        xc = x - x.mean(-1, keepdim=True) if c else x
        cos = (xc * y).sum(-1) / (xc.norm(dim=-1) * y.norm(dim=-1)).clamp_min(torch.finfo(y.dtype).tiny)
        if bool((cos >= 1 - 1e-6).all()):
            return True
    return False


def _stream_states(records: dict[str, tuple[Tensor, Tensor]], layers: list[str], D: int) -> list[Tensor]:
    """The residual stream's values: each layer's input ``h``, and ``h + y`` for every ``D``-wide output
    ``y`` recorded inside the layer (the stream after its first block; post-norm models add a norm's
    output, OLMo2)."""
    out = []
    for name in layers:
        if name not in records or records[name][0].shape[-1] != D:
            continue
        h = records[name][0]
        out.append(h)
        out += [h + y for m, (_, y) in records.items() if m.startswith(name + ".") and y.shape == h.shape]
    return out


def _place(linears, norm_outs: dict[str, Tensor], states: list[Tensor], D: int):
    """Readers (input a norm's output — ``reader_norm`` — or, in a post-norm model, a state of the stream
    itself — ``direct``) and writers (the other linear maps with ``D`` outputs)."""
    readers, writers, reader_norm, direct = {}, {}, {}, set()
    for name, (canon, _lay, x, y) in linears.items():
        src = next((n for n, o in norm_outs.items() if x is o or same_tensor(x, o)), None)
        if src is not None:
            readers[name] = canon["weight"]
            reader_norm[name] = src
        elif x.shape[-1] == D and any(same_tensor(x, h) for h in states):
            readers[name] = canon["weight"]
            direct.add(name)
        elif y.shape[-1] == D:
            writers[name] = canon["weight"]
    return readers, writers, reader_norm, direct


def pre_norm(consumers: set[str], readers: dict[str, str], reader_norm: dict[str, str], prefix: str) -> str | None:
    """The norm inside the layer feeding exactly ``consumers`` (and nothing else that reads the stream)."""
    srcs = {reader_norm.get(c) for c in consumers}
    if len(srcs) != 1 or None in srcs:
        return None
    n = srcs.pop()
    if not n.startswith(prefix) or {r for r, s in reader_norm.items() if s == n} != consumers:
        return None
    return n


def dataflow(model: nn.Module, inputs: Mapping[str, Any], readers: dict[str, str], writers: dict[str, str]) -> dict:
    """Per writer: which reader output features at the last token reach its input at the last token
    (``local``), and which at token 0 reach its input at later tokens (``cross``: keys and values
    do, queries do not — also under a causal mask), with every reader's output an autograd leaf."""
    mods = dict(model.named_modules())
    leaves: dict[str, Tensor] = {}
    w_in: dict[str, Tensor] = {}
    hooks = []

    def leaf_hook(name):
        def hook(mod, args, out):
            if name in leaves:
                return None
            first = out_tensor(out)
            t = first.detach().requires_grad_(True)
            leaves[name] = t
            return t if isinstance(out, Tensor) else type(out)((t, *out[1:]))  # a router's (logits, ...) tuple
        return hook

    def in_hook(name):
        def hook(mod, args, kwargs):
            x = first_tensor(args, kwargs)
            if name not in w_in and x is not None:
                w_in[name] = x
        return hook

    for r in readers:
        hooks.append(mods[r].register_forward_hook(leaf_hook(r)))
    for w in writers:
        hooks.append(mods[w].register_forward_pre_hook(in_hook(w), with_kwargs=True))
    req = {n: p.requires_grad for n, p in model.named_parameters()}
    try:
        for p in model.parameters():
            p.requires_grad_(False)
        with torch.enable_grad():
            model(**inputs)
            gen = torch.Generator().manual_seed(1234)
            names = list(leaves)
            out = {}
            B, T = inputs["input_ids"].shape[:2] if "input_ids" in inputs else \
                next((t.shape[:2] for t in leaves.values() if t.dim() == 3), (0, 0))  # pixel_values: from the tokens
            for w, x in w_in.items():
                if x.dim() == 2 and x.shape[0] == B * T:
                    x = x.reshape(B, T, -1)  # models that flatten tokens before a linear map (OPT's FFN)
                if x.dim() < 3 or not x.requires_grad:
                    out[w] = {"local": {}, "cross": {}, "uses": []}
                    continue
                r0 = torch.randn(x[:, -1].shape, generator=gen, dtype=x.dtype)
                r1 = torch.randn(x[:, 1:].shape, generator=gen, dtype=x.dtype)
                g0 = torch.autograd.grad((x[:, -1] * r0).sum(), [leaves[n] for n in names], retain_graph=True,
                                         allow_unused=True)
                g1 = torch.autograd.grad((x[:, 1:] * r1).sum(), [leaves[n] for n in names], retain_graph=True,
                                         allow_unused=True)
                g0 = [g if g is None or g.dim() != 2 else g.reshape(B, T, -1) for g in g0]
                g1 = [g if g is None or g.dim() != 2 else g.reshape(B, T, -1) for g in g1]
                local = {n: (g[:, -1] != 0).any(dim=0) for n, g in zip(names, g0) if g is not None}
                cross = {n: (g[:, 0] != 0).any(dim=0) for n, g in zip(names, g1) if g is not None}
                uses = [n for n in names if (n in local and bool(local[n].any())) or (n in cross and bool(cross[n].any()))]
                out[w] = {"local": local, "cross": cross, "uses": uses}
    finally:
        for h in hooks:
            h.remove()
        for n, p in model.named_parameters():
            p.requires_grad_(req[n])
    return out



def projection(linears, name: str, features: list[int] | None) -> Projection:
    canon, lay, _, _ = linears[name]
    shape = tuple(dict(_named_shapes(linears))[canon["weight"]])
    stored_out = shape[0] if lay == "out_in" else shape[1]
    feats = None if features is None or list(features) == list(range(stored_out)) else tuple(int(f) for f in features)
    return Projection(canon["weight"], canon.get("bias"), lay, shape, feats)


def _named_shapes(linears):
    for _, (canon, lay, x, y) in linears.items():
        W = (y.shape[-1], x.shape[-1]) if lay == "out_in" else (x.shape[-1], y.shape[-1])
        yield canon["weight"], W


def common_prefix(names: list[str]) -> str:
    parts = [n.split(".") for n in names]
    out = []
    for seg in zip(*parts):
        if len(set(seg)) != 1:
            break
        out.append(seg[0])
    return ".".join(out)


