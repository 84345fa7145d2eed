"""The census: every symmetry a model has (that the finders know), each verified numerically.

``census(model, inputs)`` (1) finds the architecture (HF ``config.model_type`` through
:mod:`paramsym.models.adapters`; for an HF model without an adapter, and for every HF model's
residual stream, traced by :mod:`paramsym.census.spaces`; otherwise a walk over module types),
(2) asks each
:class:`~paramsym.census.finders.SymmetryFinder` for candidates, (3) **verifies each candidate on
the actual weights**: a random group element ``g`` is applied to the parameters and

    verified_error = ‖F(g·θ) − F(θ)‖ / ‖F(θ)‖        (F = the model's output on ``inputs``)
    motion         = ‖g·θ − θ‖ / ‖θ‖                  (over the tensors the candidate moves;
                                                     ‖g·θ − θ‖ where they are all 0, e.g. zero biases)

in float64 where the model converts (float32 otherwise); a candidate is *verified* when the error
is at most its tolerance **and** the motion is non-zero. The tolerance is the one rule of
:mod:`paramsym.census.precision`: the run dtype's rounding through the model,
``rounding_tolerance(dtype, L, n) = 10·(L+1)·√n·ε`` (``tolerance=`` overrides this term), plus the
rounding of the float32 islands measured at both points of the check (a finder may raise the
first term for one entry). Unverified candidates are listed but not counted.

Counting. ``total_dimension`` is the sum of the verified continuous dimensions, and that sum is
the dimension of the orbit through generic weights (a **direct sum**) because the tangent
directions of different entries are linearly independent:

* query/key GL(d_k) (or the rotary commutant) moves the query and key rows, value/output GL(d_v)
  the value rows and output columns; different heads and layers move different coordinates;
* the key-bias translation ``δb_k = c`` moves only the key bias. A query/key direction ``X``
  moves ``δW_q = X W_q`` too, so a combination of the two that vanishes needs ``X W_q = 0``,
  i.e. ``X = 0`` wherever a head's query rows have full rank. The value shift
  (``δb_v = c``, ``δb_o = −W_o c``) moves ``b_o``, which value/output GL does not move, so
  ``W_o c = 0``, i.e. ``c = 0`` where ``W_o`` has full column rank. Checked on an
  ``nn.MultiheadAttention(8, 2)`` with biases: the 80 counted directions (32 + 32 + 8 + 8) have
  rank 80, and the affine solver (``paramsym.exact.solve_affine``, no dimension given) finds the
  whole affine algebra of the ``attention-d8h2-bias`` block to be 80;
* a norm scale moves its norm's weights, which nothing else moves, so at points where those
  weights are non-zero its directions are independent of all the others;
* in an MLP, rescaling (ReLU) and GL (no activation) act on different hidden spaces; the orbit
  of ``GL(h_1) × … `` / the diagonal groups is free at generic weights (``LinearChainAction``).

Discrete permutations (hidden units, heads) add 0. The symmetric fraction is
``total_dimension / parameters`` (all parameters of the model). Symmetries the finders do not
know (OV redistribution inside a QK cluster, which only RMHSA parameters have; permutations
inside a GQA group) are not counted, so the fraction is a lower bound of the true one.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ..errors import (
    ConfigError,
    NonFiniteError,
    ShapeError,
    UnknownArchitectureError,
    UnsupportedModelError,
    check_seed,
)
from ..groups.memory import check_memory, dense_bytes
from ..models.adapters import adapt, known_model_types, require_eager
from ..models.checks import check_finite_weights
from ..targets.base import model_output
from .finders import DEFAULT_FINDERS, KNOWN_MODULES, CensusContext, SymmetryFinder
from .precision import (
    PrecisionFloor,
    float64_throughout,
    island_floor,
    model_extent,
    rounding_tolerance,
)

__all__ = ["CensusEntry", "CensusResult", "census", "default_inputs", "verify_candidate"]

_output = model_output  # thin alias: the one HF-output extractor is targets.model_output


@dataclass
class CensusEntry:
    """One verified (or refuted) symmetry of the census."""

    module: str
    kind: str
    dimension: int
    verified_error: float
    motion: float
    verified: bool
    moved_parameters: int
    discrete_order: str | None = None
    log10_order: float | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    tolerance: float | None = None  # this entry's: the census tolerance + the measured float32 rounding floor
    exact_error: float | None = None  # the same error computed in float64 throughout (where the model has float32 islands)


@dataclass
class CensusResult:
    """The census of a model; :meth:`to_json` is what ``paramsym census --json`` prints."""

    model: str
    model_type: str | None
    dtype: str
    parameters: int
    entries: list[CensusEntry]
    unrecognised: list[dict[str, Any]]
    seconds: float
    tolerance: float
    residual_rotation: dict[str, Any] | None = None  # O(D) after folding norm scales (RMSNorm models)
    refused: list[dict[str, Any]] = field(default_factory=list)  # {module, kind, reason}: not claimed, not counted

    @property
    def total_dimension(self) -> int:
        return sum(e.dimension for e in self.entries if e.verified)

    def dimension_of(self, prefix: str) -> int:
        """Sum of verified dimensions of entries whose kind starts with ``prefix``."""
        return sum(e.dimension for e in self.entries if e.verified and e.kind.startswith(prefix))

    def dimension_by_kind(self) -> dict[str, int]:
        """Verified dimension summed per kind (discrete kinds appear with 0)."""
        out: dict[str, int] = {}
        for e in self.entries:
            if e.verified:
                out[e.kind] = out.get(e.kind, 0) + e.dimension
        return out

    def group(self) -> dict[str, Any]:
        """The whole verified group: continuous dimension, discrete order (``log10`` of the product
        of the verified discrete entries' orders, and their count), per kind."""
        disc = [e for e in self.entries if e.verified and e.log10_order is not None]
        return {"continuous_dimension": self.total_dimension,
                "log10_discrete_order": sum(e.log10_order for e in disc),
                "discrete_factors": {k: sum(1 for e in disc if e.kind == k) for k in sorted({e.kind for e in disc})},
                **({"residual_rotation": self.residual_rotation} if self.residual_rotation else {})}

    @property
    def symmetric_fraction(self) -> float:
        return self.total_dimension / self.parameters if self.parameters else 0.0

    @property
    def all_verified(self) -> bool:
        return all(e.verified for e in self.entries)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model, "model_type": self.model_type, "dtype": self.dtype,
            "symmetries": [asdict(e) for e in self.entries],
            "total_dimension": self.total_dimension,
            "attention_dimension": self.dimension_of("attention."),
            "key_bias_dimension": self.dimension_of("key_bias_translation"),
            "dimension_by_kind": self.dimension_by_kind(),
            "parameters": self.parameters,
            "symmetric_fraction": self.symmetric_fraction,
            "all_verified": self.all_verified,
            "unverified": [f"{e.module}:{e.kind}" for e in self.entries if not e.verified],
            "refused": self.refused,
            "tolerance": self.tolerance,
            "unrecognised_modules": self.unrecognised,
            "seconds": self.seconds,
            "group": self.group(),
            "counting": "total_dimension sums verified continuous dimensions; their tangent directions are "
                        "independent (disjoint coordinates; the key-bias translation moves only b_k while query/key "
                        "GL also moves W_q; the value shift moves b_o while value/output GL does not; norm scales "
                        "move weights nothing else moves), so the sum is direct. Discrete permutations add 0. "
                        "Fraction = total_dimension / parameters; a lower bound (symmetries not in the census "
                        "are not counted).",
        }


def default_inputs(model: nn.Module, generator: torch.Generator, tokens: int = 8, batch: int = 2) -> dict[str, Tensor]:
    """Random probe inputs for an HF model's verification, by its ``main_input_name``: token ids
    (``input_ids``, uniform over the vocabulary, with an all-ones attention mask; one sequence for
    a sequence-classification head without a pad token, which transformers refuses to batch) or
    images (``pixel_values``: ``batch × num_channels × image_size × image_size`` standard normal
    entries, the config's sizes; ``tokens`` unused), drawn from ``generator``.

    Raises:
        ConfigError: ``tokens`` < 1 or beyond the model's positions (``max_position_embeddings``).
        UnsupportedModelError: a model whose main input is neither (audio ``input_values``, ...),
            or an image model whose config gives no ``image_size``/``num_channels``.
        TooLargeError: the float64 attention scores (``batch x heads x tokens^2`` per layer)
            exceed the default memory budget (2 GiB).
    """
    if not isinstance(model, nn.Module) or getattr(getattr(model, "config", None), "model_type", None) is None:
        raise ConfigError(f"default_inputs draws token ids for a Hugging Face model (one with a config); received a "
                          f"{type(model).__name__}. Pass inputs= (a batch the model accepts) to census instead.")
    if not isinstance(generator, torch.Generator):
        raise ConfigError(f"generator must be a torch.Generator; received {type(generator).__name__}. Pass e.g. "
                          "torch.Generator().manual_seed(0).")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"batch must be an integer >= 1; received {batch!r}.")
    cfg = model.config
    heads = int(getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", None) or 1)
    main = getattr(model, "main_input_name", "input_ids")
    if main == "pixel_values":
        return _images(model, generator, batch, heads)
    if main != "input_ids":
        raise UnsupportedModelError(
            f"the census probes a model with random token ids (input_ids) or images (pixel_values); "
            f"{type(model).__name__} (model_type {cfg.model_type!r}) takes {main!r}, which the census cannot draw. Pass "
            "inputs= (a batch the model accepts) to paramsym.census.census from Python.")
    if batch > 1 and getattr(cfg, "pad_token_id", None) is None and type(model).__name__.endswith("ForSequenceClassification"):
        batch = 1  # transformers refuses batches > 1 in a classification head that cannot find the last token
    limit = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise ConfigError(f"tokens (--tokens) must be an integer >= 1; received {tokens!r}.")
    if isinstance(limit, int) and tokens > limit:
        raise ConfigError(f"tokens (--tokens) {tokens} exceeds the model's {limit} positions "
                          f"(max_position_embeddings); use at most {limit}.")
    check_memory(dense_bytes(batch, heads, tokens, tokens), f"the attention scores of {batch} sequences of {tokens} tokens",
                 None, "Use fewer --tokens.")
    vocab = int(getattr(model.config, "vocab_size", 100))
    ids = torch.randint(0, vocab, (batch, tokens), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _images(model: nn.Module, generator: torch.Generator, batch: int, heads: int) -> dict[str, Tensor]:
    """``pixel_values`` of the config's image size and channels (:func:`default_inputs`)."""
    cfg = model.config
    size, channels, patch = (getattr(cfg, k, None) for k in ("image_size", "num_channels", "patch_size"))
    hw = tuple(size) if isinstance(size, (list, tuple)) else (size, size)
    if len(hw) != 2 or not all(isinstance(v, int) and v > 0 for v in (*hw, channels)):
        raise UnsupportedModelError(
            f"{type(model).__name__} takes pixel_values, but its config gives image_size {size!r} and num_channels "
            f"{channels!r}; the census draws images of those sizes (positive integers). Pass inputs= to "
            "paramsym.census.census from Python.")
    pw = tuple(patch) if isinstance(patch, (list, tuple)) else (patch, patch)
    seq = hw[0] // pw[0] * (hw[1] // pw[1]) + 1 if all(isinstance(v, int) and v > 0 for v in pw) else hw[0] * hw[1]
    check_memory(dense_bytes(batch, heads, seq, seq), f"the attention scores of {batch} images of {seq} patches", None,
                 "Give a smaller model (image_size, patch_size).")
    return {"pixel_values": torch.randn(batch, channels, *hw, generator=generator)}


def _unrecognised(model: nn.Module, covered: set[str]) -> list[dict[str, Any]]:
    out = []
    for name, mod in model.named_modules():
        own = [n for n, _ in mod.named_parameters(recurse=False)]
        if own and not any((f"{name}.{n}" if name else n) in covered for n in own):
            out.append({"module": name, "type": type(mod).__name__, "parameters": sum(p.numel() for p in mod.parameters(recurse=False))})
    return out


def _check_inputs(inputs: Any) -> None:
    """Refuse a verification batch that is not a tensor, sequence or mapping of tensors/values,
    holds a tensor on the meta device, an empty batch, or NaN/inf entries."""
    if isinstance(inputs, Tensor):
        items = [("inputs", inputs)]
    elif isinstance(inputs, Mapping):
        items = [(f"inputs[{k!r}]", v) for k, v in inputs.items()]
    elif isinstance(inputs, (list, tuple)):
        items = [(f"inputs[{i}]", v) for i, v in enumerate(inputs)]
    else:
        raise ConfigError(f"inputs must be a tensor, a tuple of positional inputs or a dict of keyword inputs; "
                          f"received {type(inputs).__name__}. Pass a batch the model accepts.")
    tensors = [(n, v) for n, v in items if isinstance(v, Tensor)]
    if not tensors:
        raise ConfigError("inputs hold no tensor; pass a batch the model accepts (e.g. {'input_ids': ids}).")
    for n, v in tensors:
        if v.device.type == "meta":
            raise ConfigError(f"{n} is on the meta device (no data); pass a batch with values on the CPU.")
        if v.dim() == 0 or v.shape[0] == 0 or v.numel() == 0:
            raise ShapeError(f"{n} has shape {tuple(v.shape)}: an empty batch; expected at least one example in "
                             "dimension 0.")
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            raise NonFiniteError(f"{n} holds NaN or infinite entries; expected a finite verification batch.")


def census(
    model: nn.Module,
    inputs: Tensor | Sequence[Any] | Mapping[str, Any] | None = None,
    *,
    finders: Sequence[SymmetryFinder] | None = None,
    dtype: torch.dtype = torch.float64,
    tolerance: float | None = None,
    seed: int = 0,
    name: str = "",
    copy_model: bool = True,
    progress: bool = False,
    layout: str = "auto",
) -> CensusResult:
    """List and verify the symmetries of ``model`` (see module docstring).

    Args:
        model: an HF model (adapted by ``config.model_type``; switched to eager attention) or any
            ``nn.Module`` containing ``nn.MultiheadAttention`` s or ``nn.Sequential`` MLPs.
        inputs: the verification batch (tensor, tuple of positional inputs, or dict of keyword
            inputs); default for HF models: random token ids (:func:`default_inputs`).
        finders: the symmetry finders (default :data:`~paramsym.census.finders.DEFAULT_FINDERS`).
        dtype: verification dtype (float64 by default; float32 is used if the model does not convert).
        tolerance: the dtype term of each entry's tolerance (default
            :func:`~paramsym.census.precision.rounding_tolerance` of the dtype, the layer count
            and the widest fan-in); the measured float32-island floor is added to it.
        seed: seed of the ``torch.Generator`` drawing inputs and group elements.
        copy_model: work on a copy (``False`` converts ``model`` itself to ``dtype``; saves memory).
        progress: show a tqdm bar on stderr.
        layout: where an HF model's spaces come from: ``"auto"`` (the architecture adapter where one
            is registered, else traced by :func:`paramsym.census.spaces.derive_spaces`; the
            residual stream is always traced), ``"derived"`` (traced even where an adapter exists),
            ``"adapter"`` (adapters only, no tracing: no residual-stream entry).

    Raises:
        UnsupportedModelError: no parameters, or no module the finders know (lists what they know and what was found).
        UnknownArchitectureError: an HF model with an unknown ``model_type`` and no known modules.
        ConfigError: no ``inputs`` for a model that is not an HF model, inputs of the wrong type or on
            the meta device, a bad tolerance, layout or dtype (float64 or float32 only).
        ShapeError: an empty batch, or inputs the model cannot run on.
        NonFiniteError: NaN/inf weights or inputs.
        TraceError: an HF model without an adapter whose spaces the tracer cannot follow (names the
            module and why, and what was found).
    """
    t0 = time.perf_counter()
    if not isinstance(model, nn.Module):
        raise UnsupportedModelError(f"census needs a torch.nn.Module; received {type(model).__name__}.")
    n_params = sum(p.numel() for p in model.parameters())
    if n_params == 0:
        raise UnsupportedModelError(f"{type(model).__name__} has no parameters; there is nothing to take a census of. "
                                    "Pass a model with weights.")
    if tolerance is not None and not (0 < tolerance < 1):
        raise ConfigError(f"tolerance must be in (0, 1); received {tolerance!r}.")
    if layout not in ("auto", "derived", "adapter"):
        raise ConfigError(f"layout must be 'auto', 'derived' or 'adapter'; received {layout!r}.")
    if dtype not in (torch.float64, torch.float32):
        raise ConfigError(f"dtype must be torch.float64 or torch.float32 (the verification dtype); received {dtype!r}.")
    if any(t.device.type == "meta" for t in model.parameters()):
        raise ConfigError(f"the {type(model).__name__} has parameters on the meta device (no values); load its weights "
                          "first.")
    check_finite_weights([*model.named_parameters(), *model.named_buffers()], "census model",
                         "A census of NaN/inf weights verifies nothing; pass a model with finite weights.")
    if inputs is not None:
        _check_inputs(inputs)
    gen = torch.Generator().manual_seed(check_seed(seed))
    mode, layout, arch_error = layout, None, None
    is_hf = hasattr(model, "config") and getattr(model.config, "model_type", None) is not None
    if not is_hf and mode != "auto":
        raise ConfigError(f"layout={mode!r} chooses how a Hugging Face model's spaces are found; a "
                          f"{type(model).__name__} has no config, so it would be ignored. Use layout='auto'.")
    if is_hf and mode != "derived":
        try:
            layout = adapt(model)
        except UnknownArchitectureError as exc:
            arch_error = exc
    work = copy.deepcopy(model) if copy_model else model
    if is_hf:
        require_eager(work)
    work.eval()
    try:
        work.to(dtype)
    except (RuntimeError, TypeError):
        dtype = torch.float32
        work.to(dtype)
    params = {k: v.detach() for k, v in work.named_parameters()}
    spaces, trace_inputs = None, None
    if is_hf and mode != "adapter":
        from ..errors import TraceError
        from .spaces import derive_spaces

        trace_inputs = dict(inputs) if isinstance(inputs, Mapping) else default_inputs(work, torch.Generator().manual_seed(int(seed)))
        try:
            with torch.no_grad():
                spaces = derive_spaces(work, trace_inputs, model_output)
        except TraceError:
            if layout is None:
                raise
        if spaces is not None and layout is None:
            layout = spaces.layout
    ctx = CensusContext(work, layout, params, spaces)
    tol = float(tolerance) if tolerance is not None else rounding_tolerance(
        dtype, *model_extent(params, len(layout.layers) if layout is not None else None))
    candidates = [c for f in (DEFAULT_FINDERS if finders is None else finders) for c in f.find(ctx)]
    refused = _refused(layout, spaces)
    covered = {n for c in candidates for n in c.moved}
    unrecognised = _unrecognised(work, covered)
    if not candidates:
        found = sorted({f"{u['type']}" for u in unrecognised})
        msg = (f"found no module the census knows in {type(model).__name__} (it knows {KNOWN_MODULES}; known "
               f"model_types: {known_model_types()}); modules with parameters found: {found}.")
        if arch_error is not None:
            raise UnknownArchitectureError(f"{arch_error} {msg}")
        raise UnsupportedModelError(msg)
    if inputs is None:
        if layout is None:
            raise ConfigError(f"census of a {type(model).__name__} needs inputs= (a batch the model accepts); only HF "
                              "models get random token ids by default.")
        inputs = default_inputs(work, gen)
    args, kwargs = ((inputs,), {}) if isinstance(inputs, Tensor) else (
        ((), dict(inputs)) if isinstance(inputs, Mapping) else (tuple(inputs), {}))
    cast = lambda x: x.to(dtype) if isinstance(x, Tensor) and x.is_floating_point() else x  # noqa: E731
    args, kwargs = tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}

    def forward(p: Mapping[str, Tensor]) -> Tensor:
        with torch.no_grad():
            return model_output(functional_call(work, dict(p), args, kwargs))

    try:
        precision = PrecisionFloor(forward, params, dtype)
    except (RuntimeError, TypeError, ValueError, IndexError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ShapeError(f"the {type(model).__name__} cannot run on the given inputs ({type(exc).__name__}: {first}); "
                         "pass a batch the model accepts (shape and dtype of its forward inputs).") from None
    entries = []
    it = candidates
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(candidates, desc="census: verifying", unit="symmetry", leave=False)
    for c in it:
        entries.append(verify_candidate(c, params, forward, precision, tol, gen))
    rotation = _residual_rotation(work, spaces, trace_inputs if spaces is not None else None, tol, gen)
    return CensusResult(name or type(model).__name__, getattr(getattr(model, "config", None), "model_type", None),
                        str(dtype).replace("torch.", ""), n_params, entries, unrecognised,
                        time.perf_counter() - t0, tol, rotation, refused)


def verify_candidate(c: Any, params: Mapping[str, Tensor], forward: Any, precision: PrecisionFloor, tol: float,
                     gen: torch.Generator) -> CensusEntry:
    """Verify one candidate (module docstring): apply one random element ``g`` (drawn from
    ``gen``) to ``params``, compare ``forward(g·θ)`` with ``forward(θ)`` through ``precision``
    (the float32-island floor), measure the motion of the moved tensors.

    ``forward`` is whatever function the entry must leave unchanged: the whole model's output
    (:func:`census`) or one decoder layer's update on cached inputs (:mod:`paramsym.census.streaming`).
    """
    with torch.no_grad():
        new = c.transform(params, gen)
    err, exact_err, floor = precision.check(forward(new), lambda new=new: precision.exact(new), c.expected)
    num = sum(_square(new[n] - params[n]) for n in c.moved)
    den = sum(_square(params[n]) for n in c.moved)
    motion = (num / den) ** 0.5 if den > 0 else num**0.5  # absolute where the moved weights are 0 (zero biases)
    tol_c = max(tol, c.tolerance or 0.0) + floor
    return CensusEntry(c.module, c.kind, c.dimension, err, motion, err <= tol_c and motion > 0,
                       sum(c.moved.values()), c.discrete_order, c.log10_order, c.note, c.extra, tol_c, exact_err)


def _square(t: Tensor) -> float:
    """``‖t‖²`` as one dot product (no squared copy of ``t``)."""
    flat = t.reshape(-1)
    return float(torch.dot(flat, flat))


def _refused(layout: Any, spaces: Any = None) -> list[dict[str, Any]]:
    """Entries the tracer refused per layer (``AttentionLayout.qk_refused``): the layer's query/key
    symmetry, and its key-bias translation where the keys have a bias; the rest of the layer stays.
    And the norm scale of every stream norm that is no layer's pre-norm slot and feeds no reader
    (post-norms writing the stream: OLMo2, Gemma2's post-attention/post-FFN norms)."""
    out: list[dict[str, Any]] = list(getattr(spaces, "refused", []))
    if spaces is not None:
        out_mods = {(r["module"], r["kind"]) for r in out}
        slots = {n for layer in layout.layers for n in (layer.norm_attention, layer.norm_ffn, layer.norm_shared) if n}
        fed = set(readers_of_norms(spaces))
        inside = tuple(layer.module + "." for layer in layout.layers)  # a final norm (outside the layers) is no post-norm
        for n in spaces.norms:
            if n.startswith(inside) and n not in slots and n not in fed and (n, "norm_scale") not in out_mods:
                out.append({"module": n, "kind": "norm_scale",
                            "reason": "a post-norm: its output is added to the residual stream (no linear map reads "
                                      "it), so scaling it changes the stream; only the stream permutation moves it"})
    for layer in getattr(layout, "layers", ()):
        a = layer.attention
        if a.qk_refused:
            out.append({"module": a.module, "kind": "attention.query_key", "reason": a.qk_refused})
            if a.k.bias is not None:
                out.append({"module": a.module, "kind": "key_bias_translation",
                            "reason": "the query/key path is refused (see attention.query_key)"})
    return out


def _residual_rotation(work: nn.Module, spaces: Any, inputs: Any, tol: float,
                       gen: torch.Generator) -> dict[str, Any] | None:
    """The residual stream's orthogonal group ``O(D)`` of a pre-norm model (``None`` where the
    stream was not traced), verified on its canonical form
    (:func:`paramsym.census.canonical.canonical_form`, embeddings untied): a Haar-random ``Q``
    applied to the canonical model's embeddings, readers and writers
    (:func:`paramsym.census.rotation.rotate_canonical`) must leave the output unchanged (relative
    ``verified_error``, tolerance the canonical form's rounding bound) and move those tensors
    (``motion``, relative; tolerance the census's, :mod:`paramsym.census.precision`: the dtype term
    plus the float32 islands' rounding measured on both models). Not a symmetry of the given weights (their norm scales, biases and
    LayerNorm centring must be folded first), so not in ``total_dimension``; where the canonical
    form is refused (post-norm, base models) ``verified`` is false and ``note`` says why."""
    if spaces is None or not (spaces.norms or spaces.free_norms):
        return None
    from ..errors import SymmetryNotApplicableError
    from .canonical import canonical_form
    from .rotation import random_orthogonal, rotate_canonical, rotation_dimension

    D = spaces.hidden_size
    out: dict[str, Any] = {"dimension": rotation_dimension(D), "group": f"O({D})",
                           "requires": "the canonical form: norm scales and biases folded into the readers, LayerNorm "
                                       "centring into the writers, the LM head untied "
                                       "(paramsym.census.canonical.canonical_form returns the equivalent model)"}
    try:
        canon = canonical_form(work, inputs, model_output, untie=True, spaces=spaces)
    except SymmetryNotApplicableError as e:
        return out | {"verified": False, "note": f"not applicable: {e}"}
    before = {k: v.detach().clone() for k, v in canon.named_parameters()}
    rotated = rotate_canonical(canon, spaces, random_orthogonal(D, gen))
    with torch.no_grad():
        got = model_output(rotated(**inputs))
        ref = model_output(work(**inputs))
        floor = 0.0
        if ref.dtype == torch.float64:  # the one rule: plus the float32 islands' rounding, measured at both models
            floor = island_floor(ref, float64_throughout(lambda: model_output(work(**inputs))),
                                 got, float64_throughout(lambda: model_output(rotated(**inputs))))
    err = float((got - ref).norm() / ref.norm())
    after = {k: v.detach() for k, v in rotated.named_parameters()}
    num = sum(float((after[k] - v).pow(2).sum()) for k, v in before.items())
    den = sum(float(v.pow(2).sum()) for k, v in before.items() if not torch.equal(after[k], v))
    t = tol + floor
    return out | {"verified_error": err, "motion": (num / den) ** 0.5 if den else 0.0,
                  "verified": err <= t and num > 0, "tolerance": t}


def readers_of_norms(spaces: Any) -> dict[str, list[str]]:
    """Stream norm → the readers taking its output (traced: ``Spaces.reader_norm``)."""
    out: dict[str, list[str]] = {}
    for r, n in getattr(spaces, "reader_norm", {}).items():
        out.setdefault(n, []).append(r)
    return out
