"""Jacobian of the realisation map ``θ ↦ f_θ`` on a probe set: dense and matrix-free.

The analysed function is a pure function of a parameter dictionary and a batch of inputs,

    f(params: dict[str, Tensor], x: Tensor[N, dimX]) -> Tensor[N, dimY],

evaluated *per sample* (row ``n`` of the output depends on row ``n`` of ``x`` only; no batch
statistics). Its discretised differential on the probe set ``{x_n}`` is the matrix

    J ∈ R^{(N·dimY) × p},    J[(n, a), i] = ∂ f_{θ,a}(x_n) / ∂θ_i,

with rows in ``(n, a)`` order (n-major, the order of ``f(params, x).reshape(-1)``) and columns
in the order of :class:`ParamLayout` (the dictionary's insertion order, each tensor flattened
row-major). Columns are the pointwise functional sensitivities ``S_i*`` of seed 003.

Two realisations:

* :func:`dense_jacobian` — ``torch.func.vmap`` over probe points of ``torch.func.jacrev``, in
  chunks of probe points, in float64 by default. Memory ``8·N·dimY·p`` bytes.
* :class:`JacobianOperator` — matrix-free products ``J v`` (``torch.func.jvp``) and ``Jᵀ u``
  (``torch.func.vjp``), plus a ``scipy.sparse.linalg.LinearOperator`` view. Memory ``O(p)`` plus
  one forward pass.

:func:`function_from_module` builds ``f`` from any ``nn.Module`` and a selection of trainable
parameter names; the other parameters and buffers are held fixed ("first layer frozen").
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, jvp, vjp, vmap

from ..errors import NonFiniteError, ParameterNameError, ShapeError

#: ``f(params, x) -> Tensor[N, dimY]``, evaluated per sample.
ParamFunction = Callable[[Mapping[str, Tensor], Tensor], Tensor]


# --------------------------------------------------------------------------------------------
# Parameter layout: dict[str, Tensor] <-> flat vector
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamLayout:
    """Names and shapes of a parameter dictionary and its flat (column) order.

    Invariant: ``layout.unflatten(layout.flatten(params)) == params`` and column ``i`` of the
    Jacobian is entry ``i`` of ``layout.flatten``.
    """

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    @classmethod
    def from_params(cls, params: Mapping[str, Tensor]) -> ParamLayout:
        if not params:
            raise ShapeError(
                "the parameter dictionary is empty; select at least one trainable parameter "
                "(function_from_module(..., trainable=[...]))."
            )
        return cls(tuple(params), tuple(tuple(t.shape) for t in params.values()))

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(int(np.prod(s)) if s else 1 for s in self.shapes)

    @property
    def numel(self) -> int:
        return int(sum(self.sizes))

    @property
    def offsets(self) -> tuple[int, ...]:
        out, acc = [], 0
        for s in self.sizes:
            out.append(acc)
            acc += s
        return tuple(out)

    def slice(self, name: str) -> slice:
        """Columns of tensor ``name`` in the flat order."""
        try:
            i = self.names.index(name)
        except ValueError:
            raise ParameterNameError(
                f"no parameter named {name!r}; the layout has {list(self.names)}."
            ) from None
        return slice(self.offsets[i], self.offsets[i] + self.sizes[i])

    def flatten(self, params: Mapping[str, Tensor]) -> Tensor:
        """Concatenate the tensors (in layout order) into one vector of length ``numel``."""
        missing = [n for n in self.names if n not in params]
        if missing:
            raise ParameterNameError(f"parameters {missing} are missing; expected {list(self.names)}.")
        return torch.cat([params[n].reshape(-1) for n in self.names])

    def unflatten(self, vec: Tensor) -> dict[str, Tensor]:
        """Split a vector of length ``numel`` back into named tensors (views of ``vec``)."""
        if vec.dim() != 1 or vec.numel() != self.numel:
            raise ShapeError(
                f"flat parameter vector has shape {tuple(vec.shape)}; expected ({self.numel},)."
            )
        return {
            n: vec[o : o + s].view(shape)
            for n, shape, o, s in zip(self.names, self.shapes, self.offsets, self.sizes)
        }

    def owner(self, index: int) -> tuple[str, int]:
        """``(tensor name, flat index inside that tensor)`` of column ``index``."""
        offs = np.asarray(self.offsets)
        k = int(np.searchsorted(offs, index, side="right") - 1)
        return self.names[k], index - self.offsets[k]


# --------------------------------------------------------------------------------------------
# Building f from an nn.Module
# --------------------------------------------------------------------------------------------


def _select_names(module: nn.Module, trainable) -> list[str]:
    all_names = [n for n, _ in module.named_parameters()]
    if trainable is None:
        return [n for n, p in module.named_parameters() if p.requires_grad]
    if callable(trainable):
        chosen = [n for n in all_names if trainable(n)]
    else:
        if isinstance(trainable, str):
            trainable = [trainable]
        chosen = list(trainable)
        unknown = [n for n in chosen if n not in all_names]
        if unknown:
            raise ParameterNameError(
                f"trainable names {unknown} are not parameters of {type(module).__name__}; "
                f"valid names: {all_names}."
            )
    if not chosen:
        raise ParameterNameError(
            f"the trainable selection matches no parameter of {type(module).__name__}; "
            f"valid names: {all_names}."
        )
    return chosen


def function_from_module(
    module: nn.Module,
    trainable: Sequence[str] | Callable[[str], bool] | str | None = None,
    *,
    forward: Callable[..., Tensor] | None = None,
    dtype: torch.dtype | None = torch.float64,
) -> tuple[ParamFunction, dict[str, Tensor]]:
    """Turn ``module`` into a pure ``f(params, x) -> Tensor[N, dimY]`` of selected parameters.

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
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, received {type(module).__name__}.")
    names = _select_names(module, trainable)
    model = copy.deepcopy(module)
    if dtype is not None:
        model = model.to(dtype)
    model.eval()
    state = {n: p.detach() for n, p in model.named_parameters()}
    state.update({n: b.detach() for n, b in model.named_buffers()})
    params = {n: state[n].clone() for n in names}
    fixed = {n: t for n, t in state.items() if n not in params}

    def f(p: Mapping[str, Tensor], x: Tensor) -> Tensor:
        merged = {**fixed, **p}

        def apply(*args, **kwargs):
            return functional_call(model, merged, args, kwargs)

        out = forward(apply, x) if forward is not None else apply(x)
        if not isinstance(out, Tensor):
            raise TypeError(
                f"the module returned {type(out).__name__}; pass forward=... that returns a "
                "Tensor of shape [N, dimY]."
            )
        n = x.shape[0]
        if out.dim() == 0 or out.shape[0] != n:
            raise ShapeError(
                f"the model output has shape {tuple(out.shape)}; expected a leading batch "
                f"dimension {n} (one row per probe point)."
            )
        return out.reshape(n, -1)

    return f, params


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
        params: the trainable tensors (columns, in :class:`ParamLayout` order).
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
    layout = ParamLayout.from_params(p)
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


class JacobianOperator:
    """Matrix-free ``J`` of ``θ ↦ f_θ(x)`` at fixed ``params`` and probe set ``x``.

    ``matvec(v) = J v`` by one ``torch.func.jvp``; ``rmatvec(u) = Jᵀ u`` by one
    ``torch.func.vjp`` (its forward pass is recorded once and reused). Vectors are flat, in
    :class:`ParamLayout` order (length ``p``) and ``(n, a)`` row order (length ``N·dimY``).

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
        self.layout = ParamLayout.from_params(self.params)
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

    def rows(self, index: Tensor | Iterable[int]) -> Tensor:
        """Rows ``J[index, :]`` by batched VJPs (``vmap`` over unit vectors)."""
        idx = torch.as_tensor(list(index) if not isinstance(index, Tensor) else index)
        eye = torch.zeros(len(idx), self.shape[0], dtype=self.dtype)
        eye[torch.arange(len(idx)), idx] = 1.0
        return vmap(self.rmatvec)(eye)

    def column_norms(self, chunk_size: int = 64) -> Tensor:
        """``‖J_{:,i}‖₂`` for all ``i`` from ``N·dimY`` VJPs (rows accumulated, chunked)."""
        acc = torch.zeros(self.shape[1], dtype=self.dtype)
        for s in range(0, self.shape[0], chunk_size):
            r = self.rows(range(s, min(s + chunk_size, self.shape[0])))
            acc += (r * r).sum(0)
        return acc.sqrt()

    def dense(self, chunk_size: int = 64) -> Tensor:
        """Materialise ``J`` from VJPs (for checks on small models)."""
        return torch.cat(
            [self.rows(range(s, min(s + chunk_size, self.shape[0])))
             for s in range(0, self.shape[0], chunk_size)]
        )

    def gram(self, chunk_size: int = 32, weights: Tensor | None = None) -> Tensor:
        """``J W Jᵀ`` (``W = diag(weights)``, identity by default) from VJP–JVP pairs.

        Memory ``O((N·dimY)² + chunk·p)``; cost ``N·dimY`` VJPs and JVPs.
        """
        m = self.shape[0]
        K = torch.empty(m, m, dtype=self.dtype)
        for s in range(0, m, chunk_size):
            r = self.rows(range(s, min(s + chunk_size, m)))
            if weights is not None:
                r = r * weights
            K[:, s : s + r.shape[0]] = vmap(self.matvec)(r).T
        return 0.5 * (K + K.T)

    def to_scipy(self):
        """A ``scipy.sparse.linalg.LinearOperator`` (float64 numpy vectors) wrapping ``J``."""
        from scipy.sparse.linalg import LinearOperator

        def mv(v):
            return self.matvec(torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)).reshape(-1)).numpy()

        def rmv(u):
            return self.rmatvec(torch.from_numpy(np.ascontiguousarray(u, dtype=np.float64)).reshape(-1)).numpy()

        return LinearOperator(self.shape, matvec=mv, rmatvec=rmv, dtype=np.float64)


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
    layout = ParamLayout.from_params(p)
    th = layout.flatten(p)
    v = v.to(torch.float64).reshape(-1)
    xs = x.to(torch.float64) if x.is_floating_point() else x
    with torch.no_grad():
        plus = fn(layout.unflatten(th + eps * v), xs)
        minus = fn(layout.unflatten(th - eps * v), xs)
    return ((plus - minus) / (2 * eps)).reshape(-1)
