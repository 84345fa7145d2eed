"""Targets: a pure function ``F_X(θ) = vec(output on the fixed batch X)`` of a parameter block.

Every parameter outside the block and the batch X are fixed *context*. A target is built from a
real ``nn.Module`` with ``torch.func.functional_call`` (the module itself is never modified), or
from a plain function. Two outputs are supported:

* the **whole output** of the model (a tensor, ``.logits``/``.last_hidden_state`` of an HF
  output, or the first element of a tuple; a custom ``output`` callable may post-process it);
* a **boundary output** of a subnetwork (Proposition 4.1): for hidden units ``B`` of a pair of
  linear layers ``in_layer → act → out_layer``, the units' contribution to the next
  pre-activations, ``W_out[:, B] act(W_in[B] h + b_in[B])``, where ``h`` is the (fixed) input of
  ``in_layer`` on X. If the block lies inside these units' weights, the full network depends on
  the block only through this boundary output, so preserving it preserves the full output.

Invariants: ``F(θ0)`` equals the model's own output on X (up to dtype rounding); ``F`` is pure,
differentiable and ``vmap``-able in θ.

Both rest on :class:`ModuleFunction` — the one place a model is copied (eval mode, optional
dtype such as float64), its parameters checked finite and a block selected. Besides the
fixed-batch target it offers the *per-sample* view used by attribution,

    f(params: dict[str, Tensor], x: Tensor[N, ...]) -> Tensor[N, dimY],

a function of the block's whole tensors and of a batch of probe points
(:meth:`ModuleFunction.per_sample`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from .errors import MaskError, ShapeError, check_finite
from .params import ParameterBlock, Selection, detached_params, install

Batch = Tensor | tuple | Mapping[str, Any]
#: ``f(params, x) -> Tensor[N, dimY]``, evaluated per sample (row n depends on x[n] only)
ParamFunction = Callable[[Mapping[str, Tensor], Tensor], Tensor]
#: ``forward(apply, x) -> Tensor`` with ``apply(*args, **kwargs)`` = the model at given parameters
Forward = Callable[..., Tensor]


def _split_batch(batch: Batch) -> tuple[tuple, dict]:
    if isinstance(batch, Tensor):
        return (batch,), {}
    if isinstance(batch, Mapping):
        return (), dict(batch)
    if isinstance(batch, (tuple, list)):
        return tuple(batch), {}
    raise ShapeError(
        f"batch must be a Tensor, a tuple of positional inputs or a dict of keyword inputs; "
        f"received {type(batch).__name__}."
    )


def _default_output(out: Any) -> Tensor:
    if isinstance(out, Tensor):
        return out
    for attr in ("logits", "last_hidden_state"):
        val = getattr(out, attr, None)
        if isinstance(val, Tensor):
            return val
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], Tensor):
        return out[0]
    raise ShapeError(
        f"cannot take a tensor from the model output of type {type(out).__name__}; pass "
        "output=callable(model_output) -> Tensor to the Target."
    )


def _convert(obj: Any, dtype: torch.dtype | None, device: torch.device | str | None) -> Any:
    if isinstance(obj, Tensor):
        if obj.is_floating_point():
            return obj.to(device=device, dtype=dtype or obj.dtype)
        return obj.to(device=device)
    if isinstance(obj, Mapping):
        return {k: _convert(v, dtype, device) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(_convert(v, dtype, device) for v in obj)
    return obj


def _check_batch_finite(batch: Batch) -> None:
    args, kwargs = _split_batch(batch)
    for i, a in enumerate(args):
        if isinstance(a, Tensor) and a.is_floating_point():
            check_finite(f"batch input {i}", a, "Remove or fix the non-finite rows of X.")
    for k, a in kwargs.items():
        if isinstance(a, Tensor) and a.is_floating_point():
            check_finite(f"batch input {k!r}", a, "Remove or fix the non-finite rows of X.")


class ModuleFunction:
    """A private eval-mode copy of ``model`` and a block of its parameters; everything else fixed.

    Args:
        model: any ``nn.Module``; copied (never modified), put in eval mode, gradients off.
        block: a :class:`ParameterBlock`, entry selections, a predicate on names (whole
            tensors) or ``None`` (every parameter with ``requires_grad``, whole tensors).
        dtype: floating dtype of the copy (``None`` keeps the model's; ``torch.float64`` for
            attribution's float64 analysis).

    Raises:
        ParameterNameError, MaskError: bad block selection (one message style, see params).
        NonFiniteError: non-finite parameters or buffers.
    """

    def __init__(
        self,
        model: nn.Module,
        block: ParameterBlock | Selection | Sequence[Selection] | Callable[[str], bool] | None = None,
        *,
        dtype: torch.dtype | None = None,
    ):
        if not isinstance(model, nn.Module):
            raise ShapeError(f"model must be a torch.nn.Module, received {type(model).__name__}.")
        # select on the caller's model (``None`` reads its requires_grad flags), then copy
        self.block = block if isinstance(block, ParameterBlock) else ParameterBlock.from_module(model, block)
        self.model = copy.deepcopy(model)
        if dtype is not None:
            self.model = self.model.to(dtype)
        self.model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.params = detached_params(self.model)
        for k, v in self.params.items():
            if v.is_floating_point():
                check_finite(f"parameter {k!r}", v, "Fix the model's weights before analysing them.")

    def block_params(self) -> dict[str, Tensor]:
        """Clones of the block's whole tensors (the ``params`` argument of :meth:`per_sample`)."""
        self._require_whole()
        return {k: v.clone() for k, v in self.block.tensors(self.params).items()}

    def _require_whole(self) -> None:
        if not self.block.is_whole:
            raise MaskError(
                f"the per-sample view needs whole tensors, but {self.block!r} selects parts of "
                "tensors; select whole parameters (names or a predicate)."
            )

    def per_sample(self, forward: Forward | None = None) -> ParamFunction:
        """``f(params, x) -> [N, dimY]``: the model on probe points ``x`` at block tensors ``params``.

        ``params`` are the block's whole tensors (missing ones keep their fixed values); the
        other parameters and buffers are fixed. ``forward(apply, x)`` customises the call
        (``apply(*args, **kwargs)`` runs the model), e.g. a Hugging Face encoder:
        ``lambda apply, x: apply(inputs_embeds=x).last_hidden_state.mean(1)``. The output is
        reshaped to ``[N, dimY]`` (``[N]`` becomes ``[N, 1]``; trailing dimensions flattened).
        """
        self._require_whole()
        model = self.model
        fixed = {k: v for k, v in self.params.items()}

        def f(p: Mapping[str, Tensor], x: Tensor) -> Tensor:
            merged = {**fixed, **p}

            def apply(*args, **kwargs):
                return functional_call(model, merged, args, kwargs)

            out = forward(apply, x) if forward is not None else apply(x)
            if not isinstance(out, Tensor):
                raise ShapeError(
                    f"the model returned {type(out).__name__}; pass forward=... that returns a "
                    "Tensor of shape [N, dimY]."
                )
            n = x.shape[0]
            if out.dim() == 0 or out.shape[0] != n:
                raise ShapeError(
                    f"the model output has shape {tuple(out.shape)}; expected a leading batch "
                    f"dimension {n} (one row per probe point)."
                )
            return out.reshape(n, -1)

        return f

    def install(self, theta: Tensor) -> nn.Module:
        """A copy of the model with the block set to ``theta``."""
        return install(self.model, self.block, theta)


class Target(ModuleFunction):
    """``F_X(θ)``: the flattened output of ``model`` on ``batch`` as a function of a block.

    Args:
        model: any ``nn.Module``; it is put in eval mode on a private copy and never modified.
        block: a :class:`ParameterBlock` or selections (see :mod:`paramsym.params`).
        batch: the fixed batch X (tensor, tuple of positional inputs, or dict of keyword inputs).
        output: optional ``callable(model_output) -> Tensor`` choosing/post-processing the output.
        name: a label used in reports.

    Raises:
        ParameterNameError, MaskError: bad block selection.
        NonFiniteError: non-finite parameters or batch.
    """

    def __init__(
        self,
        model: nn.Module,
        block: ParameterBlock | Selection | Sequence[Selection],
        batch: Batch,
        output: Callable[[Any], Tensor] | None = None,
        *,
        name: str = "",
    ):
        super().__init__(model, block)
        _check_batch_finite(batch)
        self.batch = batch
        self._args, self._kwargs = _split_batch(batch)
        self.output = output
        self.name = name or type(model).__name__
        self.theta0 = self.block.gather(self.params).clone()
        with torch.no_grad():
            self.out_shape = tuple(self._forward(self.params).shape)

    # -- evaluation ------------------------------------------------------------------------
    def _forward(self, params: Mapping[str, Tensor]) -> Tensor:
        out = functional_call(self.model, dict(params), self._args, self._kwargs)
        return self.output(out) if self.output is not None else _default_output(out)

    def __call__(self, theta: Tensor) -> Tensor:
        """``F_X(θ)`` flattened to a vector of length ``q``."""
        return self._forward(self.block.scatter(theta, self.params)).reshape(-1)

    @property
    def p(self) -> int:
        """Dimension of the parameter block."""
        return self.block.size

    @property
    def q(self) -> int:
        """Number of output components."""
        n = 1
        for s in self.out_shape:
            n *= s
        return n

    @property
    def dtype(self) -> torch.dtype:
        return self.theta0.dtype

    @property
    def device(self) -> torch.device:
        return self.theta0.device

    def to(self, dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> Target:
        """A copy of this target in another dtype/device (model, batch and θ0 converted)."""
        new = copy.copy(self)
        new.model = copy.deepcopy(self.model).to(device=device, dtype=dtype) if dtype else copy.deepcopy(self.model).to(device)
        new.params = detached_params(new.model)
        new.batch = _convert(self.batch, dtype, device)
        new._args, new._kwargs = _split_batch(new.batch)
        new.theta0 = new.block.gather(new.params).clone()
        new._after_to(self, dtype, device)
        return new

    def _after_to(self, old: Target, dtype, device) -> None:
        """Hook for subclasses holding extra tensors."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, p={self.p}, q={self.q})"


class FunctionTarget(Target):
    """A target from a plain function ``fn(θ) -> Tensor`` and a base point ``theta0``."""

    def __init__(self, fn: Callable[[Tensor], Tensor], theta0: Tensor, *, name: str = "function"):
        check_finite("theta0", theta0)
        self.fn = fn
        self.theta0 = theta0.detach().clone().reshape(-1)
        self.name = name
        self.model = None
        self.block = None
        with torch.no_grad():
            self.out_shape = tuple(fn(self.theta0).shape)

    def __call__(self, theta: Tensor) -> Tensor:
        return self.fn(theta).reshape(-1)

    @property
    def p(self) -> int:
        return int(self.theta0.numel())

    def install(self, theta: Tensor) -> nn.Module:
        from .errors import ParamsymError

        raise ParamsymError("a FunctionTarget has no model to install parameters into.")

    def to(self, dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> FunctionTarget:
        new = copy.copy(self)
        new.theta0 = self.theta0.to(device=device, dtype=dtype or self.theta0.dtype)
        return new


class BoundaryTarget(Target):
    """The boundary output of hidden units ``units`` between two linear layers (Prop. 4.1).

    ``F_X(θ) = vec( act(h W_in[B]ᵀ + b_in[B]) W_out[:, B]ᵀ )`` with ``h`` the input of
    ``in_layer`` on X (captured once from the unmodified model; it does not depend on the block)
    and ``B = units``. The block must lie inside ``in_layer.weight[B]``, ``in_layer.bias[B]`` and
    ``out_layer.weight[:, B]``; otherwise the full output could depend on the block outside the
    boundary and the lifting argument would fail, so this raises :class:`MaskError`.

    Args:
        model: the host network.
        block: block selections (e.g. ``["fc1.weight[3]", "fc2.weight[:, 3]"]``).
        batch: the host's input batch X.
        in_layer, out_layer: names of ``nn.Linear`` sub-modules (weights ``(out, in)`` layout).
        units: hidden-unit indices B.
        activation: the elementwise activation between the two layers.
    """

    def __init__(
        self,
        model: nn.Module,
        block: ParameterBlock | Selection | Sequence[Selection],
        batch: Batch,
        *,
        in_layer: str,
        out_layer: str,
        units: Sequence[int],
        activation: Callable[[Tensor], Tensor],
        name: str = "",
    ):
        modules = dict(model.named_modules())
        for lname in (in_layer, out_layer):
            if lname not in modules or not isinstance(modules[lname], nn.Linear):
                linears = [n for n, m in modules.items() if isinstance(m, nn.Linear)]
                raise MaskError(f"boundary layer {lname!r} is not an nn.Linear of the model; linear layers: {linears}.")
        self.in_layer, self.out_layer = in_layer, out_layer
        self.units = torch.as_tensor(list(units), dtype=torch.long)
        self.activation = activation
        captured: dict[str, Tensor] = {}

        def hook(_mod, inputs):
            captured["h"] = inputs[0].detach()

        probe = copy.deepcopy(model).eval()  # eval mode on a copy: the user's model is never modified
        handle = dict(probe.named_modules())[in_layer].register_forward_pre_hook(hook)
        try:
            args, kwargs = _split_batch(batch)
            with torch.no_grad():
                probe(*args, **kwargs)
        finally:
            handle.remove()
        self.h = captured["h"]
        super().__init__(model, block, batch, name=name or f"{type(model).__name__}:boundary{list(units)}")
        self._check_block_inside()

    def _check_block_inside(self) -> None:
        allowed: dict[str, Tensor] = {}
        win = self.params[f"{self.in_layer}.weight"]
        m = torch.zeros_like(win, dtype=torch.bool)
        m[self.units] = True
        allowed[f"{self.in_layer}.weight"] = m
        if f"{self.in_layer}.bias" in self.params:
            mb = torch.zeros_like(self.params[f"{self.in_layer}.bias"], dtype=torch.bool)
            mb[self.units] = True
            allowed[f"{self.in_layer}.bias"] = mb
        wout = self.params[f"{self.out_layer}.weight"]
        mo = torch.zeros_like(wout, dtype=torch.bool)
        mo[:, self.units] = True
        allowed[f"{self.out_layer}.weight"] = mo
        for e in self.block.entries:
            ok = allowed.get(e.name)
            if ok is None or not bool(ok.reshape(-1)[e.index].all()):
                raise MaskError(
                    f"block entry {e.name!r} reaches outside the boundary subnetwork of units "
                    f"{self.units.tolist()} ({self.in_layer}.weight rows, {self.in_layer}.bias, "
                    f"{self.out_layer}.weight columns); the full output would depend on it outside "
                    "the boundary output. Restrict the block to these weights."
                )

    def _forward(self, params: Mapping[str, Tensor]) -> Tensor:
        w_in = params[f"{self.in_layer}.weight"][self.units]
        z = self.h @ w_in.T
        bias = params.get(f"{self.in_layer}.bias")
        if bias is not None:
            z = z + bias[self.units]
        w_out = params[f"{self.out_layer}.weight"][:, self.units]
        return self.activation(z) @ w_out.T

    def _after_to(self, old: Target, dtype, device) -> None:
        self.h = _convert(old.h, dtype, device)
        self.units = old.units.to(device) if device is not None else old.units


# -- real-scale FFN boundary targets -----------------------------------------------------------
def capture_inputs(model: nn.Module, module: str, batch: Batch) -> Tensor:
    """The input of sub-module ``module`` when ``model`` runs on ``batch``, as ``(N, n_in)``.

    Runs the model once under ``no_grad`` in eval mode (its mode is restored; its weights are
    never modified); every leading (batch, sequence) dimension is flattened into ``N`` rows.

    Raises:
        MaskError: no sub-module of that name.
    """
    modules = dict(model.named_modules())
    if module not in modules:
        raise MaskError(f"cannot capture the input of {module!r}: the model has no such sub-module.")
    captured: dict[str, Tensor] = {}

    def hook(_mod, inputs):
        captured["h"] = inputs[0].detach()

    was = model.training
    handle = modules[module].register_forward_pre_hook(hook)
    try:
        model.eval()
        args, kwargs = _split_batch(batch)
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        handle.remove()
        model.train(was)
    h = captured["h"]
    return h.reshape(-1, h.shape[-1])


class FFNBoundaryTarget(Target):
    """The boundary output of a few FFN units, computed from cached block inputs (Prop. 4.1).

    For units ``B = (u_1, .., u_s)`` of an FFN ``down(act(up x))`` (or, gated,
    ``down(act(gate x) ⊙ up x)``) with input rows ``h ∈ R^{N×n}`` (captured once from the real
    model on the batch by :func:`capture_inputs`),

        F(θ) = vec( A Wᵀ ),   A = act(h W_upᵀ + b_up)           (N × s)  or
                              A = act(h W_gateᵀ + b_gate) ⊙ (h W_upᵀ + b_up),
                              W = W_down[:, B]                  (m × s).

    The parameters are held *compactly* in canonical (out × in) layout, whatever the storage
    (``nn.Linear``, GPT-2's input-major ``Conv1D``, fused tensors; :class:`~paramsym.models.adapters.Projection`):
    ``"up.weight"`` (s × n), ``"up.bias"`` (s), ``"gate.weight"``, ``"gate.bias"`` (gated blocks),
    ``"down.weight"`` (m × s); compact unit ``i`` is model unit ``units[i]``. The first
    ``n_moving`` units are the *moving* units, the others the *compensators*. The default block
    (``block=None``) is the protocol's: the moving units' incoming weights and biases (and gate
    rows) and the compensators' outgoing columns. Every evaluation costs ``O(N s (n + m))``; the
    model is never rerun, copied or modified (:meth:`install` copies, :meth:`write` edits a model
    you pass).

    Invariants: ``F(θ0)`` equals the units' contribution to the FFN output on the batch (before
    the down bias); the full model depends on the block only through ``F``, so preserving ``F``
    preserves the model's output on the batch.

    Args:
        model: the host model (kept by reference; never modified).
        batch: its input batch (the prefix).
        up, down, gate: the :class:`Projection` s of the FFN.
        activation: the elementwise activation.
        units: model unit indices ``B`` (moving first).
        n_moving: how many of ``units`` move (default 1).
        inputs: the cached FFN input ``(N, n)`` (default: captured from ``input_module``).
        input_module: the sub-module whose input is the FFN input (default: ``up``'s module).
        block: selections over the compact names (``str`` or ``(name, bool mask)``), or ``None``.
        dtype: dtype of the compact parameters and cached inputs (default float64).
        max_memory: memory budget in bytes for batched evaluation (:meth:`output_scale`).
    """

    def __init__(self, model: nn.Module, batch: Batch, *, up, down, activation: Callable[[Tensor], Tensor],
                 units: Sequence[int], gate=None, n_moving: int = 1, inputs: Tensor | None = None,
                 input_module: str | None = None, block: Selection | Sequence[Selection] | None = None,
                 dtype: torch.dtype = torch.float64, max_memory: int = 2 * 2**30, name: str = ""):
        units = [int(u) for u in units]
        hidden = up.out_features
        bad = [u for u in units if not 0 <= u < hidden]
        if bad or len(set(units)) != len(units) or not units:
            raise ShapeError(f"FFN units must be distinct indices in [0, {hidden}); received {units}. Choose units of "
                             f"this layer's {hidden} hidden units.")
        if not 1 <= n_moving <= len(units):
            raise ShapeError(f"n_moving = {n_moving} must lie in [1, {len(units)}] (the number of units).")
        self.model, self.batch = model, batch
        self.projections = {"up": up, "down": down, **({"gate": gate} if gate is not None else {})}
        self.activation, self.units, self.n_moving = activation, units, int(n_moving)
        self.max_memory = int(max_memory)
        self.name = name or f"{type(model).__name__}:ffn{units[:4]}{'…' if len(units) > 4 else ''}"
        h = inputs if inputs is not None else capture_inputs(model, input_module or up.weight.rsplit(".", 1)[0], batch)
        if h.shape[-1] != up.in_features:
            raise ShapeError(f"cached FFN inputs have {h.shape[-1]} features; the up projection expects {up.in_features}.")
        check_finite("cached FFN inputs", h, "Fix the model or the batch.")
        self.h = h.reshape(-1, h.shape[-1]).to(dtype)
        full = dict(model.named_parameters())
        idx = torch.as_tensor(units, dtype=torch.long)
        params: dict[str, Tensor] = {}
        for key, proj in self.projections.items():
            flat = full[proj.weight].detach().reshape(-1)
            if key == "down":
                params["down.weight"] = flat[proj.column_positions(idx)].to(dtype)
            else:
                params[f"{key}.weight"] = flat[proj.row_positions(idx)].to(dtype)
                if proj.bias is not None:
                    params[f"{key}.bias"] = full[proj.bias].detach().reshape(-1)[proj.bias_positions(idx)].to(dtype)
        for k, v in params.items():
            check_finite(f"parameter {k!r}", v, "Fix the model's weights before analysing them.")
        self.params = params
        self.block = ParameterBlock(params, self.protocol_block() if block is None else block)
        self.theta0 = self.block.gather(params).clone()
        self._args, self._kwargs = _split_batch(batch)
        self.output = None
        self.out_shape = (self.h.shape[0], down.out_features)

    @classmethod
    def from_layer(cls, model: nn.Module, layer: int, units: Sequence[int], batch: Batch, **kwargs: Any) -> FFNBoundaryTarget:
        """The target for FFN units of layer ``layer`` of a Hugging Face model (via its adapter).

        Raises:
            UnknownArchitectureError: no adapter for the model type.
            ShapeError: ``layer`` or a unit out of range (the ranges are named).
        """
        from .models.adapters import adapt, ffn_activation

        layout = adapt(model)
        L = len(layout.layers)
        if not 0 <= int(layer) < L:
            raise ShapeError(f"layer {layer} is out of range: the model has {L} layers (0..{L - 1}). Choose one of them.")
        ffn = layout.layers[int(layer)].ffn
        kwargs.setdefault("input_module", ffn.input_module)
        kwargs.setdefault("name", f"{layout.model_type}:layer{layer}:ffn")
        return cls(model, batch, up=ffn.up, down=ffn.down, gate=ffn.gate, activation=ffn_activation(ffn),
                   units=units, **kwargs)

    @classmethod
    def from_linears(cls, model: nn.Module, batch: Batch, *, up: str, down: str, activation: Callable[[Tensor], Tensor],
                     units: Sequence[int], gate: str | None = None, **kwargs: Any) -> FFNBoundaryTarget:
        """The target for a block ``down(act(up x))`` (or gated) of ``nn.Linear`` sub-modules named
        ``up``, ``down`` (``gate``), e.g. ``nn.Sequential(nn.Linear, nn.Tanh(), nn.Linear)`` with
        ``up="0", down="2"``.

        Raises:
            MaskError: a name that is not an ``nn.Linear`` of the model (the linear layers are listed).
        """
        from .models.adapters import Projection

        modules = dict(model.named_modules())
        projs = {}
        for key, lname in (("up", up), ("down", down), ("gate", gate)):
            if lname is None:
                continue
            mod = modules.get(lname)
            if not isinstance(mod, nn.Linear):
                linears = [n for n, m in modules.items() if isinstance(m, nn.Linear)]
                raise MaskError(f"{key} layer {lname!r} is not an nn.Linear of the model; linear layers: {linears}.")
            projs[key] = Projection(f"{lname}.weight", f"{lname}.bias" if mod.bias is not None else None, "out_in",
                                    tuple(mod.weight.shape))
        return cls(model, batch, activation=activation, units=units, up=projs["up"], down=projs["down"],
                   gate=projs.get("gate"), **kwargs)

    # -- structure --------------------------------------------------------------------------
    @property
    def gated(self) -> bool:
        return "gate" in self.projections

    def incoming_names(self) -> list[str]:
        """Compact names holding the units' incoming weights and biases."""
        return [k for k in ("up.weight", "up.bias", "gate.weight", "gate.bias") if k in self.params]

    def protocol_block(self) -> list[tuple[str, Tensor]]:
        """Moving units' incoming weights/biases and compensators' outgoing columns (masks)."""
        sel: list[tuple[str, Tensor]] = []
        for k in self.incoming_names():
            m = torch.zeros(self.params[k].shape, dtype=torch.bool)
            m[: self.n_moving] = True
            sel.append((k, m))
        if len(self.units) > self.n_moving:
            m = torch.zeros(self.params["down.weight"].shape, dtype=torch.bool)
            m[:, self.n_moving:] = True
            sel.append(("down.weight", m))
        return sel

    # -- evaluation -------------------------------------------------------------------------
    def features_of(self, params: Mapping[str, Tensor]) -> Tensor:
        """Unit features ``A`` (N × s) on the cached inputs at compact ``params``."""
        z = self.h.to(params["up.weight"].dtype) @ params["up.weight"].T
        if "up.bias" in params:
            z = z + params["up.bias"]
        if not self.gated:
            return self.activation(z)
        zg = self.h.to(params["gate.weight"].dtype) @ params["gate.weight"].T
        if "gate.bias" in params:
            zg = zg + params["gate.bias"]
        return self.activation(zg) * z

    def features(self) -> Tensor:
        """Unit features at the base point, ``(N, s)``."""
        return self.features_of(self.params)

    def _forward(self, params: Mapping[str, Tensor]) -> Tensor:
        return self.features_of(params) @ params["down.weight"].T

    def estimate_bytes(self, n_points: int) -> int:
        """Peak bytes of evaluating ``n_points`` θ at once (points, features, outputs; ×2 slack)."""
        s = len(self.units)
        per = self.p + self.q + self.h.shape[0] * s * (3 if self.gated else 2) + sum(v.numel() for v in self.params.values())
        return int(2 * n_points * per * self.theta0.element_size())

    def output_scale(self, thetas: Tensor, *, max_memory: int | None = None) -> float:
        """``sqrt(E‖F(θ) − E F‖²)`` over the rows of ``thetas``, evaluated in chunks within the budget.

        Streaming (Chan's pairwise update of the centred sum of squares): memory is one chunk.

        Raises:
            TooLargeError: even one point exceeds ``max_memory`` bytes (default ``self.max_memory``);
                the estimate is named.
        """
        from .errors import TooLargeError

        budget = self.max_memory if max_memory is None else int(max_memory)
        one = self.estimate_bytes(1)
        if one > budget:
            raise TooLargeError(f"evaluating the boundary output at one point needs about {one / 2**20:.1f} MiB, over the "
                                f"memory budget of {budget / 2**20:.1f} MiB; raise max_memory or use fewer units/tokens.")
        chunk = max(1, budget // one)
        n, mean, m2 = 0, None, 0.0
        with torch.no_grad():
            for start in range(0, thetas.shape[0], chunk):
                F = torch.func.vmap(self)(thetas[start:start + chunk].to(self.dtype))
                nb, mb = F.shape[0], F.mean(0)
                m2b = float((F - mb).pow(2).sum())
                if mean is None:
                    n, mean, m2 = nb, mb, m2b
                else:
                    delta = mb - mean
                    tot = n + nb
                    m2 = m2 + m2b + float(delta.pow(2).sum()) * n * nb / tot
                    mean = mean + delta * (nb / tot)
                    n = tot
        return float((m2 / max(n, 1)) ** 0.5)

    # -- installing edits ---------------------------------------------------------------------
    def compact(self, theta: Tensor) -> dict[str, Tensor]:
        """The compact parameters with the block set to ``theta``."""
        return self.block.scatter(theta, self.params)

    def edits(self, theta: Tensor) -> dict[str, tuple[Tensor, Tensor]]:
        """``{model parameter name: (flat positions, values)}`` writing ``theta`` into the model."""
        check_finite("θ to install", theta, "Only finite parameter values can be installed.")
        c = self.compact(theta.detach())
        idx = torch.as_tensor(self.units, dtype=torch.long)
        out: dict[str, tuple[Tensor, Tensor]] = {}
        for key, proj in self.projections.items():
            if key == "down":
                out[proj.weight] = (proj.column_positions(idx).reshape(-1), c["down.weight"].reshape(-1))
                continue
            out.setdefault(proj.weight, (torch.empty(0, dtype=torch.long), torch.empty(0)))
            pos, val = out[proj.weight]
            out[proj.weight] = (torch.cat([pos, proj.row_positions(idx).reshape(-1)]),
                                torch.cat([val.to(c[f"{key}.weight"].dtype), c[f"{key}.weight"].reshape(-1)]))
            if proj.bias is not None:
                bpos, bval = out.get(proj.bias, (torch.empty(0, dtype=torch.long), torch.empty(0)))
                out[proj.bias] = (torch.cat([bpos, proj.bias_positions(idx)]),
                                  torch.cat([bval.to(c[f"{key}.bias"].dtype), c[f"{key}.bias"].reshape(-1)]))
        return out

    def write(self, model: nn.Module, theta: Tensor) -> dict[str, Tensor]:
        """Write ``theta`` into ``model`` **in place** (rounded to its dtype, e.g. float32).

        Returns the previous values of the edited tensors' entries (``{name: flat values}``), for
        :meth:`restore`.
        """
        named = dict(model.named_parameters())
        old: dict[str, Tensor] = {}
        with torch.no_grad():
            for name, (pos, val) in self.edits(theta).items():
                flat = named[name].data.view(-1)
                p = pos.to(flat.device)
                old[name] = flat[p].clone()
                flat[p] = val.to(device=flat.device, dtype=flat.dtype)
        return old

    def restore(self, model: nn.Module, old: Mapping[str, Tensor]) -> None:
        """Undo :meth:`write` (``old`` is what it returned)."""
        named = dict(model.named_parameters())
        pos = {name: p for name, (p, _) in self.edits(self.theta0).items()}
        with torch.no_grad():
            for name, val in old.items():
                named[name].data.view(-1)[pos[name].to(val.device)] = val

    def install(self, theta: Tensor) -> nn.Module:
        """A copy of the host model with ``theta`` written into it (in the model's dtype)."""
        new = copy.deepcopy(self.model)
        self.write(new, theta)
        return new

    def to(self, dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> FFNBoundaryTarget:
        """A copy with the compact parameters and cached inputs converted (the host is shared)."""
        new = copy.copy(self)
        new.params = {k: v.to(device=device, dtype=dtype or v.dtype) for k, v in self.params.items()}
        new.h = self.h.to(device=device, dtype=dtype or self.h.dtype)
        new.theta0 = new.block.gather(new.params).clone()
        return new

    def __repr__(self) -> str:
        return (f"FFNBoundaryTarget({self.name!r}, units={len(self.units)} ({self.n_moving} moving), "
                f"tokens={self.h.shape[0]}, p={self.p}, q={self.q})")
