"""``paramsym align`` on tiny models saved to tmp, and the named errors of bad input."""

from __future__ import annotations

import json

import pytest
import torch

from paramsym.alignment.align import align
from paramsym.alignment.arch import check_same_architecture, mlp_architecture
from paramsym.alignment.io import load_pair
from paramsym.cli import main
from paramsym.errors import ArchitectureMismatchError, InputFileError, SymmetryNotApplicableError
from paramsym.models.datasets import Split
from paramsym.models.mlp import mlp
from paramsym.runs.rundir import load_tensors, save_tensors


def _save(path, widths, seed, activation="relu"):
    m = mlp(widths, activation, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    save_tensors(path, {k: v.detach() for k, v in m.named_parameters()})
    return path


def test_cli_json_smoke_writes_every_output(tmp_path, capsys):
    a = _save(tmp_path / "a.safetensors", [64, 8, 10], 0)
    b = _save(tmp_path / "b.safetensors", [64, 8, 10], 1)
    out = tmp_path / "out"
    code = main(["align", str(a), str(b), "--json", "--points", "5", "--out", str(out)])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    for key in ("barrier_before", "barrier_permutation", "barrier_full", "function_error"):
        assert isinstance(summary[key], float)
    assert summary["function_error"] <= 1e-6
    assert summary["symmetries"] == ["permutation", "rescaling"]
    for name in ("result.json", "report.md", "merged.safetensors"):
        assert (out / name).is_file()
    merged = load_tensors(out / "merged.safetensors")
    assert set(merged) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert merged["fc1.weight"].dtype == torch.float32
    assert "barrier" in (out / "report.md").read_text()


def test_different_architectures_name_the_tensors(tmp_path, capsys):
    a = _save(tmp_path / "a.safetensors", [64, 8, 10], 0)
    b = _save(tmp_path / "b.safetensors", [64, 9, 10], 1)
    with pytest.raises(ArchitectureMismatchError, match=r"fc1\.weight: \(8, 64\) vs \(9, 64\)"):
        load_pair(a, b)
    c = _save(tmp_path / "c.safetensors", [64, 8, 8, 10], 1)
    with pytest.raises(ArchitectureMismatchError, match=r"only in B: \['fc3\.bias', 'fc3\.weight'\].*fc2\.bias: \(10,\) vs \(8,\); fc2\.weight: \(10, 8\) vs \(8, 8\)"):
        load_pair(a, c)
    assert main(["align", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "ArchitectureMismatchError" in err and len(err.strip().splitlines()) == 1


def test_unreadable_files_are_named(tmp_path):
    a = _save(tmp_path / "a.safetensors", [64, 8, 10], 0)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a safetensors file at all")
    with pytest.raises(InputFileError, match="bad.safetensors"):
        load_pair(a, bad)
    with pytest.raises(InputFileError, match="does not exist"):
        load_pair(a, tmp_path / "missing.safetensors")
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(InputFileError, match="config.json"):
        load_pair(a, tmp_path / "emptydir")


def test_symmetries_that_do_not_apply_are_refused(tmp_path, capsys):
    a = _save(tmp_path / "a.safetensors", [64, 8, 10], 0)
    b = _save(tmp_path / "b.safetensors", [64, 8, 10], 1)
    assert main(["align", str(a), str(b), "--symmetries", "permutation,attention"]) == 2
    assert "SymmetryNotApplicableError" in capsys.readouterr().err
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(20, 4, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 2, (20,), generator=gen)
    pa = {k: v.detach() for k, v in mlp([4, 5, 2], "tanh", dtype=torch.float64).named_parameters()}
    arch = mlp_architecture(pa, "tanh")
    with pytest.raises(SymmetryNotApplicableError, match="homogeneous"):
        align(arch, pa, pa, Split(x[:10], y[:10], x[10:], y[10:]), symmetries=["rescaling"])
    # tanh: permutations apply, rescaling does not, so the default picks permutations only
    res = align(arch, pa, pa, Split(x[:10], y[:10], x[10:], y[10:]), points=3)
    assert res.symmetries == ["permutation"]


def test_check_same_architecture_accepts_equal_shapes():
    t = {"w": torch.zeros(2, 3)}
    check_same_architecture(t, {"w": torch.ones(2, 3)})
