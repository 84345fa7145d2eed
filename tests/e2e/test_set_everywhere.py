"""One way to configure (issue 32, item 3): every run command of the CLI parser takes ``--set KEY=VALUE``,
and each of its flags is sugar for ``--set`` of one key: the flag and the ``--set`` give the same
configuration and the same ``config_hash`` (nothing is run: each command's parser default ``config``
builds the configuration of a fresh run)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from paramsym.cli import build_parser
from paramsym.config import to_dict
from paramsym.errors import ConfigError
from paramsym.runs.provenance import config_hash

ROOT = Path(__file__).parents[2]
SPEC = str(ROOT / "examples" / "sweeps" / "tiny.yaml")

#: commands with ``--out`` that are not a run of one configuration, and why
NOT_RUNS = {
    "reproduce": "an orchestrator of many runs (each configured by its experiment's paper()/quick() value)",
}

#: run command → (the argv that selects it, [(flag argv, the same as --set argv), ...]); each pair
#: changes the configuration from the base's (checked), so a flag that wrote nothing would fail
CASES: dict[str, tuple[list[str], list[tuple[list[str], list[str]]]]] = {
    "discover": (["discover", "--preset", "sigmoid-scalar", "--device", "cpu"], [
        (["--seed", "7"], ["--set", "seed=7"]),
        (["--steps", "13"], ["--set", "train.steps=13"])]),
    "experiment objectives": (["experiment", "objectives", "--quick"], [
        (["--seeds", "1,2"], ["--set", "seeds=[1,2]"]),
        (["--steps", "9"], ["--set", "steps=9"]),
        (["--variants", "finite"], ["--set", "variants=[finite]"]),
        (["--preset", "relu242"], ["--set", "preset=relu242"])]),
    "experiment lifting": (["experiment", "lifting", "--quick"], [
        (["--unit-beta", "0.3"], ["--set", "unit_beta=0.3"]),
        (["--seeds", "5,6"], ["--set", "seeds=[5,6]"])]),
    "experiment transformer": (["experiment", "transformer", "--quick"], [
        (["--tokens", "8"], ["--set", "tokens=8"]),
        (["--units", "1:777"], ["--set", "units=[[1,777]]"]),
        (["--compensators", "20"], ["--set", "compensators=20"])]),
    "attribute": (["attribute", "--preset", "annulus-wedge", "--quick"], [
        (["--seed", "4"], ["--set", "seed=4"]),
        (["--flow", "fixed"], ["--set", "flows=[fixed]"]),
        (["--stage", "init"], ["--set", "stage=init"]),
        (["--weights", "mine.safetensors"], ["--set", "weights=mine.safetensors"]),
        (["--probes", "probes.safetensors"], ["--set", "probes=probes.safetensors"])]),
    "affine": (["affine", "--preset", "relu242"], [
        (["--tol", "1e-5"], ["--set", "tol=1e-5"]),
        (["--samples", "40"], ["--set", "samples=40"]),
        (["--rule", "threshold"], ["--set", "rule=threshold"]),
        (["--max-memory", "1GiB"], ["--set", "max_memory=1GiB"])]),
    "census": (["census", "--preset", "mlp-relu"], [
        (["--tokens", "4"], ["--set", "tokens=4"]),
        (["--dtype", "float32"], ["--set", "dtype=float32"]),
        (["--seed", "3"], ["--set", "seed=3"])]),
    "compensate": (["compensate", "--model", "llama-tiny", "--layer", "1", "--unit", "3"], [
        (["--tokens", "8"], ["--set", "tokens=8"]),
        (["--motion", "0.002"], ["--set", "motion=0.002"]),
        (["--learned"], ["--set", "learned=true"])]),
    "teleport": (["teleport", "--preset", "digits-mlp"], [
        (["--every", "5"], ["--set", "every=5"]),
        (["--seeds", "0,1"], ["--set", "seeds=[0,1]"]),
        (["--optimizer", "sgd"], ["--set", "optimizers=[sgd]"]),
        (["--steps", "50"], ["--set", "steps=50"])]),
    "align": (["align", "--preset", "digits-mlp"], [
        (["--points", "5"], ["--set", "points=5"]),
        (["--seed", "2"], ["--set", "seed=2"]),
        (["--symmetries", "permutation"], ["--set", "symmetries=[permutation]"]),
        (["--stages", "before,permutation,full,canonical,orthogonal,refined"],
         ["--set", "stages=[before,permutation,full,canonical,orthogonal,refined]"]),
        (["--refine-steps", "7"], ["--set", "refine.steps=7"]),
        (["--refine-lr", "0.003"], ["--set", "refine.lr=0.003"]),
        (["--refine-condition", "10"], ["--set", "refine.max_condition=10"])]),
    "align --stream": (["align", "A", "B", "--stream"], [
        (["--merge", "0.3"], ["--set", "merge=0.3"]),
        (["--seed", "2"], ["--set", "seed=2"]),
        (["--max-memory", "1GiB"], ["--set", "max_memory=1GiB"]),
        ([], ["--set", "dtype=float32"])]),  # the spec's tracing dtype: --set only
    "sweep": (["sweep", SPEC], [
        ([], ["--set", "spec.candidate_steps=12"])]),  # no flag writes the spec: --set only
    "attention count": (["attention", "count", "--group", "D4", "--heads", "8"], [
        (["--copies", "3"], ["--set", "copies=3"]),
        (["--rep", "copies:2"], ["--set", "rep=copies:2"])]),
    "attention table": (["attention", "table", "--group", "C4", "--heads", "2"], [
        (["--copies", "1..3"], ["--set", "copies=[1,2,3]"])]),
    "attention clusterings": (["attention", "clusterings", "--group", "C6", "--heads", "3"], [
        (["--limit", "4"], ["--set", "limit=4"])]),
    "attention classify": (["attention", "classify", "layer.safetensors", "--group", "C2"], [
        (["--tol", "1e-7"], ["--set", "tol=1e-7"]),
        (["--seed", "5"], ["--set", "seed=5"])]),
    "attention build": (["attention", "build", "--group", "D4", "--heads", "3", "--index", "2"], [
        (["--seed", "4"], ["--set", "seed=4"]),
        (["--perturb", "1e-3"], ["--set", "perturb=1e-3"]),
        (["--copies", "2"], ["--set", "copies=2"])]),
    "census --export": (["census", "--model", "m", "--export", "permutation-spec"], [
        (["--tokens", "4"], ["--set", "tokens=4"]),
        (["--without-weights"], ["--set", "without_weights=true"]),
        (["--max-memory", "1GiB"], ["--set", "max_memory=1GiB"])]),
    "group": (["group", "D4"], [
        (["--rep", "copies:2"], ["--set", "rep=copies:2"])]),
}


def _leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(prefix), parser
        return
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, (*prefix, name))


def _config(argv: list[str]):
    if "--export" in argv:  # a run directory to write into (the configuration is built without touching it)
        argv = [*argv, "--out", "export-run"]
    args = build_parser().parse_args(argv)
    return args.config(args)


def test_every_run_command_takes_set_and_builds_its_config() -> None:
    leaves = dict(_leaves(build_parser()))
    runs = {name for name, p in leaves.items() if p.get_default("config") is not None}
    with_out = {name for name, p in leaves.items() if any("--out" in a.option_strings for a in p._actions)}
    assert with_out - runs == set(NOT_RUNS)  # every command writing a run directory builds its configuration here
    assert runs == {name.split(" --")[0] for name in CASES}  # "census --export": a second kind of `census`
    for name in runs:
        assert any("--set" in a.option_strings for a in leaves[name]._actions), name


@pytest.mark.parametrize("command", sorted(CASES))
def test_a_flag_and_set_of_its_key_give_the_same_config(command: str) -> None:
    argv, pairs = CASES[command]
    base = _config(argv)
    for flag, set_ in pairs:
        via_set = _config(argv + set_)
        assert via_set != base, (command, set_)  # the key was written
        if flag:
            via_flag = _config(argv + flag)
            assert via_flag == via_set, (command, flag, set_)
            assert config_hash(via_flag) == config_hash(via_set)
            with pytest.raises(ConfigError, match="give one"):  # both: refused, not one silently winning
                _config(argv + flag + set_)


@pytest.mark.parametrize("argv, named", [
    (["affine", "--preset", "relu242", "--set", "tolerance=1e-5"], "tolerance"),
    (["census", "--preset", "mlp-relu", "--set", "tokens=many"], "tokens"),
    (["attention", "count", "--group", "D4", "--heads", "8", "--set", "heads"], "key=value"),
    (["experiment", "objectives", "--quick", "--set", "train.nonsense=1"], "train.nonsense"),
    (["attribute", "--preset", "lifting-sanity", "--set", "weights=w.safetensors"], "does not accept --weights"),
    (["attribute", "--preset", "hamiltonian", "--stage", "init"], "no stages"),
    (["attribute", "--preset", "lifting-sanity", "--stage", "init"], "stage must be one of"),
    (["align", "--preset", "digits-mlp", "--stages", "before,rotated"], "unknown stage"),
    (["align", "--preset", "digits-mlp", "--set", "stages=[full,refined]"], "refines the 'orthogonal'"),
    (["align", "--preset", "digits-mlp", "--stages", "full,orthogonal,refined", "--refine-steps", "-1"], "refine-steps"),
    (["align", "--preset", "digits-mlp", "--set", "refine.lr=0"], "refine.lr"),
])
def test_a_bad_set_is_a_named_error(argv: list[str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        _config(argv)


@pytest.mark.parametrize("run", ["objectives", "lifting", "transformer"])
def test_the_papers_run_is_a_value(run: str) -> None:
    """``paper()`` is what ``paramsym reproduce`` runs at the full budget, what the documented command
    builds, and what ``--paper`` builds (one value, no constants elsewhere)."""
    import shlex

    from paramsym.reproduce.runs import RUNS
    from paramsym.runs.kinds import KINDS

    kind = {"objectives": "discovery-objectives", "lifting": "discovery-lifting",
            "transformer": "transformer-discovery"}[run]
    paper = KINDS[kind].load().config.paper()
    assert RUNS[run].config(False)["config"] == to_dict(paper)
    assert config_hash(paper) == config_hash(_config(["experiment", run, "--paper"]))
    if run != "transformer":  # its documented command (hashed by reproduce, so kept) omits --paper
        assert config_hash(_config(shlex.split(RUNS[run].command)[1:])) == config_hash(paper)
    assert config_hash(paper) != config_hash(KINDS[kind].load().config())  # the paper's run is not the default


def test_the_annulus_paper_protocol_is_a_value() -> None:
    from paramsym.experiments.attribution.annulus.run import AnnulusConfig
    from paramsym.reproduce.runs import RUNS

    for quick in (False, True):
        cfg = RUNS["annulus-wedge"].config(quick)["config"]
        assert cfg["protocol"] == cfg["gauge"] == "paper"
        assert cfg == to_dict(_config(["attribute", "--preset", "annulus-wedge", "--set", "protocol=paper", "--set",
                                       "gauge=paper"] + (["--quick"] if quick else [])))
        assert to_dict(AnnulusConfig.paper(quick=quick)) == {**cfg, "data": to_dict(AnnulusConfig()).get("data")}
