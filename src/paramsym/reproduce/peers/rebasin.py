"""paramsym's alignment beside the ``rebasin`` package (0.0.47) on the ``digits-mlp`` preset.

For each width the two cached ``digits-mlp`` models (seeds 0 and 1; trained on first use) are
aligned by

* ``rebasin.PermutationCoordinateDescent(model_a, model_b, x).rebasin()`` (permutations only; its
  matching cost differs from the paper's weight matching — compare barriers, not costs),
* ``paramsym`` permutations only (Git Re-Basin weight matching, :func:`paramsym.alignment.align`),
* ``paramsym`` permutations + positive rescaling,

and every aligned B is evaluated the same way: float64, a ``points``-point linear path, train and
test loss barriers (:meth:`paramsym.alignment.path.PathCurve.barriers`) and the relative output
change of the aligned B over all inputs (:func:`paramsym.alignment.path.relative_output_error`).
Needs the ``compare`` extra (``pip install 'paramsym[compare]'``).

Run: ``paramsym reproduce align-rebasin`` (rows in docs/reproductions.md, table in
docs/alignment.md) or ``PYTHONPATH=src python benchmarks/rebasin_compare.py [--json]``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import torch

from ...errors import InputFileError

__all__ = ["compare"]


def compare(widths: Sequence[int] = (32, 16), *, cache_dir: str | os.PathLike | None = None,
            points: int = 25) -> dict[str, Any]:
    """``{str(width): {method: {"train_barrier", "test_barrier", "function_error", "seconds"}}}``.

    Methods: ``before``, ``rebasin``, ``permutation``, ``permutation+rescaling``.

    Raises:
        InputFileError: the ``rebasin`` package is not installed (says how to install it).
    """
    try:
        from rebasin import PermutationCoordinateDescent
    except ImportError:
        raise InputFileError("the rebasin comparison needs the package rebasin 0.0.47 (and its imports torchview, "
                             "graphviz); install it with pip install 'paramsym[compare]'.") from None
    from ...alignment.align import align
    from ...alignment.path import path_curve, relative_output_error
    from ...kinds.align_presets import load_preset
    from ...models.mlp import mlp

    out: dict[str, Any] = {}
    for width in widths:
        arch, a, b, data, _ = load_preset("digits-mlp", cache_dir=cache_dir, width=int(width))
        ours = align(arch, a, b, data, points=points, generator=torch.Generator().manual_seed(0))
        model_a = mlp(arch.info["widths"], "relu", dtype=torch.float32)
        model_b = mlp(arch.info["widths"], "relu", dtype=torch.float32)
        model_a.load_state_dict(a)
        model_b.load_state_dict(b)
        t0 = time.perf_counter()
        # the package draws its coordinate-descent order from torch's global generator: seeded here
        # (and restored after), so its number no longer depends on what ran before in the process
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            PermutationCoordinateDescent(model_a, model_b, data.x_train[:64]).rebasin()
        t_rebasin = time.perf_counter() - t0
        theirs = {k: v.detach().double() for k, v in model_b.named_parameters()}
        A = {k: v.double() for k, v in a.items()}
        d64 = type(data)(data.x_train.double(), data.y_train, data.x_test.double(), data.y_test)
        curve = path_curve(arch.forward, A, theirs, d64, points).barriers()
        x_all = torch.cat([d64.x_train, d64.x_test])
        s = ours.summary()
        out[str(width)] = {
            "before": {"train_barrier": s["barrier_before_train"], "test_barrier": s["barrier_before"],
                       "function_error": 0.0, "seconds": 0.0},
            "rebasin": {"train_barrier": curve["train_loss"], "test_barrier": curve["test_loss"],
                        "function_error": relative_output_error(arch.forward, ours.stages["before"], theirs, x_all),
                        "seconds": t_rebasin},
            "permutation": {"train_barrier": s["barrier_permutation_train"], "test_barrier": s["barrier_permutation"],
                            "function_error": s["function_error_permutation"], "seconds": s["seconds"]["permutation"]},
            "permutation+rescaling": {"train_barrier": s["barrier_full_train"], "test_barrier": s["barrier_full"],
                                      "function_error": s["function_error"], "seconds": s["seconds"]["full"]},
        }
    return out
