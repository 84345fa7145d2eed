"""``paramsym reproduce`` end to end through the CLI on cheap claims, checked against independent values."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _cli(*args, cwd):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "paramsym.cli", "reproduce", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, check=False)


def test_cheap_claims_end_to_end_json(tmp_path):
    out = tmp_path / "runs"
    p = _cli("hamiltonian-reynolds", "groups-d4-regular", "lifting-sanity-frozen", "--quick", "--json", "--out", str(out),
             cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    rows = {r["claim"]: r for r in doc["rows"]}
    assert list(rows) == ["lifting-sanity-frozen", "hamiltonian-reynolds", "groups-d4-regular"]
    for r in rows.values():
        assert {"claim", "kind", "paper", "ours", "holds", "criterion", "budget", "full_time", "code_version",
                "config_hash", "command", "seconds", "cpu_seconds", "date_utc"} <= set(r)
        assert r["budget"] == "quick" and r["error"] is None and r["holds"] is True  # exact runs: evaluated at quick
        assert len(r["config_hash"]) == 16 and r["code_version"] and r["statistic"]
    # issue 33: a known answer and background the paper cites are related; not counted
    assert {c: r["kind"] for c, r in rows.items()} == {"lifting-sanity-frozen": "related",
                                                       "hamiltonian-reynolds": "reproduction",
                                                       "groups-d4-regular": "related"}
    assert doc["summary"]["reproduced"] == ["hamiltonian-reynolds"] and doc["summary"]["counts"]["failing"] == 0
    # independent reference for the Reynolds claim: the 64-point average of R_k⁻¹ F(R_k q), in numpy,
    # leaves the exactly equivariant force unchanged to rounding
    q = np.random.default_rng(0).normal(size=(50, 2))

    def force(z, a=0.6):
        return -(a + (z * z).sum(1, keepdims=True)) * z

    avg = np.zeros_like(q)
    for k in range(64):
        c, s = math.cos(2 * math.pi * k / 64), math.sin(2 * math.pi * k / 64)
        R = np.array([[c, -s], [s, c]])
        avg += force(q @ R.T) @ R / 64
    assert np.linalg.norm(avg - force(q)) / np.linalg.norm(force(q)) < 1e-14
    assert rows["hamiltonian-reynolds"]["values"]["relative_change"] <= 1e-14
    # the D4 regular decomposition from the character table: A1 ⊕ A2 ⊕ B1 ⊕ B2 ⊕ 2E1 (dimension 8)
    assert rows["groups-d4-regular"]["ours"].startswith("A1 ⊕ A2 ⊕ B1 ⊕ B2 ⊕ 2E1")
    # frozen first layer: η is not in Im J, most of it stays outside
    assert rows["lifting-sanity-frozen"]["values"]["residual"] > 0.1
    # the run directories are kept (and reused: a rerun does not recompute)
    assert (out / "groups" / "regular.json").exists() and (out / "reynolds" / "reproduce.json").exists()
    p2 = _cli("hamiltonian-reynolds", "--quick", "--out", str(out), cwd=tmp_path)
    assert p2.returncode == 0 and "| `hamiltonian-reynolds` |" in p2.stdout and "reused" in p2.stderr
    # a reused row shows the seconds of the run that made it, not this call's
    first = rows["hamiltonian-reynolds"]
    assert f"{first['seconds']:.0f} / {first['cpu_seconds']:.0f} (reused)" in p2.stdout


def test_unknown_claim_is_a_named_error(tmp_path):
    p = _cli("tabel1-fits", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "UnknownClaimError" in p.stderr and "closest: table1-fits" in p.stderr


def test_bad_out_and_docs_directories_are_named_errors(tmp_path, capsys):
    from paramsym.cli import main

    f = tmp_path / "a-file"
    f.write_text("not a directory\n")
    assert main(["reproduce", "groups-d4-regular", "--out", str(f)]) == 2
    assert "--out" in capsys.readouterr().err and f.read_text() == "not a directory\n"
    assert main(["reproduce", "groups-d4-regular", "--write-docs", str(tmp_path / "missing")]) == 2
    assert "--write-docs" in capsys.readouterr().err
    assert main(["reproduce"]) == 2 and "name a claim or `all`" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists()
