"""``paramsym group``: end-to-end through the real command line entry point."""

from __future__ import annotations

import json

from paramsym.cli import main


def test_group_text(capsys):
    assert main(["group", "D4", "--subgroups"]) == 0
    out = capsys.readouterr().out
    assert "order 8" in out and "10 subgroups in 8 conjugacy classes" in out
    assert "regular (dim 8) = A1 ⊕ A2 ⊕ B1 ⊕ B2 ⊕ 2E1" in out


def test_group_json_by_generators(capsys):
    assert main(["group", "perm:[[1,0,2],[1,2,0]]", "--rep", "perm", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["order"] == 6 and info["representation"]["decomposition"] == "A1 ⊕ E1"
    assert [r["type"] for r in info["real_irreps"]] == ["real", "real", "real"]
    assert main(["group", "C4", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["real_irreps"][2] == {"name": "E1", "dim": 2, "type": "complex", "fs_indicator": 0}


def test_group_errors_are_one_line(capsys):
    assert main(["group", "X7"]) == 2
    err = capsys.readouterr().err
    assert "GroupError" in err and "Accepted" in err and "Traceback" not in err
    assert main(["group", "perm:[[1,0],[1,2,0]]"]) == 2
    assert "same set" in capsys.readouterr().err
    assert main(["group", "D4", "--rep", "perm"]) == 2
    assert main(["group", "D4", "--rep", "copies:x"]) == 2
