"""Jacobian of the realisation map ``θ ↦ f_θ`` on a probe set: dense and matrix-free.

The analysed function is a pure function of a parameter dictionary and a batch of inputs,

    f(params: dict[str, Tensor], x: Tensor[N, dimX]) -> Tensor[N, dimY],

evaluated *per sample* (row ``n`` of the output depends on row ``n`` of ``x`` only; no batch
statistics). Its discretised differential on the probe set ``{x_n}`` is the matrix

    J ∈ R^{(N·dimY) × p},    J[(n, a), i] = ∂ f_{θ,a}(x_n) / ∂θ_i,

with rows in ``(n, a)`` order (n-major, the order of ``f(params, x).reshape(-1)``) and columns
in the order of the whole-tensor :class:`~paramsym.params.ParameterBlock` of the parameters
(the dictionary's insertion order, each tensor flattened row-major). Columns are the pointwise functional sensitivities ``S_i*`` of [Attribution].

Two realisations:

* :func:`dense_jacobian` — ``torch.func.vmap`` over probe points of ``torch.func.jacrev``, in
  chunks of probe points, in float64 by default. Memory ``8·N·dimY·p`` bytes.
* :class:`JacobianOperator` — matrix-free products ``J v`` (``torch.func.jvp``) and ``Jᵀ u``
  (``torch.func.vjp``), plus a ``scipy.sparse.linalg.LinearOperator`` view. Memory ``O(p)`` plus
  one forward pass.

:func:`function_from_module` builds ``f`` from any ``nn.Module`` and a selection of trainable
parameter names (through :class:`paramsym.targets.ModuleFunction`); the other parameters and
buffers are held fixed ("first layer frozen").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor, nn
from torch.func import jacrev, jvp, vjp, vmap

from ..errors import NonFiniteError, ShapeError
from ..linop import LinearOperator
from ..params import ParameterBlock
from ..targets import ModuleFunction, ParamFunction

# --------------------------------------------------------------------------------------------
# The parameter function: built on paramsym.targets / paramsym.params (one implementation)
# --------------------------------------------------------------------------------------------

#: Alias kept for the public API: the column layout of ``J`` is a whole-tensor
#: :class:`~paramsym.params.ParameterBlock` (``ParameterBlock.from_params(p)`` is
#: ``ParameterBlock.from_params(p)``; ``flatten``/``unflatten``/``slice``/``owner`` live there).
ParamLayout = ParameterBlock


def function_from_module(
    module: nn.Module,
    trainable: Sequence[str] | Callable[[str], bool] | str | None = None,
    *,
    forward: Callable[..., Tensor] | None = None,
    dtype: torch.dtype | None = torch.float64,
) -> tuple[ParamFunction, dict[str, Tensor]]:
    """Turn ``module`` into a pure ``f(params, x) -> Tensor[N, dimY]`` of selected parameters.

    A thin wrapper of :class:`paramsym.targets.ModuleFunction` (the one model-copying and
    name-checking path shared with discovery's :class:`~paramsym.targets.Target`):
    ``mf = ModuleFunction(module, trainable, dtype=dtype)``; returns
    ``(mf.per_sample(forward), mf.block_params())``.

    Args:
        module: any ``nn.Module`` (it is copied; the caller's module is never modified).
        trainable: which parameters are the columns of ``J``: ``None`` = every parameter with
            ``requires_grad``; a list of names; a single name; or a predicate on names. The
            others (and all buffers) are held fixed at their current values.
        forward: optional ``forward(apply, x) -> Tensor`` where ``apply(*args, **kwargs)`` runs
            the module with the given parameters; use it for models whose call is not
            ``module(x)`` or whose output needs pooling (e.g. a Hugging Face encoder:
            ``lambda apply, x: apply(inputs_embeds=x).last_hidden_state.mean(1)``).
        dtype: floating dtype of the copy (float64 by default; ``None`` keeps the module's). The
            copy is put in eval mode (dropout off, batch-norm running statistics).

    Returns:
        ``(f, params)``: the function and the dictionary of trainable tensors (detached copies).
        ``f`` reshapes the module's output to ``[N, dimY]`` (a ``[N]`` output becomes
        ``[N, 1]``, trailing dimensions are flattened).
    """
    if isinstance(trainable, str):
        trainable = [trainable]
    mf = ModuleFunction(module, trainable, dtype=dtype)
    return mf.per_sample(forward), mf.block_params()


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------


def check_probes(x: Tensor, name: str = "probe set") -> None:
    """Raise a named error for an empty or non-finite probe set."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape [N, dimX], received {type(x).__name__}.")
    if x.dim() < 2:
        raise ShapeError(f"{name} has shape {tuple(x.shape)}; expected [N, dimX] (one row per point).")
    if x.shape[0] == 0:
        raise ShapeError(
            f"{name} is empty (shape {tuple(x.shape)}); pass at least one probe point, e.g. a "
            "polar grid (paramsym.attribution.polar_grid)."
        )
    if x.is_floating_point():
        bad = int((~torch.isfinite(x)).sum())
        if bad:
            raise NonFiniteError(f"{name} has {bad} non-finite entries; expected all finite.")


def check_outputs(y: Tensor, what: str = "model output") -> Tensor:
    """Raise :class:`NonFiniteError` naming how many outputs are NaN/inf; return ``y``.

    Fast path: a finite sum proves every entry finite (NaN and ±inf propagate through a sum);
    only a non-finite sum (which may also be an overflow) triggers the entry-wise count.
    """
    if y.numel() == 0 or math.isfinite(float(y.sum())):
        return y
    bad = int((~torch.isfinite(y)).sum())
    if bad:
        raise NonFiniteError(
            f"{what} has {bad} non-finite entries out of {y.numel()}; the model diverges on the "
            "probe set — check the parameters (a diverged training run?) and the probe points."
        )
    return y


def _as_dtype(params: Mapping[str, Tensor], dtype: torch.dtype | None) -> dict[str, Tensor]:
    if dtype is None:
        return {k: v.detach() for k, v in params.items()}
    return {k: v.detach().to(dtype) for k, v in params.items()}


# --------------------------------------------------------------------------------------------
# Dense Jacobian
# --------------------------------------------------------------------------------------------


def dense_jacobian(
    fn: ParamFunction,
    params: Mapping[str, Tensor],
    x: Tensor,
    *,
    chunk_size: int | None = 256,
    dtype: torch.dtype | None = torch.float64,
) -> Tensor:
    """Dense ``J ∈ R^{(N·dimY) × p}`` by ``vmap`` over probe points of ``jacrev``.

    Args:
        fn: ``f(params, x) -> [N, dimY]``, per sample.
        params: the trainable tensors (columns in the order of their whole-tensor block).
        x: probe set ``[N, dimX]`` (or ``[N, ...]``).
        chunk_size: probe points per vmapped batch (memory ``chunk·dimY·p`` extra); ``None`` =
            all at once.
        dtype: computation dtype (float64 by default; ``None`` keeps the inputs' dtype).

    Returns:
        ``J`` with rows in ``(n, a)`` order and columns in layout order; equals the matrix of
        :class:`JacobianOperator` and a per-output ``torch.autograd.grad`` loop (see
        ``benchmarks/jacobian.py``).
    """
    check_probes(x)
    p = _as_dtype(params, dtype)
    layout = ParameterBlock.from_params(p)
    xs = x.to(dtype) if (dtype is not None and x.is_floating_point()) else x

    def single(pp, xi):
        return fn(pp, xi.unsqueeze(0))[0]

    jac_one = vmap(jacrev(single), in_dims=(None, 0))
    n = xs.shape[0]
    step = n if chunk_size is None else max(1, int(chunk_size))
    J = None
    offs = layout.offsets
    for s in range(0, n, step):
        jd = jac_one(p, xs[s : s + step])  # name -> [b, dimY, *shape]
        b, dim_y = next(iter(jd.values())).shape[:2]
        if J is None:
            J = torch.empty(n * dim_y, layout.numel, dtype=next(iter(jd.values())).dtype)
        for name, o, size in zip(layout.names, offs, layout.sizes):
            J[s * dim_y : (s + b) * dim_y, o : o + size] = jd[name].reshape(b * dim_y, size)
    return check_outputs(J, "the Jacobian")


# --------------------------------------------------------------------------------------------
# Matrix-free Jacobian
# --------------------------------------------------------------------------------------------


class JacobianOperator(LinearOperator):
    """Matrix-free ``J`` of ``θ ↦ f_θ(x)`` at fixed ``params`` and probe set ``x``.

    A :class:`paramsym.linop.LinearOperator`: rows, column norms, ``dense()``, ``gram()`` and
    the SciPy adapter are the base's, derived from the two products below.

    ``matvec(v) = J v`` by one ``torch.func.jvp``; ``rmatvec(u) = Jᵀ u`` by one
    ``torch.func.vjp`` (its forward pass is recorded once and reused). Vectors are flat, in
    column order of :attr:`layout` (length ``p``) and ``(n, a)`` row order (length ``N·dimY``).

    Args:
        fn: ``f(params, x) -> [N, dimY]``.
        params: the trainable tensors at which ``J`` is taken.
        x: probe set.
        dtype: computation dtype (float64 by default).
    """

    def __init__(
        self,
        fn: ParamFunction,
        params: Mapping[str, Tensor],
        x: Tensor,
        *,
        dtype: torch.dtype | None = torch.float64,
    ):
        check_probes(x)
        self.fn = fn
        self.params = _as_dtype(params, dtype)
        self.layout = ParameterBlock.from_params(self.params)
        self.x = x.to(dtype) if (dtype is not None and x.is_floating_point()) else x
        self.dtype = next(iter(self.params.values())).dtype
        out, self._vjp = vjp(lambda p: fn(p, self.x), self.params)
        self.values = check_outputs(out.detach(), "model output on the probe set")
        self.out_shape = tuple(out.shape)
        self.shape = (int(out.numel()), self.layout.numel)

    def matvec(self, v: Tensor) -> Tensor:
        """``J v`` for a flat ``v`` of length ``p``; returns length ``N·dimY``."""
        v = torch.as_tensor(v, dtype=self.dtype)
        tangent = self.layout.unflatten(v.reshape(-1))
        _, out = jvp(lambda p: self.fn(p, self.x), (self.params,), (tangent,))
        return out.reshape(-1)

    def rmatvec(self, u: Tensor) -> Tensor:
        """``Jᵀ u`` for a flat ``u`` of length ``N·dimY``; returns length ``p``."""
        u = torch.as_tensor(u, dtype=self.dtype).reshape(self.out_shape)
        (g,) = self._vjp(u)
        return self.layout.flatten(g)


def finite_difference_matvec(
    fn: ParamFunction,
    params: Mapping[str, Tensor],
    x: Tensor,
    v: Tensor,
    *,
    eps: float = 1e-6,
) -> Tensor:
    """Central difference ``[f(θ + εv) − f(θ − εv)] / 2ε`` (float64): error ``O(ε²‖v‖³)``.

    An autodiff-free reference for ``J v``.
    """
    p = _as_dtype(params, torch.float64)
    layout = ParameterBlock.from_params(p)
    th = layout.flatten(p)
    v = v.to(torch.float64).reshape(-1)
    xs = x.to(torch.float64) if x.is_floating_point() else x
    with torch.no_grad():
        plus = fn(layout.unflatten(th + eps * v), xs)
        minus = fn(layout.unflatten(th - eps * v), xs)
    return ((plus - minus) / (2 * eps)).reshape(-1)
