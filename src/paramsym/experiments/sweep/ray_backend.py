"""The Ray Tune backend of ``paramsym sweep`` (imported only when ``--backend ray`` is chosen).

One ``Tuner`` per stage: a grid search over the stage's trial mappings, one CPU each, at most
``workers`` at once, the same :func:`~paramsym.experiments.sweep.trials.run_trial` as the local
backend inside a function trainable. The same code runs on one machine (``ray.init(num_cpus=N)``)
and on a cluster (``ray start --head`` on one node, ``ray start --address=HEAD:6379`` on the
others, ``paramsym sweep ... --backend ray --address HEAD:6379``); the sweep's output directory
must then be on a file system every node sees.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import ray
from ray import tune

from ...errors import BackendUnavailableError, ConfigError
from .backends import check_reachable
from .trials import run_trial

__all__ = ["RayBackend"]


def _ray_trainable(config: dict[str, Any]) -> None:
    """The Ray Tune function trainable: one trial, reported as one result."""
    summary = run_trial(config["trial"], config["root"])
    tune.report({"summary_json": json.dumps(summary, allow_nan=True)})


#: driver-side channels of running Tuners (the Tuner pickles its callbacks, which therefore hold
#: only a key into this table, never the queue or event themselves)
_CHANNELS: dict[str, Any] = {}


class _Forward(tune.Callback):
    """Puts each reported trial summary into channel ``key``'s queue (driver side)."""

    def __init__(self, channel: str):
        self.channel = channel

    def on_trial_result(self, iteration, trials, trial, result, **info):  # noqa: D102 (Ray API)
        _CHANNELS[self.channel][0].put(json.loads(result["summary_json"]))


class _Stop(tune.Stopper):
    """Ends the whole experiment once channel ``key``'s event is set (the driver stopped reading)."""

    def __init__(self, channel: str):
        self.channel = channel

    def __call__(self, trial_id, result):  # noqa: D102 (Ray API)
        return False

    def stop_all(self):  # noqa: D102 (Ray API)
        entry = _CHANNELS.get(self.channel)
        return entry is not None and entry[1].is_set()


def _dirname(trial: Any) -> str:
    return trial.config["trial"]["id"]


class RayBackend:
    """Ray Tune: one ``Tuner`` per stage, a grid over the stage's trials, 1 CPU per trial.

    Args:
        workers: CPUs of the local Ray instance (``ray.init(num_cpus=workers)``) and the most
            trials run at once; with ``address``, only the concurrency limit.
        address: an existing cluster (``HOST:PORT`` of a head node, ``ray://HOST:PORT`` or
            ``auto``); checked for reachability within :data:`CONNECT_TIMEOUT_S` seconds.

    On a multi-node cluster, the sweep's output directory must be on a file system every node
    sees (trials continued from a checkpoint read their parent's directory).
    """

    name = "ray"

    def __init__(self, workers: int = 1, address: str | None = None):
        if workers < 1:
            raise ConfigError(f"--workers must be ≥ 1; received {workers}.")
        self.workers = workers
        self._owns = False
        if not ray.is_initialized():
            if address and address != "auto":
                check_reachable(address)
            try:
                if address:
                    ray.init(address=address, log_to_driver=False, logging_level="ERROR")
                else:
                    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
            except (ConnectionError, RuntimeError, TimeoutError) as exc:
                raise BackendUnavailableError(
                    f"Ray could not start or connect ({' '.join(str(exc).split())[:300]}); start a head node with "
                    "`ray start --head` and pass --address HOST:6379, or use --backend local.") from None
            self._owns = True

    def iterate(self, trials: Sequence[Mapping[str, Any]], root: Path) -> Iterator[dict[str, Any]]:
        """Run ``trials`` with a Tuner (in a driver thread); yield each summary as it is reported.

        Closing the iterator early stops the experiment (a Tune ``Stopper``): running trials are
        ended, finished ones keep their directories.
        """
        if not trials:
            return
        results: queue.Queue = queue.Queue()
        stop = threading.Event()
        done = object()
        key = f"{os.getpid()}-{id(results)}"
        _CHANNELS[key] = (results, stop)
        callback, stopper = _Forward(key), _Stop(key)

        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # no experiment banner on stdout (verbose=0)
        storage = (root.parent / "ray").resolve()
        tuner = tune.Tuner(
            tune.with_resources(_ray_trainable, {"cpu": 1}),
            param_space={"trial": tune.grid_search([dict(t) for t in trials]), "root": str(root.resolve())},
            tune_config=tune.TuneConfig(max_concurrent_trials=self.workers, reuse_actors=True,
                                        trial_dirname_creator=_dirname),
            run_config=tune.RunConfig(name=f"stage-{trials[0]['stage']}", storage_path=str(storage), verbose=0,
                                      callbacks=[callback], stop=stopper),
        )
        outcome: dict[str, Any] = {}

        def fit() -> None:
            try:
                outcome["grid"] = tuner.fit()
            except BaseException as exc:  # handed to the driver thread below
                outcome["error"] = exc
            finally:
                results.put(done)

        thread = threading.Thread(target=fit, name="paramsym-sweep-tune", daemon=True)
        thread.start()
        try:
            while (item := results.get()) is not done:
                yield item
        finally:
            stop.set()
            thread.join()
            _CHANNELS.pop(key, None)
        if "error" in outcome:
            raise BackendUnavailableError(f"Ray Tune failed: {' '.join(str(outcome['error']).split())[:400]}")
        errors = [r.error for r in outcome["grid"] if r.error is not None]
        if errors:
            raise BackendUnavailableError(f"{len(errors)} Ray trial(s) failed; first: {' '.join(str(errors[0]).split())[:400]}")

    def close(self) -> None:
        if self._owns:
            import ray

            ray.shutdown()
