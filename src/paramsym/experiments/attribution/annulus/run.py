"""Annulus classifier ([Attribution] §3.1 and App. C.2): lifted flows on a rotation-invariant task.

Data: an inner disc (100 points, radius ``√U``, angle uniform, label +1) and an outer band
(100 points, radius ``U[2.3, 3.0]``, angle ``arc·(U − ½)``, label −1) with ``arc = 90°``
(``data="wedge"``) or ``360°`` (``"full"``). Model: MLP 2→96→96→96→1, GELU (19,009 parameters),
full-batch Adam (lr 3e-3, 200 epochs, BCE with logits). Probe grid: 24×24 on ``[−3.5, 3.5]²``
kept where ``‖x‖ ≤ 3.5`` (N = 408). Group: SO(2) on the input, trivial on the logit, Reynolds
over ``C_64``.

For the model at initialisation (``stage="init"``) or after training (``"trained"``) the run
lifts ``η`` and ``−δ`` (``c*``, ``b*``) and integrates the resolved and fixed flows along
``+c`` and ``−b`` on ``t ∈ [0, 1]`` (forward Euler, ``dt = 0.005``, raw — unnormalised —
directions), comparing ``‖δ_t‖``, angular deviation profiles and decision boundaries with the
exact predictions (``f_0 ∘ R_t`` along ``+c``, ``P_E f_0 + e^{−t} δ_0`` along ``−b``).

Randomness: the initialisation uses ``torch.Generator().manual_seed(seed)``, the data
``manual_seed(seed + 1)``; the model at initialisation is therefore the same for both data sets.
The source's exact random draws are unknown, so ‖δ‖ values differ from the paper's; the
comparisons that matter are the ratios (end vs prediction, resolved vs fixed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ....attribution.diagnostics import (
    FlowMonitor,
    cutoff_sweep,
    orbit_closure,
    quadrature_check,
    sparse_attribution,
)
from ....attribution.flows import (
    FLOW_MODES,
    FlowTrace,
    LiftRecord,
    angular_profile,
    predicted_function,
    rms,
    run_flow,
)
from ....attribution.jacobian import function_from_module
from ....attribution.lift import GAUGES, DenseLift
from ....attribution.problem import SymmetryProblem
from ....attribution.symmetry import reynolds_x, so2
from ....attribution.tables import parameter_table, tensor_table
from ....errors import ConfigError
from ....models.mlp import mlp
from ....runs.rundir import RunDir, read_json, save_tensors, write_json
from ..records import lift_records, run_metrics

#: the source's numbers (resolved flows: start → end (prediction); fixed flows: end at t = 1)
PAPER = {
    "resolved": {
        ("wedge", "trained", "+c"): (298, 298, 298),
        ("wedge", "trained", "-b"): (298, 109, 110),
        ("full", "trained", "-b"): (56.1, 20.5, 20.6),
        ("init", "init", "-b"): (0.273, 0.100, 0.101),
    },
    "fixed_end": {("wedge", "+c"): 321, ("full", "+c"): 1237, ("wedge", "-b"): 823, ("full", "-b"): 95.4,
                  ("init", "+c"): 0.689, ("init", "-b"): 0.015},
    #: task accuracy at t = 1 of the fixed flows on the trained networks
    "fixed_accuracy": {("wedge", "+c"): 0.845, ("wedge", "-b"): 0.405, ("full", "+c"): 0.700, ("full", "-b"): 1.000},
}


#: truncation of the image-membership check reported beside the flows' τ
EXACT_RTOL = 1e-8


@dataclass
class AnnulusConfig:
    """Configuration of the annulus experiment (override with ``--set key=value``)."""

    data: str = "wedge"
    stage: str = "trained"
    seed: int = 42
    n_inner: int = 100
    n_outer: int = 100
    r_outer_min: float = 2.3
    r_outer_max: float = 3.0
    hidden: int = 96
    depth: int = 3
    activation: str = "gelu"
    epochs: int = 200
    lr: float = 3e-3
    grid: int = 24
    extent: float = 3.5
    n_quadrature: int = 64
    rtol: float = 1e-3
    gauge: str = "column"
    t_end: float = 1.0
    dt: float = 0.005
    directions: tuple[str, ...] = ("+c", "-b")
    profile_radius: float = 2.0
    boundary_grid: int = 121
    predict_every: int = 5
    #: flow modes to run (``"resolved"``, ``"fixed"``; ``--flow``)
    flows: tuple[str, ...] = FLOW_MODES
    #: ``"paramsym"`` (float64 training, torch draws) or ``"paper"`` (the authors' float32 protocol:
    #: :mod:`paramsym.experiments.attribution.annulus.protocol`)
    protocol: str = "paramsym"
    #: numpy seed of the paper protocol's data (the authors' ``data_seed``)
    data_seed: int = 3
    #: truncations of the cutoff sweep (diagnostics at t = 0)
    sweep_rtols: tuple[float, ...] = (1e-1, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 1e-5, 1e-6)
    #: FISTA iterations of the sparse (lasso, elastic-net) attributions at t = 0 (0: skip)
    sparse_iters: int = 300
    #: a user's trained weights (safetensors state dict of the MLP; replaces init/training)
    weights: str | None = None
    #: a safetensors file with ``probes`` [N, 2] (and optionally the task data ``x``, ``y``)
    probes: str | None = None

    @classmethod
    def quick(cls) -> AnnulusConfig:
        """A small, fast version for tests and smoke runs (60 epochs, flows to t = 0.04)."""
        return cls(epochs=60, t_end=0.04, dt=0.02, boundary_grid=31, sweep_rtols=(), sparse_iters=0)

    @classmethod
    def paper(cls, quick: bool = False) -> AnnulusConfig:
        """The paper's protocol of the annulus flows (``paramsym reproduce annulus-wedge|annulus-full|annulus-init``):
        ``protocol="paper"`` and ``gauge="paper"`` (the same as ``--set protocol=paper --set gauge=paper``),
        at the default budget, or at the quick one with ``quick``."""
        import dataclasses

        return dataclasses.replace(cls.quick() if quick else cls(), protocol="paper", gauge="paper")

    @property
    def preset(self) -> str:
        """The preset name: ``annulus-wedge`` or ``annulus-full``."""
        return f"annulus-{self.data}"

    def validate(self) -> None:
        if self.data not in ("wedge", "full"):
            raise ConfigError(f"data must be 'wedge' or 'full', received {self.data!r}.")
        if self.stage not in ("init", "trained"):
            raise ConfigError(f"stage must be 'init' or 'trained', received {self.stage!r}.")
        if self.gauge not in GAUGES:
            raise ConfigError(f"gauge must be one of {GAUGES}, received {self.gauge!r}.")
        bad = [d for d in self.directions if d not in ("+c", "-b")]
        if bad:
            raise ConfigError(f"directions must be '+c' and/or '-b', received {bad}.")
        bad = [f for f in self.flows if f not in FLOW_MODES]
        if bad:
            raise ConfigError(f"flows must be among {FLOW_MODES}, received {bad}.")
        if self.protocol not in ("paramsym", "paper"):
            raise ConfigError(f"protocol must be 'paramsym' or 'paper', received {self.protocol!r}.")
        if self.dt <= 0 or self.t_end <= 0:
            raise ConfigError(f"dt and t_end must be positive, received dt={self.dt}, t_end={self.t_end}.")

    @property
    def arc(self) -> float:
        return math.pi / 2 if self.data == "wedge" else 2 * math.pi


def make_data(cfg: AnnulusConfig) -> tuple[Tensor, Tensor]:
    """``(x [200, 2], y [200])`` with ``y = 1`` inside the disc and ``0`` on the band."""
    g = torch.Generator().manual_seed(cfg.seed + 1)
    r_in = torch.sqrt(torch.rand(cfg.n_inner, generator=g, dtype=torch.float64))
    a_in = 2 * math.pi * torch.rand(cfg.n_inner, generator=g, dtype=torch.float64)
    r_out = cfg.r_outer_min + (cfg.r_outer_max - cfg.r_outer_min) * torch.rand(cfg.n_outer, generator=g, dtype=torch.float64)
    a_out = cfg.arc * (torch.rand(cfg.n_outer, generator=g, dtype=torch.float64) - 0.5)
    r = torch.cat([r_in, r_out])
    a = torch.cat([a_in, a_out])
    x = torch.stack([r * torch.cos(a), r * torch.sin(a)], 1)
    y = torch.cat([torch.ones(cfg.n_inner), torch.zeros(cfg.n_outer)]).double()
    return x, y


def probe_grid(n: int = 24, extent: float = 3.5) -> Tensor:
    """``n × n`` grid on ``[−extent, extent]²`` kept where ``‖x‖ ≤ extent`` (408 points for 24)."""
    g = torch.linspace(-extent, extent, n, dtype=torch.float64)
    X, Y = torch.meshgrid(g, g, indexing="xy")
    pts = torch.stack([X.reshape(-1), Y.reshape(-1)], 1)
    return pts[pts.norm(dim=1) <= extent + 1e-12]


def build_model(cfg: AnnulusConfig):
    gen = torch.Generator().manual_seed(cfg.seed)
    return mlp([2] + [cfg.hidden] * cfg.depth + [1], cfg.activation, generator=gen)


def train(model, x: Tensor, y: Tensor, cfg: AnnulusConfig, progress: bool = False) -> list[float]:
    """Full-batch Adam on BCE-with-logits; returns the loss per epoch."""
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    losses = []
    it = range(cfg.epochs)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="train", leave=False)
    for _ in it:
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(-1), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def _train_paper(model, x: Tensor, y: Tensor, cfg: AnnulusConfig, progress: bool) -> list[float]:
    """The authors' loop: float32, ``BCEWithLogitsLoss(model(x), y[:, None])``, full-batch Adam."""
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    it = range(cfg.epochs)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="train (paper protocol, float32)", leave=False)
    losses = []
    for _ in it:
        opt.zero_grad()
        loss = loss_fn(model(x), y[:, None])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def task_metrics(model_fn, x: Tensor, y: Tensor) -> tuple[float, float]:
    """``(BCE-with-logits, accuracy)`` of logits ``model_fn(x)`` against labels ``y ∈ {0, 1}``."""
    with torch.no_grad():
        z = model_fn(x).reshape(-1)
        loss = float(torch.nn.functional.binary_cross_entropy_with_logits(z, y.to(z.dtype)))
        acc = float(((z > 0).to(y.dtype) == y).double().mean())
    return loss, acc


def build_problem(cfg: AnnulusConfig, progress: bool = False) -> tuple[SymmetryProblem, dict[str, Any]]:
    """Model (trained, at initialisation, or a user's weights), probes and SO(2) as a :class:`SymmetryProblem`."""
    from .protocol import load_mlp_state, load_probes, paper_data, paper_init

    widths = [2] + [cfg.hidden] * cfg.depth + [1]
    user = load_probes(cfg.probes) if cfg.probes else {}
    if cfg.protocol == "paper":
        x, y = paper_data(cfg.n_inner, cfg.n_outer, cfg.arc, cfg.r_outer_min, cfg.r_outer_max, cfg.data_seed)
    else:
        x, y = make_data(cfg)
    info: dict[str, Any] = {"protocol": cfg.protocol}
    if cfg.weights:
        model = load_mlp_state(cfg.weights, widths, cfg.activation)
        info["weights"] = str(cfg.weights)
    elif cfg.protocol == "paper":
        model = paper_init(widths, cfg.activation, cfg.seed)
        if cfg.stage == "trained":
            losses = _train_paper(model, x, y, cfg, progress)
            info.update({"loss_first": losses[0], "loss_final": losses[-1], "losses": losses})
        model = model.double()
    else:
        model = build_model(cfg)
        if cfg.stage == "trained":
            losses = train(model, x, y, cfg, progress)
            info.update({"loss_first": losses[0], "loss_final": losses[-1], "losses": losses})
    x, y = (user["x"], user["y"]) if "x" in user else (x.double(), y.double())
    info["n_params"] = sum(p.numel() for p in model.parameters())
    info["task_loss"], info["train_accuracy"] = task_metrics(model, x, y)
    fn, params = function_from_module(model)
    probes = user["probes"] if "probes" in user else probe_grid(cfg.grid, cfg.extent)
    group = so2(n_quadrature=cfg.n_quadrature)
    problem = SymmetryProblem(fn, params, probes, group, rtol=cfg.rtol, gauge=cfg.gauge)
    info["n_probes"] = int(probes.shape[0])
    return problem, {"info": info, "data": (x, y)}


def _paper_row(cfg: AnnulusConfig, mode: str, direction: str) -> dict[str, Any] | None:
    if mode == "resolved":
        key = ("init", "init", direction) if cfg.stage == "init" else (cfg.data, cfg.stage, direction)
        row = PAPER["resolved"].get(key)
        if row:
            return {"paper_delta_start": row[0], "paper_delta_end": row[1], "paper_delta_predicted": row[2]}
        return None
    key = ("init" if cfg.stage == "init" else cfg.data, direction)
    row = {}
    if key in PAPER["fixed_end"]:
        row["paper_delta_end"] = PAPER["fixed_end"][key]
    if key in PAPER["fixed_accuracy"]:
        row["paper_accuracy_end"] = PAPER["fixed_accuracy"][key]
    return row or None


def _boundary_grid(cfg: AnnulusConfig) -> Tensor:
    g = torch.linspace(-cfg.extent, cfg.extent, cfg.boundary_grid, dtype=torch.float64)
    X, Y = torch.meshgrid(g, g, indexing="xy")
    return torch.stack([X.reshape(-1), Y.reshape(-1)], 1)


def _flow_arrays(problem: SymmetryProblem, trace: FlowTrace, cfg: AnnulusConfig, key: str) -> dict[str, Tensor]:
    """Profiles (measured and predicted) and decision-boundary fields at the snapshot times."""
    th0 = trace.snapshots[0.0]
    grid = _boundary_grid(cfg)
    out: dict[str, Tensor] = {}
    times = sorted(trace.snapshots)
    out[f"{key}.times"] = torch.tensor(times, dtype=torch.float64)
    for i, t in enumerate(times):
        th = trace.snapshots[t]
        tau = trace.snapshot_taus[t]
        fx = problem.function_of_x(th)
        pred = predicted_function(problem, th0, trace.direction, tau)
        _, d = angular_profile(fx, cfg.profile_radius)
        _, dp = angular_profile(pred, cfg.profile_radius)
        out[f"{key}.profile.{i}"] = torch.from_numpy(d[:, 0].copy())
        out[f"{key}.profile_pred.{i}"] = torch.from_numpy(dp[:, 0].copy())
        with torch.no_grad():
            out[f"{key}.field.{i}"] = fx(grid).reshape(cfg.boundary_grid, cfg.boundary_grid)
            out[f"{key}.field_pred.{i}"] = pred(grid).reshape(cfg.boundary_grid, cfg.boundary_grid)
    return out


def _sparse_rows(J: Tensor, att, iters: int) -> list[dict[str, Any]]:
    """Lasso and elastic-net (α = ½) attributions of η and −δ beside the least-squares ones."""
    if iters <= 0:
        return []
    rows = []
    for name, t, ls in (("c", att.eta, att.c.direction), ("b", -att.delta, att.b.direction)):
        sq = ls.square()
        rows.append({"target": name, "kind": "least squares (gauge)", "residual": float((J @ ls - t.reshape(-1)).norm()
                                                                                        / t.norm()),
                     "support": int((ls != 0).sum()), "participation_ratio": float(sq.sum() ** 2 / sq.square().sum())})
        for alpha, kind in ((1.0, "lasso"), (0.5, "elastic net α=0.5")):
            r = sparse_attribution(J, t, lam_rel=1e-2, alpha=alpha, iters=iters)
            rows.append({"target": name, "kind": kind, "residual": r["residual"], "support": r["support"],
                         "participation_ratio": r["participation_ratio"], "lam": r["lam"],
                         "objective_change": r["objective_change"]})
    return rows


def start_diagnostics(problem: SymmetryProblem, att, x: Tensor, y: Tensor, cfg: AnnulusConfig) -> dict[str, Any]:
    """At t = 0: task metrics of f and of its Reynolds projection P(f), the cutoff sweep of both
    lifts, the quadrature check of P and the orbit closure over 2π
    (:mod:`paramsym.attribution.diagnostics`)."""
    f = problem.function_of_x()
    loss, acc = task_metrics(f, x, y)
    ploss, pacc = task_metrics(lambda z: reynolds_x(f, z, problem.group, warn=False), x, y)
    J = problem.jacobian()
    if not cfg.sweep_rtols:
        return {"task": {"loss": loss, "accuracy": acc, "projected_loss": ploss, "projected_accuracy": pacc},
                "quadrature": quadrature_check(f, problem.probes, cfg.n_quadrature),
                "orbit_closure": orbit_closure(f, problem.probes, problem.group),
                "sparse": _sparse_rows(J, att, cfg.sparse_iters)}
    return {
        "task": {"loss": loss, "accuracy": acc, "projected_loss": ploss, "projected_accuracy": pacc},
        "cutoff_sweep": {"c": cutoff_sweep(J, att.eta, cfg.sweep_rtols, gauge=cfg.gauge, reference_rtol=cfg.rtol),
                         "b": cutoff_sweep(J, -att.delta, cfg.sweep_rtols, gauge=cfg.gauge, reference_rtol=cfg.rtol)},
        "quadrature": quadrature_check(f, problem.probes, cfg.n_quadrature),
        "sparse": _sparse_rows(J, att, cfg.sparse_iters),
        "orbit_closure": orbit_closure(f, problem.probes, problem.group),
    }


def run(cfg: AnnulusConfig, out: RunDir, *, progress: bool = True) -> dict[str, Any]:
    """Presets ``annulus-wedge`` / ``annulus-full`` (contract: :mod:`paramsym.experiments.attribution.records`):
    returns the metrics (``"summary"`` inside), which the run verb writes.

    Trains (stage ``trained``) or keeps the initialisation (``init``), lifts ``η`` and ``−δ``,
    and follows the flows ``cfg.flows`` × ``cfg.directions``; finished flows of an interrupted
    run in the same ``out`` are reused.
    """
    cfg.validate()
    if cfg.weights or cfg.probes:  # user files are checked before the run directory is written
        from .protocol import load_mlp_state, load_probes

        if cfg.weights:
            load_mlp_state(cfg.weights, [2] + [cfg.hidden] * cfg.depth + [1], cfg.activation)
        if cfg.probes:
            load_probes(cfg.probes)
    problem, extra = build_problem(cfg, progress)
    info = extra["info"]
    x, y = extra["data"]
    save_tensors(out.file("model.safetensors"), problem.params)
    save_tensors(out.file("data.safetensors"), {"x": x, "y": y, "probes": problem.probes})

    att = problem.lifts()
    lifts = lift_records(att)
    # the lifting criterion itself (image membership): a nearly untruncated pinv (τ = 1e-8, SVD)
    exact = DenseLift(problem.jacobian(), rtol=EXACT_RTOL, gauge="none", solver="svd")
    for name, target, t in (("c*", "eta", att.eta), ("b*", "-delta", -att.delta)):
        r = exact.solve(t.reshape(-1))
        lifts.append(LiftRecord(f"{name} (τ={EXACT_RTOL:g})", target, r.residual, r.rank, r.target_norm,
                                float(r.direction.norm()), r.liftable(),
                                r.verdict(f"{'η' if name == 'c*' else '−δ'}, lifting criterion")))
    records = []
    flows_dir = out.path / "flows"
    flows_dir.mkdir(exist_ok=True)
    for mode in cfg.flows:
        for direction in cfg.directions:
            key = f"{mode}_{'c' if direction == '+c' else 'b'}"
            done = flows_dir / f"{key}.json"
            if done.exists():  # resume: this flow finished in an earlier attempt
                rec = read_json(done)["record"]
                records.append(rec)
                continue
            n_steps = int(round(cfg.t_end / cfg.dt))
            monitor = FlowMonitor(problem, direction, cfg.t_end, task=lambda f: task_metrics(f, x, y),
                                  every=cfg.predict_every, steps=n_steps, profile_radius=cfg.profile_radius)
            monitor.set_first_direction(att.c.direction if direction == "+c" else att.b.direction)
            trace = run_flow(problem, direction, mode, t_end=cfg.t_end, dt=cfg.dt,
                             snapshot_at=[0.0, 0.25 * cfg.t_end, 0.5 * cfg.t_end, 0.75 * cfg.t_end, cfg.t_end],
                             progress=progress, predict_every=cfg.predict_every, callback=monitor)
            arrays = _flow_arrays(problem, trace, cfg, key)
            arrays[f"{key}.heatmap"] = torch.stack(monitor.profiles)  # [steps + 1, 360]
            d0 = arrays[f"{key}.profile.0"].numpy()
            dT = arrays[f"{key}.profile.{len(trace.snapshots) - 1}"].numpy()
            dP = arrays[f"{key}.profile_pred.{len(trace.snapshots) - 1}"].numpy()
            extra_fields = {
                "rms_ratio": rms(dT) / rms(d0) if rms(d0) > 0 else None,
                "rms_ratio_predicted": rms(dP) / rms(d0) if rms(d0) > 0 else None,
                "profile_error_end": float(np.sqrt(np.mean((dT - dP) ** 2))) / max(rms(d0), 1e-300),
            }
            paper = _paper_row(cfg, mode, direction)
            if paper:
                extra_fields.update(paper)
            extra_fields.update(monitor.end())
            rec = trace.record()
            rec.extra.update(extra_fields)
            rec_json = rec.to_json()
            save_tensors(flows_dir / f"{key}.safetensors", arrays)
            write_json(done, {"record": rec_json, "trace": {**trace.to_json(), "diagnostics": monitor.series}})
            records.append(rec_json)
    summary = {
        "preset": cfg.preset,
        "stage": cfg.stage,
        "lifts": [r.to_json() for r in lifts],
        "flows": records,
        "paper": {"resolved": {"/".join(k): v for k, v in PAPER["resolved"].items()},
                  "fixed_end": {"/".join(k): v for k, v in PAPER["fixed_end"].items()},
                  "fixed_accuracy": {"/".join(k): v for k, v in PAPER["fixed_accuracy"].items()}},
    }
    metrics = {
        **start_diagnostics(problem, att, x, y, cfg),
        "info": {k: v for k, v in info.items() if k != "losses"},
        "losses": info.get("losses"),
        "delta_norm": att.delta_norm,
        "eta_norm": float(att.eta.norm()),
        "sigma": att.c.sigma[: min(200, att.c.sigma.numel())].tolist() if att.c.sigma is not None else None,
        "tensor_table": tensor_table(att),
        "top_c": parameter_table(att, top=10, by="c"),
        "top_b": parameter_table(att, top=10, by="b"),
        "gauge_image_shift": {"c": att.c.info.get("gauge_image_shift"), "b": att.b.info.get("gauge_image_shift")},
    }
    return run_metrics(summary, metrics)
