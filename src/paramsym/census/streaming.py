"""The weighted census of a safetensors checkpoint, streamed one decoder layer at a time (issue 34).

The in-memory census (:func:`paramsym.census.walk.census`) loads the whole model in float64 (~16
bytes per parameter with its copies). Every entry except the residual stream's lives in one
decoder layer ``i`` and moves only that layer's tensors, so it can be verified on that layer's
function alone. With ``h_i`` the hidden states entering layer ``i`` and ``c_i`` the rest of what
the model passes it (attention mask, rotary ``cos``/``sin``, positions), the layer update

    U_i(θ_i) = layer_i(h_i, c_i; θ_i) − h_i

is unchanged by an entry's group element ``g`` (acting on ``θ_i`` only) **iff** the layer's output
is, and then every later hidden state and the logits are unchanged too (they depend on ``θ_i``
only through ``layer_i``'s output). So :func:`streaming_census`:

1. reads the headers (:func:`paramsym.census.stored.read_checkpoint`: a shard missing from the
   index or the directory, a truncated shard, an index naming a tensor no shard holds are
   :class:`~paramsym.errors.CheckpointError` s) and ``config.json``, builds the model on the
   ``meta`` device (names and shapes, no storage), and checks the estimate of the peak
   (:func:`streaming_estimate`) against ``max_memory`` **before anything is allocated**
   (:class:`~paramsym.errors.TooLargeError`);
2. finds the layer layout as the census does (the architecture adapter where one is registered,
   else traced by :func:`paramsym.census.spaces.derive_spaces`) on a two-layer copy at the real
   widths (:mod:`paramsym.census.configspec`'s), and renumbers layer 0's for every layer (layers 0
   and 1 must agree);
3. reads the embedding rows of the probe tokens only (``safe_open(...).get_slice``), runs the
   model's own forward (all non-layer modules, vocabulary cut) with recorders in place of the
   decoder layers to capture each layer's ``c_i`` and ``h_0``;
4. for ``i = 0 .. L−1``: loads layer ``i``'s tensors alone in float64 (``load_state_dict`` with
   ``assign=True`` into the ``meta`` layer), asks the census's finders for the candidates of that
   layer, verifies each on ``U_i`` with :func:`paramsym.census.walk.verify_candidate` (the census's one
   tolerance rule, :func:`~paramsym.census.precision.rounding_tolerance` of one layer in float64
   plus the float32-island floor, relative to ``‖U_i(θ_i)‖``),
   keeps ``h_{i+1}`` and drops the layer;
5. computes the logits from ``h_L`` (the final norm through the model's own forward, the output
   embedding read in row chunks).

Entries that span every layer (the residual stream's permutation) are listed in ``refused``
with that reason: they are checked by the spec export (:mod:`paramsym.census.configspec`). With
``spot_check=True`` (and the whole model within ``max_memory`` in float32), the streamed logits
are compared with ``from_pretrained``'s forward of the whole model in float32 — the check that
the streamed layer functions are the model's.

Memory: the two-layer copy (×4, as :mod:`paramsym.census.configspec`), then one layer in float64
with its transformed copies (×:data:`LAYER_FACTOR`), a chunk of the output embedding, plus the
runtime (:data:`RUNTIME_BYTES`). Llama-family (Llama, Mistral, Qwen2) and GPT-2 are tested.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ..errors import ConfigError, UnsupportedModelError
from ..groups.memory import check_memory, format_bytes
from ..models.checks import check_finite_weights
from .base import CensusContext
from .precision import PrecisionFloor, model_extent, rounding_tolerance
from .stored import Piece, StoredTensor, expert_pieces, from_pieces, stored_names

__all__ = ["LAYER_FACTOR", "RUNTIME_BYTES", "StreamPlan", "plan_stream", "streamed_output", "streaming_census",
           "streaming_estimate"]

#: float64 copies of one layer held at once while verifying it (the layer, a transformed copy, the
#: float64-throughout forward's intermediates, the stored tensors being converted)
LAYER_FACTOR = 4
#: the interpreter with torch and transformers imported (measured ~0.6 GiB RSS), rounded up
RUNTIME_BYTES = 1 << 30
#: rows of the output embedding multiplied at once for the logits
LOGIT_ROWS = 4096


class _Stop(Exception):
    """Raised by the last recorder: the rest of the model's forward is not needed."""


class _Recorder(nn.Module):
    """Stands in for decoder layer ``i``: records its inputs, returns ``replay`` or the hidden states."""

    def __init__(self, sink: list, last: bool, attrs: Mapping[str, Any], replay: Tensor | None = None):
        super().__init__()
        self.sink, self.last, self.replay = sink, last, replay
        for k, v in attrs.items():
            setattr(self, k, v)

    def forward(self, hidden: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        self.sink.append((hidden, args, kwargs))
        if self.last and self.replay is None:
            raise _Stop
        return hidden if self.replay is None else self.replay


@dataclasses.dataclass
class StreamPlan:
    """What the headers and the config say, before any weight is read (:func:`plan_stream`)."""

    directory: Path
    config: Any
    cls: Any
    meta: nn.Module  # the whole model on the meta device
    stored: dict[str, StoredTensor]
    stored_as: dict[str, list[str]]  # model name -> stored names
    layers_name: str  # e.g. "model.layers"
    num_layers: int
    layer_key: str  # the config's layer-count attribute
    layer_params: list[int]  # parameters per layer
    parameters: int
    estimate: int
    pieces: dict[str, list[Piece]] = dataclasses.field(default_factory=dict)  # expert banks stored per expert


    def layer_prefix(self, i: int) -> str:
        return f"{self.layers_name}.{i}."


def _layers(meta: nn.Module, L: int) -> str:
    for name, mod in meta.named_modules():
        if isinstance(mod, nn.ModuleList) and len(mod) == L and name:
            return name
    raise UnsupportedModelError(f"the {type(meta).__name__} has no list of {L} decoder layers (a ModuleList); the "
                                "streaming census reads decoder models layer by layer. Use the in-memory census.")


def streaming_estimate(layer_params: list[int], small_params: int, output_rows: int, hidden: int) -> int:
    """Bytes of the peak of :func:`streaming_census`: the larger of the traced two-layer copy
    (``small_params`` ×4 in float64) and one layer's verification (the largest layer's float64
    bytes × :data:`LAYER_FACTOR` plus a chunk of ``min(output_rows, LOGIT_ROWS)`` output-embedding
    rows), plus :data:`RUNTIME_BYTES`."""
    layer = LAYER_FACTOR * 8 * max(layer_params, default=0) + 8 * min(output_rows, LOGIT_ROWS) * hidden
    return RUNTIME_BYTES + max(4 * 8 * small_params, layer)


def plan_stream(directory: str | Path, max_memory: int | None = None) -> StreamPlan:
    """Read the headers and the config, build the model on the ``meta`` device and check the
    estimate against ``max_memory`` (nothing allocated; module docstring, step 1).

    Raises:
        CheckpointError: bad index or shards, or a model tensor the checkpoint does not store.
        TooLargeError: the estimate exceeds ``max_memory``.
        UnsupportedModelError: no decoder-layer list, or layers with different tensors.
    """
    from .configspec import meta_checkpoint

    d = Path(directory)
    from ..models.adapters import require_eager

    stored, cfg, cls, meta, _, key, L, n_small = meta_checkpoint(d)
    main = getattr(meta, "main_input_name", "input_ids")
    if main != "input_ids":
        raise UnsupportedModelError(f"--stream verifies a token model's decoder layers on token ids; {type(meta).__name__} "
                                    f"takes {main!r}: take its census without --stream (it is loaded whole).")
    require_eager(meta)  # expert banks: the per-expert loop (the grouped kernels have no float64)
    pieces = expert_pieces(meta, stored)  # Mixtral's banks, stored per expert (names and shapes)
    stored_as = stored_names(meta, stored, pieces)
    name = _layers(meta, L)
    sd = meta.state_dict()
    per = [[(n[len(f"{name}.{i}."):], tuple(t.shape)) for n, t in sd.items() if n.startswith(f"{name}.{i}.")]
           for i in range(L)]
    for i in range(1, L):
        if per[i] != per[0]:
            raise UnsupportedModelError(f"decoder layers 0 and {i} of the {type(meta).__name__} hold different tensors; "
                                        "the streaming census renumbers layer 0's layout: use the in-memory census.")
    layer_params = [sum(int(torch.Size(s).numel()) for _, s in p) for p in per]
    out_emb = meta.get_output_embeddings()
    rows = int(out_emb.weight.shape[0]) if out_emb is not None else 0
    hidden = int(getattr(cfg, "hidden_size", 0) or getattr(cfg, "n_embd", 0) or 0)
    est = streaming_estimate(layer_params, n_small, rows, hidden)
    total = sum(int(torch.Size(t.shape).numel()) for t in stored.values())
    if max_memory is not None:
        check_memory(est, f"the streaming census of {str(d)!r} ({L} layers of {max(layer_params):,} parameters in "
                     f"float64 ×{LAYER_FACTOR}, a traced {n_small:,}-parameter 2-layer copy ×4, plus "
                     f"{format_bytes(RUNTIME_BYTES)} runtime)", max_memory, "Nothing was read.")
    return StreamPlan(d, cfg, cls, meta, stored, stored_as, name, L, key, layer_params, total, est, pieces)


def _read(plan: StreamPlan, names: list[str], dtype: torch.dtype = torch.float64) -> dict[str, Tensor]:
    """The tensors ``names`` (model names), each read alone from its shard and converted (an
    expert bank stored per expert: its pieces read and fused, :func:`~paramsym.census.stored.from_pieces`)."""
    from safetensors import safe_open

    banks = {n: plan.pieces[n] for n in names if n in plan.pieces}
    wanted = {n: plan.stored_as[n][0] for n in names if n not in banks}
    wanted.update({q.stored: q.stored for ps in banks.values() for q in ps})
    by_file: dict[Path, list[str]] = {}
    for n, s in wanted.items():
        by_file.setdefault(plan.stored[s].file, []).append(n)
    out = {}
    for f, ns in by_file.items():
        with safe_open(str(f), framework="pt") as fh:
            for n in ns:
                out[n] = fh.get_tensor(wanted[n]).to(dtype)
    return from_pieces(out, banks) if banks else out


def _param_name(model: nn.Module, p: nn.Parameter | None) -> str | None:
    return None if p is None else next((n for n, q in model.named_parameters(remove_duplicate=False) if q is p), None)


def _rename(obj: Any, old: str, new: str) -> Any:
    """``obj`` (a layout dataclass, tuple or string) with the prefix ``old`` replaced by ``new``."""
    if isinstance(obj, str):
        return new + obj[len(old):] if obj == old or obj.startswith(old + ".") else obj
    if isinstance(obj, tuple):
        return tuple(_rename(x, old, new) for x in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: _rename(getattr(obj, f.name), old, new)
                                           for f in dataclasses.fields(obj) if f.init})
    return obj


def _template(plan: StreamPlan, seed: int) -> tuple[Any, list[dict[str, Any]]]:
    """Layer 0's layout (module docstring, step 2) and its refused entries, from a two-layer copy."""
    from ..errors import TraceError
    from ..models.adapters import adapt, known_model_types, require_eager
    from .configspec import _random_weights, _small_config
    from .spaces import derive_spaces
    from .walk import _output, _refused, default_inputs

    small_cfg, _, _ = _small_config(plan.config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        small = plan.cls.from_config(small_cfg, attn_implementation="eager")
    small = require_eager(small).to(torch.float64).eval()
    _random_weights(small, torch.Generator().manual_seed(int(seed)))
    if plan.config.model_type in known_model_types():
        layout = adapt(small)
    else:
        inputs = default_inputs(small, torch.Generator().manual_seed(int(seed)))
        with torch.no_grad():
            layout = derive_spaces(small, inputs, _output).layout
        if layout is None:
            raise TraceError(f"the tracer found no decoder layers in the {type(small).__name__}.")
    if len(layout.layers) > 1 and _rename(layout.layers[0], f"{plan.layers_name}.0", f"{plan.layers_name}.1") != \
            dataclasses.replace(layout.layers[1], index=0):
        raise UnsupportedModelError(f"layers 0 and 1 of the {type(small).__name__} have different layouts (different "
                                    "symmetries); the streaming census renumbers layer 0's: use the in-memory census.")
    first = ModelLayoutOne(layout, layout.layers[0])
    return first, _refused(dataclasses.replace(layout, layers=layout.layers[:1]))


@dataclasses.dataclass
class ModelLayoutOne:
    """A model layout and its layer-0 template."""

    layout: Any
    layer0: Any

    def layer(self, prefix: str, i: int) -> Any:
        lay = _rename(self.layer0, f"{prefix}.0", f"{prefix}.{i}")
        return dataclasses.replace(self.layout, layers=(dataclasses.replace(lay, index=i),))


def _holder(path: str, layer: nn.Module) -> nn.Module:
    """A module whose ``named_modules`` name ``layer`` ``path`` (what the finders look up)."""
    root = cur = nn.Module()
    parts = path.split(".")
    for part in parts[:-1]:
        child = nn.Module()
        cur.add_module(part, child)
        cur = child
    cur.add_module(parts[-1], layer)
    return root


def _first(out: Any) -> Tensor:
    return out if isinstance(out, Tensor) else out[0]


class _Shell:
    """The model without its decoder layers (vocabulary cut, non-layer tensors from the checkpoint),
    in float64: captures each layer's inputs and applies the final norm."""

    def __init__(self, plan: StreamPlan):
        from .configspec import _small_config

        cfg0, key, L = _small_config(plan.config)
        setattr(cfg0, key, 0)
        with torch.random.fork_rng(devices=[]):
            shell = plan.cls.from_config(cfg0, attn_implementation="eager")
        setattr(shell.config, key, L)
        for k, v in plan.config.to_dict().items():  # per-layer lists back at their full length
            if isinstance(v, list) and len(v) == L:
                setattr(shell.config, k, v)
        shell = shell.to(torch.float64).eval()
        skip = {_param_name(shell, shell.get_input_embeddings().weight)}
        out_emb = shell.get_output_embeddings()
        skip.add(_param_name(shell, getattr(out_emb, "weight", None)))
        own = {n: p for n, p in shell.named_parameters() if n not in skip}
        values = _read(plan, list(own))
        for n, p in own.items():
            if tuple(values[n].shape) != tuple(p.shape):
                raise ConfigError(f"stored tensor {n!r} has shape {tuple(values[n].shape)}; the config's model has "
                                  f"{tuple(p.shape)}.")
        check_finite_weights(values.items(), "checkpoint")
        with torch.no_grad():
            for n, p in own.items():
                p.copy_(values[n])
        self.shell, self.plan = shell, plan
        self.base = shell.base_model
        rel = plan.layers_name
        base_prefix = getattr(shell, "base_model_prefix", "")
        if base_prefix and rel.startswith(base_prefix + "."):
            rel = rel[len(base_prefix) + 1:]
        self.owner, _, self.attr = rel.rpartition(".")
        self.attrs = [{k: getattr(m, k) for k in ("attention_type",) if hasattr(m, k)}
                      for m in dict(plan.meta.named_modules())[plan.layers_name]]

    def _run(self, embeds: Tensor, mask: Tensor, replay: Tensor | None) -> tuple[list, Any]:
        sink: list = []
        L = self.plan.num_layers
        holder = self.base.get_submodule(self.owner) if self.owner else self.base
        setattr(holder, self.attr, nn.ModuleList(_Recorder(sink, i == L - 1, self.attrs[i], replay) for i in range(L)))
        try:
            with torch.no_grad():
                out = self.base(inputs_embeds=embeds, attention_mask=mask, use_cache=False)
        except _Stop:
            out = None
        finally:
            setattr(holder, self.attr, nn.ModuleList())
        return sink, out

    def capture(self, embeds: Tensor, mask: Tensor) -> list:
        """``[(h_i, args, kwargs), ...]`` of every layer: ``h_0`` and the ``c_i`` (module docstring)."""
        return self._run(embeds, mask, None)[0]

    def final(self, embeds: Tensor, mask: Tensor, h_last: Tensor) -> Tensor:
        """The base model's output when the last layer returns ``h_last`` (the final norm applied)."""
        return _first(self._run(embeds, mask, h_last)[1])


def _logits(plan: StreamPlan, hidden: Tensor) -> Tensor | None:
    """``hidden @ Wᵀ (+ b)`` with the output embedding read in chunks of :data:`LOGIT_ROWS` rows."""
    from safetensors import safe_open

    head = plan.meta.get_output_embeddings()
    if head is None:
        return None
    wname = _param_name(plan.meta, head.weight)
    bname = _param_name(plan.meta, getattr(head, "bias", None))
    t = plan.stored[plan.stored_as[wname][0]]
    parts = []
    with safe_open(str(t.file), framework="pt") as fh:
        sl = fh.get_slice(t.name)
        for lo in range(0, t.shape[0], LOGIT_ROWS):
            parts.append(hidden @ sl[lo:lo + LOGIT_ROWS].to(torch.float64).T)
    out = torch.cat(parts, dim=-1)
    return out + _read(plan, [bname])[bname] if bname else out


def _embed(plan: StreamPlan, ids: Tensor) -> Tensor:
    """The input-embedding rows of ``ids`` (each distinct row read alone)."""
    from safetensors import safe_open

    name = _param_name(plan.meta, plan.meta.get_input_embeddings().weight)
    t = plan.stored[plan.stored_as[name][0]]
    rows = {}
    with safe_open(str(t.file), framework="pt") as fh:
        sl = fh.get_slice(t.name)
        for r in sorted(set(ids.reshape(-1).tolist())):
            rows[r] = sl[r:r + 1].to(torch.float64)[0]
    emb = torch.stack([rows[r] for r in ids.reshape(-1).tolist()]).reshape(*ids.shape, -1)
    check_finite_weights([(t.name, emb)], "checkpoint")
    return emb


def _load_layer(plan: StreamPlan, layers: nn.ModuleList, i: int) -> nn.Module:
    """Decoder layer ``i`` with its stored tensors in float64 (the meta layer's copy, tensors
    assigned; nothing else of the model is allocated)."""
    prefix = plan.layer_prefix(i)
    values = _read(plan, [n for n in plan.meta.state_dict() if n.startswith(prefix)])
    check_finite_weights(values.items(), "checkpoint")
    layer = copy.deepcopy(layers[i])
    layer.load_state_dict({n[len(prefix):]: v for n, v in values.items()}, strict=True, assign=True)
    empty = [n for n, b in layer.named_buffers() if b.is_meta]
    if empty:
        raise UnsupportedModelError(f"decoder layer {i} has buffers {empty[:3]} that are not stored (computed when "
                                    "the model is built); the streaming census cannot rebuild them: use the "
                                    "in-memory census.")
    return layer.eval()


def streamed_output(directory: str | Path, input_ids: Tensor, max_memory: int | None = None) -> Tensor:
    """The model's output (logits, or the last hidden state of a base model) on ``input_ids``
    in float64, computed one decoder layer at a time (module docstring, steps 3–5, without
    verification): the memory of one layer, whatever the depth.

    Raises:
        CheckpointError, TooLargeError, UnsupportedModelError: see :func:`plan_stream`.
    """
    plan = plan_stream(directory, max_memory)
    vocab = int(plan.meta.get_input_embeddings().weight.shape[0])
    if not isinstance(input_ids, Tensor) or input_ids.dim() != 2 or input_ids.dtype != torch.long or \
            int(input_ids.min()) < 0 or int(input_ids.max()) >= vocab:
        raise ConfigError(f"input_ids must be a 2-d long tensor of token ids in [0, {vocab}) (batch × tokens); received "
                          f"{tuple(input_ids.shape) if isinstance(input_ids, Tensor) else type(input_ids).__name__}.")
    mask = torch.ones_like(input_ids)
    embeds = _embed(plan, input_ids)
    shell = _Shell(plan)
    captured = shell.capture(embeds, mask)
    layers = dict(plan.meta.named_modules())[plan.layers_name]
    h = captured[0][0]
    for i in range(plan.num_layers):
        layer = _load_layer(plan, layers, i)
        _, args, kwargs = captured[i]
        with torch.no_grad():
            h = _first(layer(h, *args, **kwargs))
        del layer
    final = shell.final(embeds, mask, h)
    logits = _logits(plan, final)
    return final if logits is None else logits


def streaming_census(directory: str | Path, *, seed: int = 0, tokens: int = 8, tolerance: float | None = None,
                     max_memory: int | None = None, spot_check: bool = False, finders: Any = None,
                     progress: bool = False) -> tuple[Any, dict[str, Any]]:
    """``(CensusResult, report)``: the census of the checkpoint in ``directory`` verified layer by
    layer (module docstring). ``report`` holds the estimate, the layers, the streamed logits' norm
    and, with ``spot_check``, the whole-model comparison. ``finders``: as the census's (default
    :data:`~paramsym.census.finders.DEFAULT_FINDERS`).

    Raises:
        CheckpointError, TooLargeError, UnsupportedModelError: see :func:`plan_stream` (all before
            any weight is read).
        ConfigError: a bad tolerance, or stored tensors that do not fit the config.
        NonFiniteError: NaN/inf weights.
    """
    from ..errors import check_seed
    from .finders import DEFAULT_FINDERS
    from .walk import CensusResult, default_inputs, verify_candidate

    t0 = time.perf_counter()
    if tolerance is not None and not (0 < tolerance < 1):
        raise ConfigError(f"tolerance must be in (0, 1); received {tolerance!r}.")
    gen = torch.Generator().manual_seed(check_seed(seed))
    plan = plan_stream(directory, max_memory)
    tol = 0.0  # the largest per-layer tolerance, reported (one rule: precision.rounding_tolerance of one layer)
    template, refused_one = _template(plan, seed)
    inputs = default_inputs(plan.meta, gen, tokens=tokens)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    embeds = _embed(plan, ids)
    shell = _Shell(plan)
    captured = shell.capture(embeds, mask)
    h = captured[0][0]
    entries, refused = [], []
    layers = dict(plan.meta.named_modules())[plan.layers_name]
    it = range(plan.num_layers)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="census: streaming layers", unit="layer", leave=False)
    for i in it:
        prefix = plan.layer_prefix(i)
        layer = _load_layer(plan, layers, i)
        _, args, kwargs = captured[i]
        params = {n: p.detach() for n, p in _holder(plan.layers_name + f".{i}", layer).named_parameters()}

        def forward(p: Mapping[str, Tensor], layer=layer, h=h, args=args, kwargs=kwargs, prefix=prefix) -> Tensor:
            with torch.no_grad():
                return _first(functional_call(layer, {n[len(prefix):]: v for n, v in p.items()}, (h, *args),
                                              kwargs)) - h

        tol_i = float(tolerance) if tolerance is not None else rounding_tolerance(
            torch.float64, *model_extent(params, 1))
        tol = max(tol, tol_i)
        precision = PrecisionFloor(forward, params, torch.float64)
        ctx = CensusContext(_holder(plan.layers_name + f".{i}", layer), template.layer(plan.layers_name, i), params)
        for c in (c for f in (DEFAULT_FINDERS if finders is None else finders) for c in f.find(ctx)):
            entries.append(verify_candidate(c, params, forward, precision, tol_i, gen))
        refused += [dict(r, module=_rename(r["module"], f"{plan.layers_name}.0", f"{plan.layers_name}.{i}"))
                    for r in refused_one]
        h = h + precision.base
        del layer, params, precision, ctx
    refused.append({"module": "(residual stream)", "kind": "residual_permutation",
                    "reason": "spans every layer: not verified layer by layer (the permutation-spec export checks it)"})
    final = shell.final(embeds, mask, h)
    logits = _logits(plan, final)
    report: dict[str, Any] = {"layers": plan.num_layers, "estimate": format_bytes(plan.estimate),
                              "estimate_bytes": plan.estimate, "largest_layer_parameters": max(plan.layer_params),
                              "tokens": list(ids.shape)}
    if spot_check:
        report["spot_check"] = _spot_check(plan, ids, mask, logits if logits is not None else final, max_memory)
    result = CensusResult(str(directory), plan.config.model_type, "float64", plan.parameters, entries, [],
                          time.perf_counter() - t0, tol, None, refused)
    return result, report


def _spot_check(plan: StreamPlan, ids: Tensor, mask: Tensor, streamed: Tensor, max_memory: int | None) -> dict[str, Any]:
    """The whole model loaded in float32 (``from_pretrained``) against the streamed float64 output:
    ``‖F32 − F_stream‖ / ‖F_stream‖`` within ``tolerance = 1e-4`` (float32 rounding, ``2⁻²⁴`` per
    operation, accumulated over ``L`` layers of width-``D`` sums: ``≈ 2⁻²⁴ √(L·D)`` ≲ 1e-5 for
    D ≤ 8192, L ≤ 128, with a 10× margin for the softmax's conditioning). Skipped (with the
    reason) when ``4 × parameters + runtime`` exceeds ``max_memory``."""
    from ..errors import TooLargeError
    from ..models.loading import load_model

    need = 4 * plan.parameters + RUNTIME_BYTES
    try:
        check_memory(need, "the whole-model spot check in float32", max_memory)
    except TooLargeError as e:
        return {"checked": False, "reason": str(e)}
    model = load_model(str(plan.directory), head="auto", quiet=True, argument="--model")
    model = model.to(torch.float32).eval()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask)
    got = (out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state).to(torch.float64)
    err = float((got - streamed).norm() / streamed.norm())
    return {"checked": True, "dtype": "float32", "relative_error": err, "tolerance": 1e-4, "agrees": err <= 1e-4}
