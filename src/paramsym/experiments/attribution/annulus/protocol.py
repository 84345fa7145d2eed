"""The annulus network as the paper's authors built it, and any user's trained annulus weights.

**The paper's protocol** (``protocol="paper"``; read from the authors' public scripts, facts
only): data from ``numpy.random.default_rng(data_seed = 3)`` in this draw order — inner angles
``2π·U`` (100), inner radii ``√U`` (100), outer angles ``arc·(U − ½)`` (100), outer radii
``U[2.3, 3.0]`` (100) — cast to float32; labels +1 / −1 (BCE target ``y > 0``). The network is
``nn.Sequential(Linear(2,96), GELU, Linear(96,96), GELU, Linear(96,96), GELU, Linear(96,1))`` in
float32, initialised by PyTorch's ``nn.Linear`` default (Kaiming-uniform weights, ``a = √5``,
then ``U(±1/√fan_in)`` biases, layer by layer) from the global generator seeded 42 by the
authors' script — reproduced here bit for bit from an explicit
``torch.Generator().manual_seed(seed)`` (same Mersenne-Twister stream, same draws). Training:
full-batch Adam (lr 3e-3, 200 epochs) on ``BCEWithLogitsLoss`` in float32. The trained network
is then analysed in float64. Whether float32 training reproduces the authors' weights bit for
bit depends on the BLAS kernels and device they ran on (their scripts pick CUDA/MPS when
available); the run records the BCE and accuracy to compare.

**User weights** (:func:`load_mlp_state`): a safetensors state dict of a 2→96→96→96→1 MLP
(or the configured widths) saved from paramsym (``fc1.weight`` …), from an equivalent
``nn.Sequential`` (``0.weight``, ``2.weight``, … — the activations take the odd indices), or
from a module wrapping one (``net.0.weight``). Named errors: :class:`~paramsym.errors.ShapeError`
for a different architecture, :class:`~paramsym.errors.ParameterNameError` for missing or
unexpected tensors, :class:`~paramsym.errors.NonFiniteError` for NaN/inf values,
:class:`~paramsym.errors.RunFileError` for an unreadable file. Probes (``--probes``): a
safetensors file with ``probes [N, 2]`` and optionally the task data ``x [n, 2]``, ``y [n]``
(a run's ``data.safetensors`` qualifies).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from ....errors import NonFiniteError, ParameterNameError, ShapeError
from ....models.mlp import mlp
from ....runs.rundir import load_tensors

__all__ = ["load_mlp_state", "load_probes", "paper_data", "paper_init"]

_KEY = re.compile(r"^(?P<prefix>(?:.*\.)?)(?P<fc>fc)?(?P<idx>\d+)\.(?P<kind>weight|bias)$")


def paper_data(n_inner: int, n_outer: int, arc: float, r_min: float, r_max: float,
               data_seed: int = 3) -> tuple[Tensor, Tensor]:
    """The authors' point cloud: ``(x [n, 2] float32, y [n] ∈ {1, 0})`` (draw order in the module doc)."""
    rng = np.random.default_rng(data_seed)
    theta_in = 2 * np.pi * rng.random(n_inner)
    rad_in = np.sqrt(rng.random(n_inner))
    theta_out = arc * (rng.random(n_outer) - 0.5)
    rad_out = rng.uniform(r_min, r_max, n_outer)
    x = np.vstack([np.c_[rad_in * np.cos(theta_in), rad_in * np.sin(theta_in)],
                   np.c_[rad_out * np.cos(theta_out), rad_out * np.sin(theta_out)]]).astype(np.float32)
    y = np.r_[np.ones(n_inner), np.zeros(n_outer)].astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(y)


def paper_init(widths: Sequence[int], activation: str, seed: int) -> nn.Sequential:
    """A float32 paramsym MLP holding exactly the draws of ``nn.Linear(...)`` after seeding the global generator with ``seed``."""
    model = mlp(widths, activation, dtype=torch.float32, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in (m for m in model if isinstance(m, nn.Linear)):
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=g)
            bound = 1.0 / math.sqrt(layer.in_features)
            nn.init.uniform_(layer.bias, -bound, bound, generator=g)
    return model


def _arch(widths: Sequence[int]) -> str:
    return "→".join(str(w) for w in widths)


def load_mlp_state(path: str | Path, widths: Sequence[int], activation: str) -> nn.Sequential:
    """A float64 paramsym MLP (``fc1 …``) holding the weights of a safetensors state dict.

    Raises:
        RunFileError: unreadable or not a safetensors file.
        ParameterNameError: no linear-layer tensors, several module prefixes, a weight without its
            bias (or the reverse), or tensors that are not ``<prefix><i>.weight|bias``.
        ShapeError: a different number of layers or different layer shapes than ``widths``.
        NonFiniteError: NaN or inf in any tensor.
    """
    state = load_tensors(path, user_file="--weights: a safetensors state dict of the preset's MLP")
    ints = sorted(k for k, v in state.items() if not v.is_floating_point())
    if ints:
        dtypes = sorted({str(state[k].dtype).removeprefix("torch.") for k in ints})
        raise ShapeError(f"--weights {str(path)!r}: tensors {ints[:6]} are {'/'.join(dtypes)}, not floating point; expected "
                         "the trained float weights (float32 or float64). Save the model's float state dict.")
    expected = [(f"fc{i + 1}", (widths[i + 1], widths[i])) for i in range(len(widths) - 1)]
    want = ", ".join(f"{n}.weight {list(s)} + {n}.bias [{s[0]}]" for n, s in expected)
    hint = (f"expected the state dict of an MLP {_arch(widths)} ({activation}): {want} — as saved by "
            "paramsym or by an equivalent nn.Sequential ('0.weight', '2.weight', …, optionally under a "
            "module prefix such as 'net.')")
    layers: dict[int, dict[str, Tensor]] = {}
    prefixes, stray = set(), []
    for key, value in state.items():
        m = _KEY.match(key)
        if m is None:
            stray.append(key)
            continue
        prefixes.add(m["prefix"] + (m["fc"] or ""))
        layers.setdefault(int(m["idx"]), {})[m["kind"]] = value
    if stray or not layers:
        raise ParameterNameError(f"{path}: unexpected tensors {sorted(stray)[:6]}; {hint}." if stray
                                 else f"{path}: no linear-layer tensors found; {hint}.")
    if len(prefixes) > 1:
        raise ParameterNameError(f"{path}: tensors under several prefixes {sorted(prefixes)}; {hint}.")
    for idx in sorted(layers):
        missing = {"weight", "bias"} - set(layers[idx])
        if missing:
            pre = next(iter(prefixes))
            raise ParameterNameError(f"{path}: missing tensor(s) {[f'{pre}{idx}.{k}' for k in sorted(missing)]}; {hint}.")
    order = sorted(layers)
    if len(order) != len(expected):
        raise ShapeError(f"{path}: wrong architecture — {len(order)} linear layers, expected {len(expected)} "
                         f"({_arch(widths)}); {hint}.")
    found = [tuple(layers[i]["weight"].shape) for i in order]
    if any(f != s or tuple(layers[i]["bias"].shape) != (s[0],) for f, (_, s), i in zip(found, expected, order)):
        got = " ".join(f"{list(f)}" for f in found)
        raise ShapeError(f"{path}: wrong architecture — layer weights {got}; {hint}.")
    for i in order:
        for kind, v in layers[i].items():
            if not bool(torch.isfinite(v).all()):
                raise NonFiniteError(f"{path}: tensor {next(iter(prefixes))}{i}.{kind} holds "
                                     f"{int((~torch.isfinite(v)).sum())} non-finite value(s); expected finite weights.")
    model = mlp(widths, activation, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for (name, _), i in zip(expected, order):
            getattr(model, name).weight.copy_(layers[i]["weight"].to(torch.float64))
            getattr(model, name).bias.copy_(layers[i]["bias"].to(torch.float64))
    return model


def load_probes(path: str | Path, input_dim: int = 2) -> dict[str, Tensor]:
    """``{"probes": [N, d], optionally "x": [n, d], "y": [n]}`` (float64) from a safetensors file.

    Raises:
        ParameterNameError: no ``probes`` tensor. ShapeError: wrong shapes. NonFiniteError: NaN/inf.
    """
    data = load_tensors(path)
    if "probes" not in data:
        raise ParameterNameError(f"{path}: no tensor 'probes'; expected 'probes' [N, {input_dim}] and optionally "
                                 f"the task data 'x' [n, {input_dim}], 'y' [n]; found {sorted(data)}.")
    out = {}
    for key, shape in (("probes", 2), ("x", 2), ("y", 1)):
        if key not in data:
            continue
        v = data[key].to(torch.float64)
        if v.dim() != shape or (shape == 2 and v.shape[1] != input_dim):
            raise ShapeError(f"{path}: tensor {key!r} has shape {list(v.shape)}; expected "
                             + (f"[N, {input_dim}]." if shape == 2 else "[n]."))
        if not bool(torch.isfinite(v).all()):
            raise NonFiniteError(f"{path}: tensor {key!r} holds non-finite values; expected finite coordinates.")
        out[key] = v
    if ("x" in out) != ("y" in out) or ("x" in out and out["x"].shape[0] != out["y"].shape[0]):
        raise ShapeError(f"{path}: the task data needs both 'x' [n, {input_dim}] and 'y' [n] of the same n.")
    return out
