"""Tiny Hugging Face models saved to disk, shared by the adapter and compensation tests
(imported by test modules; not collected).

A model is built from a config object (random weights drawn after ``torch.manual_seed(0)``,
eager attention) and written with ``save_pretrained`` into a fresh temporary directory; nothing
is downloaded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch


def saved_tiny_models(configs: dict[str, Callable[[], Any]], load: Callable[[Path], Any] | None = None):
    """A module-scoped fixture parametrised over ``sorted(configs)`` (model types).

    Each parameter builds ``AutoModel.from_config(configs[model_type]())`` after
    ``torch.manual_seed(0)`` with eager attention and saves it into a directory of its own.
    The fixture's value is ``(model_type, path)``, or ``(model_type, load(path))`` when
    ``load`` is given. Assign it to the module-level name the tests request.
    """
    transformers = pytest.importorskip("transformers")

    @pytest.fixture(scope="module", params=sorted(configs))
    def fixture(request, tmp_path_factory):
        torch.manual_seed(0)
        model = transformers.AutoModel.from_config(configs[request.param](), attn_implementation="eager")
        path = tmp_path_factory.mktemp(request.param)
        model.save_pretrained(path)
        return request.param, (path if load is None else load(path))

    return fixture


def tiny_bert(attn: str = "eager"):
    """A 2-layer BERT (hidden 16, FFN 32) from a config object, weights drawn after ``manual_seed(0)``
    on a forked random state, in eval mode."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=16, attn_implementation=attn)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.BertModel(cfg)
    return model.eval()


def tiny_ids(n: int) -> torch.Tensor:
    """A prefix of ``n`` token ids, ``(1, n)``."""
    return torch.arange(3, 3 + n)[None]
