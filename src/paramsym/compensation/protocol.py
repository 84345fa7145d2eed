"""The closed-form compensation protocol on a real model ([Discovery] §7, the transformer FFN experiment).

1. **Prepare** (:func:`~paramsym.actions.ffn_unit.prepare`, the one FFN-unit module shared with
   the learned path): run the model once on the prefix (k tokens) and cache the FFN input of
   layer ℓ; compute every unit's feature on the prefix and choose the compensators B by pivoted
   QR (excluding the moving unit j); build the boundary target of ``{j} ∪ B``
   (:class:`~paramsym.targets.FFNBoundaryTarget`, float64, never rerunning the model).
2. **Edit**: a random translation ``t = s · ξ ⊙ |θ_C|`` of unit j's incoming weights and bias
   (ξ ~ N(0, I)), scaled so that the median relative change of the moved weights is ``motion``;
   the :class:`~paramsym.actions.compensating.CompensatingAction` sets the compensators' outgoing
   columns in closed form.
3. **Evaluate** (:func:`evaluate`, for any edited θ — closed form or learned): install into a copy
   of the full model in its own dtype (float32) and measure the relative change of the last
   hidden state on the prefix, ``drift = ‖H' − H‖ / ‖H‖``, against (a) a random translation of the
   same block coordinates with the same Euclidean length ``‖θ' − θ‖`` (matched motion) and (b)
   the same incoming update without compensation; and the change on other inputs (a fresh
   random prefix of the same length), where the symmetry does not hold.

Metrics: ``motion_median`` (entrywise: median of ``|Δθ_i| / |θ0_i|`` over the block's entries,
:func:`~paramsym.actions.ffn_unit.motion_entrywise`, the same measure as the learned path's),
``drift_relative``, ``ratio_random = drift_random / drift``, ``ratio_uncompensated``,
``condition_number`` (of the compensators' features), ``units_changed`` (units of the layer
whose weights changed in the installed model).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from ..actions.compensating import CompensatingAction, translation_element
from ..actions.ffn_unit import (
    FFNUnit,
    Installer,
    last_hidden,
    motion_entrywise,
    per_unit_change,
    prepare,
)

__all__ = ["CompensationSetup", "Edit", "CompensationResult", "prepare", "closed_form_edit", "evaluate",
           "run_closed_form", "last_hidden", "per_unit_change"]

#: the prepared unit (:class:`paramsym.actions.ffn_unit.FFNUnit`; the old name stays importable)
CompensationSetup = FFNUnit


@dataclass
class Edit:
    """An edited block: ``theta`` (compensated), ``uncompensated`` (the same incoming update alone)."""

    theta: Tensor
    uncompensated: Tensor
    translation: Tensor
    preservation: float  # float64 relative change of the boundary output on the prefix


@dataclass
class CompensationResult:
    """The protocol's numbers (JSON-able via :meth:`as_dict`)."""

    model_type: str
    layer: int
    unit: int
    tokens: int
    compensators: list[int]
    condition_number: float
    motion_median: float
    motion_median_random: float
    drift_relative: float
    drift_random: float
    drift_uncompensated: float
    ratio_random: float
    ratio_uncompensated: float
    drift_other_inputs: float
    boundary_preservation: float
    units_changed: int
    changed_units: list[int]
    dtype: str
    sweep: list[dict[str, float]] = field(default_factory=list)
    per_unit: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _motion(theta0: Tensor, theta: Tensor) -> float:
    return motion_entrywise(theta0, theta)


def _check_motion(motion: float) -> float:
    """``motion`` as a finite float > 0 (a median relative motion), else :class:`ConfigError`."""
    from ..options import float_option

    return float_option(motion, "motion (--motion, the median relative motion of the moved weights, e.g. 0.0015)",
                        minimum=0.0, exclusive=True)


def closed_form_edit(setup: CompensationSetup, *, motion: float = 1.5e-3, generator: torch.Generator | None = None,
                     action: CompensatingAction | None = None, direction: Tensor | None = None) -> Edit:
    """The closed-form compensated edit with median relative motion ``motion`` (see module docstring).

    ``direction`` (ξ, length ``action.dimension``) fixes the random direction (drawn from
    ``generator`` when ``None``), so a motion sweep scales one edit.
    """
    T = setup.target
    a = action or CompensatingAction(T)
    th0 = T.theta0
    xi = direction if direction is not None else torch.randn(a.dimension, generator=generator, dtype=torch.float64)
    base = a.moving_coordinates(th0).abs().to(torch.float64)
    base = torch.where(base > 0, base, base[base > 0].median() if bool((base > 0).any()) else torch.ones(()))
    s = _check_motion(motion)
    for _ in range(4):  # the motion is close to linear in the scale: a few secant steps
        th = a.act(translation_element(s * xi * base), th0)
        got = _motion(th0, th)
        if got <= 0:
            break
        s *= motion / got
    t = s * xi * base
    th = a.act(translation_element(t), th0)
    F0 = T(th0)
    pres = float((T(th) - F0).norm() / F0.norm())
    return Edit(th, a.uncompensated(t, th0), t, pres)


def evaluate(setup: CompensationSetup, theta: Tensor, uncompensated: Tensor, *, generator: torch.Generator | None = None,
             other_batch: Mapping[str, Tensor] | None = None, work: nn.Module | None = None,
             random_direction: Tensor | None = None) -> dict[str, Any]:
    """Whole-model drift of an edited block θ (closed form or learned) against the two controls.

    Installs each θ into ``work`` (default: a private copy of the model, in its own dtype) and
    restores it after measuring. The random control is ``θ0 + ‖θ − θ0‖ ξ/‖ξ‖`` with ``ξ`` =
    ``random_direction`` (or drawn from ``generator``). Returns ``drift_relative``, ``drift_random``,
    ``drift_uncompensated``, ``ratio_random``, ``ratio_uncompensated``, ``drift_other_inputs``,
    ``motion_median``, ``motion_median_random``, ``units_changed``, ``changed_units`` and
    ``per_unit`` (relative change of every unit of the layer).
    """
    T = setup.target
    inst = Installer(T, model=work if work is not None else copy.deepcopy(setup.model))
    th0 = T.theta0
    step = theta - th0
    xi = random_direction if random_direction is not None else torch.randn(step.shape[0], generator=generator,
                                                                          dtype=torch.float64)
    xi = xi.to(step.dtype)
    rand = th0 + xi / xi.norm() * step.norm()
    if other_batch is None:
        ids = setup.batch["input_ids"]
        vocab = int(getattr(setup.model.config, "vocab_size", int(ids.max()) + 1))
        other_batch = {"input_ids": torch.randint(0, vocab, tuple(ids.shape), generator=generator)}
    O0 = last_hidden(inst.model, other_batch)
    d, per_unit = inst.drift(theta), inst.per_unit(setup, theta)
    d_rand, d_unc = inst.drift(rand), inst.drift(uncompensated)
    d_other = inst.drift(theta, other_batch, O0)
    changed = [int(i) for i in (per_unit > 0).nonzero().reshape(-1)]
    floor = max(d, 1e-300)
    return {
        "motion_median": _motion(th0, theta), "motion_median_random": _motion(th0, rand),
        "drift_relative": d, "drift_random": d_rand, "drift_uncompensated": d_unc,
        "ratio_random": d_rand / floor, "ratio_uncompensated": d_unc / floor, "drift_other_inputs": d_other,
        "units_changed": len(changed), "changed_units": changed, "per_unit": per_unit.tolist(),
    }


def run_closed_form(model: nn.Module, *, layer: int, unit: int, batch: Mapping[str, Tensor],
                    compensators: int | None = None, motion: float = 1.5e-3, sweep: Sequence[float] = (0.25, 0.5, 2.0, 4.0),
                    generator: torch.Generator | None = None, max_memory: int = 2 * 2**30,
                    progress: bool = False) -> tuple[CompensationSetup, CompensationResult]:
    """The whole closed-form protocol (module docstring); ``sweep`` multiplies ``motion`` for the plot."""
    from tqdm.auto import tqdm

    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    _check_motion(motion)
    setup = prepare(model, layer=layer, unit=unit, batch=batch, compensators=compensators, max_memory=max_memory)
    action = CompensatingAction(setup.target)
    work = copy.deepcopy(model).eval()
    xi = torch.randn(action.dimension, generator=gen, dtype=torch.float64)
    zeta = torch.randn(setup.target.p, generator=gen, dtype=torch.float64)
    vocab = int(getattr(model.config, "vocab_size", 2))
    other = {"input_ids": torch.randint(0, vocab, tuple(setup.batch["input_ids"].shape), generator=gen)}
    edit = closed_form_edit(setup, motion=motion, action=action, direction=xi)
    ev = evaluate(setup, edit.theta, edit.uncompensated, work=work, random_direction=zeta, other_batch=other)
    rows = []
    for f in tqdm(sorted({1.0, *sweep}), desc="motion sweep", disable=not progress, file=None):
        e = edit if f == 1.0 else closed_form_edit(setup, motion=motion * f, action=action, direction=xi)
        r = ev if f == 1.0 else evaluate(setup, e.theta, e.uncompensated, work=work, random_direction=zeta,
                                         other_batch=other)
        rows.append({k: float(r[k]) for k in ("motion_median", "drift_relative", "drift_random", "drift_uncompensated")})
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    res = CompensationResult(
        setup.model_type, setup.layer, setup.unit, setup.tokens, setup.compensators, action.condition_number,
        ev["motion_median"], ev["motion_median_random"], ev["drift_relative"], ev["drift_random"],
        ev["drift_uncompensated"], ev["ratio_random"], ev["ratio_uncompensated"], ev["drift_other_inputs"],
        edit.preservation, ev["units_changed"], ev["changed_units"], dtype, rows, ev["per_unit"])
    return setup, res
