"""Alignment with the residual stream's orthogonal group, in the canonical form of a pre-norm transformer.

In the canonical form (``paramsym.census.canonical.canonical_form``: norm gains and biases folded
into the readers, LayerNorm's centring folded into the writers, every stream norm an RMS norm at
unit gain, the LM head untied) the residual stream has the exact symmetry ``O(D)``:

    E' = E Qᵀ (embedding rows),  W_read' = W_read Qᵀ,  W_write' = Q W_write,  b_write' = Q b_write

(``paramsym.census.rotation.rotate_canonical``; here the same map on a parameter dict,
:func:`~paramsym.alignment.matching.rotate_axes` along the stream axes of :class:`CanonicalPair`).
Together with the FFN-unit and head permutations and the per-head ``GL(d_k)`` on query/key (the
rotary commutant under rotary) and ``GL(d_v)`` on value/output, :func:`match_group` aligns B to A
by block coordinate descent on ``d(g) = ‖θ_A − g·θ_B‖``, each step exact for its factor:

* ``Q`` by orthogonal Procrustes: for the stream tensors ``T`` (stream axis first, the rest
  flattened) ``Σ_T ‖A_T − Q B_T‖² = const − 2 tr(Qᵀ K)``, ``K = Σ_T A_T B_Tᵀ``, minimised over
  ``O(D)`` by ``Q = U Vᵀ`` for ``K = U Σ Vᵀ`` (:func:`~paramsym.alignment.matching.match_rotation`);
  started on the tensors no other factor acts on (embeddings, LM head, writer biases), whose
  Procrustes problem does not depend on the other factors;
* permutations by linear assignment (Git Re-Basin), head GL by the candidates of
  :func:`~paramsym.alignment.matching.match_head_gl`.

FFN/head permutations and head GL act on other axes than ``Q`` (rows of the readers, columns of
the writers), so they commute with it and the net rotation is the product of the Procrustes steps
taken: :func:`match_group` returns it, so a planted rotation can be compared with the found one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from .arch import Architecture, UnitGroup, check_same_architecture
from .matching import (
    apply_attention,
    distance,
    match_head_gl,
    match_permutations,
    match_rotation,
    permute,
    rotate_axes,
)

__all__ = ["CanonicalPair", "match_group", "orthogonal_stage", "stream_only"]


@dataclass
class CanonicalPair:
    """Models A and B in canonical form, ready for the ``orthogonal`` and ``refined`` stages of
    :func:`paramsym.alignment.align.align` (built from two HF models by
    ``paramsym.kinds.canonical_pair.canonical_pair``, which composes the census's canonical form
    with the alignment area).

    Attributes:
        arch: the architecture of the canonical model (its ``forward``, FFN/head unit groups,
            attention layouts; no residual permutation: ``O(D)`` contains it).
        a, b: the canonical parameters of A and B (same names and shapes; float64).
        axes: canonical tensor → its axis carrying the stream (embeddings, readers, writers and
            their biases; not the unit-gain norms, which ``Q`` must not move).
        info: how the pair was built (tied, untied, hidden size, ...).
        groups: the permutation groups to match (``None``: ``arch.groups``); the builder passes
            the census's (:func:`~paramsym.alignment.checkpoints.spec_groups` of its permutation
            spec without ``P_res``: grouped-query key/value heads and fused tensors included).
    """

    arch: Architecture
    a: dict[str, Tensor]
    b: dict[str, Tensor]
    axes: dict[str, int]
    info: dict = field(default_factory=dict)
    groups: list[UnitGroup] | None = None


def stream_only(axes: Mapping[str, int], groups: Sequence[UnitGroup], attention: Sequence[Any] = ()) -> dict[str, int]:
    """The stream tensors no unit group nor attention GL acts on (embeddings, LM head, writer biases):
    their Procrustes problem does not depend on the other factors."""
    touched = {m.name for g in groups if g.kind != "residual_permutation" for m in g.members}
    for layout in attention:
        for proj in (layout.q, layout.k, layout.v):  # rows, with their biases
            touched |= {proj.weight} | ({proj.bias} if proj.bias else set())
        touched.add(layout.o.weight)  # columns; its bias is a writer's, moved by the rotation only
    return {n: ax for n, ax in axes.items() if n not in touched}


def match_group(a: Mapping[str, Tensor], b: Mapping[str, Tensor], groups: Sequence[UnitGroup], *,
                attention: Sequence[Any] = (), axes: Mapping[str, int] | None = None,
                fixed: Mapping[str, int] | None = None, generator: torch.Generator | None = None,
                max_sweeps: int = 100, max_condition: float = 1e2, max_rounds: int = 10,
                rtol: float = 1e-6) -> tuple[dict[str, Tensor], dict[str, Any], Tensor | None]:
    """Align ``b`` to ``a`` over ``groups`` (permutations), the stream rotation along ``axes`` and the
    per-head GL of ``attention`` (module docstring); all in float64.

    Stages, each a block coordinate descent on ``d = ‖θ_A − g·θ_B‖`` (the result is the stage of
    lowest ``d``, so the ``d`` of each stage is never above the one before):

    1. ``permutation``: weight matching over every group at once.
    2. ``rotation`` (``axes`` given): ``Q₀`` by Procrustes on ``fixed`` (default :func:`stream_only`;
       all of ``axes`` when empty), then rounds of (Procrustes on every stream tensor, permutation
       matching) while a round lowers ``d`` by more than ``rtol`` times its value before alignment
       (at most ``max_rounds``).
    3. ``attention`` (``attention`` given): from the start of stage 2, rounds of (head GL of
       condition ≤ ``max_condition``, Procrustes, permutation matching). It does not start from
       stage 2's end, where Procrustes over value/output tensors still carrying a GL mismatch has
       bent ``Q`` away from the rotation the embeddings fix.

    Returns:
        ``(aligned B (float64), info, Q)``: ``info`` holds ``distance`` per stage (``before``,
        ``permutation``, ``rotation``, ``attention``), ``sweeps``, the rounds, ``kept`` (the stage
        returned), ``attention_max_condition``; ``Q`` the net rotation of the kept stage (new stream =
        ``Q`` · B's stream; ``None`` without ``axes``).

    Raises:
        ArchitectureMismatchError: B's tensors differ from A's in names or shapes.
    """
    check_same_architecture(a, b)
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    a64 = {k: v.detach().double() for k, v in a.items()}
    axes = dict(axes or {})
    D = next((a64[n].shape[ax] for n, ax in axes.items()), 0)
    eye = torch.eye(D, dtype=torch.float64) if axes else None
    State = tuple  # (params, Q or None)

    def d(s: State) -> float:
        return distance(a64, s[0]) ** 0.5

    def match_all(s: State) -> tuple[State, int]:
        p = s[0]
        perms, sweeps = match_permutations(a64, p, list(groups), generator=gen, max_sweeps=max_sweeps)
        for g in groups:
            p = permute(p, g, perms[g.name])
        return (p, s[1]), sweeps

    def rotate(s: State, on: Mapping[str, int]) -> State:
        M = match_rotation(a64, s[0], on)
        return rotate_axes(s[0], axes, M), M @ s[1]

    def heads(s: State, conds: list[float]) -> State:
        p = s[0]
        for layout in attention:
            qk, vo = match_head_gl(a64, p, layout, max_condition=max_condition, query_key=not layout.qk_refused)
            conds += [float(torch.linalg.cond(m)) for m in ([] if qk is None else [qk]) + [vo]]
            p = apply_attention(p, layout, qk, vo)
        return p, s[1]

    start: State = ({k: v.detach().double() for k, v in b.items()}, eye)
    dist = {"before": d(start)}
    info: dict[str, Any] = {}
    cur, info["sweeps"] = match_all(start)
    dist["permutation"] = d(cur)

    def descend(s: State, steps: list, key: str) -> State:
        """Rounds of ``steps`` while ``d`` decreases (each step lowers the same ``d``)."""
        best = d(s)
        for rnd in range(1, max_rounds + 1):
            info[key] = rnd
            t = s
            for step in steps:
                t = step(t)
            now = d(t)
            if now >= best - rtol * dist["before"]:  # no decrease worth another round
                break
            s, best = t, now
        return s

    kept, best_d = "permutation", dist["permutation"]

    def consider(stage: str, s: State) -> None:
        """Keep ``s`` when it lowers ``d`` (only the best so far is held: one copy of the model)."""
        nonlocal cur, kept, best_d
        if d(s) < best_d:
            cur, kept, best_d = s, stage, d(s)
        dist[stage] = best_d

    first = cur
    rotate_all = lambda s: rotate(s, axes)  # noqa: E731
    permute_all = lambda s: match_all(s)[0]  # noqa: E731
    if axes:
        on = dict(fixed) if fixed is not None else stream_only(axes, groups, attention)
        first = match_all(rotate(cur, on or axes))[0]
        consider("rotation", descend(first, [rotate_all, permute_all], "rotation_rounds"))
    if attention:
        conds: list[float] = []
        steps = [lambda s: heads(s, conds)] + ([rotate_all] if axes else []) + [permute_all]
        consider("attention", descend(heads(first, conds), steps, "attention_rounds"))
        info["attention_max_condition"] = max(conds, default=1.0)
    del first
    info["kept"] = kept
    info["distance"] = dist
    return cur[0], info, cur[1]


def orthogonal_stage(pair: CanonicalPair, *, generator: torch.Generator | None = None,
                     max_condition: float = 1e2, max_rounds: int = 10) -> tuple[dict[str, Tensor], dict[str, Any], Tensor]:
    """The ``orthogonal`` stage: canonical B aligned to canonical A over FFN/head permutations (``pair.groups``),
    the stream rotation ``Q ∈ O(D)`` and per-head GL (:func:`match_group`).

    Returns:
        ``(aligned canonical B, info, Q)``; ``Q`` is the identity when the rotation did not lower
        the distance (``info["kept"]`` names the stage kept).
    """
    arch = pair.arch
    groups = arch.groups if pair.groups is None else pair.groups
    out, info, Q = match_group(pair.a, pair.b, groups, attention=arch.attention, axes=pair.axes,
                               generator=generator, max_condition=max_condition, max_rounds=max_rounds)
    return out, info, Q
