"""Verifying: the probes that keep or refute a placement, ``F(g·θ) ≈ F(θ)`` on the actual weights.

:class:`Invariance` applies a candidate transformation (one random group element of a catalogue
action placed by a hypothesis) to the model's parameters and compares the output with the
unchanged model's: within ``PROBE_TOL`` relative in float64 (float32 norms and softmax inside
some models floor at ~1e-7), 1e-4 in float32. A hypothesis whose shapes do not fit is refuted.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.func import functional_call

from ..models.adapters import AttentionLayout, FFNLayout, LayerLayout, ModelLayout, Projection
from .tracing import NormInfo

__all__ = ["Invariance", "PROBE_TOL"]

Params = dict[str, Tensor]
PROBE_TOL = 1e-6  # probes in float64 (float32 norms/softmax inside some models floor at ~1e-7); 1e-4 in float32


class Invariance:
    """``F(g·θ) ≈ F(θ)`` for candidate placements (the probes that select hypotheses)."""

    def __init__(self, model, params, inputs, output, base):
        self.model, self.inputs, self.output, self.base = model, dict(inputs), output, base
        self.params = {k: v.detach() for k, v in params.items()}

    def __call__(self, transform: Callable[[Params, torch.Generator], Params]) -> bool:
        try:
            with torch.no_grad():
                new = transform(self.params, torch.Generator().manual_seed(7))
                out = self.output(functional_call(self.model, new, (), self.inputs))
        except Exception:  # noqa: BLE001 - a hypothesis whose shapes do not fit is simply refuted
            return False
        tol = PROBE_TOL if self.base.dtype == torch.float64 else 1e-4
        return float((out - self.base).norm() / self.base.norm()) <= tol

    def attention(self, lay: AttentionLayout) -> bool:
        from .finders import AttentionFinder

        ctx = _ctx(self, lay)
        return all(self(c.transform) for c in AttentionFinder().find(ctx))

    def value_output(self, lay: AttentionLayout) -> bool:
        """The value/output action alone (query/key left out)."""
        from .finders import AttentionFinder

        ctx = _ctx(self, lay)
        return all(self(c.transform) for c in AttentionFinder().find(ctx) if c.kind == "attention.value_output.gl")

    def ffn_up(self, up: Projection, down: Projection) -> bool:
        """Scaling the ``up`` features by α and the ``down`` input columns by 1/α is invisible."""
        def t(p, g):
            p = dict(p)
            a = 1.7
            for pos, name in ((up.row_positions(torch.arange(up.out_features)), up.weight),):
                flat = p[name].reshape(-1).clone()
                flat[pos.reshape(-1)] *= a
                p[name] = flat.reshape(p[name].shape)
            if up.bias is not None:
                flat = p[up.bias].reshape(-1).clone()
                flat[up.bias_positions(torch.arange(up.out_features))] *= a
                p[up.bias] = flat.reshape(p[up.bias].shape)
            flat = p[down.weight].reshape(-1).clone()
            flat[down.column_positions(torch.arange(down.in_features)).reshape(-1)] /= a
            p[down.weight] = flat.reshape(p[down.weight].shape)
            return p
        return self(t)

    def norm_scale(self, layer: LayerLayout, norm: str, part, info: NormInfo, linears) -> bool:
        from .catalogue_finders import NormScaleFinder

        att = isinstance(part, AttentionLayout)
        if part is None:  # shared by the attention and the FFN
            lay = LayerLayout(layer.index, layer.module, layer.attention, layer.ffn, None, None, norm)
        else:
            lay = LayerLayout(layer.index, layer.module, layer.attention, layer.ffn, norm if att else None,
                              None if att else norm)
        ctx = _ctx(self, None, ModelLayout("probe", (lay,), info.size))
        cands = NormScaleFinder().find(ctx)
        return bool(cands) and all(self(c.transform) for c in cands)


def _ctx(inv: Invariance, lay: AttentionLayout | None, layout: ModelLayout | None = None):
    from .base import CensusContext

    if layout is None:
        dummy = FFNLayout("", lay.o, lay.o, "unknown")
        layout = ModelLayout("probe", (LayerLayout(0, lay.module, lay, dummy),), 0)
    return CensusContext(inv.model, layout, inv.params)


