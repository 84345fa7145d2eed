"""Bad input gets a named error that says what to do: degenerate blocks, invalid configuration
keys and values (library and command line), unknown presets. Parameter-name, mask and
non-finite errors are covered with the blocks and targets they belong to."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest
import torch
from toy_modules import UnusedBranch

from paramsym.cli import main
from paramsym.config import apply_overrides
from paramsym.discovery.config import DiscoverConfig
from paramsym.discovery.problems import DiscoveryProblem, build_problem
from paramsym.errors import ConfigError, DegenerateTargetError, ParamsymError
from paramsym.targets import Target


def test_block_the_output_ignores_is_degenerate():
    torch.manual_seed(0)
    target = Target(UnusedBranch(), ["unused.weight"], torch.randn(4, 2), name="unused")
    problem = DiscoveryProblem(name="unused", description="", target=target, perturb_std=0.1)
    with pytest.raises(DegenerateTargetError) as exc:
        problem.scales(0.3, torch.Generator().manual_seed(0))
    msg = str(exc.value)
    assert "does not depend on the parameter block" in msg and "unused.weight" in msg and "s_F = " in msg
    assert isinstance(exc.value, ValueError)
    # the used block is fine
    ok = dataclasses.replace(problem, target=Target(UnusedBranch(), ["used.weight"], torch.randn(4, 2)))
    assert ok.scales(0.3, torch.Generator().manual_seed(0)).s_F > 0


def test_invalid_config_keys_and_values():
    cfg = DiscoverConfig()
    with pytest.raises(ConfigError) as exc:
        apply_overrides(cfg, ["nope=1"])
    assert "unknown config key 'nope'" in str(exc.value) and "train.lr" in str(exc.value)  # lists valid keys
    with pytest.raises(ConfigError, match=r"Did you mean \['train.lr'\]"):
        apply_overrides(cfg, ["lr=1e-3"])
    with pytest.raises(ConfigError, match="train.lr: expected a number, received 'fast'"):
        apply_overrides(cfg, ["train.lr=fast"])
    with pytest.raises(ConfigError, match="train.steps: expected an integer"):
        apply_overrides(cfg, ["train.steps=1.5"])
    with pytest.raises(ConfigError, match="even number"):
        apply_overrides(cfg, ["train.batch=3"])
    with pytest.raises(ConfigError, match="objective.variant: expected one of"):
        apply_overrides(cfg, ["objective.variant=exact"])
    with pytest.raises(ConfigError, match="key=value"):
        apply_overrides(cfg, ["train.lr"])
    with pytest.raises(ConfigError, match="unknown preset 'nope'.*linear2x2"):
        build_problem("nope")
    # the CLI's own example: YAML 1.1 reads "3e-4" as a string, the float field accepts it
    good = apply_overrides(cfg, ["train.lr=3e-4", "verdict.rhos=[0.1,0.5]", "objective.beta=2E-1"])
    assert good.train.lr == 3e-4 and good.verdict.rhos == [0.1, 0.5] and good.objective.beta == 0.2
    with pytest.raises(ConfigError, match="expected a number"):
        apply_overrides(cfg, ["train.lr=nan"])


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--set", "train.batch=3"], "train.batch must be an even number"),
        (["--set", "objective.beta=-1"], "objective.beta must be > 0"),
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--set", "train.lr"], "--set expects key=value"),
    ],
)
def test_cli_config_errors_exit_2_with_one_line(args, needle, capsys, tmp_path):
    rc = main(["discover", "--out", str(tmp_path / "run"), *args])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.count("\n") == 0 and err.startswith("paramsym discover: error: ConfigError:") and needle in err
    assert not (tmp_path / "run").exists()  # nothing was started


def test_cli_unknown_key_in_a_fresh_process_has_no_traceback(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "paramsym.cli", "discover", "--set", "nope=1", "--out", str(tmp_path / "r")],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith("paramsym discover: error: ConfigError: unknown config key 'nope'")
    assert proc.stdout == ""


def test_every_named_error_is_a_paramsym_error_and_a_builtin():
    from paramsym import errors

    for name in ("ConfigError", "ParameterNameError", "MaskError", "NonFiniteError", "DegenerateTargetError",
                 "ShapeError", "GroupError", "ActionError"):
        cls = getattr(errors, name)
        assert issubclass(cls, ParamsymError)
        assert issubclass(cls, (ValueError, KeyError, TypeError, RuntimeError))


@pytest.mark.parametrize("key", ["seed", "problem.target_seed", "verdict.eval_seed"])
def test_negative_seed_in_a_discover_config_is_named(key):
    from paramsym.discovery.config import DiscoverConfig, with_overrides

    cfg = DiscoverConfig.for_preset("sigmoid-scalar", "hybrid")
    with pytest.raises(ConfigError, match=f"{key} must be an integer ≥ 0"):
        with_overrides(cfg, [f"{key}=-1"])
    assert with_overrides(cfg, [f"{key}=7"]) is not None


@pytest.mark.parametrize("threads", [-1, 4097, 2**31])
def test_thread_count_out_of_range_is_named(threads):
    # found by the CLI fuzz test: 2**31 overflowed torch.set_num_threads (a C int)
    from paramsym.discovery.config import DiscoverConfig, with_overrides

    with pytest.raises(ConfigError, match="threads must be between 0"):
        with_overrides(DiscoverConfig.for_preset("sigmoid-scalar", "hybrid"), [f"threads={threads}"])
