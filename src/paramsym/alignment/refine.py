"""Learned refinement of the continuous transformations aligning B: lower loss along the linear path.

Weight matching minimises ``‖θ_A − g·θ_B‖``, a proxy. The ``refined`` stage of
:func:`paramsym.alignment.align.align` optimises the continuous part of ``g`` for what merging
needs, the loss on the path ``θ(α) = (1 − α) θ_A + α g·θ_B``, starting from the ``orthogonal``
stage's B (canonical form, :class:`~paramsym.alignment.orthogonal.CanonicalPair`):

    min_{S, X, Y}  E_{α, batch} CE( f(θ(α); x), y ),
    g·θ = VO(Y) ∘ QK(X) ∘ R(S) · θ.

* ``R(S)``: the stream rotation ``Q = exp(S − Sᵀ)`` — the exponential of a skew matrix is
  orthogonal (``Qᵀ Q = exp(−K) exp(K) = I``, ``K = S − Sᵀ``) with ``det Q = 1``: the component of
  the identity, which is where a refinement of the matched ``Q₀`` starts;
* ``QK(X)``, ``VO(Y)``: per key/value head ``M = exp(X_h)`` on (W_Q, W_K) and ``exp(Y_h)`` on
  (W_V, W_O), any real ``d × d`` ``X_h``; after every step ``X_h`` is shrunk to spectral norm
  ``≤ log(κ)/2`` so ``cond(exp X_h) ≤ ‖e^{X_h}‖ ‖e^{−X_h}‖ ≤ e^{2‖X_h‖₂} ≤ κ`` (``κ`` =
  ``max_condition``): the maps stay well-conditioned, and the rounding of the transformed
  weights stays bounded. Under rotary embeddings (or where the census refused a query/key
  symmetry) the query/key map is not refined (``exp`` of a general ``X`` leaves the rotary
  commutant).

Every transformation is applied through the exact group action (``rotate_axes`` along the stream
axes, :class:`~paramsym.actions.attention.QueryKeyAction`, :class:`~paramsym.actions.attention.ValueOutputAction`),
so B's function is unchanged by construction, whatever the optimiser does. ``α`` is drawn
uniformly in ``(0, 1)`` per step (``alpha=None``) or fixed, the batch from the training split
(explicit generator). The midpoint training loss ``L(θ(½))`` (on a fixed subset of
``eval_examples`` training examples, all of them when fewer) is evaluated at the start, every
``eval_every`` steps and at the end; the best point seen is returned, so refinement never raises
it. Optimised in ``dtype`` (float32 by default: fast); the kept transformations are applied to B
in float64.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from .arch import Architecture
from .matching import apply_attention, rotate_axes
from .path import evaluate
from .refine_config import RefineConfig

__all__ = ["RefineConfig", "refine", "transform"]


def _refinable_qk(layout) -> bool:
    return not layout.rotary_dim and not layout.qk_refused


def transform(arch: Architecture, b: Mapping[str, Tensor], axes: Mapping[str, int],
              variables: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``VO(Y) ∘ QK(X) ∘ R(S) · b`` (module docstring) through the exact actions; differentiable in
    ``variables``: ``"S"`` (``D × D``), ``"X{i}"`` / ``"Y{i}"`` (``H_kv × d × d``, layer ``i``; an
    absent ``X{i}`` leaves query/key alone)."""
    p = dict(b)
    if "S" in variables:
        S = variables["S"]
        p = rotate_axes(p, axes, torch.linalg.matrix_exp(S - S.T))
    for i, layout in enumerate(arch.attention):
        X = variables.get(f"X{i}")
        gqk = None if X is None else torch.block_diag(*torch.linalg.matrix_exp(X))
        gvo = torch.block_diag(*torch.linalg.matrix_exp(variables[f"Y{i}"]))
        p = apply_attention(p, layout, gqk, gvo)
    return p


def _shrink(variables: Mapping[str, Tensor], radius: float) -> float:
    """Scale every head block ``X_h`` down to spectral norm ``≤ radius``; the largest norm after."""
    top = 0.0
    with torch.no_grad():
        for k, v in variables.items():
            if k == "S":
                continue
            s = torch.linalg.matrix_norm(v, ord=2)  # (H_kv,)
            v.mul_(torch.clamp(radius / s.clamp_min(1e-300), max=1.0)[:, None, None])
            top = max(top, float(torch.linalg.matrix_norm(v, ord=2).max()))
    return top


def refine(arch: Architecture, a: Mapping[str, Tensor], b: Mapping[str, Tensor], axes: Mapping[str, int], data,
           config: RefineConfig, *, generator: torch.Generator) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Refine ``b`` (canonical, aligned) towards lower path loss against ``a`` (module docstring).

    Args:
        arch: the canonical architecture (its ``forward`` and attention layouts).
        a, b: canonical parameters of A and of the aligned B.
        axes: the stream axes (:class:`~paramsym.alignment.orthogonal.CanonicalPair`).
        data: a :class:`~paramsym.models.datasets.Split`; its training split is used.
        config: the budget (:class:`RefineConfig`).
        generator: draws ``α`` and the batches.

    Returns:
        ``(refined B in float64, info)``: ``info`` holds the midpoint training loss at the start
        (``mid_loss_start``), of the kept point (``mid_loss``), the step kept, the evaluations,
        the largest head-map spectral norm ``‖X_h‖₂`` kept and seen during the descent, the
        condition bound ``κ``.
    """
    config.validate()
    dtype = getattr(torch, config.dtype)
    A = {n: t.detach().to(dtype) for n, t in a.items()}
    B = {n: t.detach().to(dtype) for n, t in b.items()}
    D = next(B[n].shape[ax] for n, ax in axes.items())
    var: dict[str, Tensor] = {"S": torch.zeros(D, D, dtype=dtype)}
    for i, layout in enumerate(arch.attention):
        shape = (layout.num_kv_heads, layout.head_dim, layout.head_dim)
        if _refinable_qk(layout):
            var[f"X{i}"] = torch.zeros(shape, dtype=dtype)
        var[f"Y{i}"] = torch.zeros(shape, dtype=dtype)
    for v in var.values():
        v.requires_grad_(True)
    x, y = data.x_train, data.y_train
    x = x.to(dtype) if x.is_floating_point() else x
    radius = math.log(config.max_condition) / 2

    n = x.shape[0]
    sub = torch.arange(n) if n <= config.eval_examples else torch.randperm(n, generator=generator)[:config.eval_examples]

    def mid_loss() -> float:
        with torch.no_grad():
            p = transform(arch, B, axes, var)
            return evaluate(arch.forward, {k: 0.5 * (A[k] + p[k]) for k in A}, x[sub], y[sub])[0]

    opt = torch.optim.Adam(list(var.values()), lr=config.lr)
    best = (mid_loss(), 0, {k: v.detach().clone() for k, v in var.items()})
    info: dict[str, Any] = {"mid_loss_start": best[0], "evaluations": [[0, best[0]]]}
    seen = 0.0
    t0 = time.perf_counter()
    from tqdm.auto import tqdm

    bar = tqdm(total=config.steps, disable=not config.progress, desc="refine", leave=False)
    for step in range(1, config.steps + 1):
        al = config.alpha if config.alpha is not None else float(torch.rand((), generator=generator, dtype=torch.float64))
        idx = torch.randperm(n, generator=generator)[:config.batch]
        p = transform(arch, B, axes, var)
        logits = arch.forward({k: (1 - al) * A[k] + al * p[k] for k in A}, x[idx])
        # logits (N, …, C) against labels (N, …): every label counts once (a language model's tokens)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[idx].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen = max(seen, _shrink(var, radius))
        bar.update(1)
        if step % config.eval_every == 0 or step == config.steps:
            now = mid_loss()
            info["evaluations"].append([step, now])
            bar.set_postfix(mid_loss=f"{now:.4g}")
            if now < best[0]:
                best = (now, step, {k: v.detach().clone() for k, v in var.items()})
    bar.close()
    kept = {k: v.double() for k, v in best[2].items()}
    out = transform(arch, {k: t.detach().double() for k, t in b.items()}, axes, kept)
    info |= {"mid_loss": best[0], "step_kept": best[1], "steps": config.steps, "seconds": time.perf_counter() - t0,
             "max_head_norm": _shrink(kept, radius), "max_head_norm_seen": seen, "condition_bound": config.max_condition,
             "query_key_refined": sum(1 for la in arch.attention if _refinable_qk(la)),
             "rotation_angle": float(torch.linalg.matrix_norm(kept["S"] - kept["S"].T, ord=2))}
    return {k: v.detach() for k, v in out.items()}, info
