"""One composition error (issue 33): ``paramsym.actions.composition.composition_errors`` and its p95 are what
Table 1's verdict and the transformer FFN-unit protocol (``paramsym compensate --learned --json``, the
``transformer`` reproduction run) both compute; checked against a per-sample float32/float64 reference loop."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import paramsym.actions.ffn_unit as ffn_unit
import paramsym.verdict as verdict
from paramsym.actions import composition
from paramsym.cli import main


class _Linear:
    """a(g, θ) = g θ on R^s (an exact group action: the composition error is 0 in float64)."""

    def act_many(self, g, theta):
        return (g @ theta[..., None])[..., 0]


def _elements(n=16, s=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    A = 0.3 * torch.randn(2, n, s, s, generator=gen, dtype=torch.float64)
    return torch.linalg.matrix_exp(A[0]), torch.linalg.matrix_exp(A[1]), torch.randn(n, s, generator=gen,
                                                                                     dtype=torch.float64)


def test_both_call_sites_use_the_one_definition():
    assert verdict.composition_errors is composition.composition_errors
    assert ffn_unit.composition_errors is composition.composition_errors
    assert verdict.p95 is composition.p95 and ffn_unit.p95 is composition.p95
    from paramsym.experiments.discovery.transformer import run as transformer_run

    assert transformer_run.evaluate_action is ffn_unit.evaluate_action  # the reproduction's call site


def test_stored_composition_matches_a_per_sample_reference():
    g1, g2, theta = _elements()
    act = _Linear()
    assert float(composition.composition_errors(act, theta, g1, g2).max()) <= 1e-13  # exact action, float64

    def store(x):
        return x.to(torch.float32).double()

    errs = composition.composition_errors(act, theta, g1, g2, store=store)
    ref = []
    for i in range(theta.shape[0]):  # numpy, one sample at a time, rounding to float32 after every action
        G1, G2, t = g1[i].numpy(), g2[i].numpy(), theta[i].numpy()
        t1 = (G1 @ t).astype(np.float32).astype(np.float64)
        t21 = (G2 @ t1).astype(np.float32).astype(np.float64)
        td = ((G2 @ G1) @ t).astype(np.float32).astype(np.float64)
        ref.append(np.linalg.norm(td - t21) / (np.linalg.norm(t1 - t) + np.linalg.norm(t21 - t1)))
    ref = np.array(ref)
    assert errs.max() > 0  # float32 storage makes the exact action compose only to rounding
    np.testing.assert_allclose(errs.numpy(), ref, rtol=1e-10)
    assert math.isclose(composition.p95(errs), float(np.percentile(ref, 95)), rel_tol=1e-10)
    assert math.isclose(composition.median(errs), float(np.median(ref)), rel_tol=1e-10)


def test_zero_motion_gives_zero_and_a_lone_error_gives_inf():
    num, den = torch.tensor([0.0, 1.0, 2.0]), torch.tensor([0.0, 0.0, 4.0])
    assert composition.safe_ratio(num, den).tolist() == [0.0, float("inf"), 0.5]


def test_compensate_learned_json_prints_the_shared_p95(tmp_path, capsys, monkeypatch):
    """``paramsym compensate --learned --json``: its ``composition_error_p95`` is the p95 of what the one
    definition returned during the run (a spy on the function ``evaluate_action`` calls)."""
    pytest.importorskip("transformers")
    seen = []

    def spy(*args, **kwargs):
        out = composition.composition_errors(*args, **kwargs)
        seen.append(out.clone())
        return out

    monkeypatch.setattr(ffn_unit, "composition_errors", spy)
    assert main(["compensate", "--model", "llama-tiny", "--layer", "1", "--unit", "3", "--tokens", "8", "--learned",
                 "--objective", "finite", "--steps", "3", "--json", "--out", str(tmp_path / "run")]) == 0
    res = json.loads(capsys.readouterr().out)
    assert len(seen) == 1 and seen[0].shape == (32,)
    assert res["composition_error_p95"] == composition.p95(seen[0])
    assert math.isclose(res["composition_error_p95"], float(np.percentile(seen[0].numpy(), 95)), rel_tol=1e-12)
