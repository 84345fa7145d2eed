"""What a model computes in, and the verification floor it sets (issue 34).

Hugging Face models run parts of a float64 forward pass in float32: eager attention calls
``softmax(scores, dtype=torch.float32)``, RMSNorm computes ``x.to(torch.float32)``, Gemma
multiplies by ``1 + w.float()``. Call the float64 forward with these *float32 islands*
``F̃`` and the same forward computed in float64 throughout ``F`` (:class:`Float64Throughout`:
every requested float32 dtype becomes float64, so ``F`` is the model's mathematics in float64).
The island rounding ``E(θ) = F̃(θ) − F(θ)`` depends on the weights (e.g. a key-bias shift
enlarges the logits the float32 softmax rounds), so a fixed tolerance on ``F̃`` makes the
verdict depend on the seed. For a claimed symmetry ``g`` with reference ``R`` (``F(θ)``, or a
permutation of it for an equivariance), the triangle inequality gives

    ‖F̃(g·θ) − R̃‖ ≤ ‖F(g·θ) − R‖ + ‖E(g·θ)‖ + ‖E(θ)‖,

so the derived tolerance of the as-computed error is ``τ + (‖E(θ)‖ + ‖E(g·θ)‖) / ‖F̃(θ)‖``
(both rounding terms are *measured* at the two points, i.e. the islands' unit roundoff
propagated through the model's own conditioning there). A true symmetry
(``‖F(g·θ) − R‖ ≤ τ``) is then verified whatever the seed, and a false one still fails as soon
as its error exceeds the rounding actually present. The float64-throughout error is recorded
beside it (``exact_error``). Without islands ``F̃ = F`` bit for bit and the floor is 0.

**The one rule** (issue 34): ``τ`` is the rounding of the run's own dtype through the model,
:func:`rounding_tolerance` ``= 10·(L + 1)·√n·ε`` — ``L + 1`` read–write blocks (``L`` layers),
each an inner product of length at most ``n`` (the widest fan-in) whose rounding grows like
``√n·ε`` (``ε`` the unit roundoff of the dtype computed in), a margin of 10; plus the measured
island floor above (:func:`island_floor`). Every census verification uses it: the entries
(:class:`PrecisionFloor`), the residual rotation on the canonical form, and — where nothing is
measured (the canonical form's own fold check, the exports' checks) — its a-priori form, ``ε`` of
float32 where the model computes anything in float32 (:func:`compute_dtype`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

__all__ = ["Float64Throughout", "PrecisionFloor", "compute_dtype", "float64_throughout", "island_floor", "model_extent",
           "rounding_tolerance"]

Params = Mapping[str, Tensor]

_CASTS = {torch.Tensor.to, torch.Tensor.type}


class Float64Throughout(TorchFunctionMode):
    """Inside this mode a float64 forward pass stays in float64: a ``dtype=torch.float32``
    argument (softmax, factories, ``.to``) becomes ``torch.float64``, ``Tensor.float()`` becomes
    ``Tensor.double()``, and ``.to(torch.float32)`` / ``.type(torch.float32)`` /
    ``.type_as(<a float32 tensor>)`` become float64.
    Nothing else is changed, so the result is the same computation without float32 rounding."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if kwargs.get("dtype") is torch.float32:
            kwargs["dtype"] = torch.float64
        if func is torch.Tensor.float:
            func = torch.Tensor.double
        elif func is torch.Tensor.type_as and len(args) == 2 and getattr(args[1], "dtype", None) == torch.float32:
            func, args = torch.Tensor.double, args[:1]
        elif func in _CASTS:
            args = tuple(torch.float64 if a is torch.float32 or (isinstance(a, str) and a == "torch.FloatTensor") else a
                         for a in args)
        return func(*args, **kwargs)


class PrecisionFloor:
    """The as-computed forward ``F̃`` and the float64-throughout ``F`` of one verification
    (module docstring): ``floor(new)`` is the relative island rounding at ``θ`` plus at ``new``.

    Args:
        forward: ``params -> output`` of the model as it computes (float64 with its islands).
        params: the unchanged parameters ``θ``.
        dtype: the verification dtype; islands exist only in float64 runs.
    """

    def __init__(self, forward: Callable[[Params], Tensor], params: Params, dtype: torch.dtype):
        self.forward = forward
        self.base = forward(params)
        self.active = dtype == torch.float64
        self.base_exact = self.exact(params) if self.active else self.base
        self.islands = self.active and not torch.equal(self.base, self.base_exact)
        self.scale = float(self.base.norm()) or 1.0
        self.rounding0 = float((self.base - self.base_exact).norm()) / self.scale

    def exact(self, params: Params) -> Tensor:
        """``F(params)`` computed in float64 throughout."""
        return float64_throughout(lambda: self.forward(params))

    def check(self, out: Tensor, exact_out: Callable[[], Tensor], expected: Callable[[Tensor], Tensor] | None = None
              ) -> tuple[float, float | None, float]:
        """``(error, exact_error, floor)`` of an as-computed output ``out`` (``exact_out()`` gives
        the same point's output in float64 throughout; called only where the model has islands):
        the relative error against ``F̃(θ)`` (through ``expected`` for an equivariance), the same
        in float64 throughout (``None`` without islands) and the rounding floor
        ``(‖E(θ)‖ + ‖E(g·θ)‖) / ‖F̃(θ)‖``."""
        ref = self.base if expected is None else expected(self.base)
        err = float((out - ref).norm()) / self.scale
        if not self.islands:
            return err, None, 0.0
        out_exact = exact_out()
        ref_exact = self.base_exact if expected is None else expected(self.base_exact)
        exact_err = float((out_exact - ref_exact).norm()) / self.scale
        return err, exact_err, island_floor(self.base, self.base_exact, out, out_exact)


def island_floor(base: Tensor, base_exact: Tensor, out: Tensor, out_exact: Tensor) -> float:
    """The measured rounding floor ``(‖E(θ)‖ + ‖E(g·θ)‖) / ‖F̃(θ)‖`` with ``E = F̃ − F`` the as-computed
    output minus the float64-throughout one, at ``θ`` (``base``) and at ``g·θ`` (``out``)."""
    scale = float(base.norm()) or 1.0
    return (float((base - base_exact).norm()) + float((out - out_exact).norm())) / scale


def rounding_tolerance(dtype: torch.dtype, depth: int, width: int) -> float:
    """``10·(depth + 1)·√width·ε(dtype)`` (module docstring: the one rule's dtype term).

    Args:
        dtype: what the model computes in (float64, float32, or lower).
        depth: the number of layers ``L`` (read–write blocks on the residual stream).
        width: the longest inner product (the widest fan-in).
    """
    return 10.0 * (max(int(depth), 0) + 1) * max(int(width), 1) ** 0.5 * torch.finfo(dtype).eps


def compute_dtype(dtype: torch.dtype, float32_inside: bool) -> torch.dtype:
    """What a model run in ``dtype`` computes in, a priori: float32 where it runs in float32 or any
    part of it computes in float32 inside (HF's RMSNorm, softmax), else ``dtype``."""
    return torch.float32 if dtype == torch.float64 and float32_inside else dtype


def model_extent(params: Mapping[str, Tensor], layers: int | None = None) -> tuple[int, int]:
    """``(depth, width)`` for :func:`rounding_tolerance`: ``layers`` (the traced or adapted layer count;
    else the number of matrices) and the longest last axis of any matrix (an upper bound on the fan-in:
    ``nn.Linear`` stores ``(out, in)``, a transposed ``(in, out)`` store only over-estimates)."""
    mats = [p for p in params.values() if p.dim() >= 2]
    depth = int(layers) if layers is not None else len(mats)
    return depth, max((int(p.shape[-1]) for p in mats), default=1)


def float64_throughout(fn: Callable[[], Tensor]) -> Tensor:
    """``fn()`` under :class:`Float64Throughout`."""
    with Float64Throughout():
        return fn()
