"""The pure-math commands start without torch, and the command line's top level stays light.

Each check runs in a fresh interpreter (``sys.modules`` of the test process already holds torch)
and asserts that ``torch`` was never imported while the command ran to completion.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import sys
from paramsym.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as exc:  # --version and --help exit through argparse
    rc = exc.code
assert rc in (0, None), rc
heavy = sorted(m for m in ("torch", "safetensors", "transformers", "matplotlib") if m in sys.modules)
print("HEAVY=" + ",".join(heavy))
"""


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [
    ["--version"],
    ["--help"],
    ["group", "D4"],
    ["attention", "count", "--group", "D4", "--copies", "96", "--heads", "8"],
    ["attention", "table", "--group", "C4", "--copies", "1..3", "--heads", "2"],
    ["attention", "clusterings", "--group", "C2", "--heads", "2"],
])
def test_pure_math_commands_never_import_torch(args: list[str]) -> None:
    out = _run(*args)
    assert out.returncode == 0, out.stderr
    assert "HEAVY=\n" in out.stdout, f"{args} imported {out.stdout.strip().splitlines()[-1]}"


def test_attention_table_run_directory_never_imports_torch(tmp_path) -> None:
    out = _run("attention", "table", "--group", "C4", "--copies", "1..3", "--heads", "2", "--quiet",
               "--out", str(tmp_path / "run"))
    assert out.returncode == 0, out.stderr
    heavy = out.stdout.strip().splitlines()[-1]
    assert "torch" not in heavy.removeprefix("HEAVY=").split(","), heavy
    env = json.loads((tmp_path / "run" / "env.json").read_text())["starts"][0]
    assert env["torch"] and env["torch_threads"] is None  # version from metadata, torch never loaded
    assert (tmp_path / "run" / "metrics.json").exists() and (tmp_path / "run" / "report.md").exists()


def test_every_command_module_top_level_is_standard_library_only() -> None:
    code = (
        "import sys, importlib\n"
        "from paramsym.cli import COMMAND_MODULES, build_parser\n"
        "for m in COMMAND_MODULES: importlib.import_module(m)\n"
        "build_parser()\n"
        "import paramsym.kinds.catalog, paramsym.runs.rundir, paramsym.attention.report\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("module", ["paramsym.cli", "paramsym"])
def test_version_line(module: str) -> None:
    out = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True,
                         timeout=120)
    from paramsym import __version__

    assert out.returncode == 0 and out.stdout.strip() == f"paramsym {__version__}"
