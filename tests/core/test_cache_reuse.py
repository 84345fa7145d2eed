"""The one reuse rule for caches (:func:`paramsym.runs.reuse.cached_tensors`, used by the trained
models of the ``align`` presets): a cached file is reused only when the provenance in its
metadata has the requested config hash and the current code version; otherwise it is made again
(the old file moved aside), refused by name, or reused marked stale."""

from __future__ import annotations

import json

import pytest
import torch

from paramsym.errors import StaleRunError
from paramsym.runs.provenance import code_version, config_hash
from paramsym.runs.reuse import cached_tensors
from paramsym.runs.rundir import load_tensors, save_tensors


class _Maker:
    """Makes a tensor from a generator seeded by the config, counting calls."""

    def __init__(self, seed: int) -> None:
        self.seed, self.calls = seed, 0

    def __call__(self) -> dict[str, torch.Tensor]:
        self.calls += 1
        return {"w": torch.randn(3, 4, generator=torch.Generator().manual_seed(self.seed))}


def _write_foreign(path, cfg, code: str) -> None:
    """A cache file as another code version would have written it (same config)."""
    record = {"code_version": code, "config_hash": config_hash(cfg), "command": None, "budget": None,
              "date_utc": "2026-01-01T00:00:00+00:00"}
    save_tensors(path, {"w": torch.zeros(3, 4)}, {"config": json.dumps(cfg), "provenance": json.dumps(record)})


def test_made_once_then_reused_with_its_provenance(tmp_path) -> None:
    path, cfg, make = tmp_path / "m.safetensors", {"width": 4, "seed": 0}, _Maker(0)
    first = cached_tensors(path, cfg, make)
    stamp = path.stat().st_mtime_ns
    again = cached_tensors(path, cfg, make)
    assert make.calls == 1 and path.stat().st_mtime_ns == stamp  # reused, not rewritten
    assert torch.equal(first["w"], again["w"]) and torch.equal(first["w"], make()["w"])
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        record = json.loads(fh.metadata()["provenance"])
    assert record["config_hash"] == config_hash(cfg) and record["code_version"] == code_version()


def test_another_code_version_is_made_again_and_the_old_file_kept(tmp_path) -> None:
    path, cfg, make = tmp_path / "m.safetensors", {"width": 4, "seed": 1}, _Maker(1)
    _write_foreign(path, cfg, "0" * 40)
    out = cached_tensors(path, cfg, make)
    assert make.calls == 1 and not torch.equal(out["w"], torch.zeros(3, 4))  # trained anew, not the old zeros
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("m.safetensors.stale-")]
    assert len(moved) == 1 and torch.equal(load_tensors(moved[0])["w"], torch.zeros(3, 4))  # nothing deleted


def test_a_file_without_provenance_or_another_config_is_not_reused(tmp_path) -> None:
    path, cfg = tmp_path / "m.safetensors", {"width": 4, "seed": 2}
    save_tensors(path, {"w": torch.zeros(3, 4)})  # an older paramsym's cache file: no record
    with pytest.raises(StaleRunError, match="no provenance record"):
        cached_tensors(path, cfg, _Maker(2), reuse="refuse")
    _write_foreign(path, {"width": 5, "seed": 2}, code_version())
    with pytest.raises(StaleRunError, match="config_hash"):
        cached_tensors(path, cfg, _Maker(2), reuse="refuse")
    make = _Maker(2)
    assert torch.equal(cached_tensors(path, cfg, make, reuse="stale")["w"], torch.zeros(3, 4)) and make.calls == 0
