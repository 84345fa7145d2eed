"""A symmetry-attribution problem: a function of parameters, a probe set and a group.

:class:`SymmetryProblem` binds ``f(params, x)``, the trainable tensors, the probe set and the
group, and computes at any flat parameter vector ``θ`` the values ``f_θ``, the orbit tangent
``η_ξ``, the defect ``δ_θ``, the Jacobian and both lifted directions

    c* = J⁺ η_ξ,        b* = J⁺ (−δ_θ)

(truncated, gauged; :mod:`paramsym.attribution.lift`). Several conditions (e.g. several values
of a conditioning input α) are stacked simply by putting all their probe points in one probe
set: the rows of ``J``, ``η`` and ``δ`` are then stacked into one least-squares system.

:func:`attribute` is the one-call API for any ``nn.Module``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import ParameterNameError, ShapeError
from ..params import ParameterBlock
from ..targets import ParamFunction
from .jacobian import JacobianOperator, check_outputs, dense_jacobian, function_from_module
from .lift import RTOL, DenseLift, LiftResult
from .matrix_free import lift_matrix_free
from .polar import PolarGrid, PolarGridFunction
from .symmetry import FunctionGroup, orbit_tangent, reynolds_x


@dataclass
class Attribution:
    """Both lifts at one ``θ``, with the function-space vectors they were computed from.

    Attributes:
        c: lift of ``η_ξ`` (symmetry direction ``c*``).
        b: lift of ``−δ`` (equivariance direction ``b*``).
        eta, delta: ``[N, dimY]``.
        values: ``f_θ`` on the probe set.
        layout: column order, the whole-tensor :class:`~paramsym.params.ParameterBlock` of
            the trainable tensors.
        sensitivity: aggregate sensitivity ``S_i = ‖J_{:,i}‖ / sqrt(N·dimY)`` (length ``p``),
            ``None`` for LSMR without a gauge.
    """

    c: LiftResult
    b: LiftResult
    eta: Tensor
    delta: Tensor
    values: Tensor
    layout: ParameterBlock
    sensitivity: Tensor | None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def delta_norm(self) -> float:
        return float(self.delta.norm())

    def verdict(self, tol: float | None = None) -> str:
        """Two lines: is η liftable (symmetry), is −δ liftable (equivariance)."""
        kw = {} if tol is None else {"tol": tol}
        return self.c.verdict("symmetry direction η (c* = J⁺η)", **kw) + "\n" + self.b.verdict(
            "equivariance direction −δ (b* = J⁺(−δ))", **kw
        )


@dataclass
class SymmetryProblem:
    """``f``, trainable ``params``, probe set, group and solver settings.

    Args:
        fn: ``f(params, x) -> [N, dimY]`` (per sample).
        params: trainable tensors at the base point (converted to float64).
        probes: probe set ``[N, dimX]``.
        group: a :class:`FunctionGroup` acting on the probes' coordinates.
        xi: generator index or Lie-algebra coefficients for ``η``.
        rtol: pseudo-inverse truncation τ.
        gauge: ``"column"`` or ``"none"``.
        method: ``"dense"`` (:class:`DenseLift`; its ``"auto"`` solver takes the tall
            ``J_Lᵀ J_L`` route when ``J`` has at least as many rows as columns), ``"gram"``
            (matrix-free exact) or ``"lsmr"`` (matrix-free).
        chunk_size: probe points per vmapped Jacobian batch.
        grid: optional :class:`~paramsym.attribution.polar.PolarGrid`, the orbit node set of a
            polar probe set; :meth:`function_of_x` then evaluates through a
            :class:`~paramsym.attribution.polar.PolarGridFunction`, so Reynolds averages (``δ``,
            the flows' predictions) cost one evaluation per rotation offset.
        cache_size: keep the lifts at the last ``cache_size`` parameter vectors (0: no cache).
            With a cache both lifts are always solved (the second costs one product once ``J``
            is factorised), so flows that start from the same ``θ₀`` share one Jacobian and
            factorisation (the Hamiltonian walks).
    """

    fn: ParamFunction
    params: Mapping[str, Tensor]
    probes: Tensor
    group: FunctionGroup
    xi: int | Tensor = 0
    rtol: float = RTOL
    gauge: str = "column"
    method: str = "dense"
    chunk_size: int | None = 256
    lsmr_options: dict[str, Any] = field(default_factory=dict)
    grid: PolarGrid | None = None
    cache_size: int = 0

    def __post_init__(self):
        self.params = {k: v.detach().to(torch.float64) for k, v in self.params.items()}
        self.layout = ParameterBlock.from_params(self.params)
        self.group.check_input(self.probes)
        self.probes = self.probes.to(torch.float64)
        if self.method not in ("dense", "gram", "lsmr"):
            raise ValueError(f"method must be 'dense', 'gram' or 'lsmr', received {self.method!r}.")

    # ---- parameters ----------------------------------------------------------------------
    @property
    def theta0(self) -> Tensor:
        """Flat base parameter vector (layout order)."""
        return self.layout.flatten(self.params)

    def unflatten(self, theta: Tensor | None) -> dict[str, Tensor]:
        return self.params if theta is None else self.layout.unflatten(theta)

    def function_of_x(self, theta: Tensor | None = None) -> Callable[[Tensor], Tensor]:
        """``x ↦ f_θ(x)`` (for predictions, profiles and plots)."""
        p = self.unflatten(theta)

        def g(x: Tensor) -> Tensor:
            return self.fn(p, x.to(torch.float64))

        return g if self.grid is None else PolarGridFunction(g, self.grid)

    # ---- function-space vectors ---------------------------------------------------------
    def values(self, theta: Tensor | None = None) -> Tensor:
        with torch.no_grad():
            return self.fn(self.unflatten(theta), self.probes)

    def eta(self, theta: Tensor | None = None) -> Tensor:
        return orbit_tangent(self.fn, self.unflatten(theta), self.probes, self.group, self.xi).detach()

    def delta(self, theta: Tensor | None = None, warn: bool = True) -> Tensor:
        """``δ = f_θ − P_E f_θ`` (the Reynolds average of :meth:`function_of_x`)."""
        with torch.no_grad():
            return check_outputs(self.values(theta)) - reynolds_x(
                self.function_of_x(theta), self.probes, self.group, warn=warn)

    def jacobian(self, theta: Tensor | None = None) -> Tensor:
        return dense_jacobian(self.fn, self.unflatten(theta), self.probes, chunk_size=self.chunk_size)

    def operator(self, theta: Tensor | None = None) -> JacobianOperator:
        return JacobianOperator(self.fn, self.unflatten(theta), self.probes)

    # ---- lifts ---------------------------------------------------------------------------
    def lifts(self, theta: Tensor | None = None, which: Sequence[str] = ("c", "b"),
              warn: bool = True) -> Attribution:
        """Compute ``η``, ``δ`` and the requested lifts (``"c"``, ``"b"``) at ``θ``.

        A lift not requested is returned with ``NaN`` residual and a zero direction; for a group
        without Haar quadrature (only ``"c"`` possible) ``delta`` is ``NaN``. With
        ``cache_size > 0`` both lifts are solved (where the group has a quadrature) and the
        result is cached by the parameter vector.
        """
        if self.cache_size > 0:
            th = self.theta0 if theta is None else theta.detach().to(torch.float64)
            key = th.numpy().tobytes()
            cache = self.__dict__.setdefault("_lift_cache", {})
            if key not in cache:
                both = ("c", "b") if self.group.order != 0 else tuple(which)
                cache[key] = self._lifts(th, both, warn)
                while len(cache) > self.cache_size:
                    cache.pop(next(iter(cache)))
            return cache[key]
        return self._lifts(theta, which, warn)

    def _lifts(self, theta: Tensor | None, which: Sequence[str], warn: bool) -> Attribution:
        eta = self.eta(theta)
        if self.group.order == 0 and "b" not in which:  # no Haar quadrature: δ is undefined
            delta = torch.full_like(eta, float("nan"))
        else:
            delta = self.delta(theta, warn=warn)
        values = self.values(theta)
        m = eta.numel()
        sens = None
        if self.method == "dense":
            J = self.jacobian(theta)
            solver = DenseLift(J, rtol=self.rtol, gauge=self.gauge)
            sens = solver.col / (m**0.5)

            def do(t):
                return solver.solve(t)
        else:
            op = self.operator(theta)

            def do(t):
                return lift_matrix_free(op, t, method=self.method, rtol=self.rtol, gauge=self.gauge,
                                        **self.lsmr_options)

        out = {}
        for key, t in (("c", eta.reshape(-1)), ("b", -delta.reshape(-1))):
            if key in which:
                out[key] = do(t)
            else:
                out[key] = _empty_lift(self.layout.numel, m, self.gauge, self.method, self.rtol)
        if sens is None and out["c"].column_norms is not None:
            sens = out["c"].column_norms / (m**0.5)
        return Attribution(out["c"], out["b"], eta, delta, values, self.layout, sens)


    def input_layer_direction(self, weight: str, theta: Tensor | None = None) -> Tensor:
        """The closed-form lift of ``η`` through the input layer: ``z`` with ``ΔW = −W ξ_τ`` on ``weight``.

        If the inputs enter ``f`` only through ``W x`` (``f(x) = g(W x + b)``, ``weight`` = ``W``)
        and the group acts on inputs only (``ρ(ξ) = 0``), then the orbit tangent is
        ``η(x) = −D_x f(x)·(ξ_τ x) = −∇g·(W ξ_τ x) = J · vec(−W ξ_τ)``: moving ``W``
        along ``−W ξ_τ`` moves the function along η exactly, so ``η ∈ Im J`` whenever ``W`` is
        trainable ([Attribution]'s known-answer case; ``lifting-sanity``). Returns the flat
        direction in this problem's layout (zeros outside ``weight``); ``‖J z − η‖ / ‖η‖`` is 0
        up to rounding exactly when those assumptions hold.

        Raises:
            ParameterNameError: ``weight`` is not a trainable tensor of the problem.
            ShapeError: the group acts on the outputs too, or ``weight`` is not ``(h, dimX)``.
        """
        tau, rho = self.group.generator(self.xi)
        if float(rho.abs().max()) != 0.0:
            raise ShapeError(f"input_layer_direction: {self.group.name} also acts on the outputs (ρ(ξ) ≠ 0); the closed "
                             "form covers groups acting on the inputs only.")
        params = self.unflatten(theta)
        if weight not in params:
            raise ParameterNameError(f"input_layer_direction: {weight!r} is not a trainable tensor of the problem; "
                                     f"trainable: {sorted(params)}.")
        W = params[weight]
        if W.ndim != 2 or W.shape[1] != tau.shape[0]:
            raise ShapeError(f"input_layer_direction: {weight!r} has shape {tuple(W.shape)}; expected (h, {tau.shape[0]}) "
                             "(the layer the inputs enter through).")
        delta = {k: torch.zeros_like(v) for k, v in params.items()}
        delta[weight] = -W @ tau.to(W.dtype)
        return self.layout.flatten(delta)

    def generator_lifts(self, theta: Tensor | None = None) -> list[LiftResult]:
        """``c*(ξ_k) = J⁺ η_{ξ_k}`` for every basis generator of the group (one factorisation of
        ``J``): the linear map ``L: ξ ↦ c*(ξ)`` of [Attribution] App. A.3, column by column."""
        if self.method != "dense":
            op = self.operator(theta)
            return [lift_matrix_free(op, orbit_tangent(self.fn, self.unflatten(theta), self.probes, self.group, k)
                                     .detach().reshape(-1), method=self.method, rtol=self.rtol, gauge=self.gauge,
                                     **self.lsmr_options) for k in range(self.group.dim)]
        solver = DenseLift(self.jacobian(theta), rtol=self.rtol, gauge=self.gauge)
        p = self.unflatten(theta)
        return [solver.solve(orbit_tangent(self.fn, p, self.probes, self.group, k).detach().reshape(-1))
                for k in range(self.group.dim)]


def _empty_lift(p: int, m: int, gauge: str, method: str, rtol: float) -> LiftResult:
    return LiftResult(
        direction=torch.zeros(p, dtype=torch.float64),
        residual=float("nan"),
        rank=None,
        sigma=None,
        dead=torch.zeros(p, dtype=torch.bool),
        column_norms=None,
        target_norm=float("nan"),
        reached=torch.zeros(m, dtype=torch.float64),
        gauge=gauge,
        method=method,
        rtol=rtol,
        info={"skipped": True},
    )


def attribute(
    module: nn.Module,
    probes: Tensor,
    group: FunctionGroup,
    *,
    trainable: Sequence[str] | Callable[[str], bool] | str | None = None,
    forward: Callable[..., Tensor] | None = None,
    xi: int | Tensor = 0,
    rtol: float = RTOL,
    gauge: str = "column",
    method: str = "dense",
    **kwargs: Any,
) -> Attribution:
    """Attribute the symmetry ``group`` of ``module``'s function to its parameters.

    Builds ``f`` from the module (:func:`~paramsym.attribution.jacobian.function_from_module`,
    float64, the non-``trainable`` parameters frozen), then returns both lifts ``c* = J⁺η_ξ`` and
    ``b* = J⁺(−δ)`` with residuals, ranks and sensitivities.

    Example::

        from paramsym.attribution import attribute, so2, polar_grid
        a = attribute(model, polar_grid(15, 32), so2())
        print(a.verdict())
    """
    if probes.dim() != 2:
        raise ShapeError(f"probes must have shape [N, dimX], received {tuple(probes.shape)}.")
    fn, params = function_from_module(module, trainable, forward=forward)
    problem = SymmetryProblem(fn, params, probes, group, xi=xi, rtol=rtol, gauge=gauge, method=method, **kwargs)
    return problem.lifts()
