"""paramsym.runs.provenance: config hashes are data equality; stale records are refused with a reason."""

from dataclasses import dataclass, field

import pytest

from paramsym.runs import provenance as pv


@dataclass(frozen=True)
class Inner:
    lr: float = 1e-3
    steps: int = 10


@dataclass(frozen=True)
class Cfg:
    name: str = "x"
    inner: Inner = field(default_factory=Inner)
    rhos: tuple[float, ...] = (0.5, 1.0)


def test_config_hash_is_equality_of_resolved_data():
    assert pv.config_hash(Cfg()) == pv.config_hash(Cfg())
    assert pv.config_hash(Cfg()) == pv.config_hash({"name": "x", "inner": {"steps": 10, "lr": 1e-3}, "rhos": [0.5, 1.0]})
    # a nested recipe value changes the hash
    assert pv.config_hash(Cfg()) != pv.config_hash(Cfg(inner=Inner(lr=2e-3)))
    assert pv.config_hash(Cfg()) != pv.config_hash(Cfg(rhos=(0.5,)))
    assert len(pv.config_hash(Cfg())) == 16


def test_non_finite_values_hash_without_error():
    assert pv.config_hash({"a": float("nan")}) != pv.config_hash({"a": float("inf")})


def test_stale_reason(monkeypatch):
    monkeypatch.setattr(pv, "code_version", lambda: "abc123")
    rec = pv.provenance(Cfg(), command="paramsym x", budget="full")
    assert rec["code_version"] == "abc123" and rec["budget"] == "full" and rec["command"] == "paramsym x"
    assert pv.stale_reason(rec, Cfg()) is None
    assert "config_hash" in pv.stale_reason(rec, Cfg(name="y"))
    assert "made by code" in pv.stale_reason({**rec, "code_version": "def456"}, Cfg())
    assert "does not identify" in pv.stale_reason({**rec, "code_version": "def456-dirty"}, Cfg())
    assert "no provenance" in pv.stale_reason(None, Cfg())


def test_code_version_names_this_checkout():
    v = pv.code_version()
    assert v.startswith("paramsym-") or len(v.split("-")[0]) == 40


def test_code_version_covers_the_whole_package_not_one_sub_package():
    """The dirty suffix hashes ``git diff HEAD`` of all of ``src/paramsym`` (a change in any of its
    sub-packages changes the version), not only of the folder holding provenance.py."""
    import hashlib
    import subprocess
    from pathlib import Path

    import paramsym

    package = Path(paramsym.__file__).resolve().parent
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=package, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout (an installed wheel has no diff)")
    diff = subprocess.run(["git", "diff", "HEAD", "--", "."], cwd=package, capture_output=True).stdout
    expected = head.stdout.strip() + ("-dirty." + hashlib.sha256(diff).hexdigest()[:12] if diff.strip() else "")
    pv.code_version.cache_clear()
    assert pv.code_version() == expected
