"""The one group / representation grammar (``FiniteGroup.parse``, ``Representation.parse``) and
the one memory budget (``MemoryBudget``), used by ``paramsym group`` and ``paramsym attention``.

References are independent: closed-form constructions (``dihedral``, ``regular``, ``copies``)
compared entry by entry, and integer arithmetic for byte sizes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from paramsym.cli import main
from paramsym.errors import (
    ConfigError,
    GroupError,
    InputFileError,
    MemoryBudgetError,
    RepresentationError,
    TooLargeError,
)
from paramsym.groups import reps
from paramsym.groups.finite import FiniteGroup, cyclic, dihedral, find_isomorphism, symmetric
from paramsym.groups.memory import DEFAULT_MAX_MEMORY, MemoryBudget, budget_bytes, parse_memory
from paramsym.groups.reps import Representation

ROT90 = [[0, -1], [1, 0]]
FLIP = [[1, 0], [0, -1]]


# ------------------------------------------------------------------------------ groups
def test_group_spec_forms_give_the_same_group(tmp_path):
    d4 = dihedral(4)
    (tmp_path / "perm.json").write_text(json.dumps({"permutations": [[1, 2, 3, 0], [0, 3, 2, 1]]}))
    (tmp_path / "mat.json").write_text(json.dumps({"matrices": [ROT90, FLIP]}))
    forms = ["D4", " d4 ", "perm:[[1,2,3,0],[0,3,2,1]]", f"mat:{json.dumps([ROT90, FLIP])}",
             str(tmp_path / "perm.json"), str(tmp_path / "mat.json")]
    for spec in forms:
        g = FiniteGroup.parse(spec)
        assert g.order == 8 and find_isomorphism(g, d4) is not None, spec
    assert FiniteGroup.parse("D4").same_as(d4) and FiniteGroup.parse(d4) is d4
    assert find_isomorphism(FiniteGroup.parse("Q8"), d4) is None  # the check can fail
    assert find_isomorphism(FiniteGroup.parse("C2xC3"), cyclic(6)) is not None
    assert FiniteGroup.parse("S3").same_as(symmetric(3))


@pytest.mark.parametrize("spec, closest", [
    ("Dihedral4", "D4"), ("cyclic6", "C6"), ("Q12", "Q8"), ("X9", "C9"), ("quaternion", "Q8"),
])
def test_unknown_group_names_suggest_the_closest(spec, closest):
    with pytest.raises(GroupError) as info:
        FiniteGroup.parse(spec)
    msg = str(info.value)
    suggestion = msg.split("did you mean ", 1)[1].split("?")[0]
    assert msg.startswith("--group: ") and closest in suggestion.split(" or ") and "\n" not in msg


def test_malformed_group_specs_are_named(tmp_path):
    with pytest.raises(GroupError, match="after 'perm:' give a JSON list"):
        FiniteGroup.parse("perm:[[1,0")
    with pytest.raises(GroupError, match="non-empty JSON list"):
        FiniteGroup.parse("perm:[]")
    with pytest.raises(GroupError, match="square matrix"):
        FiniteGroup.parse("mat:[[1,2,3]]")
    with pytest.raises(GroupError, match=r"--group 'mat:\[\[\[2,0\],\[0,1\]\]\]': generator 0 has an eigenvalue of modulus 2"):
        FiniteGroup.parse("mat:[[[2,0],[0,1]]]")  # infinite order: refused before enumerating
    with pytest.raises(InputFileError, match="does not exist"):
        FiniteGroup.parse(str(tmp_path / "none.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputFileError, match="cannot read group file"):
        FiniteGroup.parse(str(tmp_path / "bad.json"))
    (tmp_path / "keys.json").write_text('{"gens": []}')
    with pytest.raises(GroupError, match=r"'permutations' or 'matrices'.*\['gens'\]"):
        FiniteGroup.parse(str(tmp_path / "keys.json"))
    with pytest.raises(GroupError, match="received 4"):
        FiniteGroup.parse(4)


# ------------------------------------------------------------------------------ representations
def test_rep_specs_equal_the_constructions(tmp_path):
    g = dihedral(4)
    reg = reps.regular(g)
    np.testing.assert_array_equal(Representation.parse(g, "regular").matrices, reg.matrices)
    np.testing.assert_array_equal(Representation.parse("D4", "copies:3").matrices, reps.copies(reg, 3).matrices)
    # R^2 ⊗ copies:3 = 6 copies of the regular representation
    np.testing.assert_array_equal(Representation.parse(g, "copies:3", copies=2).matrices, reps.copies(reg, 6).matrices)
    assert Representation.parse(g, "trivial").dim == 1
    s3 = FiniteGroup.parse("perm:[[1,2,0],[1,0,2]]")
    perm = Representation.parse(s3, "perm")
    assert perm.dim == 3 and np.allclose(perm.matrices.sum(axis=1), 1)
    # the same representation from a file of matrices, of generators, and as safetensors
    (tmp_path / "m.json").write_text(json.dumps({"matrices": reg.matrices.tolist()}))
    (tmp_path / "g.json").write_text(json.dumps({"generators": [reg(s).tolist() for s in g.generators]}))
    save_file({"generators": np.stack([reg(s) for s in g.generators])}, str(tmp_path / "g.safetensors"))
    for f in ("m.json", "g.json", "g.safetensors"):
        np.testing.assert_allclose(Representation.parse(g, str(tmp_path / f)).matrices, reg.matrices, atol=0)


@pytest.mark.parametrize("spec, fragment", [
    ("reguler", "did you mean regular"), ("trivail", "did you mean trivial"), ("copy:3", "did you mean copies:C"),
    ("copies:0", "copies:C with an integer C >= 1"), ("copies:x", "copies:C with an integer C >= 1"),
    ("perm", "not given by permutations"),
])
def test_bad_rep_specs_are_named(spec, fragment):
    with pytest.raises(RepresentationError, match=fragment):
        Representation.parse(dihedral(4), spec)


def test_bad_rep_files_and_copies(tmp_path):
    g = dihedral(4)
    with pytest.raises(InputFileError, match="does not exist"):
        Representation.parse(g, str(tmp_path / "r.json"))
    (tmp_path / "ragged.json").write_text('{"matrices": [[1, 2], [3]]}')
    with pytest.raises(InputFileError, match="cannot read representation file"):
        Representation.parse(g, str(tmp_path / "ragged.json"))
    (tmp_path / "shape.json").write_text(json.dumps({"matrices": np.eye(2)[None].repeat(3, 0).tolist()}))
    with pytest.raises(RepresentationError, match=r"shape \(8, d, d\)"):
        Representation.parse(g, str(tmp_path / "shape.json"))
    # orthogonal but not a homomorphism: a rotation by 120° cannot be the image of D4's order-4 generator
    c, s = np.cos(2 * np.pi / 3), np.sin(2 * np.pi / 3)
    (tmp_path / "nothom.json").write_text(json.dumps({"generators": [[[c, -s], [s, c]], FLIP]}))
    with pytest.raises(RepresentationError):
        Representation.parse(g, str(tmp_path / "nothom.json"))
    for bad in (0, -1, True, 1.5):
        with pytest.raises(RepresentationError, match="--copies must be an integer >= 1"):
            Representation.parse(g, "regular", copies=bad)


def test_rep_budget_is_checked_before_allocating():
    # S6 regular: 720 matrices 720x720 float64 = 8 * 720**3 bytes, over 1 GiB
    need = 8 * 720**3
    with pytest.raises(TooLargeError, match=f"{need} bytes"):
        Representation.parse("S6", "regular", max_memory="1GiB")
    # copies are included in the estimate up front: D4 regular x 3 needs 8 * 8 * 24**2 bytes
    need = 8 * 8 * 24**2
    Representation.parse("D4", "regular", copies=3, max_memory=need)
    with pytest.raises(TooLargeError, match=f"{need} bytes"):
        Representation.parse("D4", "regular", copies=3, max_memory=need - 1)
    with pytest.raises(MemoryBudgetError, match="-1GiB"):
        Representation.parse("D4", "regular", max_memory="-1GiB")


# ------------------------------------------------------------------------------ memory budget
def test_memory_budget_parses_sizes_to_bytes():
    assert MemoryBudget("512MiB") == 512 * 2**20 and MemoryBudget("2GiB") == 2 * 2**30 == DEFAULT_MAX_MEMORY
    assert MemoryBudget("2 gib") == 2 * 2**30 and MemoryBudget("500MB") == 500 * 10**6
    assert MemoryBudget("8G") == 8 * 10**9 and MemoryBudget("1KiB") == 1024 and MemoryBudget("0.5KiB") == 512
    assert MemoryBudget(4096) == 4096 and MemoryBudget("4096") == 4096 and MemoryBudget("1e9") == 10**9
    assert MemoryBudget(np.int64(4096)) == 4096 and MemoryBudget(MemoryBudget("1MiB")) == 2**20
    assert isinstance(parse_memory("1MiB"), MemoryBudget) and json.dumps(MemoryBudget("1KiB")) == "1024"
    assert budget_bytes(None) == DEFAULT_MAX_MEMORY and budget_bytes("3KiB") == 3072


@pytest.mark.parametrize("bad", ["-1GiB", "-1", "0", "0GiB", "nan", "NaN GiB", "inf", "", "GiB", "2 parsecs",
                                 -5, 0, 0.5, float("nan"), float("inf"), True, None, [1]])
def test_memory_budget_refuses_non_sizes(bad):
    with pytest.raises(MemoryBudgetError) as info:
        MemoryBudget(bad, "--max-memory")
    msg = str(info.value)
    assert msg.startswith("--max-memory: ") and repr(bad) in msg and "\n" not in msg
    assert isinstance(info.value, ConfigError)


# ------------------------------------------------------------------------------ every command
def test_group_and_attention_commands_share_the_grammar(tmp_path, capsys):
    """Forms only one of the old parsers knew now work in both commands."""
    (tmp_path / "d4.json").write_text(json.dumps({"permutations": [[1, 2, 3, 0], [0, 3, 2, 1]]}))
    mat = f"mat:{json.dumps([ROT90, FLIP])}"
    reg = reps.regular(dihedral(4))
    (tmp_path / "rep.json").write_text(json.dumps({"generators": [reg(s).tolist() for s in dihedral(4).generators]}))
    for group in (str(tmp_path / "d4.json"), mat):
        assert main(["group", group, "--json", "--quiet"]) == 0
        assert json.loads(capsys.readouterr().out)["order"] == 8
        assert main(["attention", "count", "--group", group, "--heads", "2", "--json", "--quiet"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert (got["dim_V"], got["c"]) == (8, 8)  # c_{D4,4}(R[D4]) = 8, as for --group D4
    assert main(["group", "D4", "--rep", str(tmp_path / "rep.json"), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["representation"]["decomposition"] == "A1 ⊕ A2 ⊕ B1 ⊕ B2 ⊕ 2E1"
    for argv in (["group", "D4", "--rep", "reguler"], ["attention", "count", "--group", "D4", "--heads", "2",
                                                       "--rep", "reguler"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "RepresentationError" in err and "did you mean regular" in err and len(err.splitlines()) == 1
    for argv in (["group", "D4", "--max-memory=-1GiB"],
                 ["attention", "count", "--group", "D4", "--heads", "2", "--max-memory=-1GiB"],
                 ["affine", "--preset", "relu2881", "--max-memory=-1GiB"],
                 ["compensate", "--model", "gpt2-tiny", "--layer", "0", "--unit", "0", "--max-memory=-1GiB"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert "MemoryBudgetError" in err and "'-1GiB'" in err and len(err.splitlines()) == 1, (argv, err)
