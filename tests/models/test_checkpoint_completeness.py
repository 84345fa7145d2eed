"""The one checkpoint completeness check (issue 36): every model-taking command refuses a saved
model of any census architecture with one tensor deleted, by name, with exit status 2 and no
files left; the loader also refuses unexpected tensors, integer weights and NaN/inf weights.

Each tiny model (``paramsym.census.zoo``: 13 architectures) is built from its config object,
saved with ``save_pretrained`` and then edited on disk with safetensors (real files, real
``from_pretrained``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from paramsym.cli import main
from paramsym.errors import IncompleteCheckpointError, NonFiniteError
from paramsym.models.checks import CHUNK, check_finite_weights
from paramsym.models.loading import load_model, quiet_loading

pytest.importorskip("transformers")
from safetensors.torch import load_file, save_file  # noqa: E402

from paramsym.census.zoo import TINY, tiny_model  # noqa: E402


@pytest.fixture(scope="module", params=TINY)
def saved(request, tmp_path_factory):
    """``(arch, good_dir, state_dict, deleted_name)``: a saved tiny model and the tensor the tests delete."""
    d = tmp_path_factory.mktemp(request.param)
    with quiet_loading():
        tiny_model(request.param).save_pretrained(d)
    sd = load_file(str(d / "model.safetensors"))
    name = sorted(sd)[len(sd) // 2]  # a tensor in the middle of the model (a norm, a bias or a weight)
    return request.param, d, sd, name


def _variant(saved, tmp_path: Path, edit) -> Path:
    _, good, sd, _ = saved
    d = tmp_path / "model"
    shutil.copytree(good, d)
    tensors = dict(sd)
    edit(tensors)
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    return d


def test_the_loader_accepts_the_intact_checkpoint(saved):
    arch, good, sd, _ = saved
    model = load_model(good, quiet=True)
    stored = {k: v for k, v in model.state_dict().items() if k in sd}
    assert stored and all(torch.equal(v, sd[k]) for k, v in stored.items())


def test_a_deleted_tensor_is_refused_by_name(saved, tmp_path):
    *_, name = saved
    d = _variant(saved, tmp_path, lambda t: t.pop(name))
    with pytest.raises(IncompleteCheckpointError, match=f"lacks 1 tensor.*'{name}'"):
        load_model(d, quiet=True)


def test_an_unexpected_tensor_is_refused_by_name(saved, tmp_path):
    d = _variant(saved, tmp_path, lambda t: t.update({"stray.weight": torch.zeros(3)}))
    with pytest.raises(IncompleteCheckpointError, match="no place for: 'stray.weight'"):
        load_model(d, quiet=True)


def test_integer_weights_are_refused_by_name(saved, tmp_path):
    *_, name = saved
    d = _variant(saved, tmp_path, lambda t: t.update({name: t[name].to(torch.int32)}))
    with pytest.raises(IncompleteCheckpointError, match=f"non-floating dtype: '{name}' \\(I32\\)"):
        load_model(d, quiet=True)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_weights_are_refused_by_name(saved, tmp_path, bad):
    *_, name = saved

    def edit(t):
        t[name] = t[name].clone()
        t[name].view(-1)[-1] = bad

    d = _variant(saved, tmp_path, edit)
    with pytest.raises(NonFiniteError, match=f"weights '{name}' hold NaN or infinite"):
        load_model(d, quiet=True)


def _commands(model: Path, good: Path, out: Path) -> dict[str, list[str]]:
    """Every command that takes a saved HF model, pointed at ``model``."""
    return {
        "census": ["census", "--model", str(model), "--out", str(out)],
        "census --export": ["census", "--model", str(model), "--export", "permutation-spec", "--out", str(out)],
        "compensate": ["compensate", "--model", str(model), "--layer", "0", "--unit", "0", "--out", str(out)],
        "align --census-groups A": ["align", str(model), str(good), "--census-groups", "--out", str(out)],
        "align --census-groups B": ["align", str(good), str(model), "--census-groups", "--out", str(out)],
    }


def test_every_model_taking_command_refuses_a_deleted_tensor(saved, tmp_path, capsys):
    _, good, _, name = saved
    d = _variant(saved, tmp_path, lambda t: t.pop(name))
    for what, argv in _commands(d, good, tmp_path / "out").items():
        capsys.readouterr()
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2, (what, err)
        assert "IncompleteCheckpointError" in err and repr(name) in err, (what, err)
        assert len(err.strip().splitlines()) == 1, (what, err)
        assert not (tmp_path / "out").exists(), what


def test_the_finiteness_scan_is_chunked_and_finds_the_last_entry():
    n = 2 * CHUNK + 5
    clean = torch.zeros(n)
    check_finite_weights([("w", clean)])
    for where in (0, CHUNK, n - 1):  # first chunk, a chunk boundary, the tail of the last chunk
        bad = clean.clone()
        bad[where] = float("nan")
        with pytest.raises(NonFiniteError, match="'w'"):
            check_finite_weights([("ok", clean), ("w", bad)])
    check_finite_weights([("ids", torch.arange(5))])  # integer buffers hold no NaN: skipped
