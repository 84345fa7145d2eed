"""The memory budget: estimates are checked before dense representations are allocated."""

from __future__ import annotations

import numpy as np
import pytest

from paramsym.errors import ConfigError, TooLargeError
from paramsym.groups.finite import dihedral, symmetric
from paramsym.groups.memory import DEFAULT_MAX_MEMORY, check_memory, format_bytes, parse_memory
from paramsym.groups.reps import copies, regular, tensor, trivial


def test_regular_s7_is_refused_with_the_estimate():
    g = symmetric(7)
    with pytest.raises(TooLargeError) as info:
        regular(g)
    msg = str(info.value)
    # 5040 matrices of 5040 x 5040 float64 = 8 * 5040**3 bytes
    assert "954 GiB" in msg and str(8 * 5040**3) in msg and "--max-memory" in msg and "2 GiB" in msg


def test_budget_is_a_keyword_and_exact_at_the_boundary():
    g = dihedral(4)  # regular: 8 * 8**3 = 4096 bytes
    assert regular(g, max_memory=4096).dim == 8
    with pytest.raises(TooLargeError, match="4 KiB"):
        regular(g, max_memory=4095)
    rep = regular(g)
    with pytest.raises(TooLargeError, match="copies"):
        copies(rep, 10_000)  # 8 * 8 * 80000**2 bytes
    with pytest.raises(TooLargeError):
        tensor(rep, rep, max_memory=1000)
    with pytest.raises(TooLargeError):
        trivial(g, 100_000)
    np.testing.assert_array_equal(copies(rep, 2, max_memory=8 * 8 * 16 * 16).matrices[3, 8:, 8:], rep.matrices[3])


def test_parse_and_format():
    assert parse_memory("2GiB") == 2 * 2**30 == DEFAULT_MAX_MEMORY
    assert parse_memory("500MB") == 500 * 10**6 and parse_memory("8g") == 8 * 10**9
    assert parse_memory("1e9") == 10**9 and parse_memory(4096) == 4096
    for bad in ["", "-1GiB", "0", "2 parsecs", "nan", "GiB"]:
        with pytest.raises(ConfigError, match="max-memory"):
            parse_memory(bad)
    assert format_bytes(8 * 5040**3) == "954 GiB" and format_bytes(512) == "512 B"
    check_memory(10, "x", max_memory=10)
    with pytest.raises(TooLargeError, match="what to do|raise the budget"):
        check_memory(11, "x", max_memory=10)
