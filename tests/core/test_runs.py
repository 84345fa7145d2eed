"""Run directories: lazy creation, atomic umask-respecting writes, the history of starts in
env.json, and one named error (RunFileError, naming the path) for every unreadable or
unwritable run file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from paramsym.errors import ParamsymError, RunDirError, RunFileError
from paramsym.runs.rundir import RunDir, load_tensors, read_json, save_tensors, write_json


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_get_0666_minus_umask(tmp_path: Path, umask, mask: int, mode: int) -> None:
    umask(mask)
    run = RunDir(tmp_path / "run")
    run.write_json("a.json", {"x": 1})
    run.write_text("b.md", "text")
    save_tensors(run.file("c.safetensors"), {"w": torch.ones(2)})
    run.save_checkpoint({"w": torch.ones(2)}, {"step": 3})
    for p in ["a.json", "b.md", "c.safetensors", "checkpoint/state.json", "checkpoint/tensors-00000003.safetensors"]:
        assert (run.file(p).stat().st_mode & 0o777) == mode, p
    assert (run.path.stat().st_mode & 0o777) == 0o777 & ~mask
    assert not [p for p in run.path.rglob("*.tmp")]


def test_run_dir_is_created_by_the_first_write(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "a" / "b")
    assert not (tmp_path / "a").exists()
    assert not run.has("config.json") and run.load_checkpoint() is None and run.starts() == []
    run.write_json("config.json", {"kind": "x"})
    assert run.read_json("config.json") == {"kind": "x"}


def test_paths_that_are_not_directories(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("keep")
    with pytest.raises(RunFileError, match="not a directory"):
        RunDir(f)
    with pytest.raises(RunFileError, match=str(f)):
        RunDir(f / "sub").write_json("x.json", {})
    with pytest.raises(RunFileError, match="writable"):
        RunDir("/proc/paramsym-no/run").write_json("x.json", {})
    assert f.read_text() == "keep"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(RunDirError, match="not empty"):
        RunDir.fresh(tmp_path / "full")
    (tmp_path / "empty").mkdir()
    assert RunDir.fresh(tmp_path / "empty").path == tmp_path / "empty"
    with pytest.raises(RunDirError, match="not a paramsym run directory"):
        RunDir.open_existing(f)


@pytest.mark.parametrize("data", [b'{"a": [1, 2', b"", b"\xff\xfe\x00garbage", b"[1, 2]]"])
def test_corrupt_json_is_a_named_error(tmp_path: Path, data: bytes) -> None:
    p = tmp_path / "metrics.json"
    p.write_bytes(data)
    with pytest.raises(RunFileError, match="truncated or corrupt") as info:
        read_json(p)
    assert str(p) in str(info.value) and "\n" not in str(info.value)
    assert p.read_bytes() == data


@pytest.mark.parametrize("cut", [0, 7, 8, 40, -3])
def test_corrupt_safetensors_is_a_named_error(tmp_path: Path, cut: int) -> None:
    p = tmp_path / "t.safetensors"
    save_tensors(p, {"w": torch.arange(10.0)})
    data = p.read_bytes()
    p.write_bytes(data[:cut])
    with pytest.raises(RunFileError, match="safetensors") as info:
        load_tensors(p)
    assert str(p) in str(info.value)
    p.write_bytes(os.urandom(len(data)))
    with pytest.raises(RunFileError):
        load_tensors(p)
    with pytest.raises(RunFileError, match="does not exist"):
        load_tensors(tmp_path / "missing.safetensors")


def test_env_json_keeps_every_start(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.write_env(0, "cpu", resumed_from_step=None)
    run.write_env(0, "cpu", resumed_from_step=500)
    starts = run.starts()
    assert [s["resumed_from_step"] for s in starts] == [None, 500]
    assert {"time_utc", "host", "torch", "paramsym", "git_sha", "seed", "device", "argv"} <= set(starts[1])
    write_json(tmp_path / "env.json", {"torch": "old", "seed": 3})  # a single start of an earlier version
    run.write_env(3)
    assert [s.get("torch") for s in run.starts()][0] == "old" and len(run.starts()) == 2
    (tmp_path / "env.json").write_text("[1, 2]")
    with pytest.raises(RunFileError, match="starts"):
        run.write_env(3)
    assert json.loads((tmp_path / "env.json").read_text()) == [1, 2]


@pytest.mark.parametrize("state", [
    {"step": 3, "tensor_file": "../../etc/passwd"}, {"step": "3", "tensor_file": "tensors-00000003.safetensors"},
    {"step": -1, "tensor_file": "tensors-00000003.safetensors"}, [1, 2], {"tensor_file": "tensors-00000003.safetensors"},
])
def test_checkpoint_state_of_the_wrong_form(tmp_path: Path, state) -> None:
    run = RunDir(tmp_path)
    run.save_checkpoint({"w": torch.ones(2)}, {"step": 3})
    write_json(run.checkpoint_dir / "state.json", state)
    for kept in run.checkpoint_dir.glob("state-*.json"):  # no intact copy to fall back to
        kept.unlink()
    with pytest.raises(RunFileError, match="checkpoint state"):
        run.load_checkpoint()


def test_checkpoint_round_trip_and_replacement(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.save_checkpoint({"w": torch.ones(2)}, {"step": 3, "history": []})
    run.save_checkpoint({"w": torch.full((2,), 2.0)}, {"step": 5, "history": [{"a": 1.0}]})
    tensors, state = run.load_checkpoint()
    assert torch.equal(tensors["w"], torch.full((2,), 2.0)) and state["step"] == 5
    # the previous checkpoint is kept beside the newest as a fallback; older ones are removed
    assert sorted(p.name for p in run.checkpoint_dir.glob("tensors-*")) == ["tensors-00000003.safetensors",
                                                                           "tensors-00000005.safetensors"]
    run.save_checkpoint({"w": torch.full((2,), 3.0)}, {"step": 7, "history": []})
    assert sorted(p.name for p in run.checkpoint_dir.glob("tensors-*")) == ["tensors-00000005.safetensors",
                                                                           "tensors-00000007.safetensors"]
    assert sorted(p.name for p in run.checkpoint_dir.glob("state-*")) == ["state-00000005.json", "state-00000007.json"]
    assert issubclass(RunFileError, RunDirError) and issubclass(RunFileError, ParamsymError)


def test_safetensors_bytes_do_not_depend_on_the_metadata_order(tmp_path: Path) -> None:
    """The same tensors and metadata give the same bytes (safetensors writes ``__metadata__`` in hash
    order; ``tensors_to_bytes`` puts it in name order), and the file reads back unchanged."""
    from safetensors import safe_open

    from paramsym.runs.rundir import tensors_to_bytes

    tensors = {"M": torch.randn(3, 2, generator=torch.Generator().manual_seed(0)), "R": torch.ones(2)}
    meta = {k: f"value of {k} é" for k in ("group", "rep", "clustering", "perturb", "a", "zz")}
    blobs = {tensors_to_bytes(tensors, dict(reversed(meta.items()) if i % 2 else meta.items())) for i in range(12)}
    assert len(blobs) == 1
    (tmp_path / "t.safetensors").write_bytes(blobs.pop())
    with safe_open(str(tmp_path / "t.safetensors"), "pt") as f:
        assert f.metadata() == meta
        assert all(torch.equal(f.get_tensor(k), v) for k, v in tensors.items())
    header = (tmp_path / "t.safetensors").read_bytes()
    n = int.from_bytes(header[:8], "little")
    assert list(json.loads(header[8:8 + n])["__metadata__"]) == sorted(meta)
