"""Errors at the float64 rounding floor are documented as bounds (docs/results.md, attention.md,
groups.md), so a machine's last digits never change the documentation."""

from __future__ import annotations

import numpy as np
import pytest

from paramsym.claims import floor_bound


@pytest.mark.parametrize("n", [1, 2, 8, 128, 5000])
def test_bound_is_the_power_of_ten_above_n_eps(n: int) -> None:
    eps = np.finfo(np.float64).eps
    k = int(np.ceil(np.log10(n * eps)))  # independent: numpy's eps and log10
    bound = 10.0 ** k
    assert bound >= n * eps > bound / 10
    text = f"≤ 1e{k}"
    assert floor_bound(0.0, n) == text
    assert floor_bound(n * eps, n) == text
    assert floor_bound(bound, n) == text
    above = bound * 1.5
    assert floor_bound(above, n) == f"{above:.2g}"  # above the floor: the measured value, never hidden


def test_the_machines_that_differed_print_the_same() -> None:
    # D4's 16 copies (n = 128) measured 3.6e-15 / 2e-15 on one machine and 1.8e-14 / 4.6e-15 on another
    assert {floor_bound(x, 128) for x in (3.6e-15, 2e-15, 1.8e-14, 4.6e-15)} == {"≤ 1e-13"}
    assert {floor_bound(x, 8) for x in (6.7e-16, 8.9e-16, 3.4e-16, 6.9e-16)} == {"≤ 1e-14"}
