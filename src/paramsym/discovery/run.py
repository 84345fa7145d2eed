"""A discovery run end to end (the names of the modules it is split into, importable from here).

:mod:`.entry` (``discover``, ``start_run``, ``resume_run``, ``run_discovery``), :mod:`.files`
(``config.json``, ``block.json``), :mod:`.evaluation` (``evaluate_action``), :mod:`.threads`
(``choose_threads``), :mod:`.reload` (``load_learned_action``, ``load_trained``) and
:mod:`.problems` (``resolve_problem``, ``scale_generator``).
"""

from __future__ import annotations

from ..errors import BlockMismatchError
from .entry import DiscoveryResult, discover, resume_run, run_discovery, start_run, train_run
from .evaluation import evaluate_action
from .files import KIND, check_block, describe_block, load_config, read_block, save_config
from .problems import resolve_problem, scale_generator
from .reload import TrainedRun, load_learned_action, load_trained
from .threads import choose_threads

__all__ = ["BlockMismatchError", "DiscoveryResult", "KIND", "TrainedRun", "check_block", "choose_threads",
           "describe_block", "discover", "evaluate_action", "load_config", "load_learned_action", "load_trained",
           "read_block", "resolve_problem", "resume_run", "run_discovery", "save_config", "scale_generator",
           "start_run", "train_run"]
