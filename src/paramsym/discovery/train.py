"""Training a learned group and action network on a discovery problem ([Discovery] §5, App. D.1–D.2).

One step draws ``batch`` points of μ; half of the points used by the differential and finite
terms are replaced by transformed points ``a(q, θ')`` (independent ``q`` and ``θ'``, detached),
the regularisers use the original μ points. Objective variants:

* ``hybrid``:        ``L_inv + γ1 L_trans + γ2 (L_comp + L_pres) + λ_s R_scale + λ_d R_div``
* ``infinitesimal``: ``L_inv + γ1 L_trans + λ_s R_scale + λ_d R_div``          (γ2 = 0)
* ``finite``:        ``L_pres + L_comp + λ_s R_scale + λ_d R_div``             (baseline)

(+ ``λ_sparse R_sparse`` when enabled). Adam in float32 with gradient-norm clipping; all
randomness comes from one ``torch.Generator`` seeded by ``cfg.seed`` (the global torch seed is
never used), whose state is saved in every checkpoint together with the partial loss averages of
the current logging window, so a run resumed from a checkpoint at any step reproduces an
uninterrupted one exactly. Checkpoints are taken every ``train.checkpoint_every`` steps and
whenever ``train.checkpoint_seconds`` of wall-clock time have passed since the last one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..actions.learned import LearnedAction
from ..errors import ConvergenceError, RunFileError, TooLargeError
from ..groups.lie import GroupSamples, MatrixLieGroup
from ..groups.memory import format_bytes
from . import objectives as O
from .config import DiscoverConfig
from .problems import DiscoveryProblem, action_basis

LOSS_TERMS = ("inv", "trans", "comp", "pres", "scale", "div", "sparse", "total")


@dataclass
class TrainState:
    """What a checkpoint holds besides tensors."""

    step: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    #: sums of the loss terms over the steps of the current logging window, and their count
    pending: dict[str, float] = field(default_factory=dict)
    pending_count: int = 0


def build_action(problem: DiscoveryProblem, cfg: DiscoverConfig, scales: O.Scales, generator: torch.Generator) -> LearnedAction:
    """The learned group (Frobenius-normalised generators) and action network, seeded.

    Every random number comes from ``generator``; torch modules draw a default initialisation
    from the global generator before it is overwritten, so that draw runs on a forked global
    state: the caller's global random state is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        return _build_action(problem, cfg, scales, generator)


def _build_action(problem: DiscoveryProblem, cfg: DiscoverConfig, scales: O.Scales, generator: torch.Generator) -> LearnedAction:
    group = MatrixLieGroup(cfg.group.size, cfg.group.generators, generator=generator)
    return LearnedAction(
        group,
        problem.target.p,
        theta_center=problem.theta_base.float(),
        theta_scale=input_scale(problem, cfg, scales),
        out_scale=scales.s_theta * (scales.beta if cfg.action.out_scale == "field" else 1.0),
        width=cfg.action.width,
        depth=cfg.action.depth,
        generator=generator,
        kind=cfg.action.kind,
        flow_steps=cfg.action.flow_steps,
        basis=action_basis(problem, cfg),
    )


def input_scale(problem: DiscoveryProblem, cfg: DiscoverConfig, scales: O.Scales) -> float:
    """What divides ``θ − θ_c`` at the network input (``action.theta_scale``): μ's std σ (``mu``),
    ``max(σ, β s_θ / √p)`` (``entry``: the per-entry RMS of a move of the field's magnitude) or
    ``max(σ, β s_θ)`` (``move``: that move's norm)."""
    sigma = float(problem.perturb_std)
    move = scales.beta * scales.s_theta
    if cfg.action.theta_scale == "entry":
        return max(sigma, move / int(problem.target.p) ** 0.5)
    if cfg.action.theta_scale == "move":
        return max(sigma, move)
    return sigma


def training_memory(p: int, q: int, cfg: DiscoverConfig) -> int:
    """Estimated peak bytes of training: the action network ``b`` (float32) with its gradient and
    two Adam moments (4 copies), and one step's work (``~24`` float32 vectors of size ``p`` and
    ``~8`` of size ``q`` per batch point: points, moved points, fields, tangents, outputs).

    ``b`` has ``(p + s²) w + (depth − 1) w² + w p`` weights (w = width, s = group size). The flow
    kind's field network has ``p w + (depth − 1) w² + w r p`` weights and keeps the activations of
    its ``2 · 4 · flow_steps`` RK4 stages (two flows per step) for the backward pass.
    """
    w, s = cfg.action.width, cfg.group.size
    if cfg.action.kind == "flow":
        r = cfg.group.generators
        weights = (p + 1) * w + (cfg.action.depth - 1) * (w + 1) * w + (w + 1) * r * p
        stages = 8 * cfg.action.flow_steps
        work = cfg.train.batch * (24 * p + 8 * q) + stages * 2 * cfg.train.batch * (w * cfg.action.depth + r * p)
        return 4 * (4 * weights + work)
    weights = (p + s * s + 1) * w + (cfg.action.depth - 1) * (w + 1) * w + (w + 1) * p
    work = cfg.train.batch * (24 * p + 8 * q) + 8 * cfg.train.batch * w * cfg.action.depth * cfg.group.generators
    return 4 * (4 * weights + work)


def check_memory(problem: DiscoveryProblem, cfg: DiscoverConfig) -> None:
    """Refuse a run whose training would not fit ``cfg.train.max_memory``.

    Raises:
        TooLargeError: with the estimate and what to do.
    """
    need = training_memory(int(problem.target.p), int(problem.target.q), cfg)
    budget = cfg.train.max_memory
    if need > budget:
        raise TooLargeError(
            f"training a learned action on {problem.name!r} (block p = {problem.target.p}, output q = {problem.target.q}) "
            f"needs about {need / 2**30:.1f} GiB (action network of width {cfg.action.width} on p inputs and outputs, "
            f"Adam state, batch {cfg.train.batch}), over the budget train.max_memory = {format_bytes(budget)}; select a "
            "smaller block (e.g. one unit and its compensators: preset minilm-ffn-unit), lower action.width, or raise "
            "train.max_memory knowingly (--set train.max_memory=16GiB)."
        )


@dataclass
class StepBatch:
    """The sampled inputs of one training step (:meth:`Trainer.batch`): points ``theta_mu`` of μ,
    the mixed points ``theta`` (its first ``shared`` rows are ``theta_mu``'s), elements ``g1``,
    ``g2`` and generators ``h`` (one per point of ``theta``)."""

    theta_mu: Tensor
    theta: Tensor
    g1: Tensor
    g2: Tensor
    h: Tensor
    shared: int


class Trainer:
    """Optimises ``action`` (and its learned generators) on ``problem`` with ``cfg``."""

    #: ask a fused ``step_quantities`` for the residual form (reduced coordinates: the composition and
    #: transport residuals and the regularisers' fields stay in ``Eᵀ`` coordinates); ``False`` gives the
    #: block form, the step before that change (kept for benchmarks/discovery_step.py)
    residuals: bool = True

    def __init__(self, problem: DiscoveryProblem, cfg: DiscoverConfig, scales: O.Scales, device: str = "cpu"):
        self.problem = problem
        self.cfg = cfg
        self.scales = scales
        self.device = torch.device(device)
        self.rng = torch.Generator().manual_seed(cfg.seed)
        self.action = build_action(problem, cfg, scales, self.rng).to(self.device)
        self.target = problem.target.to(torch.float32, self.device)
        # foreach: one batched update for all tensors (the same values as the per-tensor loop, bitwise)
        self.opt = torch.optim.Adam(self.action.parameters(), lr=cfg.train.lr, foreach=True)
        self.state = TrainState()

    # -- schedule --------------------------------------------------------------------------
    def stage(self, step: int) -> tuple[float, int]:
        """``(rho, max_factors)`` of the curriculum stage containing ``step``."""
        t = self.cfg.train
        if step < int(t.warmup_fraction * t.steps):
            return t.rho * t.warmup_rho_factor, 1
        return t.rho, t.max_factors

    def lr_at(self, step: int) -> float:
        t = self.cfg.train
        start = int((1 - t.decay_fraction) * t.steps)
        if step < start or t.decay_fraction == 0:
            return t.lr
        frac = (step - start) / max(1, t.steps - start)
        lo = t.lr * t.lr_final_factor
        return lo + 0.5 * (t.lr - lo) * (1 + math.cos(math.pi * frac))

    # -- one step --------------------------------------------------------------------------
    def _points(self, n: int) -> Tensor:
        return self.problem.sample(n, self.rng, torch.float32).to(self.device)

    def _sample(self, n: int, rho: float, mf: int) -> GroupSamples:
        return self.action.group.sample(n, rho, mf, generator=self.rng).to(self.device)

    def batch(self, step: int) -> StepBatch:
        """The points and elements of one step at ``step``, drawn from the trainer's generator.

        ``theta_mu``: ``batch`` points of μ; ``theta``: the first half of them followed by moved
        points ``a(q, θ')`` (independent ``q`` and ``θ'``, detached). One set of samples serves every
        term: ``g1`` transport, composition and preservation, ``g2`` composition (a quarter of the
        pairs are inverse pairs ``g2 = g1⁻¹``), ``h`` a random generator per point. Points in the
        action's dtype.
        """
        cfg, a = self.cfg, self.action
        group = a.group
        dt = a.theta_center.dtype
        B = cfg.train.batch
        half = B // 2
        rho, mf = self.stage(step)
        theta_mu = self._points(B).to(dt)
        with torch.no_grad():
            q = group.matrices(self._sample(half, rho, mf))
            theta_tr = a.act_many(q, self._points(half).to(dt)).detach()
        theta = torch.cat([theta_mu[:half], theta_tr])
        s1, s2 = self._sample(B, rho, mf), self._sample(B, rho, mf)
        n_inv = int(round(cfg.objective.inverse_fraction * B))
        # g1, the inverse pairs' g1⁻¹ and the other g2, exponentiated in one call
        inv, rest = s1.select(slice(0, n_inv)).inverse(), s2.select(slice(n_inv, B))
        g = group.matrices(GroupSamples(torch.cat([s1.coeffs, inv.coeffs, rest.coeffs]),
                                        torch.cat([s1.index, inv.index, rest.index])))
        which = torch.randint(0, group.num_generators, (B,), generator=self.rng).to(self.device)
        return StepBatch(theta_mu, theta, g[:B], g[B:], group.generators()[which], half)

    def losses(self, step: int) -> dict[str, Tensor]:
        """All loss terms at ``step`` (sampled with the trainer's generator) and their total."""
        return self.objective(self.batch(step))

    def objective(self, b: StepBatch) -> dict[str, Tensor]:
        """All loss terms of the batch ``b`` and their total (the configured variant and weights).

        The network quantities come from the action's fused ``step_quantities`` (one evaluation
        per network input, the regulariser points shared with θ; in reduced coordinates the residual
        form, :class:`~paramsym.actions.base.StepQuantities`), and ``F(θ)`` is evaluated once:
        the invariance term's forward-mode pass returns it, and the preservation term reuses it.
        """
        cfg, sc, a = self.cfg, self.scales, self.action
        variant = cfg.objective.variant
        inf, fin = variant in ("hybrid", "infinitesimal"), variant in ("hybrid", "finite")
        args = (b.theta, b.theta_mu, b.g1, b.g2, b.h)
        fused = getattr(a, "step_quantities", None)
        if fused is not None:
            q = fused(*args, infinitesimal=inf, finite=fin, shared=b.shared, residuals=self.residuals)
        else:
            q = O.step_quantities(a, *args, infinitesimal=inf, finite=fin)
        zero = b.theta.new_zeros(())
        out: dict[str, Tensor] = dict.fromkeys(LOSS_TERMS, zero)
        base = None
        if inf:
            out["inv"], base = O.invariance_and_output(self.target, b.theta, q.fields, sc)
            out["trans"] = (O.transport_loss(q.transported, q.field_at_moved, sc) if q.trans_residual is None
                            else O.motion_loss(q.trans_residual, sc))
        if fin:
            out["comp"] = (O.composition_loss(q.direct, q.two_step, sc) if q.comp_residual is None
                           else O.motion_loss(q.comp_residual, sc))
            out["pres"] = O.preservation_loss(self.target, b.theta, q.moved, sc, base=base)
        out["scale"] = O.scale_penalty(q.fields_mu, sc)
        out["div"] = O.diversity_penalty(q.fields_mu)
        if cfg.objective.lambda_sparse > 0:
            out["sparse"] = O.sparsity_penalty(a.group.generators())
        ob = cfg.objective
        w = ob.invariance_weight  # the logged terms stay unweighted
        if variant == "hybrid":
            total = w * out["inv"] + ob.gamma_transport * out["trans"] + ob.gamma_finite * (out["comp"] + w * out["pres"])
        elif variant == "infinitesimal":
            total = w * out["inv"] + ob.gamma_transport * out["trans"]
        else:
            total = w * out["pres"] + out["comp"]
        total = total + ob.lambda_scale * out["scale"] + ob.lambda_div * out["div"] + ob.lambda_sparse * out["sparse"]
        out["total"] = total
        return out

    def step(self, step: int) -> dict[str, float]:
        for grp in self.opt.param_groups:
            grp["lr"] = self.lr_at(step)
        terms = self.losses(step)
        self.opt.zero_grad(set_to_none=True)
        terms["total"].backward()
        gnorm = torch.nn.utils.clip_grad_norm_(self.action.parameters(), self.cfg.train.clip, foreach=True)
        if not torch.isfinite(terms["total"]) or not torch.isfinite(gnorm):
            raise ConvergenceError(
                f"training diverged at step {step}: loss {float(terms['total']):.3g}, gradient norm "
                f"{float(gnorm):.3g}. Lower train.lr or objective weights, or check the target."
            )
        self.opt.step()
        rec = {k: float(v.detach()) for k, v in terms.items()}
        rec["grad_norm"] = float(gnorm)
        return rec

    # -- loop ------------------------------------------------------------------------------
    def run(
        self,
        *,
        progress: bool = True,
        on_checkpoint: Callable[[Trainer], None] | None = None,
        stop_after: int | None = None,
    ) -> TrainState:
        """Train from ``state.step`` to ``cfg.train.steps``.

        Args:
            progress: show a tqdm progress bar with the current losses.
            on_checkpoint: called every ``checkpoint_every`` steps, after ``checkpoint_seconds``
                of wall-clock time since the last call, and at the end.
            stop_after: stop early after this many steps (tests).
        """
        from tqdm.auto import tqdm

        t = self.cfg.train
        st = self.state
        bar = tqdm(total=t.steps, initial=st.step, disable=not progress, desc=f"discover {self.problem.name}",
                   dynamic_ncols=True, mininterval=0.5)
        self.action.train()
        end = t.steps if stop_after is None else min(t.steps, st.step + stop_after)
        last_save = time.monotonic()
        while st.step < end:
            s = st.step
            rec = self.step(s)
            for k, v in rec.items():
                st.pending[k] = st.pending.get(k, 0.0) + v
            st.pending_count += 1
            st.step += 1
            if st.step % t.log_every == 0 or st.step == t.steps:
                mean = {k: v / st.pending_count for k, v in st.pending.items()}
                rho, mf = self.stage(s)
                mean.update(step=st.step, lr=self.lr_at(s), rho=rho, max_factors=mf)
                st.history.append(mean)
                bar.set_postfix({k: f"{mean[k]:.2e}" for k in ("total", "inv", "trans", "comp", "pres", "scale") if mean.get(k)})
                st.pending, st.pending_count = {}, 0
            bar.update(1)
            due = st.step % t.checkpoint_every == 0 or st.step == t.steps
            if not due and t.checkpoint_seconds > 0:
                due = time.monotonic() - last_save >= t.checkpoint_seconds
            if on_checkpoint is not None and due:
                on_checkpoint(self)
                last_save = time.monotonic()
        bar.close()
        self.action.eval()
        return st

    # -- checkpoint state ------------------------------------------------------------------
    def state_tensors(self) -> dict[str, Tensor]:
        """Action/group weights, Adam moments and the generator state, as flat tensors."""
        tensors = {f"action.{k}": v for k, v in self.action.state_dict().items()}
        for i, st in self.opt.state_dict()["state"].items():
            for k, v in st.items():
                tensors[f"optim.{i}.{k}"] = v if isinstance(v, Tensor) else torch.tensor(v)
        tensors["rng"] = self.rng.get_state()
        return tensors

    def state_json(self) -> dict:
        st = self.state
        return {"step": st.step, "history": st.history, "pending": st.pending, "pending_count": st.pending_count}

    def load(self, tensors: dict[str, Tensor], state: dict) -> None:
        """Restore from :meth:`state_tensors` / :meth:`state_json`.

        Raises:
            RunFileError: the checkpoint does not fit this configuration or is corrupt.
        """
        try:
            history, pending = state["history"], state.get("pending", {})
            if not isinstance(history, list) or not all(isinstance(h, dict) for h in history) or not isinstance(pending, dict):
                raise TypeError("'history' must be a list of objects and 'pending' an object")
            self.action.load_state_dict({k[7:]: v for k, v in tensors.items() if k.startswith("action.")})
            opt_sd = self.opt.state_dict()
            new_state: dict[int, dict[str, Tensor]] = {}
            for k, v in tensors.items():
                if k.startswith("optim."):
                    _, i, name = k.split(".", 2)
                    new_state.setdefault(int(i), {})[name] = v
            opt_sd["state"] = new_state
            self.opt.load_state_dict(opt_sd)
            self.rng.set_state(tensors["rng"])
            self.state = TrainState(step=int(state["step"]), history=list(history),
                                    pending={str(k): float(v) for k, v in pending.items()},
                                    pending_count=int(state.get("pending_count", 0)))
        except (KeyError, ValueError, RuntimeError, TypeError, IndexError) as exc:
            msg = " ".join(str(exc).split())[:300]
            raise RunFileError(
                f"the checkpoint does not fit this configuration or is corrupt ({type(exc).__name__}: {msg}); "
                "delete the run directory's checkpoint/ folder to restart from step 0, or start a new run."
            ) from None
