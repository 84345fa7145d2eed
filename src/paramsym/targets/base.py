"""Targets built from modules and functions: ModuleFunction, Target, FunctionTarget, BoundaryTarget.

See :mod:`paramsym.targets` for the definitions and invariants."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from ..errors import ConfigError, MaskError, ParamsymError, ShapeError, check_finite
from ..params import ParameterBlock, Selection, detached_params, install

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


def model_output(out: Any) -> Tensor:
    """The one tensor taken from a model's output (the one extractor of HF outputs in paramsym).

    ``out`` itself if it is a tensor; else its ``.logits`` (HF heads), else its
    ``.last_hidden_state`` (HF base models), else its first element if it is a tuple/list
    starting with a tensor.

    Raises:
        ShapeError: no tensor can be taken (pass an output callable choosing one).
    """
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
        "output=callable(model_output) -> Tensor (e.g. to the Target) choosing it."
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


def _check_batch(batch: Batch, params: Mapping[str, Tensor]) -> None:
    """Refuse a batch that cannot be the fixed input of a target: tensors on the meta device or
    on another device than the parameters, floating inputs of another dtype than the floating
    parameters, or no rows (then finite entries, :func:`_check_batch_finite`).

    Raises:
        ConfigError: a meta tensor or a device mismatch.
        ShapeError: a floating dtype mismatch or an input with 0 rows.
    """
    args, kwargs = _split_batch(batch)
    floats = {v.dtype for v in params.values() if v.is_floating_point()}
    devices = {v.device for v in params.values()}
    named = [(f"batch input {i}", a) for i, a in enumerate(args)] + [(f"batch input {k!r}", a) for k, a in kwargs.items()]
    for name, a in named:
        if not isinstance(a, Tensor):
            continue
        if a.is_meta:
            raise ConfigError(f"{name} is on the 'meta' device (no values); expected a tensor on "
                              f"{sorted(map(str, devices)) or ['cpu']}. Pass real data.")
        if devices and a.device not in devices:
            raise ConfigError(f"{name} is on {a.device} but the model's parameters are on "
                              f"{', '.join(sorted(map(str, devices)))}; move one of them (X.to(device)).")
        if a.dim() >= 1 and a.shape[0] == 0:
            raise ShapeError(f"{name} has 0 rows (shape {tuple(a.shape)}); expected at least one input row. Pass a "
                             "non-empty batch.")
        if a.is_floating_point() and len(floats) == 1 and a.dtype not in floats:
            want = next(iter(floats))
            raise ShapeError(f"{name} is {str(a.dtype).removeprefix('torch.')} but the model's parameters are "
                             f"{str(want).removeprefix('torch.')}; convert the batch (X.to({want})) or the model.")
    _check_batch_finite(batch)


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
        meta = [k for k, v in [*model.named_parameters(), *model.named_buffers()] if v.is_meta]
        if meta:
            raise ConfigError(f"the model's parameters are on the 'meta' device (no values), e.g. {meta[0]!r}; expected "
                              "real weights on cpu or cuda. Load or initialise the weights (model.to_empty(...) and "
                              "load_state_dict) first.")
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
        _check_batch(batch, self.params)
        self.batch = batch
        self._args, self._kwargs = _split_batch(batch)
        self.output = output
        self.name = name or type(model).__name__
        self.theta0 = self.block.gather(self.params).clone()
        with torch.no_grad():
            try:
                out = self._forward(self.params)
            except ParamsymError:
                raise
            except (RuntimeError, IndexError, TypeError, ValueError) as exc:
                shapes = [tuple(a.shape) for a in (*self._args, *self._kwargs.values()) if isinstance(a, Tensor)]
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
                raise ShapeError(f"the model cannot be evaluated on the batch (input shapes {shapes}): {first}. "
                                 "Check the batch's width and dtype against the model's first layer.") from None
            self.out_shape = tuple(out.shape)

    # -- evaluation ------------------------------------------------------------------------
    def _forward(self, params: Mapping[str, Tensor]) -> Tensor:
        out = functional_call(self.model, dict(params), self._args, self._kwargs)
        return self.output(out) if self.output is not None else model_output(out)

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
        from ..errors import ParamsymError

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
