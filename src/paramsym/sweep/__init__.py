"""Recipe sweeps (``paramsym sweep``): the papers' validation search as one command.

Candidates on a grid of :class:`~paramsym.discovery.config.DiscoverConfig` overrides per
objective variant, the best continued, the selected recipe replicated on fresh seeds, and the
replication aggregated into the paper's table (medians over seeds of within-seed 95th
percentiles; fits). Backends: a local process pool, or Ray Tune (``paramsym[ray]``).
"""

from __future__ import annotations

from .driver import KIND, budget, plan_candidates
from .launch import run_sweep, stored_spec
from .spec import METRICS, VARIANTS, SelectSpec, SweepSpec, load_spec, spec_from_dict
from .trials import make_trial, run_trial, trial_config, trial_id

__all__ = ["KIND", "METRICS", "budget", "VARIANTS", "SelectSpec", "SweepSpec", "load_spec", "make_trial", "plan_candidates",
           "run_sweep", "run_trial", "spec_from_dict", "stored_spec", "trial_config", "trial_id"]
