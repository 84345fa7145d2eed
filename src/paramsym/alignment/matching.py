"""Weight matching modulo exact symmetries: permutations, positive rescalings, per-head GL / rotary commutant.

All three minimise the same weight distance ``‖θ_A − g·θ_B‖²`` over one factor of the group at a
time (block coordinate descent, so the distance never increases):

* **Permutations** (Git Re-Basin weight matching, Ainsworth et al. 2023, Alg. 1). For a unit
  group with permutation ``π`` and every other group's permutation fixed, ``‖g·θ_B‖`` does not
  depend on ``π``, so minimising the distance maximises ``Σ_i S[i, π(i)]`` with
  ``S = Σ_members A[pos] · B'[pos]ᵀ`` (``n × n``; ``B'`` = B with the other groups' current
  permutations applied; members are each unit's incoming weights and bias and its outgoing
  weights) — a linear assignment problem solved exactly by
  :func:`scipy.optimize.linear_sum_assignment`. Groups are visited in a random order (seeded
  generator) until a whole sweep changes no permutation.
* **Positive rescaling** of unit ``j`` behind a homogeneous activation: incoming ``u = (w_j, b_j)``
  ↦ ``c u``, outgoing ``v`` ↦ ``v / c``. With ``a, w`` the matching entries of A,
  ``f(c) = ‖c u − a‖² + ‖v / c − w‖²`` and ``c³ f'(c)/2 = ‖u‖² c⁴ − (u·a) c³ + (v·w) c − ‖v‖²``;
  the minimiser over ``c > 0`` is the positive real root of this quartic with the smallest
  ``f`` (``f → ∞`` at ``0⁺`` and ``∞`` when ``u, v ≠ 0``; a dead unit keeps ``c = 1``). Layers
  are swept until the distance stops decreasing (a unit's outgoing weights are the next layer's
  incoming ones). Before matching, both models are moved to their **balanced** representatives
  (:func:`balance`, the least-norm point of the rescaling orbit), so that permutations are
  matched between rescaling-free canonical forms; B is then brought into A's scale frame.
* **Attention heads** (per head, after head permutation): GL(d_k) acts by
  ``Q ↦ M Q``, ``K ↦ M⁻ᵀ K`` (``Q, K``: the head's ``d × (D+1)`` query/key rows with bias), and we
  minimise the head's weight distance ``f(M) = ‖M Q_B − Q_A‖² + ‖M⁻ᵀ K_B − K_A‖²`` (non-convex)
  from the best of three closed-form candidates under ``f``: the identity; the orthogonal
  Procrustes solution (for orthogonal ``M``, ``M⁻ᵀ = M`` and ``f`` is one Procrustes problem on
  ``[Q | K]``, solved exactly by an SVD); and the *linearised* least squares
  ``min_M ‖M Q_B − Q_A‖² + ‖Mᵀ K_A − K_B‖²`` (residual of the second term multiplied by ``Mᵀ``),
  whose normal equations are the Sylvester equation
  ``(K_A K_Aᵀ) M + M (Q_B Q_Bᵀ) = Q_A Q_Bᵀ + K_A K_Bᵀ`` (exact, ``f = 0``, when B is a
  transformed copy of A). The best candidate is refined by L-BFGS on ``f``, kept only if ``f``
  drops and ``cond(M) ≤ max_condition``. So ``f`` never exceeds its value at the identity.
  GL(d_v) likewise: ``V ↦ B V``, ``O ↦ O B⁻¹`` (``O``: the head's ``D × d`` output columns),
  ``f(B) = ‖B V_B − V_A‖² + ‖O_B B⁻¹ − O_A‖²``, Procrustes on ``[V | Oᵀ]``, Sylvester
  ``(O_Aᵀ O_A) B + B (V_B V_Bᵀ) = V_A V_Bᵀ + O_Aᵀ O_B``. The solution is applied to B through
  the catalogue actions, so the function of B is unchanged whatever ``M`` is (up to rounding,
  which grows with ``cond(M)``).
* **Under rotary embeddings** query/key ``M`` must commute with every rotation: the rotary
  commutant, block diagonal over the frequency classes of rotated pairs ``(p, p + r/2)`` and the
  non-rotated dimensions (:func:`~paramsym.actions.attention.rotary_pair_classes`). ``f`` is the
  sum of the blocks' objectives; a class is the same problem over ``ℂ`` (rows
  ``X[p] + i·X[p + r/2]``, ``M ∈ GL(m, ℂ)``, ``ᵀ`` read as ``ᴴ``: unitary Procrustes, the
  complex Sylvester equation, L-BFGS on real and imaginary parts; the classes of one size solved
  as one batch), the non-rotated block the real one (:func:`_query_key_element`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from ..actions.attention import QueryKeyAction, ValueOutputAction, rotary_pair_classes
from ..models.adapters import AttentionLayout
from .arch import UnitGroup, check_param_pair

__all__ = ["apply_attention", "balance", "match_permutations", "permute", "rescale", "match_rescaling", "solve_quartic_scales",
           "match_attention", "distance", "match_rotation", "rotate_axes", "match_head_gl"]

Params = dict[str, Tensor]


def distance(a: Mapping[str, Tensor], b: Mapping[str, Tensor]) -> float:
    """``‖θ_A − θ_B‖²`` over the tensors of ``a`` (float64).

    Raises:
        ConfigError, ArchitectureMismatchError: not two dicts of tensors with the same names and shapes.
    """
    check_param_pair(a, b)
    return float(sum(((a[n].double() - b[n].double()) ** 2).sum() for n in a))


def permute(params: Mapping[str, Tensor], group: UnitGroup, perm: Tensor) -> Params:
    """``params`` with the units of ``group`` permuted: new unit ``i`` is old unit ``perm[i]``
    (``T.flat[pos[i]] ← T.flat[pos[perm[i]]]`` in every member; other tensors shared — all of
    them for the identity, which copies nothing)."""
    out = dict(params)
    perm = torch.as_tensor(perm, dtype=torch.long)
    if torch.equal(perm, torch.arange(len(perm))):
        return out
    for m in group.members:
        flat = out[m.name].reshape(-1).clone()
        flat[m.positions.reshape(-1)] = flat[m.positions[perm].reshape(-1)]
        out[m.name] = flat.reshape(params[m.name].shape)
    return out


def _rows(params: Mapping[str, Tensor], group: UnitGroup) -> Tensor:
    """``(n, Σk)``: each unit's entries over all members (float64)."""
    return torch.cat([params[m.name].reshape(-1)[m.positions].double() for m in group.members], dim=1)


def assign(S: np.ndarray, current: Tensor) -> Tensor | None:
    """One weight-matching step: the permutation maximising ``Σ_i S[i, π(i)]`` (exact linear
    assignment), or ``None`` when it does not beat ``current`` by more than rounding."""
    from scipy.optimize import linear_sum_assignment

    _, col = linear_sum_assignment(S, maximize=True)
    new = torch.as_tensor(col, dtype=torch.long)
    n = S.shape[0]
    old_val = float(S[np.arange(n), current.numpy()].sum())
    if float(S[np.arange(n), col].sum()) > old_val + 1e-12 * max(1.0, abs(old_val)) and not torch.equal(new, current):
        return new
    return None


def match_permutations(a: Mapping[str, Tensor], b: Mapping[str, Tensor], groups: list[UnitGroup], *,
                       generator: torch.Generator | None = None, max_sweeps: int = 100,
                       init: dict[str, Tensor] | None = None) -> tuple[dict[str, Tensor], int]:
    """Git Re-Basin weight matching (module docstring): one permutation per group.

    Returns:
        ``({group name: perm}, sweeps)``; apply with :func:`permute` (new unit ``i`` of B is its
        old unit ``perm[i]``).
    """
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    perms = {g.name: torch.arange(g.size) for g in groups} if init is None else {k: v.clone() for k, v in init.items()}
    cur = dict(b)
    for g in groups:
        cur = permute(cur, g, perms[g.name])
    rows_a = {g.name: _rows(a, g) for g in groups}
    sweeps = 0
    for sweep in range(1, max_sweeps + 1):
        sweeps = sweep
        changed = False
        for k in torch.randperm(len(groups), generator=gen).tolist():
            g = groups[k]
            rb = _rows(cur, g)
            base = torch.empty_like(rb)
            base[perms[g.name]] = rb  # B with every other group's permutation, this one undone
            new = assign((rows_a[g.name] @ base.T).numpy(), perms[g.name])
            if new is not None:
                inv = torch.empty_like(perms[g.name])
                inv[perms[g.name]] = torch.arange(g.size)
                cur = permute(cur, g, inv[new])  # from the current order to the new one
                perms[g.name] = new
                changed = True
        if not changed:
            break
    return perms, sweeps


def rescale(params: Mapping[str, Tensor], group: UnitGroup, c: Tensor) -> Params:
    """Units of ``group`` rescaled: ``in`` entries of unit i × ``c_i``, ``out`` entries ÷ ``c_i``."""
    out = dict(params)
    for m in group.members:
        flat = out[m.name].reshape(-1).clone()
        pos = m.positions
        f = c.to(flat.dtype)[:, None].expand_as(pos)
        flat[pos.reshape(-1)] = flat[pos.reshape(-1)] * (f if m.role == "in" else 1.0 / f).reshape(-1)
        out[m.name] = flat.reshape(params[m.name].shape)
    return out


def solve_quartic_scales(uu: np.ndarray, ua: np.ndarray, vw: np.ndarray, vv: np.ndarray) -> np.ndarray:
    """Per unit, ``argmin_{c>0} c²uu − 2c·ua + vv/c² − 2vw/c`` (module docstring; ``c = 1`` when degenerate).

    The stationary points are the positive real roots of ``uu c⁴ − ua c³ + vw c − vv``, found for
    all units at once as eigenvalues of the ``(n, 4, 4)`` companion matrices.
    """
    n = uu.shape[0]
    c = np.ones(n)
    ok = (uu > 1e-300) & (vv > 1e-300)
    if not ok.any():
        return c
    u, a, w, v = uu[ok], ua[ok], vw[ok], vv[ok]
    comp = np.zeros((u.shape[0], 4, 4))
    comp[:, 1, 0] = comp[:, 2, 1] = comp[:, 3, 2] = 1.0
    comp[:, 0, 0] = a / u  # monic: c⁴ + p3 c³ + p2 c² + p1 c + p0, first row −(p3, p2, p1, p0)
    comp[:, 0, 2] = -w / u
    comp[:, 0, 3] = v / u
    roots = np.linalg.eigvals(comp)
    real = np.where((np.abs(roots.imag) <= 1e-7 * np.maximum(1.0, np.abs(roots))) & (roots.real > 0), roots.real, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = real**2 * u[:, None] - 2 * real * a[:, None] + v[:, None] / real**2 - 2 * w[:, None] / real
    f = np.where(np.isnan(f), np.inf, f)
    best = np.argmin(f, axis=1)
    pick = real[np.arange(real.shape[0]), best]
    c[ok] = np.where(np.isfinite(f[np.arange(f.shape[0]), best]), pick, 1.0)
    return c


def _scale_terms(a: Mapping[str, Tensor], b: Mapping[str, Tensor], group: UnitGroup) -> tuple[np.ndarray, ...]:
    uu = np.zeros(group.size)
    ua, vw, vv = np.zeros(group.size), np.zeros(group.size), np.zeros(group.size)
    for m in group.members:
        xa = a[m.name].reshape(-1)[m.positions].double()
        xb = b[m.name].reshape(-1)[m.positions].double()
        if m.role == "in":
            uu += (xb * xb).sum(1).numpy()
            ua += (xb * xa).sum(1).numpy()
        else:
            vv += (xb * xb).sum(1).numpy()
            vw += (xb * xa).sum(1).numpy()
    return uu, ua, vw, vv


def _descend_scales(a: Mapping[str, Tensor], b: Mapping[str, Tensor], groups: list[UnitGroup], step,
                    max_sweeps: int, rtol: float) -> tuple[dict[str, Tensor], int]:
    """Coordinate descent on per-unit scales of ``b``: one ``step(a, cur, group) → c`` per rescalable
    group and sweep, until ``distance(a, cur)`` decreases by at most ``rtol`` (relative).

    Returns:
        ``({group name: accumulated c (float64)}, sweeps)``.
    """
    groups = [g for g in groups if g.rescalable]
    scales = {g.name: torch.ones(g.size, dtype=torch.float64) for g in groups}
    cur = dict(b)
    prev = distance(a, cur)
    sweeps = 0
    for sweep in range(1, max_sweeps + 1):
        sweeps = sweep
        for g in groups:
            c = step(a, cur, g)
            cur = rescale(cur, g, c)
            scales[g.name] = scales[g.name] * c
        now = distance(a, cur)
        if prev - now <= rtol * max(prev, 1e-300):
            break
        prev = now
    return scales, sweeps


def match_rescaling(a: Mapping[str, Tensor], b: Mapping[str, Tensor], groups: list[UnitGroup], *,
                    max_sweeps: int = 50, rtol: float = 1e-10) -> tuple[dict[str, Tensor], int]:
    """Per-unit positive scales ``c`` for each rescalable group (module docstring).

    Returns:
        ``({group name: c (float64)}, sweeps)``: apply with :func:`rescale` to ``b`` in group order.
    """
    def step(a, cur, g):
        return torch.as_tensor(solve_quartic_scales(*_scale_terms(a, cur, g)))

    return _descend_scales(a, b, groups, step, max_sweeps, rtol)


def balance(params: Mapping[str, Tensor], groups: list[UnitGroup], *, max_sweeps: int = 200,
            rtol: float = 1e-13) -> dict[str, Tensor]:
    """Scales ``c`` of the rescaling orbit's point of least norm: ``argmin_c ‖c·θ‖²``.

    For one unit the block minimiser is ``c_j = (‖v_j‖² / ‖u_j‖²)^{1/4}`` (``‖c u‖ = ‖v / c‖``:
    incoming and outgoing norms balanced); layers are swept until the norm stops decreasing. In
    ``t = log c`` the norm is a sum of exponentials of linear forms — convex — so the balanced
    point is one point per orbit (unique when the norm is strictly convex along the orbit) and
    commutes with permutations: a planted ``P D θ`` and ``θ`` balance to ``P θ_bal`` and ``θ_bal``.

    Returns:
        ``{group name: c (float64)}``; apply with :func:`rescale` in group order.
    """
    def step(zero, cur, g):
        uu, _, _, vv = _scale_terms(zero, cur, g)
        ok = (uu > 1e-300) & (vv > 1e-300)
        return torch.as_tensor(np.where(ok, (np.where(ok, vv, 1.0) / np.where(ok, uu, 1.0)) ** 0.25, 1.0))

    zero = {n: torch.zeros_like(t) for n, t in params.items()}
    return _descend_scales(zero, params, groups, step, max_sweeps, rtol)[0]


def _head_rows(params: Mapping[str, Tensor], proj, rows: list[int], bias: bool = True) -> Tensor:
    """Canonical ``[W[rows, :] | b[rows]]`` (``len(rows) × (in + 1)``) of a projection (float64)."""
    w = params[proj.weight].reshape(-1)[proj.row_positions(rows)].double()
    if bias and proj.bias is not None:
        w = torch.cat([w, params[proj.bias].reshape(-1)[proj.bias_positions(rows)].double()[:, None]], dim=1)
    return w


def _sylvester(left: Tensor, right: Tensor, rhs: Tensor) -> Tensor:
    """Solutions ``X`` of ``left X + X right = rhs`` for a batch ``(n, m, m)`` (``X = rhs / (left + right)``
    for ``m = 1``); a problem without a finite solution gets NaN."""
    if left.shape[-1] == 1:
        x = rhs / (left + right)
    else:
        from scipy.linalg import solve_sylvester

        x = torch.stack([torch.as_tensor(solve_sylvester(a.numpy(), b.numpy(), c.numpy()))
                         for a, b, c in zip(left, right, rhs)])
    return torch.where(torch.isfinite(x).flatten(1).all(1)[:, None, None], x, torch.full_like(x, float("nan")))


def _procrustes(src: Tensor, dst: Tensor) -> Tensor:
    """``argmin_{R ∈ O(d)} ‖R src − dst‖_F`` (``R = U Vᴴ`` for ``dst srcᴴ = U Σ Vᴴ``; unitary ``R`` for
    complex input; batched over leading dimensions)."""
    u, _, vt = torch.linalg.svd(dst @ src.mH)
    return u @ vt


def _sq(r: Tensor) -> Tensor:
    """``‖r‖²_F`` over the last two dimensions (real or complex)."""
    return (r * r.conj()).real.sum((-2, -1))


def _head_objective(m: Tensor, xb: Tensor, xa: Tensor, yb: Tensor, ya: Tensor, inverse_transpose: bool) -> Tensor:
    """``‖M X_B − X_A‖² + ‖M⁻ᴴ Y_B − Y_A‖²`` (QK) or ``‖M X_B − X_A‖² + ‖Y_B M⁻¹ − Y_A‖²`` (VO);
    ``ᴴ = ᵀ`` for real ``M``; one value per problem of the batch."""
    if inverse_transpose:
        other = torch.linalg.solve(m.mH, yb)
    else:
        other = torch.linalg.solve(m.mH, yb.mH).mH
    return _sq(m @ xb - xa) + _sq(other - ya)


def _best_head_element(xa: Tensor, xb: Tensor, ya: Tensor, yb: Tensor, qk: bool, max_condition: float,
                       refine_steps: int) -> Tensor:
    """The head's GL element: the best of identity, orthogonal Procrustes and the Sylvester solution
    under the true objective (:func:`_head_objective`), refined by L-BFGS when that lowers it.

    Real input: ``M ∈ GL(d, ℝ)``. Complex input (a rotary frequency class,
    :func:`_query_key_element`): ``M ∈ GL(m, ℂ)`` with ``ᵀ`` read as ``ᴴ`` throughout (unitary
    Procrustes; the Sylvester equation with conjugate transposes; L-BFGS on the real and
    imaginary parts) — the same problem, as ``‖·‖²`` of a complex matrix is that of its real
    representation. Inputs may carry a leading batch dimension of independent problems (``(n, d, ·)``
    → ``(n, d, d)``): each is chosen on its own objective; L-BFGS runs once on their sum (separable,
    so its gradient is each problem's own), and a refined element is kept per problem only where it
    lowers that problem's objective with ``cond ≤ max_condition``.
    """
    if xa.dim() == 2:
        return _best_head_element(xa[None], xb[None], ya[None], yb[None], qk, max_condition, refine_steps)[0]
    n, d = xa.shape[:2]
    # orthogonal (unitary) M: M⁻ᴴ = M, so both terms are one Procrustes problem on stacked columns
    stack_b = torch.cat([xb, yb if qk else yb.mH], dim=-1)
    stack_a = torch.cat([xa, ya if qk else ya.mH], dim=-1)
    eye = torch.eye(d, dtype=xa.dtype).expand(n, d, d)
    cands = [eye, _procrustes(stack_b, stack_a)]
    if qk:  # (Y_A Y_Aᴴ) M + M (X_B X_Bᴴ) = X_A X_Bᴴ + Y_A Y_Bᴴ
        syl = _sylvester(ya @ ya.mH, xb @ xb.mH, xa @ xb.mH + ya @ yb.mH)
    else:  # (Y_Aᴴ Y_A) M + M (X_B X_Bᴴ) = X_A X_Bᴴ + Y_Aᴴ Y_B
        syl = _sylvester(ya.mH @ ya, xb @ xb.mH, xa @ xb.mH + ya.mH @ yb)
    ok = torch.isfinite(syl).flatten(1).all(1)
    ok[ok.clone()] = torch.linalg.cond(syl[ok]) <= max_condition
    cands.append(torch.where(ok[:, None, None], syl, eye))  # a refused Sylvester solution: the identity again
    vals = torch.stack([_head_objective(c, xb, xa, yb, ya, qk) for c in cands])  # (candidates, n)
    pick = vals.argmin(0)
    best = torch.stack(cands)[pick, torch.arange(n)]
    best_val = vals[pick, torch.arange(n)]
    todo = best_val > 1e-24
    if refine_steps > 0 and bool(todo.any()):
        sub = (xb[todo], xa[todo], yb[todo], ya[todo])
        cplx = best.is_complex()
        par = (torch.view_as_real(best[todo]) if cplx else best[todo]).clone().requires_grad_(True)
        as_m = torch.view_as_complex if cplx else (lambda t: t)
        opt = torch.optim.LBFGS([par], max_iter=refine_steps, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            f = _head_objective(as_m(par), *sub, qk).sum()
            f.backward()
            return f

        try:
            opt.step(closure)
            cand = as_m(par.detach())
            val = _head_objective(cand, *sub, qk)
            keep = (val < best_val[todo]) & (torch.linalg.cond(cand) <= max_condition)
            idx = todo.nonzero()[:, 0][keep]
            best = best.clone()
            best[idx] = cand[keep]
        except (RuntimeError, torch.linalg.LinAlgError):  # singular iterate: keep the closed-form candidates
            pass
    return best


def _query_key_element(xa: Tensor, xb: Tensor, ya: Tensor, yb: Tensor, layout: AttentionLayout,
                       max_condition: float, refine_steps: int) -> Tensor:
    """The key/value head's query/key element ``M`` (``d × d``, float64) in the layer's group.

    Without rotary embeddings ``M ∈ GL(d_k)`` (:func:`_best_head_element` on the whole head).
    Under rotary embeddings ``M`` must commute with every rotation ``R(pos)``: the **rotary
    commutant** (:class:`~paramsym.actions.attention.QueryKeyAction`, the census's
    ``attention.query_key.rotary_commutant``), block diagonal over
    :func:`~paramsym.actions.attention.rotary_pair_classes`. A class of ``m`` pairs
    ``(i_p, j_p) = (p, p + r/2)`` is ``GL(m, ℂ)`` on the complex rows ``Z = X[i] + i·X[j]``
    (``M[i, i] = M[j, j] = Re W``, ``M[j, i] = Im W``, ``M[i, j] = −Im W``; for ``m = 1`` the
    block ``[[a, −b], [b, a]]``, a complex scalar ``a + ib``), and ``M⁻ᵀ`` is the block of
    ``W⁻ᴴ``; the non-rotated dimensions (beyond ``rotary_dim`` under partial rotary, or of a zero
    frequency) get full ``GL``. Rows of different blocks never mix, so the head's objective
    ``‖M X_B − X_A‖² + ‖M⁻ᵀ Y_B − Y_A‖²`` is the sum of the blocks' objectives, each minimised by
    :func:`_best_head_element` (complex for a class, real for the non-rotated block) — never above
    its value at the identity. The conditioning guard ``cond ≤ max_condition`` applies per block:
    rounding of a transformed row depends only on its own block's element.
    """
    if not layout.rotary_dim:
        return _best_head_element(xa, xb, ya, yb, True, max_condition, refine_steps)
    d, half = layout.head_dim, layout.rotary_dim // 2
    classes, passive = rotary_pair_classes(d, layout.rotary_dim, layout.rotary_freqs)
    m = torch.zeros(d, d, dtype=torch.float64)
    for size in sorted({len(c) for c in classes}):  # the classes of one size as one batch
        ii = torch.tensor([c for c in classes if len(c) == size])  # (n, size)
        jj = ii + half
        w = _best_head_element(*(torch.complex(x[ii], x[jj]) for x in (xa, xb, ya, yb)), True, max_condition,
                               refine_steps)
        for i, j, wk in zip(ii, jj, w):
            m[i[:, None], i] = m[j[:, None], j] = wk.real
            m[j[:, None], i], m[i[:, None], j] = wk.imag, -wk.imag
    if passive:
        p = torch.tensor(passive)
        m[p[:, None], p] = _best_head_element(xa[p], xb[p], ya[p], yb[p], True, max_condition, refine_steps)
    return m


def match_attention(a: Mapping[str, Tensor], b: Mapping[str, Tensor], layout: AttentionLayout, *,
                    max_condition: float = 1e3, refine_steps: int = 50) -> tuple[Tensor, Tensor]:
    """Block-diagonal ``g_QK`` and ``g_VO`` (``H_kv d × H_kv d``) for one attention layer (module
    docstring), the group elements of :class:`~paramsym.actions.attention.QueryKeyAction` and
    :class:`~paramsym.actions.attention.ValueOutputAction` on B (:func:`match_head_gl` with both groups)."""
    gqk, gvo = match_head_gl(a, b, layout, query_key=True, max_condition=max_condition, refine_steps=refine_steps)
    return gqk, gvo


def apply_attention(params: Mapping[str, Tensor], layout: AttentionLayout, gqk: Tensor | None,
                    gvo: Tensor) -> Params:
    """``params`` with per-head ``QueryKeyAction(g_QK)`` (skipped when ``None``) then
    ``ValueOutputAction(g_VO)`` applied (the catalogue actions: the function is unchanged)."""
    out = dict(params)
    for cls, g in ((QueryKeyAction, gqk), (ValueOutputAction, gvo)):
        if g is None:
            continue
        block = cls.block_for(out, layout)
        act = cls(block, layout)
        out = block.scatter(act.act(g.to(out[layout.q.weight].dtype), block.gather(out)), out)
    return out


def match_rotation(a: Mapping[str, Tensor], b: Mapping[str, Tensor], axes: Mapping[str, int]) -> Tensor:
    """Orthogonal Procrustes for a rotation ``M ∈ O(D)`` acting on one axis of several tensors.

    ``M`` acts on tensor ``T`` along axis ``axes[T]`` (``T' = T ×_axis M``: with that axis moved
    first and the rest flattened, ``T'₍₀₎ = M T₍₀₎``; an embedding's or reader's column axis gives
    ``T Mᵀ``, a writer's row axis ``M T``). For orthogonal ``M``,
    ``Σ_T ‖A₍₀₎ − M B₍₀₎‖² = const − 2 tr(Mᵀ K)`` with ``K = Σ_T A₍₀₎ B₍₀₎ᵀ`` (``D × D``), so the
    minimiser over ``O(D)`` is ``M = U Vᵀ`` for ``K = U Σ Vᵀ`` — exact, one SVD.

    Returns:
        ``M`` (float64, ``D × D``): apply to B along ``axes``.
    """
    src = torch.cat([b[n].double().movedim(ax, 0).reshape(b[n].shape[ax], -1) for n, ax in axes.items()], dim=1)
    dst = torch.cat([a[n].double().movedim(ax, 0).reshape(a[n].shape[ax], -1) for n, ax in axes.items()], dim=1)
    return _procrustes(src, dst)


def rotate_axes(params: Mapping[str, Tensor], axes: Mapping[str, int], M: Tensor) -> Params:
    """``params`` with ``M`` applied along ``axes`` (:func:`match_rotation`'s convention), dtype kept."""
    out = dict(params)
    for n, ax in axes.items():
        t = params[n]
        out[n] = torch.tensordot(M.to(t.dtype), t.movedim(ax, 0), dims=1).movedim(0, ax).contiguous()
    return out


def _kv_group_rows(params: Mapping[str, Tensor], layout: AttentionLayout, g: int) -> tuple[Tensor, ...]:
    """Key/value head ``g`` of ``layout``: ``Q`` (``d × G(D+1)``, its query heads side by side),
    ``K``, ``V`` (``d × (D+1)``) and ``O`` (``G·D_out × d``, its query heads' columns stacked)."""
    q = torch.cat([_head_rows(params, layout.q, layout.head_rows(h)) for h in layout.query_heads(g)], dim=1)
    k = _head_rows(params, layout.k, layout.head_rows(g))
    v = _head_rows(params, layout.v, layout.head_rows(g))
    o = torch.cat([params[layout.o.weight].reshape(-1)[layout.o.column_positions(layout.head_rows(h))].double()
                   for h in layout.query_heads(g)], dim=0)
    return q, k, v, o


def match_head_gl(a: Mapping[str, Tensor], b: Mapping[str, Tensor], layout: AttentionLayout, *,
                  query_key: bool = True, max_condition: float = 1e2,
                  refine_steps: int = 50) -> tuple[Tensor | None, Tensor]:
    """Per key/value head ``g`` the elements aligning B to A, grouped-query layers included.

    Query/key (when ``query_key``): ``M_g`` acts by ``Q_h ↦ M_g Q_h`` for every query head ``h``
    reading key head ``g`` and ``K_g ↦ M_g⁻ᵀ K_g`` (rows with bias), leaving every score
    ``q_hᵀ k_g = (M q_h)ᵀ (M⁻ᵀ k_g)`` unchanged; ``M_g ∈ GL(d_k)`` without rotary embeddings,
    the rotary commutant with them (:func:`_query_key_element`: ``GL(m, ℂ)`` per frequency class
    of ``m`` rotated pairs, ``GL`` on the non-rotated dimensions — the group the census verifies);
    chosen on ``f(M) = ‖M X_B − X_A‖² + ‖M⁻ᵀ K_B − K_A‖²`` with ``X = [Q_h₁ | … | Q_h_G]`` (the
    module docstring's candidates: identity, Procrustes, Sylvester, refined; per block under
    rotary). Value/output: ``B_g ∈ GL(d_v)`` (rotary embeddings never touch values),
    ``V_g ↦ B_g V_g``, ``O_h ↦ O_h B_g⁻¹`` for the query heads of ``g``, on
    ``f(B) = ‖B V_B − V_A‖² + ‖Y_B B⁻¹ − Y_A‖²`` with ``Y = [O_h₁; …; O_h_G]``. Neither ``f``
    exceeds its value at the identity; elements (blocks, under rotary) with
    ``cond > max_condition`` are not taken (rounding of the transformed weights grows with it).

    Returns:
        ``(g_QK or None, g_VO)``: block-diagonal ``H_kv d × H_kv d`` (block ``g`` = the element of
        key/value head ``g``), the group elements of
        :class:`~paramsym.actions.attention.QueryKeyAction` (``algebra="auto"``) and
        :class:`~paramsym.actions.attention.ValueOutputAction` (apply them through those actions).
    """
    qk, vo = [], []
    for g in range(layout.num_kv_heads):
        qa, ka, va, oa = _kv_group_rows(a, layout, g)
        qb, kb, vb, ob = _kv_group_rows(b, layout, g)
        if query_key:
            qk.append(_query_key_element(qa, qb, ka, kb, layout, max_condition, refine_steps))
        vo.append(_best_head_element(va, vb, oa, ob, False, max_condition, refine_steps))
    return (torch.block_diag(*qk) if query_key else None), torch.block_diag(*vo)
