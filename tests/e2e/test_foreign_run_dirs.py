"""A run directory belongs to one kind and one configuration (issue 36): every run kind's
command, pointed with ``--out`` at a finished run of every other kind (and at a corrupt run, a
directory of foreign files, and one run of a ``reproduce --out``), refuses with one named line
naming the directory, exit status 2, before any work — and the directory is byte-identical
afterwards (every file, every sub-directory). (``reproduce --out`` keeps a user's own files beside
its run directories by design, so only that pair is not refused.)

The finished runs are real: each is made once through :func:`paramsym.cli.main` on its smallest
budget (about a minute for all, plus ``experiment transformer``'s 20 s on the real all-MiniLM-L6-v2
at two steps). ``align --census-groups`` (kind ``align-census``) and ``align --stream`` (kind
``align-stream``) align two tiny GPT-2 checkpoints when they are made targets; pointed at the
others they are refused before they read them.
"""

from __future__ import annotations

import collections
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from paramsym.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY_DISCOVER = ["--preset", "sigmoid-scalar", "--steps", "20", "--quiet", "--set", "train.checkpoint_every=10",
                 "--set", "action.width=16", "--set", "verdict.samples=20", "--set", "verdict.rhos=[0.5]",
                 "--set", "verdict.factors=[1]", "--set", "verdict.curve_points=2", "--set", "verdict.curve_times=3"]
COUNTS: collections.Counter = collections.Counter()


def _mlp_file(path: Path, seed: int) -> Path:
    g = torch.Generator().manual_seed(seed)
    save_file({"fc1.weight": torch.randn(8, 64, generator=g), "fc1.bias": torch.randn(8, generator=g),
               "fc2.weight": torch.randn(10, 8, generator=g), "fc2.bias": torch.randn(10, generator=g)}, str(path))
    return path


def _commands(out: str, inputs: dict[str, Path]) -> dict[str, tuple[str | None, list[str]]]:
    """label -> (run kind it writes, argv with ``--out out``)."""
    a, b, layer, disc = (str(inputs[k]) for k in ("a", "b", "layer", "discovery"))
    hf_a, hf_b = (str(inputs.get(k, k)) for k in ("hf_a", "hf_b"))
    q = "--quiet"
    return {
        "discover": ("discovery", ["discover", *TINY_DISCOVER, "--out", out]),
        "experiment objectives": ("discovery-objectives", ["experiment", "objectives", "--quick", "--steps", "5", q,
                                                           "--out", out]),
        "experiment lifting": ("discovery-lifting", ["experiment", "lifting", "--quick", "--steps", "5", q, "--out", out]),
        "experiment transformer": ("transformer-discovery", ["experiment", "transformer", "--quick", "--steps", "2", q,
                                                             "--out", out]),
        "attribute": ("attribution", ["attribute", "--preset", "lifting-sanity", "--quick", q, "--out", out]),
        "attention table": ("attention", ["attention", "table", "--group", "C4", "--copies", "1..3", "--heads", "2", q,
                                          "--out", out]),
        "attention count": ("attention-count", ["attention", "count", "--group", "C2", "--heads", "1", q, "--out", out]),
        "attention clusterings": ("attention-clusterings", ["attention", "clusterings", "--group", "C2", "--heads", "2",
                                                            q, "--out", out]),
        "attention classify": ("attention-classify", ["attention", "classify", layer, "--group", "C2", q, "--out", out]),
        "group": ("group", ["group", "C2", q, "--out", out]),
        "census": ("census", ["census", "--preset", "mlp-relu", q, "--out", out]),
        "affine": ("affine", ["affine", "--preset", "linear2x2", q, "--out", out]),
        "compensate": ("compensate", ["compensate", "--model", "pythia-tiny", "--layer", "0", "--unit", "0", q,
                                      "--out", out]),
        "teleport": ("teleport", ["teleport", "--preset", "booth", q, "--out", out]),
        "teleport --action": ("teleport-learned", ["teleport", "--action", disc, q, "--out", out]),
        "align": ("align", ["align", a, b, q, "--out", out]),
        "sweep": ("sweep", ["sweep", str(ROOT / "examples" / "sweeps" / "tiny.yaml"), q, "--out", out]),
        "reproduce": ("reproduce", ["reproduce", "groups-d4-regular", "--quick", q, "--out", out]),
        "align --census-groups": ("align-census", ["align", hf_a, hf_b, "--census-groups", q, "--out", out]),
        "align --stream": ("align-stream", ["align", hf_a, hf_b, "--stream", "--merge", "0.5", q, "--out", out]),
        "census --export": ("census-export", ["census", "--preset", "gpt2-tiny", "--export", "permutation-spec", q,
                                              "--out", out]),
        "attention build": ("attention-build", ["attention", "build", "--group", "C2", "--heads", "1", "--index", "0",
                                                q, "--out", out]),
    }


#: the commands made into finished targets (label -> the kind stored)
TARGETS = ["discover", "experiment objectives", "experiment lifting", "experiment transformer", "attribute", "attention table", "attention count",
           "attention clusterings", "attention classify", "group", "census", "affine", "compensate", "teleport",
           "teleport --action", "align", "align --census-groups", "align --stream", "sweep", "reproduce", "census --export",
           "attention build"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> dict[str, tuple[str | None, Path]]:
    """label -> (kind, directory) of a finished run of every target kind, plus odd directories."""
    import os

    root = tmp_path_factory.mktemp("kinds")
    cwd = os.getcwd()
    os.chdir(root)  # nothing may land in the repository
    try:
        inputs = {"a": _mlp_file(root / "a.safetensors", 0), "b": _mlp_file(root / "b.safetensors", 1),
                  "layer": root / "layer" / "layer.safetensors"}
        assert main(["attention", "build", "--group", "C2", "--heads", "1", "--index", "0", "--quiet", "--out",
                     str(inputs["layer"].parent)]) == 0
        inputs["discovery"] = root / "runs" / "discover"
        from paramsym.census.zoo import tiny_model

        for seed, name in enumerate(("hf_a", "hf_b")):
            tiny_model("gpt2", seed=seed, causal_lm=True).save_pretrained(root / name)
            inputs[name] = root / name
        out: dict[str, tuple[str | None, Path]] = {}
        for label in TARGETS:  # discover first: teleport --action reads it
            d = root / "runs" / label.replace(" ", "_").replace("-", "")
            kind, argv = _commands(str(d), inputs)[label]
            assert main(argv) in (0, 1), label  # 1: a verdict that does not hold (a finished run all the same)
            out[label] = (kind, d)
        out["reproduce: one run"] = ("reproduce-run", out["reproduce"][1] / "groups")
        corrupt = root / "runs" / "corrupt"
        shutil.copytree(out["census"][1], corrupt)
        (corrupt / "config.json").write_text('{"kind": "cen')
        foreign = root / "runs" / "foreign"
        foreign.mkdir()
        (foreign / "notes.txt").write_text("my own files\n")
        out["corrupt census"], out["foreign files"] = (None, corrupt), (None, foreign)
        return {"inputs": inputs, "targets": out, "root": root}
    finally:
        os.chdir(cwd)


def _snapshot(path: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(path)): (p.read_bytes() if p.is_file() else None) for p in sorted(path.rglob("*"))}


@pytest.mark.parametrize("label", list(_commands("OUT", collections.defaultdict(Path))))
def test_every_command_refuses_every_other_kinds_run(finished, label, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    tried = 0
    for target, (target_kind, d) in finished["targets"].items():
        kind, argv = _commands(str(d), finished["inputs"])[label]
        if kind is not None and kind == target_kind:
            continue  # the same kind: continuing or reusing it is the command's own rule
        if label == "reproduce" and target == "foreign files":
            continue  # a reproduce --out keeps the user's own files beside its run directories (by design)
        before = _snapshot(d)
        capsys.readouterr()
        rc = main(argv)
        err = capsys.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert rc == 2 and len(lines) == 1 and "error:" in lines[0], (label, target, rc, err)
        assert str(d) in lines[0], (label, target, lines[0])  # refused for the directory, not another reason
        assert _snapshot(d) == before, (label, target)
        assert list(tmp_path.iterdir()) == [], (label, target)  # nothing written elsewhere
        COUNTS[(label, lines[0].split("error: ", 1)[1].split(":", 1)[0])] += 1
        tried += 1
    assert tried >= len(finished["targets"]) - 2  # at most its own kind and (reproduce) the foreign files


def test_same_kind_other_config_is_refused(finished, capsys):
    """A finished run of the same kind with another configuration is not continued by --out (the run
    verb's rule: a non-empty --out is refused, continuing is --resume DIR with the saved configuration)."""
    d = finished["targets"]["experiment objectives"][1]
    before = _snapshot(d)
    rc = main(["experiment", "objectives", "--quick", "--steps", "6", "--quiet", "--out", str(d)])
    err = capsys.readouterr().err
    assert rc == 2 and "RunDirError" in err and "is not empty" in err and "--resume" in err, err
    assert _snapshot(d) == before


def test_print_counts():
    """The refusals per command and error name (``pytest -s``)."""
    for (label, name), n in sorted(COUNTS.items()):
        print(f"foreign --out  {label:24s} {name:22s} {n}")
