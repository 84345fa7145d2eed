"""Teleporting inside a training loop, with the optimizer state carried along.

A teleport replaces θ by ``θ' = a(g, θ)``. Optimizer state that *is* a gradient statistic must
move with it, else the next steps use moments measured in the old coordinates. For an invariant
loss, ``L(a(g, θ)) = L(θ)`` differentiated gives ``∇L(θ) = Jᵀ ∇L(θ')`` with ``J = ∂_θ a(g, θ)``,
so gradients (covectors) map by

    ∇L(θ') = A ∇L(θ),    A = J⁻ᵀ = (∂_{θ'} a(g⁻¹, θ'))ᵀ,

computed as a vector-Jacobian product of the inverse action at θ' (exact for any action, linear
in θ or not). :func:`transform_state` applies it to the per-parameter state of ``torch.optim``
optimizers:

* first moments (covectors, sums of gradients): SGD ``momentum_buffer``, Adam/AdamW/NAdam/RAdam
  ``exp_avg`` → ``A m``;
* second moments (sums of squared gradients): Adam ``exp_avg_sq`` and ``max_exp_avg_sq``,
  AdaGrad ``sum``, RMSprop ``square_avg`` → ``(A ∘ A) v`` (entrywise square of A times v). For a
  diagonal ``A`` (rescalings: ``J = diag(d)`` on incoming and ``diag(1/d)`` on outgoing weights,
  so ``A = J⁻¹``, also diagonal) this is exact: each past squared gradient ``g_t²`` becomes
  ``(A g_t)² = a² g_t²``. For a non-diagonal A it keeps the diagonal terms of
  ``A E[g gᵀ] Aᵀ`` and drops the cross terms ``A_ij A_ik E[g_j g_k]`` (j ≠ k), which the state
  does not record (it needs the dense ``p × p`` matrix A: refused above ``dense_limit``);
* scalars (``step``) are kept. Any other state tensor raises :class:`~paramsym.errors.ConfigError`
  (it is not known whether it transforms as a vector, a covector or neither).

:class:`Teleporter` wraps a model, any ``torch.optim`` optimizer and an action on a block of the
model's parameters; :meth:`Teleporter.maybe_teleport` teleports on the scheduled steps (every
``k`` steps, or a given list), writes ``θ'`` into the parameters in place and transforms the state.
:func:`train_with_teleports` is the training loop around it (full-batch steps, a teleport on every
due step, the loss recorded at every step).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch
from torch import Tensor, nn
from torch.func import vjp

from ..errors import ActionError, ConfigError, ShapeError, TooLargeError
from ..params import ParameterBlock
from .core import AscentConfig, TeleportResult, teleport
from .objectives import Objective

__all__ = ["covector_map", "transform_state", "Teleporter", "train_with_teleports", "FIRST_MOMENTS", "SECOND_MOMENTS"]

FIRST_MOMENTS = ("momentum_buffer", "exp_avg")
SECOND_MOMENTS = ("exp_avg_sq", "max_exp_avg_sq", "sum", "square_avg")


def _monomial_scale(action, g: Tensor, theta_new: Tensor) -> Tensor | None:
    """``A = diag(exp(−C log diag g))`` for a monomial action whose exponents ``C`` are cached
    (:mod:`paramsym.teleport.fast`) and a positive diagonal ``g``; else ``None``."""
    d = torch.diagonal(g)
    if not bool((g == torch.diag(d)).all()) or not bool((d > 0).all()):
        return None
    for (dtype, p, shape), C in action.__dict__.get("_monomial_cache", {}).items():
        if C is not None and dtype == theta_new.dtype and p == theta_new.numel() and shape[1] == d.numel():
            return torch.exp(-(C @ torch.log(d.to(theta_new.dtype))))
    return None


def covector_map(action, g: Tensor, theta_new: Tensor) -> Callable[[Tensor], Tensor]:
    """``c ↦ A c`` with ``A = (∂_{θ'} a(g⁻¹, θ'))ᵀ`` at ``θ' = a(g, θ)`` (module docstring)."""
    scale = _monomial_scale(action, g, theta_new)
    if scale is not None:
        return lambda c: scale * c.to(theta_new.dtype)
    g_inv = torch.linalg.inv(g.to(theta_new.dtype))
    _, pull = vjp(lambda th: action.act(g_inv, th), theta_new.detach())
    return lambda c: pull(c.to(theta_new.dtype))[0]


def _square_map(apply: Callable[[Tensor], Tensor], p: int, dtype: torch.dtype, generator: torch.Generator,
                dense_limit: int) -> tuple[Callable[[Tensor], Tensor], bool]:
    """``v ↦ (A ∘ A) v`` and whether A is diagonal (tested on a random vector)."""
    diag = apply(torch.ones(p, dtype=dtype))
    r = torch.randn(p, generator=generator, dtype=dtype)
    if torch.allclose(apply(r), diag * r, rtol=1e-10, atol=1e-12 * float(diag.abs().max() * r.abs().max())):
        return (lambda v: diag.pow(2) * v), True
    if p > dense_limit:
        raise TooLargeError(f"transform_state: the covector map of this teleport is not diagonal, and the second moments "
                            f"need the dense {p} × {p} matrix (above dense_limit = {dense_limit}); raise dense_limit or "
                            "use an optimizer without second moments (SGD).")
    A = torch.stack([apply(e) for e in torch.eye(p, dtype=dtype)], dim=1)
    A2 = A.pow(2)
    return (lambda v: A2 @ v), False


def transform_state(optimizer: torch.optim.Optimizer, named: Mapping[str, Tensor], block: ParameterBlock, action,
                    g: Tensor, theta_new: Tensor, *, dense_limit: int = 4096) -> dict[str, object]:
    """Transform ``optimizer.state`` of the block's parameters for the teleport ``θ' = a(g, θ)``.

    Args:
        optimizer: any ``torch.optim`` optimizer over (some of) the tensors in ``named``.
        named: the model's parameters by name (the tensors the optimizer holds).
        block, action: the block θ lives in and the action that moved it.
        g, theta_new: the element applied and ``θ' = a(g, θ)``.
        dense_limit: largest p for the dense second-moment map of a non-diagonal A.

    Returns:
        ``{"keys": [...], "diagonal": bool | None}``: the state keys transformed and whether A was diagonal.

    Raises:
        ConfigError: a state tensor of unknown kind (named), or a block parameter without state
            for a key others have.
    """
    apply = covector_map(action, g, theta_new)
    states = {n: optimizer.state.get(named[n], {}) for n in block.names}
    keys = sorted({k for n, st in states.items() for k, v in st.items()
                   if k != "step" and isinstance(v, Tensor) and tuple(v.shape) == tuple(named[n].shape)})
    diagonal = None
    square = None
    unknown = [k for k in keys if k not in FIRST_MOMENTS + SECOND_MOMENTS]
    if unknown:  # checked before any state is changed
        raise ConfigError(f"transform_state: optimizer state {unknown[0]!r} of {type(optimizer).__name__} is not known to "
                          f"transform under a teleport (known: {FIRST_MOMENTS + SECOND_MOMENTS}); use SGD, Adam, "
                          "AdamW, AdaGrad or RMSprop, or reset that state yourself.")
    for key in keys:
        missing = [n for n, st in states.items() if key not in st]
        if missing:
            raise ConfigError(f"transform_state: parameters {missing} have no {key!r} state while others do; teleport "
                              "after the first optimizer step over all of the block's parameters.")
    for key in keys:
        vec = block.gather({n: st[key] for n, st in states.items()}).to(theta_new.dtype)
        if key in FIRST_MOMENTS:
            new = apply(vec)
        else:
            if square is None and (scale := _monomial_scale(action, g, theta_new)) is not None:
                square, diagonal = scale.pow(2).mul, True
            if square is None:
                square, diagonal = _square_map(apply, vec.numel(), vec.dtype, torch.Generator().manual_seed(0), dense_limit)
            new = square(vec)
        for n, t in block.scatter(new, {n: st[key] for n, st in states.items()}).items():
            with torch.no_grad():
                states[n][key].copy_(t.to(states[n][key].dtype))
    return {"keys": keys, "diagonal": diagonal}


class Teleporter:
    """Teleport a model's parameters during training, carrying the optimizer state along.

    Args:
        model: the module being trained.
        optimizer: any ``torch.optim`` optimizer over its parameters (or ``None``: parameters only).
        action: a group action on ``block``.
        block: the block θ the action acts on (a :class:`ParameterBlock` of the model's parameters,
            or a list of whole-tensor names).
        every: teleport on steps ``every, 2·every, …`` (``None``: only on ``at``).
        at: explicit steps to teleport on (e.g. ``[5]``).
        config: the settings of each teleport (:class:`~paramsym.teleport.core.AscentConfig`;
            default ``AscentConfig()``).
        objective: the orbit objective of every teleport (default ``‖∇L‖²``); one call may pass
            its own (:meth:`teleport`).

    Raises:
        ConfigError: ``every`` < 1.
        ShapeError: the block's tensors are not the model's (name or shape differ: named), or the
            action acts on a different number of parameters.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer | None, action, block: ParameterBlock | list[str],
                 *, every: int | None = None, at: Iterable[int] = (), config: AscentConfig | None = None,
                 objective: Objective | None = None):
        if every is not None and (not isinstance(every, int) or every < 1):
            raise ConfigError(f"Teleporter: every must be an integer ≥ 1 (teleport every k steps); received {every!r}.")
        self.model, self.optimizer, self.action = model, optimizer, action
        self.named = dict(model.named_parameters())
        if not isinstance(block, ParameterBlock):
            block = ParameterBlock.from_params(self.named, list(block))
        check_applies(action, block, self.named)
        self.block, self.every, self.at = block, every, set(int(s) for s in at)
        self.config, self.objective = config if config is not None else AscentConfig(), objective
        self.results: list[TeleportResult] = []
        self.seconds = 0.0

    def due(self, step: int) -> bool:
        """Whether ``step`` is a scheduled teleport step."""
        return step in self.at or (self.every is not None and step > 0 and step % self.every == 0)

    def maybe_teleport(self, step: int, loss_fn: Callable[[dict[str, Tensor]], Tensor]) -> TeleportResult | None:
        """Teleport if ``step`` is scheduled (see :meth:`teleport`)."""
        return self.teleport(loss_fn) if self.due(step) else None

    def teleport(self, loss_fn: Callable[[dict[str, Tensor]], Tensor], *,
                 objective: Objective | None = None) -> TeleportResult:
        """Teleport now: ``loss_fn(params)`` is the loss of the model with parameters ``params``
        (names → tensors, e.g. via ``torch.func.functional_call``) on a fixed batch; ``objective``
        (built for this teleport) replaces the Teleporter's own for this call."""
        import time

        t0 = time.perf_counter()
        base = {n: p.detach() for n, p in self.named.items()}
        theta = self.block.gather(base)
        res = teleport(self.action, theta, lambda th: loss_fn(self.block.scatter(th, base)), self.config,
                       objective=objective if objective is not None else self.objective)
        if res.steps:
            new = self.block.scatter(res.theta, base)
            if self.optimizer is not None:
                transform_state(self.optimizer, self.named, self.block, self.action, res.g, res.theta)
            with torch.no_grad():
                for n in self.block.names:
                    self.named[n].copy_(new[n])
        self.results.append(res)
        self.seconds += time.perf_counter() - t0
        return res


def check_applies(action, block: ParameterBlock, named: Mapping[str, Tensor]) -> None:
    """Raise a named error unless ``action`` acts on ``block`` and the block's tensors are the model's.

    Raises:
        ShapeError: a block tensor the model lacks, or has with another shape (named), or a
            parameter count differing from ``action.p``.
    """
    for e in block.entries:
        if e.name not in named:
            raise ShapeError(f"the action's tensor {e.name!r} is not a parameter of the model; the model has "
                             f"{list(named)}. Build the action on this model's parameters.")
        if tuple(named[e.name].shape) != tuple(e.shape):
            raise ShapeError(f"the action expects {e.name!r} of shape {tuple(e.shape)} but the model's is "
                             f"{tuple(named[e.name].shape)}; the action was built for another architecture.")
    p = getattr(action, "p", None)
    if p is not None and int(p) != block.size:
        raise ShapeError(f"{type(action).__name__} acts on p = {p} parameters but the block {block!r} has {block.size}.")
    if not hasattr(action, "act"):
        raise ActionError(f"expected a GroupAction (with act(g, θ) and a group); received {type(action).__name__}.")


def train_with_teleports(optimizer: torch.optim.Optimizer, loss: Callable[[], Tensor], steps: int,
                         teleporter: Teleporter | None = None,
                         prepare: Callable[[int], tuple[Callable[[dict[str, Tensor]], Tensor], Objective | None]]
                         | None = None,
                         on_loss: Callable[[int, float], None] | None = None) -> list[float]:
    """Full-batch training with teleports: the losses ``L_0, …, L_steps``.

    At each step ``k = 0, …, steps``: when ``teleporter.due(k)`` (and ``k < steps``), ``prepare(k)``
    returns the loss ``L(params)`` the teleport keeps invariant and the orbit objective of this
    teleport (``None``: the teleporter's own; building it counts as teleport time), and the model
    teleports along it;
    then the training loss ``L_k = loss()`` is recorded (``on_loss(k, L_k)``) and, for ``k < steps``,
    one optimizer step is taken on it. ``steps`` optimizer steps in all, ``steps + 1`` losses.

    Args:
        optimizer: the model's ``torch.optim`` optimizer (its state is moved by each teleport).
        loss: the training loss of the model's current parameters (a scalar with a graph).
        steps: optimizer steps, ``>= 0``.
        teleporter: the :class:`Teleporter` (``None``: plain training).
        prepare: ``k -> (loss_fn, objective)`` for a due step (required with a teleporter).
        on_loss: called with ``(k, L_k)`` after each loss is recorded.
    """
    import time

    if teleporter is not None and prepare is None:
        raise ConfigError("train_with_teleports: a teleporter needs prepare(k) -> (the loss the teleport keeps, "
                          "its objective or None).")
    losses: list[float] = []
    for k in range(steps + 1):
        if teleporter is not None and k < steps and teleporter.due(k):
            t_obj = time.perf_counter()  # building the objective counts as teleport time
            loss_fn, objective = prepare(k)
            teleporter.seconds += time.perf_counter() - t_obj
            teleporter.teleport(loss_fn, objective=objective)
        optimizer.zero_grad()
        value = loss()
        losses.append(float(value.detach()))
        if on_loss is not None:
            on_loss(k, losses[-1])
        if k == steps:
            break
        value.backward()
        optimizer.step()
    return losses
