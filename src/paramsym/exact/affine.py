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
import time
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..errors import ConfigError, EmptyBlockError, ShapeError, TooFewSamplesError, TooLargeError
from ..groups.memory import budget_bytes, check_memory, format_bytes
from ..groups.progress import progress_bar
from ..targets import Target
from .ansatz import Ansatz
from .spectrum import RankDecision, check_tolerance, decide_rank

__all__ = ["AffineAlgebra", "solve_affine", "required_samples", "jacobians", "affine_memory"]

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


def _bottom_subspace(h: Tensor, k: int, gen: torch.Generator, iters: int = 5) -> tuple[Tensor, float]:
    """Bottom-k eigenvectors of PSD ``h`` by shift-invert subspace iteration; and λ_max."""
    n = h.shape[0]
    x = torch.randn(n, 1, generator=gen, dtype=h.dtype)
    for _ in range(15):  # power iteration for λ_max (the shift and σ_max)
        x = h @ x
        x = x / x.norm()
    lam_max = float(x.T @ h @ x)
    mu = 1e-11 * lam_max
    diag = h.diagonal()
    for _ in range(6):
        diag += mu
        chol, bad = torch.linalg.cholesky_ex(h)
        diag -= mu
        if int(bad) == 0:
            break
        mu *= 10
    v = torch.linalg.qr(torch.randn(n, k, generator=gen, dtype=h.dtype)).Q
    for _ in range(iters):  # (H + μI)⁻¹ v = C⁻ᵀ C⁻¹ v; cholesky_solve would copy C (8 L² bytes) each call
        y = torch.linalg.solve_triangular(chol, v, upper=False)
        v = torch.linalg.qr(torch.linalg.solve_triangular(chol.mT, y, upper=True)).Q
    w, u = torch.linalg.eigh(v.T @ h @ v)
    return v @ u, lam_max


def solve_affine(
    target: Target,
    ansatz: Ansatz | None = None,
    *,
    samples: int | None = None,
    oversample: float = 2.0,
    radius: float = 1.0,
    generator: torch.Generator | None = None,
    tol: float = 1e-6,
    rule: str = "gap",
    min_gap: float = 1e3,
    k: int = 64,
    dense_limit: int = 2500,
    held_out: int = 8,
    check_tol: float = 1e-10,
    chunk: int = 64,
    max_rounds: int = 4,
    progress: bool = False,
    max_memory: int | None = None,
) -> AffineAlgebra:
    """All affine fields ``v(θ) = Aθ + b`` (in ``ansatz``) that leave ``target`` invariant.

    Args:
        target: the function of the block (converted to float64 on a copy).
        ansatz: the family of fields (default: every affine field, ``L = p(p+1)`` unknowns).
        samples: sample points (default ``⌈oversample · L / min(q, p)⌉``; at least
            :func:`required_samples`).
        radius: spread of the sample points around θ0 in units of ``rms(θ0)``.
        generator: source of randomness (default seeded 0).
        tol, rule: rank decision (:func:`~paramsym.exact.spectrum.decide_rank`).
        min_gap: gaps below this give status ``"ambiguous_gap"``.
        k: subspace size refined (and computed by subspace iteration when ``L > dense_limit``).
        held_out: held-out points for the invariance check; ``check_tol`` its pass threshold.
            When ``samples`` is not given and the check fails (too few points: the sampled system
            has spurious null vectors), the sample count doubles, up to ``max_rounds`` times
            (and only while the estimate fits the budget).
        chunk: at most this many points per ``vmap(jacrev)`` call (fewer if the budget asks).
        max_memory: budget in bytes for the solver's arrays (``None``: 2 GiB); see
            :func:`affine_memory`.

    Raises:
        EmptyBlockError: a block with no parameters. ToleranceError: ``tol ∉ (0, 1)``.
        TooFewSamplesError: ``samples`` below the number the unknowns need (the message says it).
        TooLargeError: the Gram matrix would exceed 4 GiB (use a structured ansatz), or the
            memory estimate exceeds ``max_memory`` (the message gives the estimate).
    """
    t0 = time.perf_counter()
    if not isinstance(target, Target):
        raise ConfigError(f"target must be a paramsym.targets.Target; received {type(target).__name__}.")
    tol = check_tolerance(tol)
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
    import numbers

    def _int_ok(v):
        return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1

    if samples is not None and not _int_ok(samples):
        raise ConfigError(f"samples must be an integer >= 1, or None (automatic); received {samples!r}.")
    if max_memory is not None and not _int_ok(max_memory):
        raise ConfigError(f"max_memory must be a number of bytes >= 1, or None (2 GiB); received {max_memory!r}.")
    if not (isinstance(radius, numbers.Real) and not isinstance(radius, bool) and math.isfinite(radius) and radius > 0):
        raise ConfigError(f"radius must be a finite number > 0; received {radius!r}.")
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    f64 = target if target.dtype == torch.float64 else target.to(torch.float64)
    q = f64.q
    rank0 = int(torch.linalg.matrix_rank(jacobians(f64, f64.theta0.reshape(1, -1).to(torch.float64))[0]))
    need = required_samples(L, max(rank0, 1), p)
    adaptive = samples is None
    if samples is None:
        samples = max(need + 2, math.ceil(oversample * need))
    elif samples < need:
        raise TooFewSamplesError(
            f"samples = {samples} cannot determine {L} unknowns: each point gives at most rank J(θ0) = "
            f"{rank0} independent rows, so at least {need} sample points are needed "
            f"(the default starts from {max(need + 2, math.ceil(oversample * need))} and doubles them "
            "until the held-out check passes)."
        )
    budget = budget_bytes(max_memory)
    est = affine_memory(ansatz, q, samples, held_out=held_out, k=k, dense_limit=dense_limit)
    check_memory(est["minimum"], f"the affine solve of {target!r} ({L} unknowns, {samples} sample points, "
                 f"q = {q}: {format_bytes(est['resident'])} resident, {format_bytes(est['null_space'])} "
                 "for the null space)", budget, "Use a structured ansatz or fewer sample points.")
    room = budget - est["resident"]
    chunk = max(1, min(chunk, room // est["jacobian_per_point"]))
    gram_block = max(1, min(chunk, room // est["gram_per_point"]))
    planned = est["resident"] + max(est["null_space"], chunk * est["jacobian_per_point"],
                                    gram_block * est["gram_per_point"])
    held = _sample_points(f64.theta0, held_out, radius, gen)
    held_jac = jacobians(f64, held, chunk)
    thetas = torch.zeros(0, p, dtype=torch.float64)
    jacs: list[Tensor] = []
    h = torch.zeros(L, L, dtype=torch.float64)
    kk = min(L, max(k, 1))
    rounds = 0
    memory_stop = None
    while True:
        new = _sample_points(f64.theta0, samples - thetas.shape[0], radius, gen)
        starts = range(0, new.shape[0], chunk)
        for i in progress_bar(starts, total=len(starts), desc="affine rows", enabled=progress):
            jac = jacobians(f64, new[i : i + chunk], chunk)
            jacs.append(jac)
            if not bool(torch.isfinite(jac).all()):
                raise ConfigError("the target's Jacobian is not finite at a sample point; lower radius.")
            ansatz.gram(jac, new[i : i + chunk], out=h, max_bytes=room)
        thetas = torch.cat([thetas, new])
        v, w, s, wh, lam_max, method, decision, kk = _null_space(h, ansatz, jacs, thetas, kk, tol, rule, chunk, gen,
                                                                 dense_limit)
        coeffs = (v @ wh.T)[:, kk - decision.dimension :].T.contiguous() if decision.dimension else v[:, :0].T
        residuals = _held_out(ansatz, coeffs, held, held_jac)
        failed = decision.dimension and float(residuals.max()) > check_tol
        if failed and adaptive and rounds < max_rounds:
            grown = affine_memory(ansatz, q, 2 * samples, held_out=held_out, k=k, dense_limit=dense_limit)
            if grown["minimum"] > budget:
                memory_stop = (f"doubling the sample points to {2 * samples} would need "
                               f"{format_bytes(grown['minimum'])}, above the budget {format_bytes(budget)}")
                break
            room = budget - grown["resident"]
        if not (failed and adaptive and rounds < max_rounds):
            break
        rounds += 1
        samples *= 2
    sigma_max = math.sqrt(max(lam_max, 0.0))
    spectrum = torch.cat([w[kk:].clamp_min(0).sqrt().flip(0), s]) if method == "dense" and kk < L else s
    if decision.saturated:
        status = "saturated"
    elif decision.dimension and float(residuals.max()) > check_tol:
        status = "held_out_failure"
    elif decision.gap < min_gap:
        status = "ambiguous_gap"
    else:
        status = "successful"
    return AffineAlgebra(status, decision.dimension, coeffs, ansatz, spectrum, sigma_max, decision,
                         residuals, samples, samples * q, method, time.perf_counter() - t0,
                         {"p": p, "q": q, "rank_J": rank0, "required_samples": need, "refined": kk,
                          "rounds": rounds, "memory_minimum": est["minimum"], "memory_planned": planned,
                          "max_memory": budget,
                          "jacobian_chunk": chunk, **({"memory_stop": memory_stop} if memory_stop else {})})


def _null_space(h, ansatz, jacs, thetas, kk, tol, rule, chunk, gen, dense_limit):
    """Bottom eigenvectors of ``h``, refined by a streaming QR of ``K V`` (module docstring)."""
    L = h.shape[0]
    w = None
    while True:
        if L <= dense_limit:
            w, vecs = torch.linalg.eigh(h)
            lam_max, method = float(w[-1]), "dense"
            v = vecs[:, :kk]
        else:
            v, lam_max = _bottom_subspace(h, kk, gen)
            method = "subspace"
        r = torch.zeros(0, kk, dtype=torch.float64)
        offset = 0
        for jac in jacs:
            m = jac.shape[0]
            kv = ansatz.apply(jac, thetas[offset : offset + m], v)
            offset += m
            r = torch.linalg.qr(torch.cat([r, kv]), mode="r").R
        _, s, wh = torch.linalg.svd(r)
        decision = decide_rank(s, math.sqrt(max(lam_max, 0.0)), tol, rule)
        if decision.saturated and kk < L:
            kk = min(L, 2 * kk)
            continue
        return v, w, s, wh, lam_max, method, decision, kk


def _held_out(ansatz, coeffs, pts, jac):
    """``max_j ‖J_j v(θ_j)‖ / (‖J_j‖₂ ‖v(θ_j)‖)`` per generator (rows of ``coeffs``)."""
    if coeffs.shape[0] == 0:
        return torch.zeros(0, dtype=torch.float64)
    vf = ansatz.fields(coeffs, pts)  # (m, d, p)
    jn = torch.linalg.matrix_norm(jac, ord=2)
    num = torch.einsum("mqp,mdp->mdq", jac, vf).norm(dim=-1)
    return (num / (jn[:, None] * vf.norm(dim=-1).clamp_min(1e-300))).amax(0)

