"""Align model B to model A modulo exact symmetries, and measure the linear path before and after.

:func:`align` runs three stages on B (all in float64, each applied through the catalogue's
exact actions, so every stage computes the same function as B up to rounding):

1. **before** — B as given;
2. **permutation** — Git Re-Basin weight matching of every unit group
   (:func:`~paramsym.alignment.matching.match_permutations`), applied with
   :class:`~paramsym.actions.HiddenPermutationAction` (MLP layer pairs) or the generic position
   gather (:func:`~paramsym.alignment.matching.permute`, equal to
   :class:`~paramsym.actions.HeadPermutationAction` where its ``(pre, H, post)`` view fits);
3. **full** — continuous symmetries on top: alternating per-unit positive rescaling
   (:class:`~paramsym.actions.RescalingAction`) and re-matching permutations until the weight
   distance ``‖θ_A − g·θ_B‖²`` stops decreasing, then per-head GL(d_k) on (W_Q, W_K) — the rotary
   commutant under rotary embeddings — (:class:`~paramsym.actions.attention.QueryKeyAction`) and GL(d_v) on (W_V, W_O)
   (:class:`~paramsym.actions.attention.ValueOutputAction`).

Opt-in stages (``stages=``, :data:`STAGES`), on the canonical form of both models (norm gains
folded, LayerNorm made RMS on a centred stream, the LM head untied: given as a
:class:`~paramsym.alignment.orthogonal.CanonicalPair`, built by
``paramsym.kinds.canonical_pair.canonical_pair``), where the residual stream has the exact
symmetry ``O(D)``:

4. **canonical** — canonical B, unaligned (the path between the canonical forms: what the
   reparametrisation alone does to the barrier);
5. **orthogonal** — FFN/head permutations, a stream rotation ``Q ∈ O(D)`` by orthogonal
   Procrustes and per-head GL, by weight matching
   (:func:`~paramsym.alignment.orthogonal.match_group`);
6. **refined** — the orthogonal stage's rotation and head maps refined by gradient descent on the
   loss along the path (:mod:`paramsym.alignment.refine`, budget :class:`~paramsym.alignment.refine.RefineConfig`).

Their paths run between canonical A and the stage's B; their function error compares the
canonical model's outputs with the given B's.

Which symmetries apply comes from the architecture (:mod:`paramsym.alignment.arch`): a requested
symmetry the model does not have raises :class:`~paramsym.errors.SymmetryNotApplicableError`.
For each stage the loss/accuracy along ``θ(α) = (1 − α)θ_A + αθ_B`` and its barrier
(:mod:`paramsym.alignment.path`) are measured on the train and test splits; ``function_error`` is
``‖f_{aligned B}(x) − f_B(x)‖ / ‖f_B(x)‖`` on all inputs of the data.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..actions.base import GroupAction
from ..actions.catalogue import catalogue
from ..actions.linear import RescalingAction
from ..actions.permutation import HiddenPermutationAction
from ..errors import ConfigError, SymmetryNotApplicableError, check_finite
from ..groups.memory import check_memory
from ..params import ParameterBlock
from .arch import Architecture, UnitGroup, check_same_architecture
from .matching import (
    apply_attention,
    balance,
    distance,
    match_attention,
    match_permutations,
    match_rescaling,
    permute,
    rescale,
)
from .path import PathCurve, path_curve, relative_output_error

__all__ = ["STAGES", "SYMMETRIES", "AlignmentResult", "align", "check_points", "check_stages", "resolve_symmetries"]

#: the stages :func:`align` can report: the first three always run, the others on request
STAGES = ("before", "permutation", "full", "canonical", "orthogonal", "refined")
#: the stages computed on the canonical form (a :class:`~paramsym.alignment.orthogonal.CanonicalPair`)
CANONICAL_STAGES = ("canonical", "orthogonal", "refined")

#: symmetry names of ``--symmetries`` and the catalogue kinds they use
SYMMETRIES: dict[str, tuple[str, ...]] = {
    "permutation": ("hidden_permutation", "head_permutation", "residual_permutation"),
    "rescaling": ("rescaling",),
    "attention": ("attention.query_key", "attention.value_output"),
}


def _catalogue_text(kind: str) -> str:
    for k, _cls, text in catalogue():
        if k == kind:
            return text
    return {"attention.query_key": "per-head GL(d_k) on (W_Q, W_K): W_Q,h ↦ A W_Q,h, W_K,h ↦ A⁻ᵀ W_K,h "
                                   "(QueryKeyAction; under rotary embeddings A in the rotary commutant).",
            "attention.value_output": "per-head GL(d_v) on (W_V, W_O): W_V,h ↦ B W_V,h, W_O[:, h] ↦ W_O[:, h] B⁻¹ "
                                      "(ValueOutputAction)."}.get(kind, kind)


def resolve_symmetries(arch: Architecture, requested: Sequence[str] | None) -> list[str]:
    """The symmetries to align: ``requested`` (checked to apply) or, when ``None``, all that apply.

    Raises:
        ConfigError: an unknown name.
        SymmetryNotApplicableError: a requested symmetry the model does not have (with the reason).
    """
    applicable = {
        "permutation": (bool(arch.groups), "the model has no hidden units or heads to permute"),
        "rescaling": (arch.rescalable, f"positive rescaling needs a positively homogeneous activation between linear "
                      f"layers (ReLU, LeakyReLU, PReLU; catalogue: {_catalogue_text('rescaling')[:60]}…); this model's "
                      f"activation is {arch.activation!r}"),
        "attention": (bool(arch.attention), "per-head GL alignment needs attention layers (an MLP has none)"),
    }
    if requested is None:
        return [s for s, (ok, _) in applicable.items() if ok]
    out = []
    for s in requested:
        s = s.strip()
        if s not in SYMMETRIES:
            raise ConfigError(f"unknown symmetry {s!r}; choose from {', '.join(SYMMETRIES)} (comma-separated).")
        ok, why = applicable[s]
        if not ok:
            raise SymmetryNotApplicableError(f"symmetry {s!r} does not apply to this {arch.kind} model: {why}. "
                                             f"Drop it from --symmetries (applicable: "
                                             f"{[k for k, (o, _) in applicable.items() if o]}).")
        if s not in out:
            out.append(s)
    if not out:
        raise ConfigError("--symmetries is empty; give at least one of " + ", ".join(SYMMETRIES) + ".")
    return out


# -- applying group elements through the catalogue actions ------------------------------------
def _pair_action(params: Mapping[str, Tensor], group: UnitGroup, action: type) -> tuple[ParameterBlock, GroupAction]:
    """The block of ``group.pair`` (earlier weight, its bias, later weight) and ``action`` on it."""
    e, bias, later = group.pair
    block = ParameterBlock.from_params(params, [e] + ([bias] if bias else []) + [later])
    return block, action(block, e, later, earlier_bias=bias)


def apply_permutation(params: Mapping[str, Tensor], group: UnitGroup, perm: Tensor) -> dict[str, Tensor]:
    """B with ``group``'s units permuted (new unit ``i`` = old unit ``perm[i]``)."""
    if group.pair is None:
        return permute(params, group, perm)
    block, act = _pair_action(params, group, HiddenPermutationAction)
    return block.scatter(act.act_permutation(perm, block.gather(params)), params)


def apply_rescaling(params: Mapping[str, Tensor], group: UnitGroup, c: Tensor) -> dict[str, Tensor]:
    """B with ``group``'s incoming weights/bias × ``c`` and outgoing weights ÷ ``c``."""
    if group.pair is None:
        return rescale(params, group, c)
    block, act = _pair_action(params, group, RescalingAction)
    return block.scatter(act.act(torch.diag(c.to(params[group.pair[0]].dtype)), block.gather(params)), params)


@dataclass
class AlignmentResult:
    """The aligned B of each stage, the paths, and the summary numbers (see :meth:`summary`)."""

    symmetries: list[str]
    stages: dict[str, dict[str, Tensor]]
    curves: dict[str, PathCurve]
    function_error: dict[str, float]
    distance: dict[str, float]
    seconds: dict[str, float]
    details: dict = field(default_factory=dict)
    elements: dict[str, Tensor] = field(default_factory=dict)  # group elements found (``Q``: the stream rotation)

    def summary(self) -> dict:
        """Flat numbers: ``barrier_{stage}`` (test loss), ``barrier_{stage}_train``, accuracy drops,
        ``function_error`` (full stage), distances, times."""
        out: dict = {"symmetries": self.symmetries, "kinds": self.details.get("kinds", [])}
        for stage, curve in self.curves.items():
            b = curve.barriers()
            out[f"barrier_{stage}"] = b["test_loss"]
            out[f"barrier_{stage}_train"] = b["train_loss"]
            out[f"acc_drop_{stage}"] = b["test_acc_drop"]
            out[f"midpoint_{stage}"] = {"test_loss": b["test_mid_loss"], "train_loss": b["train_mid_loss"],
                                        "test_acc": curve.test_acc[len(curve.alphas) // 2]}
        out["function_error"] = self.function_error["full"]
        out["function_error_permutation"] = self.function_error["permutation"]
        out |= {f"function_error_{s}": self.function_error[s] for s in CANONICAL_STAGES if s in self.function_error}
        c = self.curves["before"]
        out["endpoints"] = {"A": {"train_loss": c.train_loss[0], "test_loss": c.test_loss[0], "test_acc": c.test_acc[0]},
                            "B": {"train_loss": c.train_loss[-1], "test_loss": c.test_loss[-1], "test_acc": c.test_acc[-1]}}
        out["distance"] = self.distance
        out["seconds"] = self.seconds
        out |= self.details
        return out


def align_parameters(arch: Architecture, a: Mapping[str, Tensor], b: Mapping[str, Tensor], symmetries: Sequence[str],
                     *, generator: torch.Generator | None = None, max_rounds: int = 20,
                     start: str = "permutation") -> tuple[dict, dict, dict]:
    """The aligned B of the ``permutation`` and ``full`` stages (no evaluation).

    With rescaling, ``start="balanced"`` matches permutations between the balanced forms of A
    and B (:func:`~paramsym.alignment.matching.balance`) and brings B into A's scale frame;
    ``start="permutation"`` starts from the permutation stage. Either is then refined by
    alternating distance-minimising rescaling and permutation matching.

    Returns:
        ``(stages, seconds, details)``: ``stages = {"before", "permutation", "full"}`` → params.
    """
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    _check_models(a, b)
    a = {n: t.double() for n, t in a.items()}
    cur = {n: t.double() for n, t in b.items()}
    stages = {"before": cur}
    kinds = sorted({g.kind for g in arch.groups}) if "permutation" in symmetries else []
    kinds += list(SYMMETRIES["rescaling"]) if "rescaling" in symmetries else []
    kinds += list(SYMMETRIES["attention"]) if "attention" in symmetries else []
    seconds, details = {}, {"kinds": kinds, "rounds": 0, "sweeps_permutation": 0}
    t0 = time.perf_counter()
    if "permutation" in symmetries:
        perms, sweeps = match_permutations(a, cur, arch.groups, generator=gen)
        for g in arch.groups:
            cur = apply_permutation(cur, g, perms[g.name])
        details["sweeps_permutation"] = sweeps
        details["units_moved"] = {g.name: int((perms[g.name] != torch.arange(g.size)).sum()) for g in arch.groups}
    seconds["permutation"] = time.perf_counter() - t0
    stages["permutation"] = cur
    t0 = time.perf_counter()
    if "rescaling" in symmetries:
        rescalable = [g for g in arch.groups if g.rescalable]
        if start == "balanced":
            # canonical frames: both models at the least-norm point of their rescaling orbits
            ca, cb = balance(a, rescalable), balance(stages["before"], rescalable)
            cur = stages["before"]
            for g in rescalable:
                cur = apply_rescaling(cur, g, cb[g.name])
            if "permutation" in symmetries:
                a_bal = dict(a)
                for g in rescalable:
                    a_bal = rescale(a_bal, g, ca[g.name])
                perms, _ = match_permutations(a_bal, cur, arch.groups, generator=gen)
                for g in arch.groups:
                    cur = apply_permutation(cur, g, perms[g.name])
            for g in rescalable:
                cur = apply_rescaling(cur, g, 1.0 / ca[g.name])  # into A's scale frame
            details["distance_balanced_start"] = distance(a, cur)
        prev = distance(a, cur)
        log = []
        for rnd in range(1, max_rounds + 1):
            scales, _ = match_rescaling(a, cur, rescalable)
            for g in rescalable:
                cur = apply_rescaling(cur, g, scales[g.name])
            moved = 0
            if "permutation" in symmetries:
                perms, _ = match_permutations(a, cur, arch.groups, generator=gen)
                for g in arch.groups:
                    if not torch.equal(perms[g.name], torch.arange(g.size)):
                        moved += int((perms[g.name] != torch.arange(g.size)).sum())
                        cur = apply_permutation(cur, g, perms[g.name])
            now = distance(a, cur)
            log.append({"round": rnd, "distance": now, "units_repermuted": moved})
            details["rounds"] = rnd
            if moved == 0 or prev - now <= 1e-10 * prev:
                break
            prev = now
        details["rescaling_rounds"] = log
    if "attention" in symmetries:
        conds = []
        for layout in arch.attention:
            gqk, gvo = match_attention(a, cur, layout)
            conds.append([float(torch.linalg.cond(gqk)), float(torch.linalg.cond(gvo))])
            cur = apply_attention(cur, layout, gqk, gvo)
        details["attention_condition"] = conds
    seconds["full"] = time.perf_counter() - t0 + seconds["permutation"]
    stages["full"] = cur
    return stages, seconds, details


def _check_models(a: Mapping[str, Tensor], b: Mapping[str, Tensor]) -> None:
    """Refuse non-floating or non-finite parameters (a NaN breaks the assignment solver) and unequal architectures."""
    for side, params in (("A", a), ("B", b)):
        for n, t in params.items():
            if not isinstance(t, Tensor) or not t.is_floating_point():
                raise ConfigError(f"model {side} tensor {n!r} must be a floating-point tensor; received "
                                  f"{getattr(t, 'dtype', type(t).__name__)}. Give the trained float weights.")
            check_finite(f"model {side} tensor {n!r}", t, "Alignment needs finite weights; check the file.")
    check_same_architecture(a, b)


#: bytes one path point keeps: 3 stages x (alpha + 4 curves) Python floats, and their JSON text
_BYTES_PER_POINT = 3 * 5 * (32 + 24)


def check_points(points: int, max_memory: int | None = None, stages: int = 3) -> None:
    """Refuse a path grid that is not an integer >= 2 or whose stored curves exceed ``max_memory``.

    Raises:
        ConfigError: ``points`` not an integer >= 2.
        TooLargeError: the estimate (``points`` x 840 bytes per 3 stages) exceeds the budget.
    """
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise ConfigError(f"points (--points) must be an integer >= 2 (α = 0 and 1); received {points!r}.")
    check_memory(points * _BYTES_PER_POINT * max(stages, 3) // 3, f"the loss paths of {points} points ({stages} stages)",
                 max_memory, "Use fewer --points (25 resolves the barrier).")


def check_stages(stages: Sequence[str], canonical, *, built: bool = False) -> list[str]:
    """The canonical-form stages requested in ``stages`` (in :data:`STAGES` order).

    ``built=True``: the caller builds the :class:`~paramsym.alignment.orthogonal.CanonicalPair`
    itself (the ``align`` run kind), so ``canonical`` is not required.

    Raises:
        ConfigError: an unknown stage name, ``refined`` without ``orthogonal`` (it refines that
            stage's result), or a canonical-form stage without ``canonical`` (the
            :class:`~paramsym.alignment.orthogonal.CanonicalPair`).
    """
    if isinstance(stages, str) or not all(isinstance(s, str) for s in stages):
        raise ConfigError(f"stages must be a list of stage names from {', '.join(STAGES)}; received {stages!r}.")
    bad = [s for s in stages if s not in STAGES]
    if bad:
        raise ConfigError(f"unknown stage(s) {bad}; choose from {', '.join(STAGES)} (before, permutation and full "
                          "always run).")
    extra = [s for s in CANONICAL_STAGES if s in stages]
    if "refined" in extra and "orthogonal" not in extra:
        raise ConfigError("stage 'refined' refines the 'orthogonal' stage's result; request both "
                          "(stages=(..., 'orthogonal', 'refined')).")
    if extra and canonical is None and not built:
        raise ConfigError(f"stages {extra} run on the canonical form of both models; pass canonical= (a CanonicalPair "
                          "from paramsym.kinds.canonical_pair.canonical_pair(model_a, model_b, inputs)).")
    return extra


def align(arch: Architecture, a: Mapping[str, Tensor], b: Mapping[str, Tensor], data, *,
          symmetries: Sequence[str] | None = None, points: int = 25,
          generator: torch.Generator | None = None, start: str = "permutation",
          max_memory: int | None = None, stages: Sequence[str] = ("before", "permutation", "full"),
          canonical=None, refine=None) -> AlignmentResult:
    """Align ``b`` to ``a`` and evaluate the linear paths (module docstring).

    Args:
        arch: the architecture (:func:`~paramsym.alignment.arch.mlp_architecture`, ``hf_architecture``).
        a, b: parameters of the two models (same names and shapes).
        data: a :class:`~paramsym.models.datasets.Split` with class labels.
        symmetries: subset of :data:`SYMMETRIES` (default: all that apply).
        points: grid size of the path (α = k / (points − 1)).
        generator: order of the coordinate-descent sweeps.
        start: where rescaling starts (``"balanced"`` or ``"permutation"``, see :func:`align_parameters`).
        max_memory: budget in bytes of the stored path curves (default 2 GiB; see
            :mod:`paramsym.groups.memory`): ``points`` beyond it are refused before any work.
        stages: the stages to report (:data:`STAGES`; before, permutation and full always run).
        canonical: A and B in canonical form (:class:`~paramsym.alignment.orthogonal.CanonicalPair`),
            needed by the stages canonical, orthogonal and refined.
        refine: the budget of the refined stage (:class:`~paramsym.alignment.refine.RefineConfig`;
            default its defaults).

    Raises:
        ConfigError: ``points`` < 2, non-floating parameters, unknown stages, a canonical-form
            stage without ``canonical``, a bad ``refine``.
        TooLargeError: ``points`` whose curves exceed ``max_memory`` (the estimate is named).
        NonFiniteError: NaN or inf in ``a`` or ``b``.
        ArchitectureMismatchError: different names, shapes or dtypes.
    """
    extra = check_stages(stages, canonical)
    check_points(points, max_memory, 3 + len(extra))
    if "refined" in extra:
        from .refine import RefineConfig

        refine = refine if refine is not None else RefineConfig()
        if not isinstance(refine, RefineConfig):
            raise ConfigError(f"refine must be a RefineConfig (steps, lr, ...); received {type(refine).__name__}.")
        refine.validate()
    if extra:
        from .orthogonal import CanonicalPair

        if not isinstance(canonical, CanonicalPair):
            raise ConfigError(f"canonical must be a CanonicalPair (paramsym.kinds.canonical_pair.canonical_pair); "
                              f"received {type(canonical).__name__}.")
        _check_models(canonical.a, canonical.b)
    syms = resolve_symmetries(arch, symmetries)
    stages, seconds, details = align_parameters(arch, a, b, syms, generator=generator, start=start)
    A = {n: t.double() for n, t in a.items()}
    d64 = _double_inputs(data)
    x_all = torch.cat([d64.x_train, d64.x_test])
    curves, ferr, dist = {}, {}, {}
    for stage, p in stages.items():
        curves[stage] = path_curve(arch.forward, A, p, d64, points)
        dist[stage] = distance(A, p)
        if stage != "before":
            ferr[stage] = relative_output_error(arch.forward, stages["before"], p, x_all)
    result = AlignmentResult(syms, stages, curves, ferr, dist, seconds, details)
    if extra:
        _canonical_stages(result, arch, canonical, extra, d64, x_all, points, generator, refine)
    return result


def _canonical_stages(result: AlignmentResult, arch: Architecture, pair, extra: list[str], data, x_all: Tensor,
                      points: int, generator: torch.Generator | None, refine) -> None:
    """Run the requested canonical-form stages on ``pair`` and add them to ``result`` (module docstring)."""
    from .orthogonal import orthogonal_stage
    from .refine import refine as refine_stage

    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    carch = pair.arch
    for key in ("n_classes", "positions"):  # what the outputs are is the task's, set on the given architecture
        if key in arch.info:
            carch.info[key] = arch.info[key]
    A = {n: t.double() for n, t in pair.a.items()}
    new: dict[str, dict[str, Tensor]] = {"canonical": {n: t.double() for n, t in pair.b.items()}}
    t0 = time.perf_counter()
    if "orthogonal" in extra:
        new["orthogonal"], info, Q = orthogonal_stage(pair, generator=gen)
        result.seconds["orthogonal"] = time.perf_counter() - t0
        result.details["orthogonal"] = info
        result.elements["Q"] = Q
    if "refined" in extra:
        new["refined"], info = refine_stage(carch, A, new["orthogonal"], pair.axes, data, refine, generator=gen)
        result.seconds["refined"] = time.perf_counter() - t0
        result.details["refined"] = info
    for stage in extra:
        p = new[stage]
        result.stages[stage] = p
        result.curves[stage] = path_curve(carch.forward, A, p, data, points)
        result.distance[stage] = distance(A, p)
        result.function_error[stage] = relative_output_error(arch.forward, result.stages["before"], p, x_all,
                                                             forward_q=carch.forward)


def _double_inputs(data):
    from ..models.datasets import Split

    if data.x_train.is_floating_point():
        return Split(data.x_train.double(), data.y_train, data.x_test.double(), data.y_test)
    return data
