"""Preset ``lifting-sanity``: known-answer check of the lifting criterion, first layer trainable vs frozen.

Take an MLP ``f(x) = g(W₁x + b₁)`` fitted to a rotation-invariant target
(``exp(−‖x‖²)``). For the SO(2) generator ``ξ`` the orbit tangent is

    η(x) = −D_x f(x)·(ξx) = −∇g·(W₁ ξ x) = d/dε f_{W₁ − εW₁ξ}(x) |_{ε=0},

so ``η = J · vec(ΔW₁)`` with ``ΔW₁ = −W₁ξ``: whenever the first layer is trainable, ``η`` lies
in ``Im J`` and ``c* = J⁺η`` reaches it (residual at rounding level). With the first layer
frozen, the later layers' sensitivities ``∂f/∂θ`` generally do not span ``η`` and the residual
is large: the rotation cannot be realised by moving the parameters.

The closed form is :meth:`paramsym.attribution.problem.SymmetryProblem.input_layer_direction`;
this preset only fits the model and composes the library's lifts. The check uses an
untruncated-in-effect pseudo-inverse (``τ = 1e-8``) because it is a test of
image membership; the residual at the paper's ``τ = 1e-3`` is reported beside it (a truncated
pinv discards the part of ``η`` along small singular values even when ``η ∈ Im J``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ....attribution.flows import LiftRecord
from ....attribution.jacobian import function_from_module
from ....attribution.lift import LIFT_TOL, RTOL, DenseLift
from ....attribution.problem import Attribution, SymmetryProblem
from ....attribution.symmetry import polar_grid, so2
from ....attribution.tables import tensor_table
from ....errors import ConfigError
from ....models.mlp import layer_names, mlp
from ....runs.rundir import RunDir
from ..records import run_metrics

#: τ of the image-membership check (see module doc)
SANITY_RTOL = 1e-8


@dataclass
class SanityResult:
    """Outcome of :func:`lifting_sanity`."""

    freeze_first: bool
    attribution: Attribution
    residual_paper_rtol: float
    closed_form_error: float | None
    train_loss: float
    n_params: int

    @property
    def liftable(self) -> bool:
        return self.attribution.c.liftable()

    def verdict(self) -> str:
        what = "first layer frozen" if self.freeze_first else "first layer trainable"
        return self.attribution.c.verdict(f"rotation η ({what})")


def lifting_sanity(
    freeze_first: bool,
    *,
    hidden: int = 8,
    n_train: int = 400,
    steps: int = 1000,
    lr: float = 1e-2,
    rtol: float = SANITY_RTOL,
    seed: int = 0,
) -> SanityResult:
    """Fit ``2 → hidden → 1`` (tanh) to ``exp(−‖x‖²)`` and lift the SO(2) orbit tangent.

    Args:
        freeze_first: hold ``fc1`` fixed (only ``fc2`` is trainable) instead of all layers.
        hidden: hidden width.
        n_train, steps, lr: training set size (uniform on ``[−2, 2]²``), Adam steps and rate.
        rtol: truncation of the image-membership check.
        seed: seeds the data and initialisation generators.

    Returns:
        :class:`SanityResult`; with the first layer trainable also the closed-form check
        ``‖J_{W₁} vec(−W₁ξ) − η‖ / ‖η‖``.
    """
    gen = torch.Generator().manual_seed(seed)
    model = mlp([2, hidden, 1], "tanh", generator=gen)
    x_train = torch.rand(n_train, 2, generator=gen, dtype=torch.float64) * 4 - 2
    y_train = torch.exp(-(x_train**2).sum(1, keepdim=True))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x_train) - y_train) ** 2).mean()
        loss.backward()
        opt.step()
    probes = polar_grid(16, 32, 2.0)
    group = so2()
    trainable = layer_names(model, [2]) if freeze_first else None
    fn, params = function_from_module(model, trainable)
    problem = SymmetryProblem(fn, params, probes, group, rtol=rtol, gauge="column")
    att = problem.lifts()
    J = problem.jacobian()
    paper = DenseLift(J, rtol=RTOL, gauge="column").solve(att.eta.reshape(-1))
    closed = None
    if not freeze_first:  # η = J vec(−W₁ξ) in closed form (SymmetryProblem.input_layer_direction)
        eta = att.eta.reshape(-1)
        closed = float((J @ problem.input_layer_direction("fc1.weight") - eta).norm() / eta.norm())
    return SanityResult(
        freeze_first=freeze_first,
        attribution=att,
        residual_paper_rtol=paper.residual,
        closed_form_error=closed,
        train_loss=float(loss.detach()),
        n_params=problem.layout.numel,
    )


#: preset name (``paramsym attribute --preset lifting-sanity``)
PRESET = "lifting-sanity"
#: the stages: first layer trainable (η liftable) or frozen (not liftable)
STAGES = ("trainable", "frozen")


@dataclass
class SanityConfig:
    """Configuration of the ``lifting-sanity`` preset (``--set key=value``)."""

    stage: str = "trainable"
    hidden: int = 8
    steps: int = 1000
    rtol: float = SANITY_RTOL
    seed: int = 0

    @classmethod
    def quick(cls) -> SanityConfig:
        """The quick version is the full one: a 2-8-1 MLP fitted in about a second."""
        return cls()

    def validate(self) -> None:
        if self.stage not in STAGES:
            raise ConfigError(f"stage must be one of {STAGES}, received {self.stage!r}.")
        if self.hidden < 1 or self.steps < 0:
            raise ConfigError(f"hidden must be ≥ 1 and steps ≥ 0; received {self.hidden}, {self.steps}.")


def run(cfg: SanityConfig, out: RunDir, *, progress: bool = True) -> dict[str, Any]:
    """Run ``lifting-sanity`` at ``cfg.stage``; return the metrics (``"summary"`` inside; no progress bars,
    no files of its own: the run verb writes ``out``'s)."""
    cfg.validate()
    stage = cfg.stage
    res = lifting_sanity(stage == "frozen", hidden=cfg.hidden, steps=cfg.steps, rtol=cfg.rtol, seed=cfg.seed)
    att = res.attribution
    lifts = [
        LiftRecord("c*", "eta", att.c.residual, att.c.rank, att.c.target_norm, float(att.c.direction.norm()),
                   att.c.liftable(), res.verdict()),
    ]
    summary = {
        "preset": PRESET,
        "stage": stage,
        "lifts": [r.to_json() for r in lifts],
        "flows": [],
        "verdict": res.verdict(),
        "liftable": res.liftable,
        "residual_at_paper_rtol": res.residual_paper_rtol,
        "closed_form_error": res.closed_form_error,
        "paper": None,
    }
    metrics = {
        "summary": summary,
        "train_loss": res.train_loss,
        "n_params": res.n_params,
        "lift_tol": LIFT_TOL,
        "tensor_table": tensor_table(att),
    }
    return run_metrics(summary, metrics)
