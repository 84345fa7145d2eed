"""`paramsym attention ...` end to end: real files, real parser, JSON outputs."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from paramsym.attention import report
from paramsym.cli import main
from paramsym.runs.rundir import RunDir


def run_json(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main(["attention", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_count_d4_c96(capsys):
    out = run_json(capsys, "count", "--group", "D4", "--copies", "96", "--heads", "8")
    assert out["c"] == 2_000_425 and out["closed_form"] == 2_000_425 and out["d"] == 96
    assert math.isclose(out["bound"], 1.631e96, rel_tol=1e-3)
    assert Fraction(out["bound_exact"]) == Fraction(2_000_425**16, math.factorial(8))
    assert out["bound_sci"] == "1.631e96"
    capsys.readouterr()
    assert main(["attention", "count", "--group", "D4", "--copies", "96", "--heads", "8"]) == 0
    text = capsys.readouterr().out
    assert "2000425" in text and "1.631e96" in text


def test_count_errors(capsys):
    assert main(["attention", "count", "--group", "D4", "--copies", "3", "--heads", "5"]) == 2
    assert "ShapeError" in capsys.readouterr().err
    assert main(["attention", "count", "--group", "S9", "--heads", "2"]) == 2
    assert "TooLargeError" in capsys.readouterr().err
    assert main(["attention", "count", "--group", "X7", "--heads", "2"]) == 2
    assert "GroupError" in capsys.readouterr().err


def test_clusterings_by_name_and_by_generators(capsys):
    out = run_json(capsys, "clusterings", "--group", "C6", "--heads", "3")
    assert out["count"] == 33 and len(out["clusterings"]) == 33
    # C6 given by a generating permutation (a 6-cycle) is the same group
    out = run_json(capsys, "clusterings", "--group", "perm:[[1,2,3,4,5,0]]", "--heads", "3")
    assert out["count"] == 33
    out = run_json(capsys, "clusterings", "--group", "C6", "--heads", "3", "--up-to", "relabelling")
    assert out["count"] == 14 and "clusterings" not in out


def test_table_and_run_directory(capsys, tmp_path):
    rows = run_json(capsys, "table", "--group", "D4", "--copies", "1..6")["rows"]
    assert [r["c"] for r in rows] == [4, 11, 24, 46, 80, 130]
    capsys.readouterr()
    assert main(["attention", "table", "--group", "D4", "--copies", "96", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["c"] == 2_000_425
    assert main(["attention", "table", "--group", "D4", "--copies", "1..4", "--out", str(tmp_path / "run")]) == 0
    md = capsys.readouterr().out
    assert "| 4 | 32 | 4 | 46 | 46 |" in md
    run = RunDir.open_existing(tmp_path / "run")
    assert run.read_json("config.json")["kind"] == "attention"
    assert main(["report", str(tmp_path / "run")]) == 0  # the lead's dispatcher regenerates it
    assert (tmp_path / "run" / "figures" / "components.png").exists()
    assert run.has("env.json") and run.has("report.md")
    assert report.render(run) == (tmp_path / "run" / "report.md").read_text()


def _build(tmp_path, capsys, index: int, perturb: float = 0.0) -> str:
    run = tmp_path / f"layer{index}_{perturb}"
    argv = ["attention", "build", "--group", "D4", "--heads", "3", "--index", str(index), "--out", str(run)]
    if perturb:
        argv += ["--perturb", str(perturb)]
    assert main(argv) == 0
    capsys.readouterr()
    return str(run / "layer.safetensors")


def test_build_then_classify_round_trip(capsys, tmp_path):
    for index in (0, 17, 48):
        path = _build(tmp_path, capsys, index)
        out = run_json(capsys, "classify", path, "--group", "D4")
        assert out["equivariant"] and out["numerical_check"]["max_relative_error"] < 1e-10
        clusters = out["recovery"]["clustering"]
        listing = run_json(capsys, "clusterings", "--group", "D4", "--heads", "3")["clusterings"]
        assert clusters == listing[index]
    bad = _build(tmp_path, capsys, 48, perturb=1e-3)
    out = run_json(capsys, "classify", bad, "--group", "D4")
    assert not out["equivariant"] and out["recovery"]["condition"] in {"qk_orbit", "ov_equivariance"}
    assert out["numerical_check"]["max_relative_error"] > 1e-7
    # plain text output names the condition
    assert main(["attention", "classify", bad, "--group", "D4"]) == 0
    assert "NOT equivariant" in capsys.readouterr().out


def _swap_equivariant_mha(E: int = 4, H: int = 2) -> torch.nn.MultiheadAttention:
    """An nn.MultiheadAttention commuting with the swap P of the two halves of R^4 (= head blocks):
    block matrices [[A, B], [B, A]] commute with P, so M_2 = P M_1 P^T and R_2 = P R_1 P^T."""
    g = torch.Generator().manual_seed(0)

    def block() -> torch.Tensor:
        A, B = torch.randn(2, E // 2, E // 2, generator=g, dtype=torch.float64)
        return torch.cat([torch.cat([A, B], 1), torch.cat([B, A], 1)], 0)

    mha = torch.nn.MultiheadAttention(E, H).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([block(), block(), block()]))
        mha.out_proj.weight.copy_(block())
        half = torch.randn(E // 2, generator=g, dtype=torch.float64)
        mha.in_proj_bias.zero_()
        mha.in_proj_bias[E : 2 * E] = torch.randn(E, generator=g)  # key bias: dropped exactly
        mha.in_proj_bias[2 * E :] = torch.cat([half, half])  # value bias: P-fixed
        mha.out_proj.bias.copy_(torch.cat([half, half]) * 0.5)
    return mha


def test_classify_multihead_attention_file(capsys, tmp_path):
    mha = _swap_equivariant_mha()
    path = tmp_path / "mha.safetensors"
    save_file({k: v.contiguous() for k, v in mha.state_dict().items()}, str(path), metadata={"num_heads": "2"})
    P = np.block([[np.zeros((2, 2)), np.eye(2)], [np.eye(2), np.zeros((2, 2))]])
    rep_file = tmp_path / "swap.json"
    rep_file.write_text(json.dumps({"generators": [P.tolist()]}))
    out = run_json(capsys, "classify", str(path), "--group", "C2", "--rep", str(rep_file))
    assert out["source"] == "multihead_attention"
    assert out["equivariant"], out["recovery"]["message"]
    assert out["recovery"]["clustering"]["orbits"] == [[0, 1]]  # the swap exchanges the heads
    assert out["offset_defect"] < 1e-12
    assert any("1/sqrt(2)" in n for n in out["notes"])
    # the same weights with the trivial representation on one half only: wrong size
    rep_bad = tmp_path / "bad.json"
    rep_bad.write_text(json.dumps({"generators": [(-np.eye(2)).tolist()]}))
    assert main(["attention", "classify", str(path), "--group", "C2", "--rep", str(rep_bad)]) == 2
    assert "ShapeError" in capsys.readouterr().err
    # a non-fixed offset makes the layer non-equivariant even though M, R are fine
    with torch.no_grad():
        mha.out_proj.bias[0] += 1.0
    save_file({k: v.contiguous() for k, v in mha.state_dict().items()}, str(path), metadata={"num_heads": "2"})
    out = run_json(capsys, "classify", str(path), "--group", "C2", "--rep", str(rep_file))
    assert not out["equivariant"] and out["offset_defect"] > 0.1


def test_classify_input_errors(capsys, tmp_path):
    assert main(["attention", "classify", str(tmp_path / "missing.safetensors"), "--group", "C2"]) == 2
    assert "InputFileError" in capsys.readouterr().err
    mha = torch.nn.MultiheadAttention(4, 2)
    path = tmp_path / "noheads.safetensors"
    save_file({k: v.contiguous() for k, v in mha.state_dict().items()}, str(path))
    assert main(["attention", "classify", str(path), "--group", "C4"]) == 2
    assert "num_heads" in capsys.readouterr().err
    # query bias (nn.MultiheadAttention's default init has zero biases; make one nonzero)
    with torch.no_grad():
        mha.in_proj_bias[0] = 0.5
    save_file({k: v.contiguous() for k, v in mha.state_dict().items()}, str(path), metadata={"num_heads": "2"})
    assert main(["attention", "classify", str(path), "--group", "C4"]) == 2
    assert "UnsupportedLayerError" in capsys.readouterr().err
    # a representation file that is not a homomorphism
    rep_bad = tmp_path / "nothom.json"
    c, s = np.cos(2 * np.pi / 3), np.sin(2 * np.pi / 3)
    order3 = np.eye(4)
    order3[:2, :2] = [[c, -s], [s, c]]  # orthogonal, but r^4 = r != e in C4
    rep_bad.write_text(json.dumps({"generators": [order3.tolist()]}))
    M = torch.zeros(1, 4, 4)
    save_file({"M": M, "R": M.clone()}, str(tmp_path / "r.safetensors"))
    assert main(["attention", "classify", str(tmp_path / "r.safetensors"), "--group", "C4", "--rep", str(rep_bad)]) == 2
    assert "RepresentationError" in capsys.readouterr().err


@pytest.mark.parametrize("rep", ["regular", "copies:2", "trivial"])
def test_rep_specs(capsys, rep):
    out = run_json(capsys, "count", "--group", "S3", "--heads", "1", "--rep", rep)
    assert out["dim_V"] == {"regular": 6, "copies:2": 12, "trivial": 1}[rep]


def test_float32_weights_use_a_float32_tolerance(capsys, tmp_path):
    """C3 rotating R^2 by 120°: conjugation is inexact in float32, so the default tolerance follows
    the stored dtype; a float64-sized tolerance rejects the same layer."""
    from paramsym.attention.clusterings import PartialClustering
    from paramsym.attention.structure import build_equivariant_rmhsa
    from paramsym.groups import reps
    from paramsym.groups.finite import group_by_name

    C3 = group_by_name("C3")
    c, s = np.cos(2 * np.pi / 3), np.sin(2 * np.pi / 3)
    rot = np.array([[c, -s], [s, c]])
    rep = reps.from_generators(C3, [rot])
    orbit = PartialClustering(C3, [0, 1, 2], action=C3.table)  # X = C3 (regular G-set)
    M, R = build_equivariant_rmhsa(orbit, rep, dtype=torch.float32)
    path = tmp_path / "c3.safetensors"
    save_file({"M": M, "R": R}, str(path))
    rep_file = tmp_path / "rot.json"
    rep_file.write_text(json.dumps({"generators": [rot.tolist()]}))
    out = run_json(capsys, "classify", str(path), "--group", "C3", "--rep", str(rep_file))
    assert out["equivariant"] and out["recovery"]["details"]["rtol"] == 1e-5
    assert out["recovery"]["clustering"]["orbits"] == [[0, 1, 2]]
    strict = run_json(capsys, "classify", str(path), "--group", "C3", "--rep", str(rep_file), "--tol", "1e-12")
    assert not strict["equivariant"]


def test_group_from_matrix_generators_and_enumeration_limit(capsys, tmp_path):
    gfile = tmp_path / "c4.json"
    gfile.write_text(json.dumps({"matrices": [[[0.0, -1.0], [1.0, 0.0]]]}))  # rotation by 90°
    out = run_json(capsys, "clusterings", "--group", str(gfile), "--heads", "2")
    assert out["count"] == run_json(capsys, "clusterings", "--group", "C4", "--heads", "2")["count"]
    # more clusterings than --limit: the first `limit` are listed (the count stays exact)
    out = run_json(capsys, "clusterings", "--group", "D4", "--heads", "8", "--limit", "5")
    assert out["listed"] == len(out["clusterings"]) == 5 and out["truncated"]
    assert out["count"] == 4_304_495
    assert main(["attention", "clusterings", "--group", "C6", "--heads", "3", "--limit", "5"]) == 0
    text = capsys.readouterr().out
    assert "[4]" in text and "[5]" not in text and "listed the first 5 of 33" in text
    out = run_json(capsys, "clusterings", "--group", "D4", "--heads", "8", "--count-only")
    assert out["count"] > 10_000
