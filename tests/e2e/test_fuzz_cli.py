"""Property-based: random and malformed command lines never give a traceback.

Hypothesis feeds every sub-command (discover, list, report, experiment objectives|lifting|transformer,
attribute, affine, census, compensate, teleport, align, sweep, reproduce, attention
count|table|clusterings|classify|build, group) random tokens, ``--set``
overrides (valid keys with malformed values, unknown keys), group specs (random text, huge orders
such as S12, C0, D-1, products, random permutation generators), numeric options (negative, zero,
huge, NaN, inf, text) and corrupted run directories (``report``, ``discover --resume``). The
command line must exit with status 2 and exactly one line on stderr (or 0 for a valid quick
input), never raise out of :func:`paramsym.cli.main` (a traceback), and never remove or change a
run directory's files when it refuses.

No generated command can start a real training run: the training commands (discover,
experiment, attribute) and the model commands (census, compensate, teleport, align, reproduce)
always end with ``--out`` naming an existing *file*, which is refused after every option and the
configuration have been validated but before any work; ``affine`` ends with ``--max-memory 1``
(its solver's estimate is refused before allocating) and ``sweep`` with ``--plan``; groups that
are computed have order <= 24 (larger names are refused by the enumeration limit at once).
Every command line tried is counted per command and outcome (exit 0, or the named error);
:func:`test_every_command_was_fuzzed` checks that each command was tried and prints the counts
(``pytest -s``; also written to ``$PARAMSYM_FUZZ_COUNTS`` when set).
Commands run in-process (:func:`paramsym.cli.main` with ``capsys``) in a scratch working
directory; :func:`test_a_few_malformed_commands_in_a_subprocess` checks the real stderr.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from paramsym.cli import main
from paramsym.config import flat_keys
from paramsym.discovery.config import DiscoverConfig

FUZZ = settings(deadline=None, database=None, max_examples=int(os.environ.get("PARAMSYM_FUZZ_EXAMPLES", "50")),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

DISCOVER_KEYS = flat_keys(DiscoverConfig())


@pytest.fixture()
def scratch(tmp_path: Path, monkeypatch) -> Path:
    """A scratch working directory holding ``blocker``, an existing file used as a refused ``--out``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    (tmp_path / "blocker").write_text("a file, not a run directory\n")
    return tmp_path


#: (command, outcome) -> number of command lines tried; outcome "exit 0", "usage error" or the error's name
COUNTS: collections.Counter = collections.Counter()
_SUBCOMMANDS = {"attention", "experiment"}


def _command_of(argv: list[str]) -> str:
    if argv and argv[0] in _SUBCOMMANDS and len(argv) > 1 and not argv[1].startswith("-"):
        return f"{argv[0]} {argv[1]}"
    return argv[0] if argv else "(none)"


def _cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    """Run ``paramsym argv`` in-process; check the exit status and stderr contract; return them."""
    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse: usage errors, --help, --version
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    out, err = capsys.readouterr()
    assert rc in (0, 2), (argv, rc, err)
    assert "Traceback" not in err, (argv, err)
    outcome = "exit 0"
    if rc == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1, (argv, err)
        assert "error:" in lines[0], (argv, err)
        tail = lines[0].split("error: ", 1)[1]
        name = tail.split(":", 1)[0]
        outcome = name if name.isidentifier() and name[:1].isupper() else "usage error"
    COUNTS[(_command_of(argv), outcome)] += 1
    return rc, out, err


# ----------------------------------------------------------------------------- value strategies
numbers = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.sampled_from(["0", "-1", "1e3", "1.5", "-0.0", "nan", "NaN", "inf", "-inf", "1e309", "ten", "", " ",
                     "0x10", "1_000", "2**64", str(2**64), str(10**40), "--", "١٢"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=8),
)
junk = st.one_of(st.text(max_size=12), st.sampled_from(["-", "--", "-x", "--bogus", "=", "key=", "=value", "\x00"]))
yaml_junk = st.one_of(
    numbers,
    st.sampled_from(["[", "]", "{", "[1,", "{a: 1}", "[]", "[-1]", "[0.5, nan]", "null", "~", "true", "yes", ".nan",
                     ".inf", "-.inf", "'quoted", "a: b: c", "!!python/object:os.system", "*alias", "&anchor x",
                     "cpu", "cuda:99", "tpu", "hybrid", "magic"]),
    st.text(max_size=10),
)
set_keys = st.one_of(st.sampled_from(DISCOVER_KEYS), st.sampled_from(["train", "nope", "train.lrr", "", ".", "train..lr",
                                                                     "seed.x", "verdict"]), st.text(max_size=10))
overrides = st.lists(st.tuples(set_keys, yaml_junk).map(lambda kv: f"{kv[0]}={kv[1]}") | junk, min_size=1, max_size=3)

GUARD = ["--out", "blocker"]  # an existing file: refused before any training


def _flatten(pairs) -> list[str]:
    return [t for pair in pairs for t in pair]


def _options(flags: list[str], values=numbers):
    return st.lists(st.tuples(st.sampled_from(flags), values), max_size=4).map(_flatten)


COMMANDS: dict[str, tuple[list[str], list[str]]] = {
    # prefix: (flags taking a value, the prefix's required/positional tokens)
    "discover": (["--preset", "--objective", "--seed", "--steps", "--set", "--device", "--resume"], []),
    "list": ([], []),
    "report": ([], ["nowhere"]),
    "experiment objectives": (["--preset", "--variants", "--seeds", "--steps", "--set"], []),
    "experiment lifting": (["--seeds", "--steps", "--set"], []),
    "attribute": (["--preset", "--stage", "--flow", "--seed", "--threads", "--set"], []),
    "attention count": (["--group", "--copies", "--heads", "--rep", "--max-memory"], ["--group", "C2", "--heads", "1"]),
    "attention table": (["--copies", "--heads", "--rep", "--format", "--max-memory"], ["--group", "C2"]),
    "attention clusterings": (["--heads", "--up-to", "--limit"], ["--group", "C2", "--heads", "2"]),
    "attention classify": (["--rep", "--copies", "--num-heads", "--tol", "--bias-tol", "--seed"],
                           ["missing.safetensors", "--group", "C2"]),
    "attention build": (["--heads", "--index", "--rep", "--copies", "--seed", "--perturb"],
                        ["--group", "C2", "--heads", "1", "--index", "0", "--out", "layer"]),
    "group": (["--rep", "--max-memory"], ["C2"]),
    "experiment transformer": (["--variants", "--seeds", "--steps", "--set"], []),
    "affine": (["--preset", "--tol", "--rule", "--samples", "--seed", "--threads"], ["--preset", "linear2x2"]),
    "census": (["--dtype", "--seed", "--tokens", "--threads", "--model"], ["--preset", "mlp-relu"]),
    "compensate": (["--layer", "--unit", "--tokens", "--prefix", "--compensators", "--motion", "--seed", "--max-memory",
                    "--objective", "--steps", "--rho", "--threads"],
                   ["--model", "pythia-tiny", "--layer", "0", "--unit", "0"]),
    "teleport": (["--every", "--seeds", "--optimizer", "--steps", "--threads", "--action"], ["--preset", "booth"]),
    "align": (["--symmetries", "--data", "--activation", "--width", "--points", "--seed", "--threads", "--max-memory",
               "--preset"], ["a.safetensors", "b.safetensors"]),
    "sweep": (["--backend", "--address", "--workers", "--out"], [str(Path(__file__).resolve().parents[2] / "examples"
                                                                    / "sweeps" / "tiny.yaml")]),
    "reproduce": (["--threads", "--write-docs"], []),
}
TRAINING = ("discover", "experiment", "attribute", "census", "compensate", "teleport", "align", "reproduce")
#: the last tokens of a command line that keep it from starting long work (see module docstring)
GUARDS = {"affine": ["--max-memory", "1"], "sweep": ["--plan"]}
FLAGS = ["--json", "--quiet", "--quick", "--list", "--count-only", "--overwrite", "--help", "-h", "--subgroups"]


def _safe(prefix: str, argv: list[str]) -> list[str]:
    """Make a generated command safe to run: training commands end with the refused ``--out``."""
    if prefix.startswith(TRAINING):
        return [*argv, *GUARD]
    return [*argv, *GUARDS.get(prefix, [])]


def _too_big(argv: list[str]) -> bool:
    """Sizes the pure-math commands would compute for long (known slow paths, see the report):
    a --copies range, or heads/copies above 24."""
    for opt, value in zip(argv, argv[1:]):
        if opt == "--copies" and ".." in value:
            return True
        if not _bounded(opt, value):
            return True
    return False


#: examples per command of the per-command tests (the whole module stays within about 2 minutes)
EACH = settings(FUZZ, max_examples=int(os.environ.get("PARAMSYM_FUZZ_EACH", "4")))
MODEL = settings(FUZZ, max_examples=int(os.environ.get("PARAMSYM_FUZZ_MODEL", "25")))


@EACH
@given(data=st.data())
@pytest.mark.parametrize("prefix", sorted(COMMANDS))
def test_random_tokens_for_every_command(scratch, capsys, prefix: str, data) -> None:
    flags, fixed = COMMANDS[prefix]
    extra = data.draw(st.lists(st.one_of(st.sampled_from(FLAGS), junk, numbers), max_size=3))
    opts = data.draw(_options(flags, st.one_of(numbers, junk)) if flags else st.just([]))
    argv = _safe(prefix, [*prefix.split(), *fixed, *opts, *extra])
    if _too_big(argv):
        return
    _cli(capsys, argv)


@FUZZ
@given(command=st.sampled_from(["discover", "experiment objectives", "experiment lifting", "attribute"]),
       sets=overrides, quick=st.booleans())
def test_set_overrides(scratch, capsys, command: str, sets: list[str], quick: bool) -> None:
    argv = command.split()
    if command == "attribute":
        argv += ["--preset", "lifting-sanity"]
    if quick and command != "discover":
        argv.append("--quick")
    for s in sets:
        argv += ["--set", s]
    rc, _, _ = _cli(capsys, [*argv, *GUARD])
    assert rc == 2
    assert [p.name for p in scratch.iterdir()] == ["blocker"]  # nothing created


@FUZZ
@given(key=st.sampled_from(DISCOVER_KEYS), value=yaml_junk)
def test_every_discover_key_with_malformed_values(scratch, capsys, key: str, value: str) -> None:
    rc, _, err = _cli(capsys, ["discover", "--set", f"{key}={value}", *GUARD])
    assert rc == 2 and "paramsym discover: error:" in err


def _order(name: str) -> int | None:
    """The order of a named group (C/Z/D/S/A n), or None when the name is not of that form."""
    import math

    kind, n = name[:1], name[1:]
    if not n.isdigit() or kind not in "CZDSA":
        return None
    n = int(n)
    return {"C": n, "Z": n, "D": 2 * n, "S": math.factorial(min(n, 30)), "A": math.factorial(min(n, 30)) // 2}[kind]


def _fast_group(spec: str) -> bool:
    """Groups whose computation is quick: order <= 24, or a single factor over the enumeration limit."""
    parts = spec.split("x")
    orders = [_order(p) for p in parts]
    if any(o is None for o in orders):
        return True  # refused by name parsing at once
    if any(p[:1] in "SA" and int(p[1:]) > 1000 for p in parts):
        return False  # known: S/A n with huge n formats n! in the error (groups/finite.py), see the report
    total = 1
    for o in orders:
        total *= max(o, 1)
    return total <= 24 or (len(parts) == 1 and total > 5040)


group_names = st.one_of(
    st.tuples(st.sampled_from(["C", "Z", "D", "S", "A", "Q", "V", "c", "d", "X", ""]),
              st.sampled_from(["0", "-1", "1", "2", "3", "4", "6", "8", "12", "100000", "10**9", "1.5", "", "e"]))
    .map("".join),
    st.sampled_from(["Q8", "V4", "S12", "C0", "D-1", "A0", "S0", "C2xC3", "D4xC2", "C2xC2xC2", "xC2", "C2x", "C2xxC3",
                     "S7xS7", "perm:", "perm:[]", "perm:[[0]]", "perm:[[1,0],[0,1,2]]", "perm:[[2,2,0]]", "perm:{}",
                     "mat:[[[0,-1],[1,0]]]", "mat:[[[2,0],[0,1]]]", "mat:[[[1]]]", "mat:[]", "mat:[[[nan]]]",
                     "group.json", "/proc/self/mem", "/", "."]),
    st.lists(st.permutations(list(range(4))), min_size=1, max_size=2).map(lambda ps: "perm:" + str([list(p) for p in ps])),
    st.text(max_size=10),
)


@FUZZ
@given(spec=group_names, where=st.sampled_from(["group", "count", "clusterings"]), heads=st.sampled_from(["1", "2", "3"]))
def test_group_specs(scratch, capsys, spec: str, where: str, heads: str) -> None:
    if not _fast_group(spec):
        return
    argv = {"group": ["group", spec, "--quiet"],
            "count": ["attention", "count", "--group", spec, "--heads", heads, "--quiet"],
            "clusterings": ["attention", "clusterings", "--group", spec, "--heads", heads, "--count-only"]}[where]
    _cli(capsys, argv)


NUMERIC = [  # (command tokens, option, minimum or None for "any finite number"); a training command gets GUARD
    (["discover"], "--steps", 1), (["discover"], "--seed", 0),
    (["experiment", "objectives"], "--steps", 1), (["experiment", "lifting"], "--steps", 1),
    (["attribute", "--preset", "lifting-sanity"], "--threads", 1),
    (["attribute", "--preset", "lifting-sanity"], "--seed", 0),
    (["attention", "count", "--group", "C2"], "--heads", 1),
    (["attention", "count", "--group", "C2", "--heads", "1"], "--copies", 1),
    (["attention", "table", "--group", "C2"], "--heads", 1),
    (["attention", "clusterings", "--group", "C2"], "--heads", 1),
    (["attention", "clusterings", "--group", "C2", "--heads", "2"], "--limit", 0),
    (["attention", "classify", "missing.safetensors", "--group", "C2"], "--tol", None),
    (["attention", "classify", "missing.safetensors", "--group", "C2"], "--seed", 0),
    (["attention", "classify", "missing.safetensors", "--group", "C2"], "--num-heads", 1),
    (["attention", "build", "--group", "C2", "--heads", "1", "--out", "l"], "--index", 0),
    (["attention", "build", "--group", "C2", "--index", "0", "--out", "l"], "--heads", 1),
    (["attention", "build", "--group", "C2", "--heads", "1", "--index", "0", "--out", "l"], "--perturb",
     None),
]
#: values every numeric option must refuse
BAD = ["nan", "inf", "-inf", "ten", "", "1e309", "--", "0x10"]


def _clearly_invalid(value: str, minimum: int | None) -> bool:
    """Not a finite number, or (for integer options) below the minimum or fractional."""
    import math

    if value.strip() in BAD:
        return True
    try:
        v = float(value)
    except ValueError:
        return False  # other text: some commands read Unicode digits or 1_000 as Python's int does
    return not math.isfinite(v) or (minimum is not None and (v < minimum or v != int(v)))


def _bounded(option: str, value: str) -> bool:
    """Keep sizes that the pure-math commands compute small (a huge count is a known slow path)."""
    try:
        v = float(value)
    except ValueError:
        return True
    return not (option in ("--heads", "--copies", "--num-heads") and v > 24)


@FUZZ
@given(case=st.sampled_from(NUMERIC), value=numbers)
def test_numeric_options(scratch, capsys, case, value: str) -> None:
    tokens, option, minimum = case
    if not _bounded(option, value):
        return
    argv = [*tokens, f"{option}={value}"]  # the = form lets values start with '-'
    if tokens[0] in TRAINING:
        argv += GUARD
    rc, _, err = _cli(capsys, argv)
    if _clearly_invalid(value, minimum):
        assert rc == 2, (argv, err)
        if minimum is not None or "nan" in value.lower() or "inf" in value.lower():
            assert option in err or "error:" in err


# ----------------------------------------------------------------------------- run directories
#: a tiny run whose last checkpoint is its final step: a successful resume only reruns the verdict
TINY = ["--preset", "sigmoid-scalar", "--steps", "20", "--quiet", "--set", "train.checkpoint_every=10",
        "--set", "action.width=16", "--set", "verdict.samples=20", "--set", "verdict.rhos=[0.5]",
        "--set", "verdict.factors=[1]", "--set", "verdict.curve_points=2", "--set", "verdict.curve_times=3"]


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> dict[str, Path]:
    """A finished tiny discovery run and an attention table run (through the command line)."""
    root = tmp_path_factory.mktemp("fuzz-cli")
    disc, att = root / "discovery", root / "attention"
    assert main(["discover", *TINY, "--out", str(disc)]) == 0
    assert main(["attention", "table", "--group", "C4", "--copies", "1..3", "--heads", "2", "--out", str(att),
                 "--quiet"]) == 0
    return {"discovery": disc, "attention": att}


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


damage = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0.0, 0.95)),
    st.tuples(st.just("garbage"), st.binary(min_size=1, max_size=128)),
    st.tuples(st.just("replace"), st.sampled_from([b"", b"[]", b"{}", b"null", b"17", b'"x"', b'{"kind": 3}',
                                                   b'{"kind": "attention"}', b'{"kind": "discovery", "train": []}',
                                                   b'{"rows": [{"copies": "a"}]}', b'{"rows": 5}',
                                                   b'{"step": -1, "tensor_file": "../x"}', b'{"starts": 3}',
                                                   b'{"kind": "attention", "run": "component-table"}'])),
    st.tuples(st.just("delete"), st.none()),
)


def _damage(path: Path, how) -> None:
    kind, arg = how
    if kind == "truncate":
        path.write_bytes(path.read_bytes()[: int(path.stat().st_size * arg)])
    elif kind == "garbage":
        path.write_bytes(arg)
    elif kind == "replace":
        path.write_bytes(arg)
    else:
        path.unlink()


@settings(deadline=None, database=None, max_examples=int(os.environ.get("PARAMSYM_FUZZ_RUNS", "8")), phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(kind=st.sampled_from(["discovery", "attention"]), command=st.sampled_from(["report", "resume"]),
       unfinished=st.booleans(), data=st.data())
def test_corrupted_run_directories(templates, capsys, kind: str, command: str, unfinished: bool, data) -> None:
    root = Path(tempfile.mkdtemp(prefix="paramsym-fuzz-cli-"))
    try:
        run = root / "run"
        shutil.copytree(templates[kind], run)
        names = sorted(_files(run))
        hurt = data.draw(st.dictionaries(st.sampled_from(names), damage, min_size=1, max_size=2))
        if unfinished and (run / "metrics.json").exists() and "metrics.json" not in hurt:
            (run / "metrics.json").unlink()
        for name, how in hurt.items():
            if (run / name).exists():
                _damage(run / name, how)
        before = _files(run)
        argv = ["report", str(run)] if command == "report" else ["discover", "--resume", str(run), "--quiet"]
        rc, _, _ = _cli(capsys, argv)
        after = _files(run)
        if rc == 2 and command == "report":
            assert after == before  # a refused report changes nothing
        elif rc == 2:  # a refused resume changes no file (it may have re-created a deleted block.json)
            assert {k: v for k, v in after.items() if k in before} == before and set(after) - set(before) <= {"block.json"}
        else:
            assert set(before) <= set(after)  # success may rewrite files, never remove one
    finally:
        shutil.rmtree(root, ignore_errors=True)


@MODEL
@given(data=st.data())
@pytest.mark.parametrize("prefix", ["affine", "census", "compensate", "teleport", "align", "sweep", "reproduce",
                                    "experiment transformer"])
def test_model_commands(scratch, capsys, prefix: str, data) -> None:
    """The commands added by issue 20, each with its own examples: options with edge values (negative,
    2**64, NaN, inf, text) and random tokens, ending with the guard; nothing is created."""
    flags, fixed = COMMANDS[prefix]
    edge = st.sampled_from(["-1", str(2**64), str(2**64 - 1), "nan", "inf", "-inf", "0", "1e400", "", "x", "\n"])
    opts = data.draw(_options(flags, st.one_of(edge, numbers, junk)))
    extra = data.draw(st.lists(st.one_of(st.sampled_from(FLAGS), junk), max_size=2))
    argv = _safe(prefix, [*prefix.split(), *fixed, *opts, *extra])
    if _too_big(argv):
        return
    rc, _, _ = _cli(capsys, argv)
    if "--help" not in argv and "-h" not in argv and "--list" not in argv:
        assert sorted(p.name for p in scratch.iterdir()) == ["blocker"], argv  # refused or planned: nothing written


# ----------------------------------------------------------------------------- issue 36: the new classes
#: values of --seed / --threads / --out that must never be read as a number or a path
BAD_SHARED = {"--seed": ["٣", " 3", "+1", "3 ", "١٢", "3\n", "0x1", "3.0", ""],
              "--threads": ["٣", " 2", "+1", "100000", "0", "2\t", ""],
              "--out": ["", "a\nb", "x\ty", " ", "o\x00"]}


@FUZZ
@given(prefix=st.sampled_from(sorted(COMMANDS)), data=st.data())
def test_shared_options_for_every_command(scratch, capsys, prefix: str, data) -> None:
    """``--seed`` (ASCII digits only), ``--threads`` (1..4096) and ``--out`` (not empty, no control
    characters) mean the same for every command: a bad value is refused (named, or unknown to a
    command without the flag), and nothing is created."""
    flag = data.draw(st.sampled_from(sorted(BAD_SHARED)))
    value = data.draw(st.sampled_from(BAD_SHARED[flag]))
    flags, fixed = COMMANDS[prefix]
    argv = [*prefix.split(), *fixed, f"{flag}={value}"]
    if flag != "--out":
        argv = _safe(prefix, argv)
    rc, _, err = _cli(capsys, argv)
    assert rc == 2, (argv, err)
    assert sorted(p.name for p in scratch.iterdir()) == ["blocker"], argv


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """A tiny GPT-2 saved twice (A, B), two MLP files and an RMHSA layer, made once."""
    transformers = pytest.importorskip("transformers")
    import torch
    from safetensors.torch import save_file

    root = tmp_path_factory.mktemp("ckpt")
    cfg = transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=40, n_positions=16)
    for name, seed in (("A", 0), ("B", 1)):
        torch.manual_seed(seed)
        transformers.GPT2Model(cfg).save_pretrained(root / name)
    g = torch.Generator().manual_seed(0)
    for name in ("a", "b"):
        save_file({"fc1.weight": torch.randn(8, 64, generator=g), "fc1.bias": torch.randn(8, generator=g),
                   "fc2.weight": torch.randn(10, 8, generator=g), "fc2.bias": torch.randn(10, generator=g)},
                  str(root / f"{name}.safetensors"))
    assert main(["attention", "build", "--group", "C2", "--heads", "1", "--index", "0", "--out",
                 str(root / "layer")]) == 0
    return {"hf": root / "A", "hf_b": root / "B", "mlp": root / "a.safetensors", "mlp_b": root / "b.safetensors",
            "layer": root / "layer" / "layer.safetensors"}


def _damaged(src: Path, dst: Path, defect: str, pick: int) -> Path:
    """A copy of checkpoint ``src`` (a directory or a safetensors file) with one ``defect``."""
    import torch
    from safetensors.torch import load_file, save_file

    if src.is_dir():
        shutil.copytree(src, dst)
        file = dst / "model.safetensors"
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        file = dst
    t = load_file(str(src / "model.safetensors" if src.is_dir() else src))
    floats = sorted(k for k, v in t.items() if v.is_floating_point())
    name = floats[pick % len(floats)]
    if defect == "missing":
        del t[name]
    elif defect == "unexpected":
        t["stray.weight"] = torch.zeros(2)
    elif defect == "int":
        t[name] = t[name].round().to(torch.int32)
    else:  # nan / inf / -inf at one entry
        flat = t[name].clone().reshape(-1)
        flat[pick % flat.numel()] = {"nan": float("nan"), "inf": float("inf"), "-inf": -float("inf")}[defect]
        t[name] = flat.reshape(t[name].shape)
    save_file(t, str(file), metadata={"format": "pt"})
    return dst


#: every command that reads a checkpoint: (which checkpoint it takes, argv with D = the damaged one)
CHECKPOINT_COMMANDS = {
    "census --model": ("hf", lambda d, c: ["census", "--model", d, "--out", "o"]),
    "census --export": ("hf", lambda d, c: ["census", "--model", d, "--export", "permutation-spec", "--out", "o"]),
    "compensate --model": ("hf", lambda d, c: ["compensate", "--model", d, "--layer", "0", "--unit", "0", "--out", "o"]),
    "align --census-groups (A)": ("hf", lambda d, c: ["align", d, str(c["hf_b"]), "--census-groups", "--out", "o"]),
    "align --census-groups (B)": ("hf", lambda d, c: ["align", str(c["hf"]), d, "--census-groups", "--out", "o"]),
    "align (HF B)": ("hf", lambda d, c: ["align", str(c["hf"]), d, "--out", "o"]),
    "align (MLP A)": ("mlp", lambda d, c: ["align", d, str(c["mlp_b"]), "--out", "o"]),
    "align (MLP B)": ("mlp", lambda d, c: ["align", str(c["mlp"]), d, "--out", "o"]),
    "attention classify": ("layer", lambda d, c: ["attention", "classify", d, "--group", "C2", "--out", "o"]),
}


@FUZZ
@given(command=st.sampled_from(sorted(CHECKPOINT_COMMANDS)),
       defect=st.sampled_from(["missing", "unexpected", "int", "nan", "inf", "-inf"]), pick=st.integers(0, 10**6))
def test_incomplete_or_non_finite_checkpoints(scratch, capsys, checkpoints, command, defect, pick) -> None:
    """Every command that reads weights refuses a checkpoint with a tensor missing or unexpected,
    integer weights, or NaN/inf entries: one named line, exit 2, nothing written."""
    kind, make = CHECKPOINT_COMMANDS[command]
    if kind != "hf" and defect in ("missing", "unexpected"):
        defect = "nan"  # a plain tensor file has no architecture to be incomplete against
    bad = _damaged(checkpoints[kind], scratch / "damaged" / checkpoints[kind].name, defect, pick)
    before = {p: p.read_bytes() for p in sorted(bad.rglob("*") if bad.is_dir() else [bad]) if p.is_file()}
    argv = make(str(bad), checkpoints)
    rc, _, err = _cli(capsys, argv)
    COUNTS[(f"checkpoint: {command}", defect)] += 1
    assert rc == 2, (argv, err)
    expected = "NonFiniteError" if defect in ("nan", "inf", "-inf") else "IncompleteCheckpointError"
    assert expected in err, (argv, err)
    assert sorted(p.name for p in scratch.iterdir()) == ["blocker", "damaged"], argv  # no o/, no o.json
    assert {p: p.read_bytes() for p in before} == before
    shutil.rmtree(scratch / "damaged")


def test_every_command_was_fuzzed() -> None:
    """Every command was tried (by the tests above, in this module); print the counts per command and outcome."""
    if not COUNTS:
        pytest.skip("run with the fuzz tests above (this test reports their counts)")
    tried = collections.Counter()
    for (command, _), n in COUNTS.items():
        tried[command] += n
    expected = {p for p in COMMANDS}
    missing = sorted(c for c in expected if not any(t == c for t in tried))
    assert not missing, f"commands never fuzzed: {missing}"
    table = {c: {o: n for (cc, o), n in sorted(COUNTS.items()) if cc == c} for c in sorted(tried)}
    print(f"\nfuzzed command lines: {sum(tried.values())}")
    for command, outcomes in table.items():
        print(f"  {command:24s} {sum(outcomes.values()):5d}  " + ", ".join(f"{o} {n}" for o, n in outcomes.items()))
    if os.environ.get("PARAMSYM_FUZZ_COUNTS"):
        Path(os.environ["PARAMSYM_FUZZ_COUNTS"]).write_text(json.dumps(table, indent=1))


# ----------------------------------------------------------------------------- the real stderr
def test_a_few_malformed_commands_in_a_subprocess(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src") + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    for argv, needle in [
        (["discover", "--steps", "0"], "--steps must be an integer >= 1"),
        (["attention"], "paramsym attention: error: the following arguments are required"),
        (["attention", "count", "--group", "D4", "--heads", "8", "--bogus"], "unrecognized arguments: --bogus"),
        (["group", "C0"], "GroupError"),
    ]:
        out = subprocess.run([sys.executable, "-m", "paramsym.cli", *argv], capture_output=True, text=True,
                             env=env, cwd=tmp_path, timeout=120)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], (argv, out.stderr)
        assert "Traceback" not in out.stderr and "usage:" not in out.stderr


def test_argparse_errors_are_one_line_with_a_help_hint(capsys) -> None:
    for argv in (["nope"], ["discover", "--objective", "magic"], ["report"], [], ["experiment"]):
        rc, _, err = _cli(capsys, argv)
        assert rc == 2 and err.strip().endswith("--help"), (argv, err)

