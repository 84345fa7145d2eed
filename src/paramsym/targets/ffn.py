"""Boundary targets of FFN units at real scale, from cached block inputs ([Discovery] Prop. 4.1, §6.3).

:func:`capture_inputs` runs a model once and keeps the input of one sub-module;
:class:`FFNBoundaryTarget` is the boundary output of a few FFN units computed from it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import MaskError, ShapeError, check_finite
from ..groups.memory import budget_bytes
from ..params import ParameterBlock, Selection
from .base import Batch, Target, _split_batch


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
        max_memory: memory budget in bytes for batched evaluation (:meth:`output_chunks`).
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
        self.max_memory = budget_bytes(max_memory)
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
        from ..models.adapters import adapt, ffn_activation

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
        from ..models.adapters import Projection

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

    def output_chunks(self, thetas: Tensor, *, max_memory: int | None = None) -> Iterator[Tensor]:
        """The outputs ``F(θ)`` of the rows of ``thetas`` in chunks of rows that fit the budget.

        Pass them to :func:`paramsym.verdict.output_scale` for ``s_F`` (the one definition; it
        merges chunks without holding them): memory is one chunk. The budget is checked here,
        before anything is evaluated.

        Raises:
            TooLargeError: even one point exceeds ``max_memory`` bytes (default ``self.max_memory``);
                the estimate is named.
        """
        from ..errors import TooLargeError

        budget = self.max_memory if max_memory is None else budget_bytes(max_memory)
        one = self.estimate_bytes(1)
        if one > budget:
            raise TooLargeError(f"evaluating the boundary output at one point needs about {one / 2**20:.1f} MiB, over the "
                                f"memory budget of {budget / 2**20:.1f} MiB; raise max_memory or use fewer units/tokens.")
        chunk = max(1, budget // one)

        def chunks() -> Iterator[Tensor]:
            for start in range(0, thetas.shape[0], chunk):
                with torch.no_grad():
                    yield torch.func.vmap(self)(thetas[start:start + chunk].to(self.dtype))

        return chunks()

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
