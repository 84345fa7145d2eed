"""The discovery problem: a target, a distribution μ of parameter points, known answers, scales.

See :class:`DiscoveryProblem`; the reference problems are in :mod:`paramsym.discovery.problems`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from ..errors import ConfigError, TooLargeError
from ..models.adapters import require_eager
from ..targets import Target
from ..verdict import output_scale
from .objectives import Scales

#: default memory budget of :meth:`DiscoveryProblem.scales` (bytes)
SCALE_MEMORY_BYTES = 2 * 2**30


@dataclass
class DiscoveryProblem:
    """Everything that defines one discovery task (see module docstring)."""

    name: str
    description: str
    target: Target
    perturb_std: float
    reference_span: Callable[[Tensor], Tensor] | None = None
    reference_name: str = ""
    reject: Callable[[Tensor], Tensor] | None = None
    host: Target | None = None
    host_index: Tensor | None = None
    unit_outputs: Callable[[Tensor], dict[str, Tensor]] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def theta_base(self) -> Tensor:
        return self.target.theta0

    def sample(self, n: int, generator: torch.Generator, dtype: torch.dtype | None = None) -> Tensor:
        """``n`` points of μ (rejected samples are redrawn; at most 50 rounds)."""
        base = self.theta_base
        dtype = dtype or base.dtype
        out = torch.empty(0, base.numel(), dtype=dtype)
        for _ in range(50):
            eps = torch.randn(n, base.numel(), generator=generator, dtype=torch.float64)
            pts = (base.to(torch.float64) + self.perturb_std * eps).to(dtype)
            if self.reject is not None:
                pts = pts[~self.reject(pts)]
            out = torch.cat([out, pts])
            if out.shape[0] >= n:
                return out[:n].to(base.device)
        raise ConfigError(f"problem {self.name!r}: μ rejected too many samples; lower the perturbation std.")

    def __post_init__(self) -> None:
        # forward-mode AD (JVPs) needs the eager attention path of Hugging Face models; switch the
        # target's private copy (or raise AttentionImplementationError saying how to load the model)
        model = getattr(self.target, "model", None)
        if model is not None and hasattr(getattr(model, "config", None), "_attn_implementation"):
            require_eager(model)

    def scale_memory(self, n: int = 512) -> tuple[int, int]:
        """``(bytes per point, bytes of fixed work)`` of :meth:`scales` in float64 (an estimate).

        Per point: the point and its output (``8 (p + q)``), the scattered copies of the block's
        whole tensors (``8 Σ|tensor|``) and the same again for temporaries.
        """
        p, q = int(self.target.p), int(self.target.q)
        block = getattr(self.target, "block", None)
        whole = 0 if block is None else sum(int(torch.Size(sh).numel()) for sh in block.shapes)
        if type(self.target).__call__ is not Target.__call__:
            whole = 0  # a target with its own evaluation (function or closed-form boundary target)
        return 16 * (p + q + whole), 8 * (p + q)

    def jacobian_gain(self, generator: torch.Generator, draws: int = 8, basis: torch.Tensor | None = None) -> float:
        """``γ = median_z ‖D_θF(θ0)[z]‖ / ‖z‖`` over ``draws`` Gaussian directions z (float64 JVPs at the
        base point): the output change per unit of a random move of the block — of a move in
        ``range(basis)`` (``z = E ζ``, ζ Gaussian) when the action has reduced coordinates ``basis = E``.

        With ``objective.output_scale = "motion"`` the output scale is ``s_F = γ β s_θ``, the output
        change of a random move of the field's magnitude, so that ``L_inv`` is the squared relative
        non-invariance ``‖D_θF[v]‖² / (γ ‖v‖)²`` of fields of magnitude ``β s_θ``.

        Raises:
            DegenerateTargetError: the output does not change along any drawn direction (γ = 0).
        """
        from ..errors import DegenerateTargetError

        target = self.target.to(torch.float64)
        th0 = target.theta0
        gains = []
        for _ in range(int(draws)):
            if basis is None:
                z = torch.randn(th0.shape, generator=generator, dtype=torch.float64)
            else:
                z = basis.double() @ torch.randn(basis.shape[1], generator=generator, dtype=torch.float64)
            gains.append(float(torch.func.jvp(target, (th0,), (z,))[1].norm() / z.norm()))
        gain = float(torch.tensor(gains).median())
        if not gain > 0:
            raise DegenerateTargetError(f"the output of target {self.target.name!r} does not change along {draws} random "
                                        "block directions (Jacobian gain 0); select parameters that the output uses.")
        return gain

    def scales(self, beta: float, generator: torch.Generator, n: int = 512,
               memory_bytes: float = SCALE_MEMORY_BYTES) -> Scales:
        """Fixed normalisation from ``n`` points of μ, in chunks within ``memory_bytes``.

        ``s_F = sqrt(E‖F(θ) − E F‖²)`` (centered RMS: the output's variation over μ;
        :func:`paramsym.verdict.output_scale`) and ``s_θ = sqrt(E‖θ‖²)``. When all ``n`` points
        fit the budget they are drawn at once; otherwise in chunks of as many as fit, merged by
        :func:`~paramsym.verdict.output_scale` (pairwise means and centred sums of squares),
        so ``s_F`` is accurate relative to itself even when the output's mean is far from ``F(θ0)``
        (a difference ``E‖F − F(θ0)‖² − ‖E(F − F(θ0))‖²`` would lose it to cancellation).

        Raises:
            DegenerateTargetError: the output does not vary with the block (s_F = 0).
            TooLargeError: not even one point fits ``memory_bytes`` (the estimate is named).
        """
        per_point, fixed = self.scale_memory(n)
        chunk = int((memory_bytes - fixed) // per_point)
        names = ", ".join(self.target.block.names) if getattr(self.target, "block", None) is not None else "θ"
        what = f"the output of target {self.target.name!r} over μ (block {names})"
        hint = "Select parameters that the output uses (for a boundary output, the unit's own weights)."
        if chunk < 1:
            raise TooLargeError(
                f"estimating the output scale of {self.target.name!r} (p = {self.target.p}, q = {self.target.q}) needs "
                f"about {(per_point + fixed) / 2**30:.2f} GiB per point in float64, over the memory budget of "
                f"{memory_bytes / 2**30:.2f} GiB; select a smaller block or raise the budget (memory_bytes=)."
            )
        target = self.target.to(torch.float64)
        if chunk >= n:
            theta = self.sample(n, generator, torch.float64)
            with torch.no_grad():
                F = torch.func.vmap(target)(theta)
            s_F = output_scale(F, what=what, hint=hint)
            s_theta = float(theta.pow(2).sum(-1).mean().sqrt())
            return Scales(s_F=s_F, s_theta=s_theta, beta=float(beta))
        sum_t2 = 0.0

        def chunks():
            nonlocal sum_t2
            done = 0
            while done < n:
                m = min(chunk, n - done)
                theta = self.sample(m, generator, torch.float64)
                with torch.no_grad():
                    yield torch.func.vmap(target)(theta).reshape(m, -1)
                sum_t2 += float(theta.pow(2).sum())
                done += m

        s_F = output_scale(chunks(), what=what, hint=hint)
        return Scales(s_F=s_F, s_theta=(sum_t2 / n) ** 0.5, beta=float(beta))
