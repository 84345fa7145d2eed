"""Attention tests work on tiny tensors: one intra-op thread avoids OpenMP spin costs on a busy
machine (restored after each test, so other test directories are unaffected)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
