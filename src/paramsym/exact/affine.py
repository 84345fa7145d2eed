"""Exact affine symmetries of a parameter block: the null space of a stacked linear system.

For a target ``F: R^p → R^q`` (:class:`paramsym.targets.Target`, its block θ and batch X) an
affine field ``v(θ) = Aθ + b`` is an infinitesimal symmetry iff

    ⟨∇F_k(θ), Aθ + b⟩ = 0   for every output k and every θ,

which is linear in ``(A, b)``. At sample points ``θ_j = θ0 + ρ · rms(θ0) · ε_j`` (``ε_j`` standard
normal from an explicit generator) the rows ``[vec(∇F_k(θ_j) θ_jᵀ), ∇F_k(θ_j)]`` (in an
:class:`~paramsym.exact.ansatz.Ansatz`: ``J_j Φ(θ_j)``) are stacked into ``K`` (``m·q × L``).
Jacobians come from ``torch.func.vmap(jacrev(F))`` over chunks of points, in float64.

Null space, without materialising ``K``:

1. accumulate the Gram matrix ``H = KᵀK`` (L × L) chunk by chunk (Kronecker form for the full
   ansatz, :meth:`Ansatz.gram`);
2. its bottom eigenvectors: all of them by ``eigh`` when ``L ≤ dense_limit``, else the bottom
   ``k`` by shift-invert subspace iteration (Cholesky of ``H + μI``, ``μ = 10⁻¹¹ λ_max``, raised
   tenfold if the factorisation fails; 5 iterations, each shrinking the error of the null
   vectors by ``μ/(λ_{d+1} + μ)``) and a
   Rayleigh–Ritz step;
3. *refinement*: the bottom ``k`` eigenvectors ``V`` are applied to the rows directly and
   ``K V`` is reduced by a streaming QR (``R`` of ``[R; K_chunk V]``), whose SVD gives the
   smallest singular values of ``K`` and the rotated basis.

Precision: forming ``H`` squares the condition number, so eigenvalues of ``H`` resolve singular
values only down to ``≈ √ε · σ_max ≈ 1.5·10⁻⁸ σ_max``; the null space of ``H`` is accurate to an
angle ``≈ ε (σ_max/σ_{d+1})²``. Step 3 recomputes the small singular values from ``K`` itself
(accurate to ``≈ ε σ_max``), so null singular values show up at ``~10⁻¹⁵ σ_max`` and the gap
is measured honestly. The dimension is chosen by :func:`paramsym.exact.spectrum.decide_rank`
(``σ_i ≤ tol · σ_max`` and the largest-gap rule).

Memory (``max_memory``, bytes; default :data:`paramsym.groups.memory.DEFAULT_MAX_MEMORY`):
:func:`affine_memory` estimates the arrays the solver holds — ``H`` (``8 L²``), the Jacobians
it keeps for the refinement (``8 (m + m_held) q p``) — plus the largest temporary of one stage:
the null space (``eigh``: its copy, vectors and workspace, ``≈ 4 · 8 L²``; subspace: the Cholesky factor ``8 L²``), one point's
Jacobian work (``≈ 16 · 8 q p``, vmap/jacrev's intermediates) or one point's Gram rows
(:meth:`Ansatz.gram_bytes`). Below that minimum it raises :class:`TooLargeError` with the
estimate before allocating anything large; otherwise the Jacobian chunk and the Gram row
blocks are sized so the temporaries fit in what the resident arrays leave. (The budget counts
the solver's arrays, not the interpreter and torch themselves, ≈ 0.2 GiB.)

Verification: each recovered generator is checked at held-out points,
``r = max_j ‖J(θ'_j) v(θ'_j)‖ / (‖J(θ'_j)‖₂ ‖v(θ'_j)‖)``, and :meth:`AffineAlgebra.flow`
gives the finite transformation ``exp(tÂ)`` of the augmented matrix ``Â = [[A, b], [0, 0]]``.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..errors import ConfigError, EmptyBlockError, ShapeError, TooFewSamplesError, TooLargeError
from ..groups.memory import budget_bytes, check_memory, format_bytes
from ..groups.progress import progress_bar
from ..targets import Target
from .ansatz import Ansatz
from .nullspace import NullSpace, held_out_residuals, refined_null_space
from .spectrum import RankDecision, check_tolerance

__all__ = ["AffineAlgebra", "AffineSolverConfig", "solve_affine", "required_samples", "jacobians", "affine_memory"]

#: Gram matrices above this many bytes are refused (use a structured ansatz)
MAX_GRAM_BYTES = 4 * 2**30
#: vmap(jacrev)'s working memory per sample point, in units of one Jacobian (8 q p bytes)
JACOBIAN_WORK = 16


def jacobians(target: Target, thetas: Tensor, chunk: int = 64) -> Tensor:
    """``J(θ_j) = ∂F/∂θ`` at each row of ``thetas`` (m, p): (m, q, p), by ``vmap(jacrev(F))``."""
    fn = torch.func.vmap(torch.func.jacrev(target))
    return torch.cat([fn(thetas[i : i + chunk]) for i in range(0, thetas.shape[0], chunk)])


def affine_memory(ansatz: Ansatz, q: int, samples: int, *, held_out: int = 8, k: int = 64,
                  dense_limit: int = 2500) -> dict[str, int]:
    """Memory estimate (bytes) of :func:`solve_affine` (module docstring, *Memory*).

    Returns:
        ``resident`` (``H`` and the kept Jacobians), ``null_space``, ``jacobian_per_point``,
        ``gram_per_point`` and ``minimum`` = resident + the largest one-point stage: what the
        solver needs with Jacobian chunks and Gram row blocks of one point.
    """
    p, n = ansatz.p, ansatz.n_unknowns
    kk = min(n, max(k, 1))
    resident = 8 * (n * n + (samples + held_out) * (q * p + p))
    null = 8 * 4 * n * n if n <= dense_limit else 8 * (n * n + 4 * n * kk)
    jac = 8 * JACOBIAN_WORK * q * p
    gram = ansatz.gram_bytes(1, q)
    return {"resident": resident, "null_space": null, "jacobian_per_point": jac, "gram_per_point": gram,
            "minimum": resident + max(null, jac, gram)}


def required_samples(n_unknowns: int, q: int, p: int) -> int:
    """Fewest sample points that can determine ``n_unknowns``: each point adds at most
    ``min(q, p)`` independent rows (``rank J_j ≤ min(q, p)``), so ``⌈L / min(q, p)⌉``."""
    return max(1, math.ceil(n_unknowns / max(1, min(q, p))))


@dataclass
class AffineAlgebra:
    """The affine symmetry algebra found by :func:`solve_affine` (Lineax-style result).

    Attributes:
        status: ``"successful"``; ``"ambiguous_gap"`` (the chosen gap is below ``min_gap``: the
            dimension depends on the tolerance); ``"held_out_failure"`` (a recovered generator
            fails the held-out invariance check); ``"saturated"`` (every computed singular value
            is null: raise ``k``).
        dimension: the null-space dimension ``d``.
        coefficients: (d, L) orthonormal basis of the null space in ansatz coordinates.
        singular_values: the computed singular values of ``K``, descending (for the dense path all
            ``L``, the smallest ``k`` refined; for the subspace path the smallest ``k``).
        sigma_max: the largest singular value of ``K``.
        decision: the :class:`RankDecision` (gap, tolerance table).
        residuals: (d,) held-out relative invariance residuals.
    """

    status: str
    dimension: int
    coefficients: Tensor
    ansatz: Ansatz
    singular_values: Tensor
    sigma_max: float
    decision: RankDecision
    residuals: Tensor
    n_samples: int
    n_rows: int
    method: str
    seconds: float
    info: dict = field(default_factory=dict)

    @property
    def gap(self) -> float:
        return self.decision.gap

    @property
    def n_unknowns(self) -> int:
        return self.ansatz.n_unknowns

    def generators(self) -> tuple[Tensor, Tensor]:
        """Dense ``(A, b)`` of the basis: ``A`` (d, p, p), ``b`` (d, p)."""
        return self.ansatz.assemble(self.coefficients)

    def augmented(self) -> Tensor:
        """``Â = [[A, b], [0, 0]]`` (d, p+1, p+1): the affine field as a linear one on ``[θ; 1]``."""
        a, b = self.generators()
        d, p = b.shape
        out = torch.zeros(d, p + 1, p + 1, dtype=a.dtype)
        out[:, :p, :p], out[:, :p, p] = a, b
        return out

    def fields(self, theta: Tensor) -> Tensor:
        """``v_i(θ)`` for every generator at points ``theta`` (m, p): (m, d, p)."""
        return self.ansatz.fields(self.coefficients, theta.reshape(-1, self.ansatz.p))

    def flow(self, i: int, t: float, theta: Tensor) -> Tensor:
        """The finite transformation ``θ ↦ exp(t Â_i) [θ; 1]`` (first p entries)."""
        aug = self.augmented()[i]
        x = torch.cat([theta.reshape(-1).to(aug.dtype), aug.new_ones(1)])
        return (torch.linalg.matrix_exp(t * aug) @ x)[:-1]

    def summary(self) -> dict:
        """JSON-ready summary: dimension, gap, singular values (relative too), tolerance table."""
        s = self.singular_values.tolist()
        return {
            "status": self.status, "dimension": self.dimension, "gap": self.gap,
            "tol": self.decision.tol, "rule": self.decision.rule,
            "singular_values": s, "sigma_max": self.sigma_max,
            "relative_singular_values": [x / self.sigma_max for x in s] if self.sigma_max > 0 else s,
            "tolerance_table": [{"tol": t, "dimension": d} for t, d in self.decision.table],
            "residuals": self.residuals.tolist(),
            "max_residual": float(self.residuals.max()) if self.dimension else 0.0,
            "unknowns": self.n_unknowns, "samples": self.n_samples, "rows": self.n_rows,
            "method": self.method, "seconds": self.seconds, "ansatz": self.ansatz.describe(),
            **self.info,
        }


def _sample_points(theta0: Tensor, m: int, radius: float, gen: torch.Generator) -> Tensor:
    scale = float(theta0.pow(2).mean().sqrt()) or 1.0
    eps = torch.randn(m, theta0.numel(), generator=gen, dtype=torch.float64)
    return theta0.reshape(1, -1).to(torch.float64) + radius * scale * eps


def _count(v, minimum: int) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= minimum


def _positive(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0


@dataclass
class AffineSolverConfig:
    """The settings of :func:`solve_affine` (module docstring).

    Attributes:
        samples: sample points (``None``: ``⌈oversample · L / min(q, p)⌉``, at least
            :func:`required_samples`, doubled while the held-out check fails).
        oversample: the factor of the automatic sample count.
        radius: spread of the sample points around θ0 in units of ``rms(θ0)``.
        tol, rule: rank decision (:func:`~paramsym.exact.spectrum.decide_rank`).
        min_gap: gaps below this give status ``"ambiguous_gap"``.
        k: subspace size refined (and computed by subspace iteration when ``L > dense_limit``).
        dense_limit: the most unknowns whose Gram matrix is diagonalised whole (``eigh``).
        held_out: held-out points for the invariance check; ``check_tol`` its pass threshold.
            When ``samples`` is not given and the check fails (too few points: the sampled system
            has spurious null vectors), the sample count doubles, up to ``max_rounds`` times
            (and only while the estimate fits the budget).
        chunk: at most this many points per ``vmap(jacrev)`` call (fewer if the budget asks).
        max_memory: budget in bytes for the solver's arrays (``None``: 2 GiB); see
            :func:`affine_memory`.
    """

    samples: int | None = None
    oversample: float = 2.0
    radius: float = 1.0
    tol: float = 1e-6
    rule: str = "gap"
    min_gap: float = 1e3
    k: int = 64
    dense_limit: int = 2500
    held_out: int = 8
    check_tol: float = 1e-10
    chunk: int = 64
    max_rounds: int = 4
    max_memory: int | None = None

    def validate(self) -> None:
        """Raise a named error for a setting out of its range.

        Raises:
            ToleranceError: ``tol ∉ (0, 1)``. ConfigError: any other setting (named).
        """
        check_tolerance(self.tol)
        if self.samples is not None and not _count(self.samples, 1):
            raise ConfigError(f"samples must be an integer >= 1, or None (automatic); received {self.samples!r}.")
        if self.max_memory is not None and not _count(self.max_memory, 1):
            raise ConfigError(f"max_memory must be a number of bytes >= 1, or None (2 GiB); received {self.max_memory!r}.")
        if not _positive(self.radius):
            raise ConfigError(f"radius must be a finite number > 0; received {self.radius!r}.")
        if self.rule not in ("gap", "threshold"):
            raise ConfigError(f"rule must be 'gap' or 'threshold'; received {self.rule!r}.")
        if not (_positive(self.oversample) and _positive(self.check_tol)
                and isinstance(self.min_gap, numbers.Real) and not isinstance(self.min_gap, bool) and self.min_gap >= 0):
            raise ConfigError(f"oversample and check_tol must be finite numbers > 0 and min_gap a number >= 0; received "
                              f"oversample={self.oversample!r}, check_tol={self.check_tol!r}, min_gap={self.min_gap!r}.")
        if not (_count(self.k, 1) and _count(self.dense_limit, 0) and _count(self.held_out, 1) and _count(self.chunk, 1)
                and _count(self.max_rounds, 0)):
            raise ConfigError(f"k, held_out and chunk must be integers >= 1, dense_limit and max_rounds integers >= 0; "
                              f"received k={self.k!r}, held_out={self.held_out!r}, chunk={self.chunk!r}, "
                              f"dense_limit={self.dense_limit!r}, max_rounds={self.max_rounds!r}.")


def _check_block(target: Target, ansatz: Ansatz | None) -> Ansatz:
    """The ansatz (default: every affine field) after the block checks (empty, size, Gram size)."""
    p = int(target.p)
    if p == 0:
        raise EmptyBlockError("the target's parameter block has no parameters (p = 0); select at least one entry.")
    ansatz = ansatz or Ansatz.full(p)
    if ansatz.p != p:
        raise ShapeError(f"the ansatz is for p = {ansatz.p} parameters but the block has p = {p}.")
    L = ansatz.n_unknowns
    if L * L * 8 > MAX_GRAM_BYTES:
        raise TooLargeError(f"{L} unknowns need a {L * L * 8 / 2**30:.1f} GiB Gram matrix (limit 4 GiB); "
                            "use a structured ansatz (RowMaps/Translations) to reduce the unknowns.")
    return ansatz


def _plan_samples(f64: Target, n_unknowns: int, cfg: AffineSolverConfig) -> tuple[int, int, int]:
    """``(rank J(θ0), required points, first sample count)``; a given count below the required one is refused.

    Raises:
        TooFewSamplesError: ``cfg.samples`` below the number the unknowns need (the message says it).
    """
    p = int(f64.p)
    rank0 = int(torch.linalg.matrix_rank(jacobians(f64, f64.theta0.reshape(1, -1).to(torch.float64))[0]))
    need = required_samples(n_unknowns, max(rank0, 1), p)
    automatic = max(need + 2, math.ceil(cfg.oversample * need))
    if cfg.samples is None:
        return rank0, need, automatic
    if cfg.samples < need:
        raise TooFewSamplesError(
            f"samples = {cfg.samples} cannot determine {n_unknowns} unknowns: each point gives at most rank J(θ0) = "
            f"{rank0} independent rows, so at least {need} sample points are needed "
            f"(the default starts from {automatic} and doubles them until the held-out check passes)."
        )
    return rank0, need, cfg.samples


@dataclass
class _MemoryPlan:
    """The memory estimate and what it allows: Jacobian chunk, Gram row block, room for temporaries."""

    estimate: dict[str, int]
    budget: int
    room: int
    chunk: int
    gram_block: int
    planned: int


def _plan_memory(target: Target, ansatz: Ansatz, q: int, samples: int, cfg: AffineSolverConfig) -> _MemoryPlan:
    """Check the estimate against the budget (:func:`affine_memory`) and size the chunks to fit.

    Raises:
        TooLargeError: the estimate exceeds ``cfg.max_memory`` (the message gives the estimate).
    """
    budget = budget_bytes(cfg.max_memory)
    est = affine_memory(ansatz, q, samples, held_out=cfg.held_out, k=cfg.k, dense_limit=cfg.dense_limit)
    check_memory(est["minimum"], f"the affine solve of {target!r} ({ansatz.n_unknowns} unknowns, {samples} sample "
                 f"points, q = {q}: {format_bytes(est['resident'])} resident, {format_bytes(est['null_space'])} "
                 "for the null space)", budget, "Use a structured ansatz or fewer sample points.")
    room = budget - est["resident"]
    chunk = max(1, min(cfg.chunk, room // est["jacobian_per_point"]))
    gram_block = max(1, min(chunk, room // est["gram_per_point"]))
    planned = est["resident"] + max(est["null_space"], chunk * est["jacobian_per_point"],
                                    gram_block * est["gram_per_point"])
    return _MemoryPlan(est, budget, room, chunk, gram_block, planned)


@dataclass
class _Rows:
    """The stacked system so far: sample points, their Jacobians (kept for the refinement) and ``H = KᵀK``."""

    thetas: Tensor
    jacs: list[Tensor]
    h: Tensor

    def extend(self, f64: Target, ansatz: Ansatz, new: Tensor, plan: _MemoryPlan, progress: bool) -> None:
        """Add the rows of the points ``new`` to ``H``, chunk by chunk.

        Raises:
            ConfigError: the Jacobian is not finite at a sample point, or ``H`` overflows float64
                (a radius so large that products of entries exceed the float64 range).
        """
        starts = range(0, new.shape[0], plan.chunk)
        for i in progress_bar(starts, total=len(starts), desc="affine rows", enabled=progress):
            jac = jacobians(f64, new[i : i + plan.chunk], plan.chunk)
            self.jacs.append(jac)
            if not bool(torch.isfinite(jac).all()):
                raise ConfigError("the target's Jacobian is not finite at a sample point; lower radius.")
            ansatz.gram(jac, new[i : i + plan.chunk], out=self.h, max_bytes=plan.room)
            if not bool(torch.isfinite(self.h).all()):
                big = float(torch.cat([jac.abs().amax().reshape(1), new.abs().amax().reshape(1)]).max())
                raise ConfigError(f"the constraint Gram matrix H overflowed float64 (Jacobian and sample entries up to "
                                  f"{big:.3g}, whose products exceed 1.8e308); lower radius.")
        self.thetas = torch.cat([self.thetas, new])


def _status(null: NullSpace, residuals: Tensor, cfg: AffineSolverConfig) -> str:
    """The :class:`AffineAlgebra` status (its docstring): saturated, held-out failure, ambiguous gap or successful."""
    if null.decision.saturated:
        return "saturated"
    if null.decision.dimension and float(residuals.max()) > cfg.check_tol:
        return "held_out_failure"
    if null.decision.gap < cfg.min_gap:
        return "ambiguous_gap"
    return "successful"


def solve_affine(
    target: Target,
    ansatz: Ansatz | None = None,
    config: AffineSolverConfig | None = None,
    *,
    generator: torch.Generator | None = None,
    progress: bool = False,
) -> AffineAlgebra:
    """All affine fields ``v(θ) = Aθ + b`` (in ``ansatz``) that leave ``target`` invariant.

    Sample points are drawn, their rows accumulated into ``H``, the null space computed and
    refined, and the recovered generators checked at held-out points; with an automatic sample
    count a failed check doubles the points (module docstring).

    Args:
        target: the function of the block (converted to float64 on a copy).
        ansatz: the family of fields (default: every affine field, ``L = p(p+1)`` unknowns).
        config: the solver's settings (default ``AffineSolverConfig()``).
        generator: source of randomness (default seeded 0).
        progress: show a progress bar over the row chunks.

    Raises:
        EmptyBlockError: a block with no parameters. ToleranceError: ``tol ∉ (0, 1)``.
        ConfigError: another setting of ``config`` out of its range (named).
        TooFewSamplesError: ``samples`` below the number the unknowns need (the message says it).
        TooLargeError: the Gram matrix would exceed 4 GiB (use a structured ansatz), or the
            memory estimate exceeds ``max_memory`` (the message gives the estimate).
    """
    t0 = time.perf_counter()
    cfg = config if config is not None else AffineSolverConfig()
    if not isinstance(cfg, AffineSolverConfig):
        raise ConfigError(f"config must be a paramsym.exact.AffineSolverConfig; received {type(cfg).__name__}.")
    if not isinstance(target, Target):
        raise ConfigError(f"target must be a paramsym.targets.Target; received {type(target).__name__}.")
    cfg.validate()
    tol = check_tolerance(cfg.tol)
    ansatz = _check_block(target, ansatz)
    L = ansatz.n_unknowns
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    f64 = target if target.dtype == torch.float64 else target.to(torch.float64)
    q = f64.q
    rank0, need, samples = _plan_samples(f64, L, cfg)
    adaptive = cfg.samples is None
    plan = _plan_memory(target, ansatz, q, samples, cfg)
    held = _sample_points(f64.theta0, cfg.held_out, cfg.radius, gen)
    held_jac = jacobians(f64, held, plan.chunk)
    rows = _Rows(torch.zeros(0, ansatz.p, dtype=torch.float64), [], torch.zeros(L, L, dtype=torch.float64))
    kk = min(L, max(cfg.k, 1))
    rounds = 0
    memory_stop = None
    while True:
        rows.extend(f64, ansatz, _sample_points(f64.theta0, samples - rows.thetas.shape[0], cfg.radius, gen), plan,
                    progress)
        null = refined_null_space(rows.h, ansatz, rows.jacs, rows.thetas, kk, tol, cfg.rule, gen, cfg.dense_limit)
        kk = null.k
        coeffs = null.basis()
        residuals = held_out_residuals(ansatz, coeffs, held, held_jac)
        failed = null.decision.dimension and float(residuals.max()) > cfg.check_tol
        if not (failed and adaptive and rounds < cfg.max_rounds):
            break
        grown = affine_memory(ansatz, q, 2 * samples, held_out=cfg.held_out, k=cfg.k, dense_limit=cfg.dense_limit)
        if grown["minimum"] > plan.budget:
            memory_stop = (f"doubling the sample points to {2 * samples} would need "
                           f"{format_bytes(grown['minimum'])}, above the budget {format_bytes(plan.budget)}")
            break
        plan.room = plan.budget - grown["resident"]
        rounds += 1
        samples *= 2
    return AffineAlgebra(_status(null, residuals, cfg), null.decision.dimension, coeffs, ansatz, null.spectrum(),
                         math.sqrt(max(null.lam_max, 0.0)), null.decision, residuals, samples, samples * q, null.method,
                         time.perf_counter() - t0,
                         {"p": ansatz.p, "q": q, "rank_J": rank0, "required_samples": need, "refined": kk,
                          "rounds": rounds, "memory_minimum": plan.estimate["minimum"], "memory_planned": plan.planned,
                          "max_memory": plan.budget,
                          "jacobian_chunk": plan.chunk, **({"memory_stop": memory_stop} if memory_stop else {})})
