"""Every command a run kind: ``census``, ``affine``, ``compensate`` and the pure-math ``group`` and
``attention count|table|clusterings|classify`` write config/metrics/env, ``paramsym report``
renders their directories, the shared options mean the same everywhere (seed range, the
``--out``/``--resume`` rule), and a resumed run ends with the same ``metrics.json``, byte for byte,
as an uninterrupted one. A discovery run written before ``train.memory_gb`` became
``train.max_memory`` still resumes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_checks import cli_argv, cli_env, kill_at_checkpoint

from paramsym.cli import main
from paramsym.errors import ConfigError
from paramsym.options import MAX_SEED, seed_option
from paramsym.runs.kinds import KINDS

RUNS = {
    "affine": ["affine", "--preset", "linear2x2"],
    "census": ["census", "--preset", "mlp-relu"],
    "compensate": ["compensate", "--model", "llama-tiny", "--layer", "1", "--unit", "3", "--tokens", "8"],
    # the pure-math commands (seconds; no torch, except classify's weights)
    "group": ["group", "S3", "--rep", "perm"],
    "attention": ["attention", "table", "--group", "C4", "--copies", "1..3", "--heads", "2"],
    "attention-count": ["attention", "count", "--group", "D4", "--copies", "3", "--heads", "8"],
    "attention-clusterings": ["attention", "clusterings", "--group", "C6", "--heads", "3", "--limit", "2"],
    "attention-classify": ["attention", "classify", "LAYER", "--group", "D4"],
}
#: the command words of each kind (``attention count``), and a configuration flag each takes
WORDS = {k: argv[:2] if argv[0] == "attention" else argv[:1] for k, argv in RUNS.items()}
CONFIG_FLAG = {"group": ["--rep", "regular"], "attention": ["--heads", "3"], "attention-count": ["--heads", "3"],
               "attention-clusterings": ["--limit", "3"], "attention-classify": ["--seed", "3"]}
PURE = [k for k in RUNS if k.startswith(("group", "attention"))]


def _argv(kind: str, layer: Path | None = None) -> list[str]:
    return [str(layer) if a == "LAYER" else a for a in RUNS[kind]]


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """One finished run directory of each converted command (made once for this module)."""
    root = tmp_path_factory.mktemp("kinds")
    # an equivariant D4 layer for `attention classify` (clustering 2 of 3 heads)
    layer = root / "layer" / "layer.safetensors"
    assert main(["attention", "build", "--group", "D4", "--heads", "3", "--index", "2", "--out", str(layer.parent)]) == 0
    out = {"layer": layer}
    for kind in RUNS:
        assert main([*_argv(kind, layer), "--quiet", "--out", str(root / kind)]) == 0, kind
        out[kind] = root / kind
    return out


@pytest.mark.parametrize("kind", list(RUNS))
def test_run_directory_and_report(made, kind, capsys) -> None:
    d = made[kind]
    config = json.loads((d / "config.json").read_text())
    assert config["kind"] == kind
    prov = config["provenance"]
    assert prov["command"].startswith(f"{KINDS[kind].command} ") and len(prov["config_hash"]) == 16
    assert prov["code_version"]
    from paramsym.runs.execute import load_run_config
    from paramsym.runs.provenance import config_hash
    from paramsym.runs.rundir import RunDir

    cfg = load_run_config(RunDir(d))
    assert config_hash(cfg) == prov["config_hash"]  # the typed config round-trips through config.json
    starts = json.loads((d / "env.json").read_text())["starts"]
    assert len(starts) == 1 and starts[0]["resumed"] is False
    metrics = json.loads((d / "metrics.json").read_text())
    assert "seconds" not in metrics and "train_cpu_seconds" not in metrics  # times live in timing.json
    written = (d / "report.md").read_text()
    (d / "report.md").unlink()
    capsys.readouterr()
    assert main(["report", str(d)]) == 0
    assert (d / "report.md").read_text() == written  # re-rendered from the run's files alone
    capsys.readouterr()
    assert main(["report", str(d), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == metrics


def test_json_output_is_the_metrics_plus_timing(made, tmp_path, capsys) -> None:
    capsys.readouterr()
    assert main([*RUNS["affine"], "--json", "--quiet", "--out", str(tmp_path / "a")]) == 0
    printed = json.loads(capsys.readouterr().out)
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    timing = json.loads((tmp_path / "a" / "timing.json").read_text())
    assert printed == {**metrics, **timing}
    for key in ("dimension", "gap", "singular_values", "expected", "commutativity", "closure_residual", "seconds"):
        assert key in printed, key
    assert printed["dimension"] == printed["expected"] == 4  # gl(2), an independent closed form
    # the same run with --seed 0 given explicitly is the same configuration and the same numbers
    assert main([*RUNS["affine"], "--seed", "0", "--json", "--quiet", "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "metrics.json").read_bytes() == (tmp_path / "a" / "metrics.json").read_bytes()


@pytest.mark.parametrize("kind", list(RUNS))
def test_non_empty_out_is_refused_and_nothing_changes(made, kind, capsys) -> None:
    d = made[kind]
    before = _files(d)
    capsys.readouterr()
    assert main([*_argv(kind, made["layer"]), "--quiet", "--out", str(d)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RunDirError" in err and "is not empty" in err
    assert f"{KINDS[kind].command} --resume {d}" in err
    assert _files(d) == before


@pytest.mark.parametrize("kind", list(RUNS))
def test_resume_rule(made, kind, tmp_path, capsys) -> None:
    d = made[kind]
    before = _files(d)
    capsys.readouterr()
    words = WORDS[kind]
    # a directory that does not exist: a named error, not a silent fresh start
    assert main([*words, "--resume", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "RunDirError" in err and "no such directory" in err and err.count("\n") == 1
    assert not (tmp_path / "missing").exists()
    # another command's run
    other = next(k for k in RUNS if k != kind)
    assert main([*words, "--resume", str(made[other])]) == 2
    assert f"holds a run of kind '{other}'" in capsys.readouterr().err
    # configuration flags with --resume
    assert main([*words, "--resume", str(d), *CONFIG_FLAG.get(kind, ["--seed", "3"])]) == 2
    assert "saved configuration" in capsys.readouterr().err
    # a finished run is reported, not rerun
    assert main([*words, "--resume", str(d), "--json", "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    metrics = json.loads((d / "metrics.json").read_text())
    assert {k: printed[k] for k in metrics if k != "per_unit"} == {k: v for k, v in metrics.items() if k != "per_unit"}
    assert _files(d) == before


def test_resume_of_an_unfinished_run_recomputes_the_same_bytes(tmp_path, capsys) -> None:
    d = tmp_path / "a"
    assert main([*RUNS["affine"], "--quiet", "--out", str(d)]) == 0
    full = (d / "metrics.json").read_bytes()
    (d / "metrics.json").unlink()  # as if killed before its metrics
    (d / "report.md").unlink()
    assert main(["report", str(d)]) == 2
    assert "paramsym affine --resume" in capsys.readouterr().err
    assert main(["affine", "--resume", str(d), "--quiet"]) == 0
    assert (d / "metrics.json").read_bytes() == full
    starts = json.loads((d / "env.json").read_text())["starts"]
    assert [s["resumed"] for s in starts] == [False, True]


def test_edited_config_is_refused_on_resume(tmp_path, capsys) -> None:
    d = tmp_path / "a"
    assert main([*RUNS["affine"], "--quiet", "--out", str(d)]) == 0
    (d / "metrics.json").unlink()
    cfg = json.loads((d / "config.json").read_text())
    cfg["tol"] = 1e-3
    (d / "config.json").write_text(json.dumps(cfg))
    capsys.readouterr()
    assert main(["affine", "--resume", str(d)]) == 2
    assert "was edited after the run started" in capsys.readouterr().err


@pytest.mark.parametrize("raw", [str(2**64), str(2**63), "-1", "1.5", "nan", "ten", "", str(-(2**64))])
def test_seed_range_is_one_rule(raw) -> None:
    with pytest.raises(ConfigError, match=r"--seed must be an integer seed with 0 <= seed < 2\*\*63"):
        seed_option(raw)


def test_seed_edges_accepted() -> None:
    assert seed_option("0") == 0 and seed_option(str(2**63 - 1)) == MAX_SEED == 2**63 - 1


@pytest.mark.parametrize("argv", [
    ["affine", "--preset", "linear2x2"],
    ["census", "--preset", "mlp-relu"],
    ["compensate", "--model", "llama-tiny", "--layer", "0", "--unit", "0"],
    ["attention", "classify", "w.safetensors", "--group", "D4"],
    ["discover"],
    ["attribute", "--preset", "lifting-sanity"],
])
@pytest.mark.parametrize("seed", [str(2**64), "-1"])
def test_every_command_refuses_the_same_bad_seeds(argv, seed, tmp_path, capsys) -> None:
    capsys.readouterr()
    assert main([*argv, "--seed", seed, "--out", str(tmp_path / "x")] if argv[0] != "attention" else
                [*argv, "--seed", seed]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ConfigError" in err and "--seed" in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()


LEARNED = [*RUNS["compensate"], "--learned", "--objective", "finite", "--steps", "40", "--checkpoint-every", "5",
           "--quiet"]


@pytest.mark.slow
def test_compensate_learned_killed_at_a_checkpoint_resumes_byte_identical(tmp_path: Path) -> None:
    full = tmp_path / "full"
    subprocess.run(cli_argv(*LEARNED, "--out", str(full)), check=True, env=cli_env(), capture_output=True, timeout=900)

    killed = tmp_path / "killed"
    step = kill_at_checkpoint(cli_argv(*LEARNED, "--out", str(killed)), killed,
                              killed / "discovery-finite" / "checkpoint" / "state.json", timeout=600)
    assert 0 < step < 40

    subprocess.run(cli_argv("compensate", "--resume", str(killed), "--quiet"), check=True, env=cli_env(),
                   capture_output=True, timeout=900)
    assert (killed / "metrics.json").read_bytes() == (full / "metrics.json").read_bytes()
    sub_starts = json.loads((killed / "discovery-finite" / "env.json").read_text())["starts"]
    assert [s.get("resumed_from_step") for s in sub_starts] == [None, step]  # training continued, not restarted
    assert [s["resumed"] for s in json.loads((killed / "env.json").read_text())["starts"]] == [False, True]


def test_every_listed_preset_command_parses_and_names_a_known_preset(capsys) -> None:
    """``paramsym list --json``: each row's command is a valid command line of its command, and the
    name resolves in that command's own table (one vocabulary, no stale rows); the pure-math rows'
    commands build, through the command's own flag mapping, the configuration fields they list."""
    import shlex

    from paramsym.attention import commands
    from paramsym.cli import build_parser
    from paramsym.groups import cli as group_cli
    from paramsym.kinds.catalog import all_presets
    from paramsym.runs.kinds import KINDS

    builders = {"group": group_cli.describe_config, "attention": commands.table_config,
                "attention-count": commands.count_config, "attention-clusterings": commands.clusterings_config}
    parser = build_parser()
    rows = all_presets()
    assert len({(r.kind, r.name) for r in rows}) == len(rows)
    assert set(builders) <= {r.kind for r in rows}
    for r in rows:
        args = parser.parse_args(shlex.split(r.command)[1:])
        assert r.kind in KINDS, r
        assert KINDS[r.kind].command == " ".join(shlex.split(r.command)[:len(KINDS[r.kind].command.split())]), r
        if r.kind in builders:
            cfg = builders[r.kind](args)
            assert r.fields and {k: getattr(cfg, k) for k in r.fields} == dict(r.fields), r
            continue
        assert getattr(args, "preset", None) == r.name or getattr(args, "model", None) == r.name, r
    from paramsym.presets import Preset, PresetTable

    table = PresetTable("demo preset", [Preset("a", "affine", "paramsym affine --preset a", "one")])
    with pytest.raises(ConfigError, match=r"--preset 'b' is not a known demo preset; valid: \['a'\]"):
        table.get_preset("b")
    with pytest.raises(ValueError, match="duplicate"):
        PresetTable("demo preset", [table["a"], table["a"]])


# ------------------------------------------------------------------------------ the pure-math kinds
@pytest.mark.parametrize("kind", PURE)
def test_pure_math_commands_print_the_same_with_and_without_out(made, kind, tmp_path, capsys) -> None:
    argv = _argv(kind, made["layer"])
    capsys.readouterr()
    assert main([*argv, "--quiet"]) == 0
    plain = capsys.readouterr().out
    assert main([*argv, "--quiet", "--out", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().out == plain
    assert (tmp_path / "run" / "output.txt").read_text() == plain
    assert plain.strip() and plain.strip() in (tmp_path / "run" / "report.md").read_text() or kind == "attention"
    # --json prints the metrics, with and without --out
    assert main([*argv, "--quiet", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "run" / "metrics.json").read_text())
    # a finished run resumed prints the same again and changes nothing
    before = _files(tmp_path / "run")
    assert main([*WORDS[kind], "--resume", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().out == plain and _files(tmp_path / "run") == before
    # an unfinished one (no metrics.json) is computed again, to the same bytes
    metrics = (tmp_path / "run" / "metrics.json").read_bytes()
    (tmp_path / "run" / "metrics.json").unlink()
    assert main([*WORDS[kind], "--resume", str(tmp_path / "run"), "--quiet"]) == 0
    assert capsys.readouterr().out == plain and (tmp_path / "run" / "metrics.json").read_bytes() == metrics
    starts = json.loads((tmp_path / "run" / "env.json").read_text())["starts"]
    assert [s["resumed"] for s in starts] == [False, True]  # a finished run resumed records no start


def test_pure_math_required_arguments_and_resume(made, tmp_path, capsys) -> None:
    """Without --resume, the arguments a command needs are required with argparse's message (exit 2,
    nothing written); with --resume they are not, and passing them is refused."""
    for argv, missing in ((["group"], "group"), (["attention", "count", "--group", "D4"], "--heads"),
                          (["attention", "classify", "--group", "D4"], "weights")):
        with pytest.raises(SystemExit) as exc:
            main([*argv, "--out", str(tmp_path / "x")])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert f"error: the following arguments are required: {missing}" in err and err.count("\n") == 1
        assert not (tmp_path / "x").exists()
    capsys.readouterr()
    assert main(["group", "S3", "--resume", str(made["group"])]) == 2
    assert "do not pass --group" in capsys.readouterr().err


def test_old_attention_table_directory_still_renders_and_resumes(made, tmp_path, capsys) -> None:
    """A table run written before the kind was managed (``"run": "component-table"``, metrics with
    only the rows, no provenance, no output.txt) re-renders and resumes as finished."""
    import shutil

    old = tmp_path / "old"
    shutil.copytree(made["attention"], old)
    cfg = json.loads((old / "config.json").read_text())
    cfg.pop("provenance")
    cfg.update({"run": "component-table", "group_name": "C4"})
    (old / "config.json").write_text(json.dumps(cfg))
    metrics = json.loads((old / "metrics.json").read_text())
    (old / "metrics.json").write_text(json.dumps({"rows": metrics["rows"]}))
    (old / "output.txt").unlink()
    report = (made["attention"] / "report.md").read_text()
    (old / "report.md").unlink()
    assert main(["report", str(old)]) == 0
    assert (old / "report.md").read_text() == report
    capsys.readouterr()
    assert main(["attention", "table", "--resume", str(old)]) == 0
    assert capsys.readouterr().out == (made["attention"] / "output.txt").read_text()


def _legacy_discovery_run(d: Path) -> bytes:
    """A small finished discovery run in ``d``, its config.json rewritten as before the rename
    (``train.memory_gb`` = 3.0 GiB instead of ``train.max_memory``); returns its metrics.json."""
    argv = ["discover", "--preset", "sigmoid-scalar", "--steps", "4", "--quiet", "--set", "action.width=8",
            "--set", "train.max_memory=3GiB", "--set", "verdict.samples=20", "--set", "verdict.rhos=[0.5]",
            "--set", "verdict.factors=[1]", "--set", "verdict.curve_points=2", "--set", "verdict.curve_times=3"]
    assert main([*argv, "--out", str(d)]) == 0
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["train"]["max_memory"] == 3 * 2**30
    del cfg["train"]["max_memory"]
    cfg["train"]["memory_gb"] = 3.0  # as the run was written before the rename
    (d / "config.json").write_text(json.dumps(cfg))
    return (d / "metrics.json").read_bytes()


def test_discovery_run_written_with_memory_gb_loads_and_resumes(tmp_path, capsys) -> None:
    """An old run's config.json with ``train.memory_gb`` (GiB as a number) loads as
    ``train.max_memory`` (bytes): ``--resume`` of the finished run and ``paramsym report`` work."""
    from paramsym.discovery.files import load_config
    from paramsym.runs.rundir import RunDir

    d = tmp_path / "run"
    _legacy_discovery_run(d)
    assert load_config(RunDir(d)).train.max_memory == 3 * 2**30
    from paramsym.runs.execute import load_run_config

    assert load_run_config(RunDir(d)) == load_config(RunDir(d))  # the one reader, discovery included
    before = _files(d)
    capsys.readouterr()
    assert main(["discover", "--resume", str(d), "--quiet"]) == 0
    assert "already finished" in capsys.readouterr().err and _files(d) == before
    (d / "report.md").unlink()
    assert main(["report", str(d)]) == 0 and (d / "report.md").exists()


@pytest.mark.slow
def test_discovery_run_written_with_memory_gb_resumes_to_the_same_metrics(tmp_path) -> None:
    """Killed before its metrics (removed here), the old run continues to the metrics of the
    uninterrupted one, byte for byte."""
    d = tmp_path / "run"
    full = _legacy_discovery_run(d)
    for name in ("metrics.json", "report.md"):
        (d / name).unlink()
    assert main(["discover", "--resume", str(d), "--quiet"]) == 0
    assert (d / "metrics.json").read_bytes() == full
