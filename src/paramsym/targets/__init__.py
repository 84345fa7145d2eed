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

from .base import (
    Batch,
    BoundaryTarget,
    Forward,
    FunctionTarget,
    ModuleFunction,
    ParamFunction,
    Target,
    model_output,
)
from .ffn import FFNBoundaryTarget, capture_inputs

__all__ = [
    "Batch",
    "BoundaryTarget",
    "FFNBoundaryTarget",
    "Forward",
    "FunctionTarget",
    "ModuleFunction",
    "ParamFunction",
    "Target",
    "capture_inputs",
    "model_output",
]
