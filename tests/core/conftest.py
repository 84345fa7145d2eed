"""Core tests (parameter blocks, targets, matrix groups, input errors) run torch single-threaded:
the machine is shared and OpenMP spin-waiting slows tiny-tensor loops down badly under load."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
