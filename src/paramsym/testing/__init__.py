"""Public test-kit: is *your* action a symmetry of *your* model?

:func:`check_action` runs the finite-action verdict of :mod:`paramsym.verdict` (one definition
per metric; nothing is re-implemented here) on any :class:`~paramsym.actions.base.GroupAction`
and any target, and returns an :class:`ActionCheck` with every metric's value, tolerance,
pass/fail and worst sample. :func:`assert_invariant` turns a failed check into an
``AssertionError`` naming the metric, the value, the tolerance and the worst sample, for use
inside a user's own test-suite::

    from paramsym.testing import assert_invariant

    def test_my_rescaling_is_a_symmetry():
        assert_invariant(MyRescaling(...), model, block=["fc1.weight", "fc2.weight"], batch=X)

Both functions take ``(action, target, points, ...)``, in that order (as
:func:`paramsym.verdict.evaluate`); swapped arguments raise a named
:class:`~paramsym.errors.ActionError`.

For each factor count ``k`` in ``factors`` the check draws ``samples`` points θ and elements
``g1, g2`` (signed exponential products of exactly ``k`` factors with coefficient radius ρ) and
measures, per sample, the metrics of :data:`paramsym.verdict.METRICS` with the very functions of
:func:`paramsym.verdict.evaluate` (:func:`~paramsym.verdict.draw_cell`,
:func:`~paramsym.verdict.cell_samples`, :func:`~paramsym.verdict.summarise`), so the same seed
gives the same numbers: the output error ``‖F(a(g,θ)) − F(θ)‖ / s_F`` (p95 ≤ 1e-3), the
composition, inverse and subdivision errors (p95 ≤ 1e-2), the transport error (p95 ≤ 2e-2) and
the motion ``‖a(g,θ) − θ‖ / s_θ`` (median ≥ 0.05) — definitions and tolerances as in
:data:`paramsym.verdict.METRICS`.

Motion is judged on one-factor elements only (a product such as ``exp(th) exp(−th)`` may not
move at all), so ``factors`` must include 1; it is what stops a trivial action ``a(g, θ) = θ``
— which satisfies every error metric exactly — from passing. With ``unit_outputs`` the
compensation metrics (moving-output change, median ≥ 0.005 s_F; cancellation error, p95 ≤ 1e-2)
are added. The check passes when every cell passes :func:`paramsym.verdict.cell_fits`.

Scales (when not given), from the points ``θ_1..θ_n`` (see :func:`estimate_scales`):
``s_θ = sqrt(mean_k ‖θ_k‖²)`` and ``s_F = sqrt(mean_k ‖F(θ_k) − F̄‖²)`` with ``F̄`` the mean
output — the output's variation over the points (:func:`paramsym.verdict.output_scale`). A
single point has no variation; then the points for ``s_F`` are ``θ_0 + σ ε_k`` (64 draws, ``ε ~ N(0, I)``, ``σ = perturb · s_θ / √p``,
``perturb = 0.05``: random moves of 5% of the block's norm). ``s_F = 0`` (the output does not
depend on the block) raises :class:`~paramsym.errors.DegenerateTargetError`.
"""

from .kit import PointSampler, assert_invariant, check_action, estimate_scales
from .results import METRICS, ActionCheck, MetricResult

__all__ = ["METRICS", "ActionCheck", "MetricResult", "PointSampler", "assert_invariant", "check_action",
           "estimate_scales"]
