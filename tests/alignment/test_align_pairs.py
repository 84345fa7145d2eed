"""The transformer pairs of issue 35: the stdlib byte corpus, digits as images, the ViT adapter and its
residual stream, sequence losses, and the two presets at their quick budgets."""

from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("transformers")

from paramsym.alignment.align import align, apply_permutation  # noqa: E402
from paramsym.alignment.arch import hf_architecture  # noqa: E402
from paramsym.alignment.matching import distance, match_permutations  # noqa: E402
from paramsym.alignment.path import evaluate  # noqa: E402
from paramsym.models.corpus import lm_windows, stdlib_corpus, stdlib_files  # noqa: E402
from paramsym.models.datasets import digits, digits_images  # noqa: E402


def _vit(hidden=16, layers=2, seed=0):
    from transformers import ViTConfig, ViTForImageClassification

    conf = ViTConfig(image_size=8, patch_size=2, num_channels=1, hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=2, intermediate_size=24, num_labels=10, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, attn_implementation="eager")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return ViTForImageClassification(conf).eval()


def test_corpus_is_split_by_file_and_windows_are_next_token_pairs():
    files = stdlib_files()
    assert files == sorted(files, key=lambda p: p.name) and len(files) > 10
    c = stdlib_corpus(test_every=5)
    assert set(c.train_files).isdisjoint(c.test_files)
    assert list(c.test_files) == [f.name for i, f in enumerate(files) if i % 5 == 4]
    # the test stream is the test files' bytes, each followed by a newline (read independently here)
    raw = b"".join(f.read_bytes() + b"\n" for i, f in enumerate(files) if i % 5 == 4)
    assert bytes(c.test.to(torch.uint8).tolist()) == raw
    x, y = lm_windows(c.test, 16, 5)
    assert x.shape == y.shape == (5, 16)
    for row_x, row_y in zip(x, y):
        start = raw.find(bytes(row_x.tolist()))
        assert start >= 0 and raw[start + 1:start + 17] == bytes(row_y.tolist())
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(lm_windows(c.train, 8, 4, g1)[0], lm_windows(c.train, 8, 4, g2)[0])
    assert c.describe()["sha256"] == stdlib_corpus(test_every=5).sha256


def test_digits_images_are_the_digits_split_as_images():
    from sklearn.datasets import load_digits

    img, flat = digits_images(0), digits(0)
    assert img.x_train.shape[1:] == (1, 8, 8) and torch.equal(img.y_train, flat.y_train)
    raw = torch.as_tensor(load_digits().images, dtype=torch.float64) / 16
    order = torch.randperm(len(raw), generator=torch.Generator().manual_seed(0))  # the split of digits(0)
    train = order[: round(0.8 * len(raw))]
    m, sd = raw[train].mean(), raw[train].std()
    assert torch.allclose(img.x_train[:, 0].double(), (raw[train] - m) / sd, atol=1e-5)
    assert torch.equal(img.y_train, torch.as_tensor(load_digits().target)[train])


def test_vit_groups_are_symmetries_and_planted_permutations_are_recovered():
    """Heads, FFN units and the residual stream of a ViT: a random permutation of each moves the
    parameters and leaves the logits (HF forward, float64) at rounding; dropping one tensor of a
    group breaks it; all groups permuted at once are recovered exactly by weight matching."""
    model = _vit().double()
    arch = hf_architecture(model, n_classes=10)
    kinds = sorted((g.kind, g.size) for g in arch.groups)
    assert kinds == sorted([("head_permutation", 2)] * 2 + [("hidden_permutation", 24)] * 2
                           + [("residual_permutation", 16)])
    a = {n: p.detach() + 0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
         for n, p in model.named_parameters()}
    x = digits_images(0).x_test[:12].double()
    ref = arch.forward(a, x)
    assert ref.shape == (12, 10)
    gen = torch.Generator().manual_seed(4)
    b = dict(a)
    for g in arch.groups:
        perm = torch.randperm(g.size, generator=gen)
        perm = torch.roll(perm, 1) if torch.equal(perm, torch.arange(g.size)) else perm  # not the identity
        moved = apply_permutation(a, g, perm)
        assert distance(moved, a) > 1e-3, g.name
        assert float((arch.forward(moved, x) - ref).abs().max() / ref.abs().max()) <= 1e-12, g.name
        broken = dataclasses.replace(g, members=g.members[:-1])
        assert float((arch.forward(apply_permutation(a, broken, perm), x) - ref).abs().max()) > 1e-6, g.name
        b = apply_permutation(b, g, perm)
    perms, _ = match_permutations(a, b, arch.groups, generator=torch.Generator().manual_seed(0))
    for g in arch.groups:
        b = apply_permutation(b, g, perms[g.name])
    assert max(float((b[n] - a[n]).abs().max()) for n in a) == 0.0


def test_sequence_loss_equals_hugging_face_language_model_loss():
    """Next-token loss over every position (positions="all") against HF's own shifted-label loss."""
    from transformers import GPT2Config, GPT2LMHeadModel

    conf = GPT2Config(vocab_size=256, n_positions=16, n_embd=16, n_layer=1, n_head=2, attn_implementation="eager")
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = GPT2LMHeadModel(conf).eval().double()
    arch = hf_architecture(model, positions="all")
    x, y = lm_windows(stdlib_corpus().test, 8, 6)
    loss, acc = evaluate(arch.forward, dict(model.named_parameters()), x, y, batch=4)
    full = torch.cat([x, y[:, -1:]], dim=1)
    with torch.no_grad():
        ref = float(model(full, labels=full).loss)
    # HF's loss upcasts the logits to float32 only: its rounding bounds the agreement
    assert abs(loss - ref) <= 8 * torch.finfo(torch.float32).eps * abs(ref)
    assert 0.0 <= acc <= 1.0


@pytest.mark.parametrize("name", ["vit-digits", "lm-stdlib"])
def test_quick_presets_train_align_and_keep_b_function(name, tmp_path):
    from paramsym.kinds.align_pairs import StdlibLMConfig, ViTDigitsConfig
    from paramsym.kinds.align_presets import load_preset

    cfg = ViTDigitsConfig.quick() if name == "vit-digits" else StdlibLMConfig.quick()
    arch, a, b, data, info = load_preset(name, cache_dir=tmp_path, pair=cfg)
    assert distance(a, b) > 1.0  # two seeds: two different models
    assert info["config"]["layers" if name == "vit-digits" else "n_layer"] >= 2
    res = align(arch, a, b, data, points=3, generator=torch.Generator().manual_seed(0))
    s = res.summary()
    for stage in res.stages:
        assert s[f"barrier_{stage}"] == s[f"barrier_{stage}"]  # finite numbers
    for stage, err in res.function_error.items():
        assert err <= 1e-10, (stage, err)
    assert res.distance["permutation"] < res.distance["before"]
    # cached: a second load reads the same tensors back
    _, a2, _, _, _ = load_preset(name, cache_dir=tmp_path, pair=cfg)
    assert all(torch.equal(a[n], a2[n]) for n in a)
