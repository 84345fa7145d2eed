"""The linear path between two models, its loss barrier, and the merged midpoint.

For parameters ``θ_A, θ_B`` and ``α ∈ [0, 1]``, ``θ(α) = (1 − α) θ_A + α θ_B`` (every tensor).
On a grid ``0 = α_0 < … < α_K = 1`` with losses ``L_k = L(θ(α_k))`` the **barrier** is the
largest signed gap between the path and the straight line through its end losses,

    barrier = max_k [ L_k − ((1 − α_k) L_0 + α_k L_K) ],

(0 at the ends, so ≥ 0 on a grid holding them; it is reported with the ``α`` where it occurs).
Losses are mean cross-entropy over a whole split (over every label: every token of a language
model's windows); accuracies are the share of argmax hits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import ConfigError, ShapeError

__all__ = ["PathCurve", "barrier", "evaluate", "interpolate", "path_curve", "relative_output_error"]


def interpolate(a: Mapping[str, Tensor], b: Mapping[str, Tensor], alpha: float) -> dict[str, Tensor]:
    """``(1 − α) θ_A + α θ_B`` for every tensor of ``a``.

    Raises:
        ConfigError: ``alpha`` not a finite real number, or ``a``/``b`` not dicts of tensors.
        ArchitectureMismatchError: ``a`` and ``b`` hold other names or shapes.
    """
    import math
    import numbers

    from .arch import check_param_pair

    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not math.isfinite(alpha):
        raise ConfigError(f"alpha must be a finite real number (0 = A, 1 = B); received {alpha!r}.")
    check_param_pair(a, b)
    alpha = float(alpha)
    return {n: (1.0 - alpha) * a[n] + alpha * b[n] for n in a}


def barrier(alphas: Sequence[float], losses: Sequence[float]) -> tuple[float, float]:
    """``(max_k [L_k − ((1 − α_k) L_0 + α_k L_K)], α at the max)`` (module docstring).

    Raises:
        ConfigError: a grid that does not start at 0 and end at 1, or lengths that differ.
    """
    al = [float(x) for x in alphas]
    ls = [float(x) for x in losses]
    if len(al) != len(ls) or len(al) < 2 or al[0] != 0.0 or al[-1] != 1.0:
        raise ConfigError(f"barrier needs losses on a grid from α=0 to α=1 of the same length; received "
                          f"{len(al)} α (first {al[:1]}, last {al[-1:]}) and {len(ls)} losses.")
    gaps = [loss - ((1.0 - a) * ls[0] + a * ls[-1]) for a, loss in zip(al, ls)]
    k = max(range(len(gaps)), key=gaps.__getitem__)
    return gaps[k], al[k]


@torch.no_grad()
def evaluate(forward: Callable[[Mapping[str, Tensor], Tensor], Tensor], params: Mapping[str, Tensor],
             x: Tensor, y: Tensor, batch: int = 4096) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``forward(params, x)`` against labels ``y``.

    Logits ``(N, …, C)`` with labels ``(N, …)``: every label counts once (a language model's
    ``(N, T, V)`` next-token logits against ``(N, T)`` targets: the mean over all ``N·T`` tokens)."""
    loss, hits = 0.0, 0
    for i in range(0, x.shape[0], batch):
        logits = forward(params, x[i:i + batch])
        target = y[i:i + batch]
        flat = logits.double().reshape(-1, logits.shape[-1])
        loss += float(torch.nn.functional.cross_entropy(flat, target.reshape(-1), reduction="sum"))
        hits += int((logits.argmax(-1) == target).sum())
    return loss / y.numel(), hits / y.numel()


@dataclass
class PathCurve:
    """Loss and accuracy along the path on the train and test splits, with the barriers."""

    alphas: list[float]
    train_loss: list[float]
    test_loss: list[float]
    train_acc: list[float]
    test_acc: list[float]

    def barriers(self) -> dict[str, float]:
        """``train``/``test`` loss barriers and where they occur; accuracy drops (end-line minus path)."""
        out = {}
        for split in ("train", "test"):
            b, at = barrier(self.alphas, getattr(self, f"{split}_loss"))
            acc = getattr(self, f"{split}_acc")
            drop, at_acc = barrier(self.alphas, [-v for v in acc])
            out |= {f"{split}_loss": b, f"{split}_alpha": at, f"{split}_acc_drop": drop, f"{split}_acc_alpha": at_acc,
                    f"{split}_mid_loss": getattr(self, f"{split}_loss")[len(self.alphas) // 2]}
        return out

    def as_dict(self) -> dict:
        return {"alphas": self.alphas, "train_loss": self.train_loss, "test_loss": self.test_loss,
                "train_acc": self.train_acc, "test_acc": self.test_acc, "barriers": self.barriers()}


def path_curve(forward: Callable[[Mapping[str, Tensor], Tensor], Tensor], a: Mapping[str, Tensor],
               b: Mapping[str, Tensor], data, points: int = 25) -> PathCurve:
    """Evaluate the path on ``points`` equally spaced ``α`` (both ends included) on ``data``
    (a :class:`~paramsym.models.datasets.Split`)."""
    if int(points) < 2:
        raise ConfigError(f"the path needs at least 2 points (α = 0 and 1); received {points}.")
    alphas = [k / (points - 1) for k in range(points)]
    cols: dict[str, list[float]] = {"train_loss": [], "test_loss": [], "train_acc": [], "test_acc": []}
    for al in alphas:
        p = interpolate(a, b, al)
        for split in ("train", "test"):
            loss, acc = evaluate(forward, p, getattr(data, f"x_{split}"), getattr(data, f"y_{split}"))
            cols[f"{split}_loss"].append(loss)
            cols[f"{split}_acc"].append(acc)
    return PathCurve(alphas, **cols)


@torch.no_grad()
def relative_output_error(forward: Callable[[Mapping[str, Tensor], Tensor], Tensor], p: Mapping[str, Tensor],
                          q: Mapping[str, Tensor], x: Tensor, batch: int = 4096,
                          forward_q: Callable[[Mapping[str, Tensor], Tensor], Tensor] | None = None) -> float:
    """``‖f_q(x) − f_p(x)‖_F / ‖f_p(x)‖_F`` over all inputs (the outputs of ``forward``; ``q``'s
    by ``forward_q`` when given — another parametrisation of the same model, such as its
    canonical form, whose tensors may differ from ``p``'s).

    Raises:
        ConfigError: ``forward`` not callable, ``x`` not a non-empty tensor, ``batch`` not an integer >= 1.
        ArchitectureMismatchError: ``p`` and ``q`` hold other names or shapes.
    """
    from .arch import check_param_pair

    if not callable(forward):
        raise ConfigError(f"forward must be a callable (params, x) -> outputs; received {type(forward).__name__}.")
    if forward_q is None:
        check_param_pair(p, q, ("p", "q"), same_dtype=True)
    elif not callable(forward_q):
        raise ConfigError(f"forward_q must be a callable (params, x) -> outputs; received {type(forward_q).__name__}.")
    if not isinstance(x, Tensor) or x.ndim == 0 or x.shape[0] == 0 or x.is_meta:
        raise ConfigError(f"x must be a non-empty batch tensor with values; received "
                          f"{type(x).__name__ if not isinstance(x, Tensor) else tuple(x.shape)}.")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ConfigError(f"batch must be an integer >= 1; received {batch!r}.")
    num = den = 0.0
    for i in range(0, x.shape[0], batch):
        try:
            fp = forward(p, x[i:i + batch]).double()
            fq = (forward_q or forward)(q, x[i:i + batch]).double()
        except RuntimeError as exc:  # a batch the forward cannot take (shape, dtype, device)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise ShapeError(f"forward cannot run on x of shape {tuple(x.shape)} and dtype {x.dtype} with these "
                             f"parameters ({first}); pass a batch the model takes.") from None
        num += float(((fq - fp) ** 2).sum())
        den += float((fp**2).sum())
    return (num / max(den, 1e-300)) ** 0.5
