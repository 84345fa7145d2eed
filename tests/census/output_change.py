"""The model-level check shared by the census tests (imported by test modules; not collected)."""

from __future__ import annotations

import torch

from paramsym.census.walk import _output, default_inputs


def relative_output_change(model: torch.nn.Module, new: dict[str, torch.Tensor]) -> float:
    """``‖f(θ_new) − f(θ)‖ / ‖f(θ)‖`` of the model's output on the census's default inputs (seed 0),
    with ``new`` (parameter name → tensor) substituted by ``torch.func.functional_call``."""
    inputs = default_inputs(model, torch.Generator().manual_seed(0))
    with torch.no_grad():
        base = _output(model(**inputs))
        got = _output(torch.func.functional_call(model, new, (), inputs))
    return float((got - base).norm() / base.norm())
