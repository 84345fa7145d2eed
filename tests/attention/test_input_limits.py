"""Inputs that used to hang or crash: huge symmetric groups and huge ranges of copies."""

import pytest

from paramsym.attention.components import MAX_RANGE, parse_range
from paramsym.cli import main
from paramsym.errors import ShapeError, TooLargeError
from paramsym.groups.finite import alternating, symmetric


@pytest.mark.parametrize("build, n", [(symmetric, 100_000), (alternating, 10**9), (symmetric, 8)])
def test_huge_symmetric_groups_are_refused_without_computing_n_factorial(build, n):
    with pytest.raises(TooLargeError, match=f"{n}!"):
        build(n)


def test_range_is_capped_with_a_named_error():
    assert parse_range("1..3,7") == [1, 2, 3, 7]
    assert len(parse_range(f"1..{MAX_RANGE}")) == MAX_RANGE
    with pytest.raises(ShapeError, match="at most"):
        parse_range(f"1..{MAX_RANGE + 1}")


def test_cli_one_line(capsys):
    assert main(["group", "S100000"]) == 2
    assert main(["attention", "table", "--group", "D4", "--copies", "1..100000", "--heads", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "TooLargeError" in err[0] and "at most" in err[1]
