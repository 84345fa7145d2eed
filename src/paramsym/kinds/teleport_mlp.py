"""The MLP presets of ``paramsym teleport``: the anchor's multi-layer regression and digits.

``regression-mlp`` (the anchor's ``multi_layer_regression.py`` set-up, our data): a bias-free
network ``5 → 6 → 7 → 8`` with LeakyReLU(0.1) (the anchor's ``dim = [4, 5, 6, 7, 8]``: 4 samples
of 5 features, 8 outputs), weights, inputs ``X`` (4 × 5) and targets ``Y`` (4 × 8) all uniform on
[0, 1) from ``torch.Generator().manual_seed(seed)``, loss ``½ ‖f(X) − Y‖²_F``, float64, 300
full-batch steps of GD (lr 1e-4) or AdaGrad (lr 0.1, ε 1e-10); one teleport at step 5. The action
is the positive rescaling of both hidden layers (13 dimensions, exact for LeakyReLU, so the loss
is kept to rounding); the objective is the linearised 100-step lookahead
(:class:`~paramsym.teleport.objectives.LinearizedLookahead`, with AdaGrad's accumulator as the
preconditioner). Target per seed: the baseline's loss after 300 steps.

``digits-mlp``: :func:`paramsym.models.mlp.mlp` ``[64, 32, 32, 10]`` (ReLU, biases, float64,
initialised from the seed) on :func:`paramsym.models.datasets.digits` (seed-split), cross-entropy,
full-batch SGD (lr 0.1) or Adam (lr 1e-3); teleports every 200 (SGD) or 100 (Adam) steps with the
rescaling of both hidden layers, objective: the loss decrease of 2 plain GD steps at lr 0.2 on 256
training examples drawn for that teleport (:func:`~paramsym.teleport.core.descent_objective`; lr
twice SGD's step, a stability margin: with the step itself, 5-step lookaheads chose points from
which GD at lr 0.1 later diverged), at most 3 ascent steps, path length in the algebra ≤ 2 per
teleport (``radius``), gradient-norm factor ≤ 2. (The first version teleported every 100/50 steps
with a 5-step full-batch lookahead and 5 ascent steps: step ratio 1.45/1.07 but +95 %/+270 % wall
time and a lower median validation accuracy at the target; docs/teleport.md has the comparison.)
The target is a fixed training loss (``TeleportConfig.targets``); validation accuracy on the held-out 20 %, both
when the run first reaches the target and after the last step.
"""

from __future__ import annotations

import time
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

from ..groups.progress import progress_bar
from .teleport_presets import (
    DEFAULT_STEPS,
    OPTIMIZERS,
    Job,
    TeleportConfig,
    _no_checkpoint,
    _two_d,
    aggregate,
)

__all__ = ["regression_problem", "run", "run_mlp_preset", "train_preset"]


def regression_problem(seed: int) -> tuple[nn.Sequential, torch.Tensor, torch.Tensor]:
    """The anchor's regression network and data for ``seed`` (module docstring)."""
    gen = torch.Generator().manual_seed(seed)
    widths, layers = [5, 6, 7, 8], OrderedDict()
    for i in range(3):
        lin = nn.Linear(widths[i], widths[i + 1], bias=False, dtype=torch.float64)
        with torch.no_grad():
            lin.weight.copy_(torch.rand(lin.weight.shape, generator=gen, dtype=torch.float64))
        layers[f"fc{i + 1}"] = lin
        if i < 2:
            layers[f"act{i + 1}"] = nn.LeakyReLU(0.1)
    x = torch.rand(4, 5, generator=gen, dtype=torch.float64)
    y = torch.rand(4, 8, generator=gen, dtype=torch.float64)
    return nn.Sequential(layers), x, y


def _optimizer(name: str, model: nn.Module, lr: float) -> torch.optim.Optimizer:
    if name in ("gd", "sgd"):
        return torch.optim.SGD(model.parameters(), lr=lr)
    if name == "adagrad":
        return torch.optim.Adagrad(model.parameters(), lr=lr, eps=1e-10)
    return torch.optim.Adam(model.parameters(), lr=lr)


def train_preset(cfg: TeleportConfig, opt_name: str, seed: int, steps: int, teleport: bool,
           objective: str = "lookahead") -> dict:
    """One training run of ``cfg.preset`` (with teleports when ``teleport``; the tuning values from ``cfg``).

    ``objective="grad-norm"`` teleports ``regression-mlp`` by the paper's ``‖∇L‖²``
    (:func:`~paramsym.teleport.objectives.grad_norm_objective`) instead of the lookahead (the measurement
    ``teleport-grad-norm`` of docs/teleport.md: why the preset uses the lookahead)."""
    from ..teleport import (
        AscentConfig,
        Teleporter,
        descent_objective,
        mlp_rescaling,
        train_with_teleports,
    )
    from ..teleport.objectives import LinearizedLookahead

    preset, every, lr = cfg.preset, cfg.every if teleport else None, cfg.lr[opt_name]
    if preset == "regression-mlp":
        model, x, y = regression_problem(seed)

        def loss_of(out):
            return 0.5 * (out - y).pow(2).sum()

        data = None
    else:
        from ..models.datasets import digits
        from ..models.mlp import mlp

        data = digits(seed, dtype=torch.float64)
        model = mlp([64, 32, 32, 10], "relu", dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
        x, y = data.x_train, data.y_train

        def loss_of(out):
            return F.cross_entropy(out, y)

    slope = 0.1 if preset == "regression-mlp" else 0.0
    n_layers = sum(1 for n in dict(model.named_parameters()) if n.endswith(".weight"))

    def forward(params, inputs):
        """The network written out (same as ``functional_call(model, params, ...)``, cheaper per call)."""
        h = inputs
        for i in range(1, n_layers + 1):
            h = F.linear(h, params[f"fc{i}.weight"], params.get(f"fc{i}.bias"))
            if i < n_layers:
                h = F.leaky_relu(h, slope) if slope else F.relu(h)
        return h

    def loss_params(params):
        return loss_of(forward(params, x))

    opt = _optimizer(opt_name, model, lr)
    tele = None
    if teleport:
        block, action = mlp_rescaling(dict(model.named_parameters()),
                                      activation=nn.LeakyReLU(0.1) if preset == "regression-mlp" else "relu")
        action = action.double()
        if preset == "regression-mlp":
            tele = Teleporter(model, opt, action, block, every=every, at=() if every else [5],
                              config=AscentConfig(steps=cfg.regression_ascent_steps, step_size=1.0, tol=1e-10))
        else:
            tele = Teleporter(model, opt, action, block, every=every or cfg.every_per_optimizer[opt_name],
                              config=AscentConfig(steps=cfg.ascent_steps, step_size=0.5, tol=1e-10,
                                                  max_factor=cfg.max_factor, radius=cfg.radius))
    acc_at_target = None
    target = cfg.targets.get(opt_name) if data is not None else None

    def prepare(k: int):
        """The teleport at step ``k``: the loss it keeps and its objective (``None``: ``‖∇L‖²``)."""
        base = {n: p.detach() for n, p in model.named_parameters()}
        theta = tele.block.gather(base)
        if preset == "regression-mlp" and objective == "grad-norm":
            return loss_params, None  # the teleport's default objective: ‖∇L‖² of the loss
        if preset == "regression-mlp":
            sm = None
            if opt_name == "adagrad":
                sm = tele.block.gather({n: opt.state[p]["sum"] for n, p in model.named_parameters()})
            lookahead = LinearizedLookahead(tele.action, theta, lambda th, b=base: forward(tele.block.scatter(th, b), x),
                                            y, lr, 100, sm)
            return loss_params, lookahead
        # the teleport's batch: cfg.teleport_batch training examples drawn for this teleport
        n = len(y) if cfg.teleport_batch is None else min(cfg.teleport_batch, len(y))
        pick = torch.randperm(len(y), generator=torch.Generator().manual_seed(1000 * seed + k))[:n]

        def sub_loss(params, pick=pick):
            return F.cross_entropy(forward(params, x[pick]), y[pick])

        obj = descent_objective(lambda th, b=base: sub_loss(tele.block.scatter(th, b)), cfg.lookahead_lr,
                                 cfg.lookahead_steps)
        if cfg.norm_penalty:
            sq0 = float(theta.pow(2).sum())

            def obj(th, _d=obj, _s=sq0, _lam=cfg.norm_penalty):
                return _d(th) - _lam * (th.pow(2).sum() / _s - 1)
        return sub_loss, obj

    def on_loss(k: int, value: float) -> None:
        nonlocal acc_at_target
        if target is not None and acc_at_target is None and value <= target:
            with torch.no_grad():
                acc_at_target = float((model(data.x_test).argmax(1) == data.y_test).double().mean())

    t0 = time.perf_counter()
    losses = train_with_teleports(opt, lambda: loss_of(model(x)), steps, tele, prepare, on_loss)
    seconds = time.perf_counter() - t0
    out = {"losses": losses, "seconds": seconds, "teleport_seconds": tele.seconds if tele else 0.0,
           "teleports": [{"step": None, **r.summary()} for r in (tele.results if tele else [])]}
    if data is not None:
        with torch.no_grad():
            out["val_acc"] = float((model(data.x_test).argmax(1) == data.y_test).double().mean())
        out["val_acc_at_target"] = acc_at_target
    return out


def run_mlp_preset(cfg: TeleportConfig, optimizers: list[str], seeds: list[int], progress: bool = False,
                   job=None) -> dict:
    """Both presets: for each optimizer and seed (the seed values), train without and with teleports
    (same init); ``job(optimizer, seed, compute)`` wraps each pair (the run kind's checkpoint)."""
    steps = cfg.steps or DEFAULT_STEPS[cfg.preset]
    runs = []
    jobs = [(o, s) for o in optimizers for s in seeds]
    for opt_name, seed in progress_bar(jobs, total=len(jobs), desc=f"teleport {cfg.preset}", enabled=progress):
        runs.append(_job(cfg, opt_name, seed, steps) if job is None else
                    job(opt_name, seed, lambda o=opt_name, s=seed: _job(cfg, o, s, steps)))
    target = {o: (None if cfg.preset == "regression-mlp" else cfg.targets[o]) for o in optimizers}
    return {"runs": runs, "target": target, "lr": {o: cfg.lr[o] for o in optimizers}, "steps": steps}


def _job(cfg: TeleportConfig, opt_name: str, seed: int, steps: int) -> dict:
    """One (optimizer, seed) pair: the baseline and the teleport run from the same initialisation."""
    base = train_preset(cfg, opt_name, seed, steps, False)
    tele = train_preset(cfg, opt_name, seed, steps, True)
    rec = {"seed": seed, "optimizer": opt_name, "baseline": base, "teleport": tele}
    if cfg.preset == "regression-mlp":
        rec["target"] = base["losses"][-1]
    else:
        rec["val_acc_baseline"], rec["val_acc_teleport"] = base["val_acc"], tele["val_acc"]
        rec["val_acc_at_target_baseline"] = base["val_acc_at_target"]
        rec["val_acc_at_target_teleport"] = tele["val_acc_at_target"]
    return rec


# The dispatcher over every preset lives here, above teleport_presets (which holds the 2-D presets
# and the configuration): the import goes teleport_mlp -> teleport_presets only.
def run(cfg: TeleportConfig, progress: bool = False, job: Job | None = None) -> dict:
    """Run a preset with and without teleports; return the per-seed runs and the aggregates.

    ``job`` (optional) wraps each (optimizer, seed) job: the run kind's checkpoint (module docstring).
    ``seeds`` in the result is the number of seeds, ``seed_values`` the seeds.
    """
    cfg.validate()
    job = job or _no_checkpoint
    t0 = time.perf_counter()
    if cfg.preset in ("booth", "rosenbrock"):
        result = _two_d(cfg, progress, job)
    else:
        result = run_mlp_preset(cfg, cfg.optimizers or OPTIMIZERS[cfg.preset], cfg.seed_values(), progress, job)
    seeds = cfg.seed_values()
    result.update(preset=cfg.preset, every=cfg.every, seeds=len(seeds), seed_values=seeds)
    result.update(aggregate(result))
    result["seconds"] = time.perf_counter() - t0
    return result
