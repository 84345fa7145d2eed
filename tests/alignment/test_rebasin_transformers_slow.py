"""Why the ``rebasin`` peer has no numbers on the transformer pairs (docs/alignment.md, block align-pairs):
on tiny Hugging Face transformers its ``PermutationCoordinateDescent`` raises on GPT-2 (Conv1D weights) or
changes B's function, and on a ViT runs but changes B's function — a permutation that is not a symmetry."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.slow
transformers = pytest.importorskip("transformers")
rebasin = pytest.importorskip("rebasin")


def _pair(make):
    out = []
    for seed in (0, 1):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            out.append(make().eval())
    return out


def test_rebasin_changes_a_vits_function():
    conf = transformers.ViTConfig(image_size=8, patch_size=4, num_channels=1, hidden_size=16, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=24, num_labels=10,
                                  attn_implementation="eager")
    a, b = _pair(lambda: transformers.ViTForImageClassification(conf))
    x = torch.randn(6, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = b(x).logits.clone()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        rebasin.PermutationCoordinateDescent(a, b, x[:4]).rebasin()
    with torch.no_grad():
        after = b(x).logits
    # an exact symmetry would leave the logits at float32 rounding (≈ 1e-7 relative)
    assert float((after - before).norm() / before.norm()) > 1e-2


def test_rebasin_fails_or_changes_gpt2s_function():
    """On GPT-2 (Conv1D weights, input-major) the peer either raises or returns a B that no longer runs or computes another function."""
    conf = transformers.GPT2Config(vocab_size=256, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                                   bos_token_id=10, eos_token_id=10, attn_implementation="eager")
    a, b = _pair(lambda: transformers.GPT2LMHeadModel(conf))
    ids = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = b(ids).logits.clone()
    try:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            rebasin.PermutationCoordinateDescent(a, b, ids).rebasin()
        with torch.no_grad():
            after = b(ids).logits  # B's tensors may no longer fit together after the peer
    except RuntimeError:
        return
    assert float((after - before).norm() / before.norm()) > 1e-2
