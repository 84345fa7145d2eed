"""The conditioning levers of the learned transformer recipe, one at a time (issue 17).

Each row trains the direct-map action (hybrid objective) on one FFN unit of the real
all-MiniLM-L6-v2 (layer 3, the unit of largest feature RMS on the 16-token prefix, β by the
per-unit rule) with the ``minilm-ffn-unit`` recipe, changing one lever, and evaluates it by the
paper's protocol (:func:`paramsym.actions.ffn_unit.evaluate_action`: 32 elements at ρ = 0.5,
float32 installation). Rows: the recipe as shipped, then each lever reverted:

* protocol v3's levers (2026-12-03; ``recipe`` is v3: compensation span, invariance weight 100, β
  margin 2): ``v2`` (the v2 recipe: unit span, weight 10, margin 4), ``unit-span`` (v3 in v2's
  coordinates), ``invariance_weight=10`` / ``=30`` / ``=300`` / ``=1000`` (instead of 100) and
  ``beta_rule=min+invariance_weight=10`` (β from the span's least-moving symmetric direction, at the
  weight it was measured with);
* protocol v2's levers (2026-12-03), against the v2 recipe: ``block`` (the action in all p block
  coordinates instead of ``unit-span``), ``v2:invariance_weight=1`` / ``=30`` (instead of 10), ``v1``
  (both reverted: the previous recipe's action and objective) and ``whitened`` (v1 in coordinates
  whitening the boundary Jacobian's incoming and outgoing parts, :class:`WhitenedCoordinates`);
* protocol v1's levers, each against the v1 recipe (block coordinates, weight 1, margin 4):
* ``output_scale=mu``: s_F over the anchored μ (the paper's) instead of the Jacobian-gain scale;
* ``theta_scale=mu`` / ``entry``: the network reads θ in units of μ's σ / of the move's per-entry RMS;
* ``k=16``: N compensators instead of 2N;
* ``lr=3e-4`` / ``lr=3e-3``: the learning rate (the recipe: 1e-3, cosine decay to 5 %), and
  ``lr-constant``: no decay (the learning-rate schedule lever);
* ``gamma_transport=10`` (alone and with lr 3e-3), ``=1`` (the previous recipe, with ``--steps 500``), ``=3``, ``=30``, ``=100``: the transport weight γ1 of the known-answer
  recipes, where the hybrid objective's composition gain was reached (the recipe: γ1 = 1);
* ``reduced``: isometric reduced coordinates (the paper: "reduced-coordinate actions use the induced
  physical parameter norm; the Pythia coordinates are isometric for these increments"; which
  coordinates is not stated, these are our reading). The action learns on ``z`` with
  ``θ = θ_⊥ + E z``, ``E`` orthonormal columns: incoming increments in the span of the prefix's
  augmented FFN inputs ``[h, 1]`` (N directions; the rest change nothing on the prefix) and the
  compensators' outgoing increments in the row space of their features ``A_B`` (the rest are a
  null space of the boundary output), q = N + d·N of p = d + 1 + d·k. Every removed direction is
  an exact, trivial symmetry; the symmetric tangent of the closed form lies in the span. β is
  rescaled so that the field has the recipe's raw norm (``β s_θ`` equal), and the action is
  evaluated on the block conjugated back, ``a(g, θ) = θ + E (a_z(g, Eᵀ(θ − θ_⊥)) − Eᵀ(θ − θ_⊥))``.

Usage (about 4.5 CPU minutes per row at protocol v3's 6,000 steps, 1.5 at ``--steps 2000``, the
budget its development rows were measured at; the v1 rows were measured at ``--steps 500`` / ``1500``,
where ``recipe`` was then γ_transport = 10)::

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/transformer_levers.py [--steps N] [--seed 0] [--rows recipe,k16]

Prints one line per row: ratio random, ratio uncompensated, median entry motion, stored composition
(median, p95) and the training CPU seconds. Development measurements: docs/discovery.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

#: protocol v2's recipe (unit-span coordinates, invariance weight 10, β margin 4): its lever rows are
#: measured against it
V2 = ["action.coordinates=unit-span", "objective.invariance_weight=10"]
V2_CFG = {"beta_margin": 4.0}
K16 = {"compensators": 16}
#: protocol v1's recipe (block coordinates, invariance weight 1; its rows also need ``--steps``, below)
V1 = ["action.coordinates=block", "objective.invariance_weight=1"]
#: name -> (overrides of every sub-run, TransformerDiscoveryConfig fields)
ROWS = {
    "recipe": ([], {}),
    # protocol v3's levers (2026-12-03): the v2 recipe, the unit span at v3's weight and margin, the
    # invariance weight, the β rule's worst-direction variant
    "v2": (V2, V2_CFG),
    "unit-span": (["action.coordinates=unit-span"], {}),
    "invariance_weight=10": (["objective.invariance_weight=10"], {}),
    "invariance_weight=30": (["objective.invariance_weight=30"], {}),
    "invariance_weight=300": (["objective.invariance_weight=300"], {}),
    "invariance_weight=1000": (["objective.invariance_weight=1000"], {}),
    "beta_rule=min+invariance_weight=10": (["objective.invariance_weight=10"], {"beta_rule": "min"}),
    # protocol v2's two levers reverted (2026-12-03): block coordinates, the invariance weight
    "block": (["action.coordinates=block", "objective.invariance_weight=10"], V2_CFG),
    "v2:invariance_weight=1": ([V2[0], "objective.invariance_weight=1"], V2_CFG),
    "v2:invariance_weight=30": ([V2[0], "objective.invariance_weight=30"], V2_CFG),
    "v1": (V1, V2_CFG),
    "whitened": (V1, V2_CFG),
    # protocol v1's levers (2026-12-02), each against the v1 recipe
    "output_scale=mu": ([*V1, "objective.output_scale=mu"], V2_CFG),
    "theta_scale=mu": ([*V1, "action.theta_scale=mu"], V2_CFG),
    "theta_scale=entry": ([*V1, "action.theta_scale=entry"], V2_CFG),
    "k16": (V1, {**V2_CFG, **K16}),
    "lr=3e-4": ([*V1, "train.lr=3e-4"], V2_CFG),
    "lr=3e-3": ([*V1, "train.lr=3e-3"], V2_CFG),
    "lr-constant": ([*V1, "train.lr_final_factor=1.0"], V2_CFG),
    "reduced": (V1, V2_CFG),
    "gamma_transport=10": ([*V1, "objective.gamma_transport=10"], V2_CFG),
    "gamma_transport=10+lr=3e-3": ([*V1, "objective.gamma_transport=10", "train.lr=3e-3"], V2_CFG),
    "gamma_transport=1": ([*V1, "objective.gamma_transport=1"], V2_CFG),
    "gamma_transport=3": ([*V1, "objective.gamma_transport=3"], V2_CFG),
    "gamma_transport=30": ([*V1, "objective.gamma_transport=30"], V2_CFG),
    "gamma_transport=100": ([*V1, "objective.gamma_transport=100"], V2_CFG),
}


def block_positions(target):
    """Where each block coordinate sits in ``[incoming (d + 1) | outgoing (d × k, row-major)]`` (one
    unit's up row and bias, then the compensators' down columns), else SystemExit."""
    d = target.h.shape[1]
    k = target.params["down.weight"].shape[1] - 1
    idx = {n: torch.full(v.shape, -1.0, dtype=torch.float64) for n, v in target.params.items()}
    idx["up.weight"][0] = torch.arange(d, dtype=torch.float64)
    idx["up.bias"][0] = float(d)
    idx["down.weight"][:, 1:] = d + 1 + torch.arange(d * k, dtype=torch.float64).reshape(d, k)
    src = target.block.gather(idx).long()
    if not (bool((src >= 0).all()) and src.unique().numel() == src.numel()):
        raise SystemExit("reduced coordinates: the block is not one unit's up row and bias + the compensators' columns")
    return src


class ReducedCoordinates:
    """``θ = θ_⊥ + E z`` for an FFN boundary target (module docstring, row ``reduced``)."""

    def __init__(self, target) -> None:
        h = target.h.double()
        N, d = h.shape
        A = target.features()[:, target.n_moving:].double()  # N × k
        self.Q = torch.linalg.qr(torch.cat([h, torch.ones(N, 1, dtype=h.dtype)], 1).T)[0]  # (d+1) × N
        self.P = torch.linalg.qr(A.T)[0]  # k × N
        self.target, self.N, self.d = target, N, d
        self.src = block_positions(target)
        self.theta0 = target.theta0.double()
        self.z0 = self.project(self.theta0)
        self.perp = self.theta0 - self.embed(self.z0)

    def embed(self, z):
        """``E z``: block increments of reduced coordinates ``z`` (..., N + d·N); linear, isometric."""
        inc = z[..., :self.N] @ self.Q.to(z.dtype).T
        out = z[..., self.N:].reshape(*z.shape[:-1], self.d, self.N) @ self.P.to(z.dtype).T
        return torch.cat([inc, out.reshape(*z.shape[:-1], -1)], -1)[..., self.src]

    def project(self, theta):
        """``Eᵀ θ`` of one block vector."""
        c = self.target.compact(theta)
        zin = torch.cat([c["up.weight"][0], c["up.bias"][0].reshape(1)]) @ self.Q.to(theta.dtype)
        return torch.cat([zin, (c["down.weight"][:, 1:] @ self.P.to(theta.dtype)).reshape(-1)])

    def problem(self, problem):
        """The discovery problem on ``z`` (μ: the same anchored Gaussian, in ``z``)."""
        import dataclasses

        from paramsym.targets.base import FunctionTarget

        T = self.target

        def fn(z):
            return T.to(z.dtype)(self.perp.to(z.dtype) + self.embed(z))

        tgt = FunctionTarget(fn, self.z0.to(T.dtype), name=f"reduced:{T.name}")
        return dataclasses.replace(problem, name=problem.name + "-reduced", target=tgt, unit_outputs=None)

    def block_action(self, action):
        """The reduced action conjugated back to the block (what the evaluation installs)."""
        emb = self

        class Conjugated(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = action

            @property
            def group(self):
                return self.inner.group

            def act_many(self, g, theta):
                z = torch.stack([emb.project(t) for t in theta])
                return theta + emb.embed(self.inner.act_many(g, z) - z)

        return Conjugated()


class WhitenedCoordinates(ReducedCoordinates):
    """``θ = L z`` with ``L`` whitening the boundary Jacobian's two parts (row ``whitened``).

    Incoming: ``C_in = I + V (diag(σ_ref/σ_i) − I) Vᵀ`` on the right singular vectors ``V`` of the
    incoming Jacobian (N nonzero σ_i); outgoing: the same on the compensators' features ``A_B``
    (``ΔW_B = ΔZ C_outᵀ``); ``σ_ref`` the geometric mean of all 2N singular values; directions
    outside both spans unchanged. Every hard direction then has gain σ_ref. β keeps the raw field norm.
    """

    def __init__(self, target) -> None:
        from paramsym.actions.ffn_unit import incoming_size

        T = target.to(torch.float64)
        self.target, th0 = target, T.theta0
        N, d = target.h.shape
        k = T.features().shape[1] - T.n_moving
        self.N, self.d, self.k = N, d, k
        self.src = block_positions(target)
        self.inv = torch.empty_like(self.src)
        self.inv[self.src] = torch.arange(self.src.numel())
        n_in = incoming_size(T)
        _, sa, Va = torch.linalg.svd(T.features()[:, T.n_moving:], full_matrices=False)

        def f(dz):
            return T(th0 + torch.cat([dz, torch.zeros(th0.numel() - n_in, dtype=torch.float64)])[self.src])

        _, si, Vi = torch.linalg.svd(torch.func.jacfwd(f)(torch.zeros(n_in, dtype=torch.float64)), full_matrices=False)
        si, Vi = si[:N], Vi[:N]
        ref = float(torch.cat([si, sa]).log().mean().exp())
        self.Cin = torch.eye(n_in, dtype=torch.float64) + Vi.T @ torch.diag(ref / si - 1) @ Vi
        self.Cout = torch.eye(k, dtype=torch.float64) + Va.T @ torch.diag(ref / sa - 1) @ Va
        self.Cin_inv, self.Cout_inv = torch.linalg.inv(self.Cin), torch.linalg.inv(self.Cout)
        self.theta0 = th0
        self.z0 = self.project(th0)
        self.perp = torch.zeros_like(th0)

    def embed(self, z):
        n = self.d + 1
        inc = z[..., :n] @ self.Cin.to(z.dtype).T
        out = z[..., n:].reshape(*z.shape[:-1], self.d, self.k) @ self.Cout.to(z.dtype).T
        return torch.cat([inc, out.reshape(*z.shape[:-1], -1)], -1)[..., self.src]

    def project(self, theta):
        n = self.d + 1
        c = theta[..., self.inv]
        inc = c[..., :n] @ self.Cin_inv.to(theta.dtype).T
        out = c[..., n:].reshape(*c.shape[:-1], self.d, self.k) @ self.Cout_inv.to(theta.dtype).T
        return torch.cat([inc, out.reshape(*c.shape[:-1], -1)], -1)


def main() -> None:
    from paramsym.discovery.config import DiscoverOverrides
    from paramsym.experiments.discovery.transformer.run import (
        TransformerDiscoveryConfig,
        train_learned,
        unit_beta,
        unit_problem,
        whole_model_evaluation,
    )
    from paramsym.runs.rundir import RunDir

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the recipe's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layer", type=int, default=3)
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated among {list(ROWS)}")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"layer {args.layer}, rule unit, hybrid, {args.steps or 'the recipe'} steps, seed {args.seed}")
    print(f"{'row':20s} {'ratio rand':>10s} {'ratio unc':>10s} {'motion':>9s} {'comp med':>9s} {'comp p95':>9s} "
          f"{'train CPU s':>11s}")
    for name in args.rows.split(","):
        overrides, fields = ROWS[name]
        cfg = TransformerDiscoveryConfig(overrides=DiscoverOverrides.parse(overrides), **fields)
        problem = unit_problem(cfg, args.layer, None)
        beta = unit_beta(problem, cfg)
        trained, red = problem, None
        if name in ("reduced", "whitened"):
            red = (ReducedCoordinates if name == "reduced" else WhitenedCoordinates)(problem.target)
            trained = red.problem(problem)
            beta = float(f"{beta * float(red.theta0.norm()) / float(red.z0.norm()):.6g}")  # the same raw field norm
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.process_time()
            action, info = train_learned(trained, "hybrid", out=RunDir(Path(tmp) / "run"), seed=args.seed,
                                         steps=args.steps, overrides=[*overrides, f"objective.beta={beta!r}"],
                                         progress=False)
            cpu = time.process_time() - t0
        if red is not None:
            action = red.block_action(action)
        ev = whole_model_evaluation(problem, action, samples=cfg.samples, rho=cfg.rho, seed=cfg.eval_seed)
        print(f"{name:20s} {ev['ratio_random']:10.1f} {ev['ratio_uncompensated']:10.1f} "
              f"{100 * ev['motion_median']:8.3f}% {100 * ev['composition_error']:8.3f}% "
              f"{100 * ev['composition_error_p95']:8.3f}% {cpu:11.0f}", flush=True)


if __name__ == "__main__":
    main()
