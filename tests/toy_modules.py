"""Small ``nn.Module`` fixtures shared by test modules (imported by them; not collected)."""

from __future__ import annotations

from torch import nn


class UnusedBranch(nn.Module):
    """Two ``Linear(2, 2)`` layers of which the forward pass uses only ``used``: the output
    does not depend on ``unused.*``, so a block of those parameters is degenerate."""

    def __init__(self):
        super().__init__()
        self.used = nn.Linear(2, 2)
        self.unused = nn.Linear(2, 2)

    def forward(self, x):
        return self.used(x)
