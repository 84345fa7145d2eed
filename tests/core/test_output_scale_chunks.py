"""The one s_F (``verdict.output_scale``) over chunks of rows equals the dense formula, also
where a difference of squares would cancel (outputs far from zero with a tiny spread)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from paramsym.discovery.problems import build_problem
from paramsym.errors import DegenerateTargetError, NonFiniteError
from paramsym.verdict import output_scale

DT = torch.float64


@pytest.mark.parametrize("offset", [0.0, 1e8])
def test_chunks_merge_to_the_dense_value(offset):
    gen = torch.Generator().manual_seed(0)
    F = offset + torch.randn(37, 4, generator=gen, dtype=DT) * torch.tensor([1.0, 2.0, 0.5, 3.0], dtype=DT)
    x = F.numpy() - offset  # the reference: centred in float64 after removing the offset exactly
    ref = math.sqrt(np.mean(np.sum((x - x.mean(0)) ** 2, axis=1)))
    assert output_scale(F) == pytest.approx(ref, rel=1e-8 if offset else 1e-13)
    for sizes in ([37], [1] * 37, [5, 11, 21], [36, 1]):
        chunks = iter(torch.split(F, sizes))
        assert output_scale(chunks) == pytest.approx(ref, rel=1e-8 if offset else 1e-13), sizes
    # a difference of squares loses everything here: E‖F‖² − ‖E F‖² at 1e16 scale
    if offset:
        naive = float(F.pow(2).sum(1).mean() - F.mean(0).pow(2).sum())
        assert abs(math.sqrt(max(naive, 0.0)) - ref) > 1e-3 * ref


def test_chunked_errors_are_the_dense_ones():
    with pytest.raises(DegenerateTargetError, match="over 10 points"):
        output_scale(iter(torch.split(torch.ones(10, 2, dtype=DT), 3)))
    with pytest.raises(NonFiniteError):
        output_scale(iter([torch.ones(2, 1, dtype=DT), torch.tensor([[float("nan")]], dtype=DT)]))


def test_problem_scales_in_chunks_equal_the_dense_scales():
    """``DiscoveryProblem.scales`` within a budget of a few points gives the dense s_F and s_θ."""
    problem = build_problem("relu242")
    dense = problem.scales(0.3, torch.Generator().manual_seed(4), n=64)
    per_point, fixed = problem.scale_memory(64)
    small = problem.scales(0.3, torch.Generator().manual_seed(4), n=64, memory_bytes=fixed + 5 * per_point)
    assert small.s_F == pytest.approx(dense.s_F, rel=1e-12) and small.s_theta == pytest.approx(dense.s_theta, rel=1e-12)
    pts = problem.sample(64, torch.Generator().manual_seed(4), DT)
    assert dense.s_F == output_scale(torch.func.vmap(problem.target.to(DT))(pts))
