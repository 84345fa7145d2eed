"""Torch CPU threads for a discovery run (the library never sets them; the command line does)."""

from __future__ import annotations

import torch

from .config import DiscoverConfig

__all__ = ["choose_threads"]


def choose_threads(cfg: DiscoverConfig, p: int | None = None) -> int:
    """Torch CPU threads for a run: ``cfg.threads``, or 1 for small problems when 0 (auto).

    The library never sets the thread count; a command line calls
    ``torch.set_num_threads(choose_threads(cfg))`` on CPU. ``p`` (the block size) is taken from
    the configured preset when not given (which builds the problem: pass ``p`` when the
    problem is built anyway).
    """
    if cfg.threads > 0:
        return cfg.threads
    if p is None:
        from .problems import resolve_problem

        p = resolve_problem(cfg).target.p
    work = (p + cfg.group.size**2) * cfg.action.width + cfg.action.depth * cfg.action.width**2
    return 1 if work < 4_000_000 else torch.get_num_threads()
