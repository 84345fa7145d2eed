"""Dead ends of ``paramsym attention`` / ``paramsym group``: named one-line errors with exit 2,
the memory budget, and pure-math commands that never import torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from paramsym.cli import main

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=300)


def _one_line_error(capsys, argv: list[str], name: str, *fragments: str) -> str:
    capsys.readouterr()
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and name in lines[0] and "Traceback" not in err, err
    for f in fragments:
        assert f in lines[0], (f, err)
    return lines[0]


def test_s7_count_names_too_large_and_the_memory_in_a_subprocess():
    proc = _run("""
        import sys
        from paramsym.cli import main
        sys.exit(main(["attention", "count", "--group", "S7", "--heads", "7"]))
    """)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "TooLargeError" in lines[0] and "954 GiB" in lines[0], proc.stderr
    assert "--max-memory" in lines[0] and proc.stdout == ""


def test_budget_option(capsys):
    _one_line_error(capsys, ["attention", "count", "--group", "S6", "--heads", "8"],
                    "TooLargeError", "2.78 GiB", "budget of 2 GiB")
    _one_line_error(capsys, ["attention", "count", "--group", "D4", "--heads", "8",
                             "--max-memory", "1KiB"], "TooLargeError", "4 KiB")
    _one_line_error(capsys, ["attention", "count", "--group", "D4", "--heads", "8",
                             "--max-memory", "lots"], "MemoryBudgetError", "--max-memory")
    _one_line_error(capsys, ["group", "S6"], "TooLargeError", "2.78 GiB")
    assert main(["attention", "count", "--group", "D4", "--heads", "8", "--max-memory", "4096",
                 "--quiet"]) == 0


@pytest.mark.parametrize("argv, fragment", [
    (["count", "--group", "D4", "--heads", "0"], "--heads must be an integer >= 1; received 0"),
    (["count", "--group", "D4", "--heads", "x"], "--heads must be an integer >= 1; received 'x'"),
    (["count", "--group", "D4", "--heads", "8", "--copies", "-3"], "--copies must be an integer >= 1"),
    (["table", "--group", "D4", "--copies", "0..3"], "every number of copies must be >= 1"),
    (["table", "--group", "D4", "--heads", "2.5"], "--heads must be an integer"),
    (["clusterings", "--group", "C6", "--heads", "-1"], "--heads must be an integer >= 1"),
    (["clusterings", "--group", "C6", "--heads", "3", "--limit", "-5"], "--limit must be an integer >= 0"),
    (["classify", "w.safetensors", "--group", "D4", "--tol", "-1"], "--tol must be a finite number > 0"),
    (["classify", "w.safetensors", "--group", "D4", "--tol", "nan"], "--tol must be a finite number > 0"),
    (["classify", "w.safetensors", "--group", "D4", "--bias-tol", "-1"], "--bias-tol"),
    (["classify", "w.safetensors", "--group", "D4", "--num-heads", "0"], "--num-heads must be an integer >= 1"),
    (["classify", "w.safetensors", "--group", "D4", "--seed", "-1"], "--seed must be an integer seed with 0 <= seed < 2**63"),
    (["build", "--group", "C2", "--heads", "1", "--index", "-1", "--out", "x"], "--index must be an integer >= 0"),
    (["build", "--group", "C2", "--heads", "1", "--index", "0", "--perturb", "inf", "--out", "x"], "--perturb"),
])
def test_numeric_options_are_validated(capsys, argv, fragment):
    _one_line_error(capsys, ["attention", *argv], "ConfigError", fragment)


def test_build_out_dead_ends(capsys, tmp_path):
    """``attention build --out DIR`` writes a run directory (the layer is ``DIR/layer.safetensors``): the old
    ``--out FILE`` form, a missing ``--out``, a non-empty directory and a path under a file are one named line
    each, and nothing is replaced."""
    base = ["attention", "build", "--group", "C2", "--heads", "2", "--index", "0"]
    old = tmp_path / "layer.safetensors"
    _one_line_error(capsys, [*base, "--out", str(old)], "ConfigError", "now writes a run directory",
                    "DIR/layer.safetensors")
    assert not old.exists()
    _one_line_error(capsys, base, "ConfigError", "--out DIR")
    full = tmp_path / "full"
    full.mkdir()
    (full / "layer.safetensors").write_text("keep me")
    _one_line_error(capsys, [*base, "--out", str(full)], "RunDirError", "not empty")
    assert (full / "layer.safetensors").read_text() == "keep me"
    _one_line_error(capsys, [*base, "--out", str(full / "layer.safetensors" / "run")], "RunFileError",
                    "cannot create directory")
    assert main([*base, "--out", str(tmp_path / "run")]) == 0 and (tmp_path / "run" / "layer.safetensors").is_file()
    capsys.readouterr()
    if os.geteuid() != 0:  # root may write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        try:
            _one_line_error(capsys, [*base, "--out", str(ro / "sub")], "RunFileError", str(ro))
        finally:
            ro.chmod(0o700)


def test_table_out_unwritable(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = _one_line_error(capsys, ["attention", "table", "--group", "C2", "--copies", "1", "--heads", "1",
                                    "--out", str(blocker / "run")], "Error", str(blocker / "run"))
    assert "OutputFileError" in line or "RunFileError" in line


_PURE_MATH = """
    import argparse, io, sys, contextlib
    from paramsym.attention import cli as attention_cli
    from paramsym.groups import cli as group_cli
    parser = argparse.ArgumentParser(prog="paramsym")
    sub = parser.add_subparsers(dest="command")
    attention_cli.register(sub)
    group_cli.register(sub)
    for argv in (["attention", "count", "--group", "D4", "--copies", "96", "--heads", "8"],
                 ["attention", "table", "--group", "D4", "--copies", "1..4", "--format", "json"],
                 ["attention", "clusterings", "--group", "C6", "--heads", "3", "--json"],
                 ["group", "D4"]):
        args = parser.parse_args(argv)
        with contextlib.redirect_stdout(io.StringIO()):
            assert args.func(args) == 0, argv
    print("torch" in sys.modules)
"""


def test_pure_math_commands_never_import_torch():
    proc = _run(_PURE_MATH)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False", "torch was imported by a pure-math command"


def test_top_level_cli_pure_math_never_imports_torch():
    proc = _run("""
        import io, sys, contextlib
        from paramsym.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["attention", "count", "--group", "D4", "--copies", "96", "--heads", "8"]) == 0
            assert main(["group", "D4"]) == 0
        print("torch" in sys.modules)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_json_outputs_stay_plain(capsys):
    capsys.readouterr()
    assert main(["attention", "count", "--group", "D4", "--heads", "8", "--copies", "96", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["c"] == 2_000_425
