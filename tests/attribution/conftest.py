"""Shared fixtures of the attribution tests.

The machine is shared and small; OpenMP spin-waiting with several threads makes tiny-tensor
loops 10–20× slower under load, so every test here runs torch single-threaded.
"""

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
