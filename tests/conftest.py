"""Fixtures shared by every test directory.

Every test runs torch single-threaded: the tests work on small tensors, and on the 2-core CI
machine OpenMP spin-waiting with several threads makes such loops 10–20× slower under load.
The previous setting is restored after each test.
"""

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
