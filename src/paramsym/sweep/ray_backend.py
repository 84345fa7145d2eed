"""The Ray Tune backend of ``paramsym sweep`` (imported only when ``--backend ray`` is chosen).

One ``Tuner`` for the whole sweep, fed by a :class:`~ray.tune.search.Searcher` that hands out the
trials of each stage as the driver plans them (a stage's trials depend on the previous stage's
results), one CPU each, at most ``workers`` at once, with actors reused between trials (a worker
imports torch once); inside, the same :func:`~paramsym.sweep.trials.run_trial` as the
local backend, as a function trainable. The same code runs on one machine (``ray.init(num_cpus=N)``)
and on a cluster (``ray start --head`` on one node, ``ray start --address=HEAD:6379`` on the
others, ``paramsym sweep ... --backend ray --address HEAD:6379``); the sweep's output directory
must then be on a file system every node sees.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune.search import Searcher

from ..errors import BackendUnavailableError, ConfigError
from .trials import run_trial

__all__ = ["RayBackend"]


def _ray_trainable(config: dict[str, Any]) -> None:
    """The Ray Tune function trainable: one trial, reported as one result (one torch thread:
    the worker process is Ray's, and Ray gives each trial one CPU)."""
    import torch

    torch.set_num_threads(1)
    summary = run_trial(config["trial"], config["root"])
    tune.report({"summary_json": json.dumps(summary, allow_nan=True)})


#: seconds to wait for a TCP connection to a Ray head node before giving up
CONNECT_TIMEOUT_S = 5.0


def check_reachable(address: str) -> None:
    """Fail within :data:`CONNECT_TIMEOUT_S` unless ``HOST:PORT`` (or ``ray://HOST:PORT``) accepts TCP."""
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise BackendUnavailableError(
            f"--address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379, or ray://10.0.0.5:10001 for Ray Client, "
            "or 'auto' for the cluster started on this machine).")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise BackendUnavailableError(
            f"cannot reach a Ray cluster at {address!r} within {CONNECT_TIMEOUT_S:g} s ({why}). Start a head node "
            f"there with `ray start --head --port={port}` (and `ray start --address={host}:{port}` on each worker "
            "machine), or drop --address to start Ray on this machine, or use --backend local. Finished trials "
            "are kept; rerun with --resume.") from None


class _Channel:
    """Driver-side state of a running Tuner: trials to hand out, summaries coming back, flags."""

    def __init__(self) -> None:
        self.todo: queue.Queue = queue.Queue()
        self.results: queue.Queue = queue.Queue()
        self.finish = threading.Event()  # no more trials will come: end when the queue is empty
        self.abort = threading.Event()  # the driver stopped reading: end now


#: driver-side channels of running Tuners. The Tuner pickles its searcher, callbacks and
#: stopper, which therefore hold only a key into this table, never queues or events.
_CHANNELS: dict[str, _Channel] = {}
_DONE = "__paramsym_sweep_tuner_done__"


class _Feed(Searcher):
    """Hands out the trials the driver queued; ``FINISHED`` once the driver is done."""

    def __init__(self, channel: str):
        super().__init__()
        self.channel = channel

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # noqa: D102 (Ray API)
        ch = _CHANNELS.get(self.channel)
        if ch is None or ch.abort.is_set():
            return Searcher.FINISHED
        try:
            return ch.todo.get_nowait()
        except queue.Empty:
            return Searcher.FINISHED if ch.finish.is_set() else None

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:  # noqa: D102
        pass


class _Forward(tune.Callback):
    """Puts each reported trial summary (or a trial's failure) into the channel's result queue."""

    def __init__(self, channel: str):
        self.channel = channel

    def on_trial_result(self, iteration, trials, trial, result, **info):  # noqa: D102 (Ray API)
        _CHANNELS[self.channel].results.put(json.loads(result["summary_json"]))

    def on_trial_error(self, iteration, trials, trial, **info):  # noqa: D102 (Ray API)
        tid = trial.config["trial"]["id"]
        _CHANNELS[self.channel].results.put({"id": tid, "error": f"Ray trial failed (see {trial.local_path})"})


class _Stop(tune.Stopper):
    """Ends the whole experiment once the driver stopped reading (an error, an interrupt)."""

    def __init__(self, channel: str):
        self.channel = channel

    def __call__(self, trial_id, result):  # noqa: D102 (Ray API)
        return False

    def stop_all(self):  # noqa: D102 (Ray API)
        ch = _CHANNELS.get(self.channel)
        return ch is None or ch.abort.is_set()


def _dirname(trial: Any) -> str:
    return trial.config["trial"]["id"]


#: seconds ``ray.init(address=...)`` may take to join a cluster before the sweep gives up
JOIN_TIMEOUT_S = 10.0


def _connect(address: str) -> None:
    """``ray.init(address=address)``, given up after :data:`JOIN_TIMEOUT_S` seconds.

    Ray itself retries for a minute or more when something answers at the address that is not
    a Ray head node (a proxy, another service); the attempt runs in a daemon thread and is
    abandoned (it ends on its own) when it takes too long.
    """
    outcome: dict[str, BaseException] = {}

    def attempt() -> None:
        try:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR")
        except BaseException as exc:  # handed to the caller
            outcome["error"] = exc

    thread = threading.Thread(target=attempt, name="paramsym-ray-connect", daemon=True)
    thread.start()
    thread.join(JOIN_TIMEOUT_S)
    if thread.is_alive() or "error" in outcome:
        why = (f"no Ray head node answered within {JOIN_TIMEOUT_S:g} s" if thread.is_alive()
               else " ".join(str(outcome["error"]).split())[:300])
        raise BackendUnavailableError(
            f"cannot join a Ray cluster at {address!r} ({why}). Start a head node there with `ray start --head` "
            "(and `ray start --address=HEAD:6379` on each worker machine) and pass its HOST:PORT, or drop --address "
            "to start Ray on this machine, or use --backend local. Finished trials are kept; rerun with --resume.")


class RayBackend:
    """Ray Tune: one ``Tuner`` per sweep, trials handed out stage by stage, 1 CPU per trial.

    Args:
        workers: CPUs of the local Ray instance (``ray.init(num_cpus=workers)``) and the most
            trials run at once; with ``address``, only the concurrency limit.
        address: an existing cluster (``HOST:PORT`` of a head node, ``ray://HOST:PORT`` or
            ``auto``); checked for reachability within
            :data:`CONNECT_TIMEOUT_S` seconds.

    On a multi-node cluster, the sweep's output directory must be on a file system every node
    sees (trials continued from a checkpoint read their parent's directory).
    """

    name = "ray"

    def __init__(self, workers: int = 1, address: str | None = None):
        if workers < 1:
            raise ConfigError(f"--workers must be ≥ 1; received {workers}.")
        self.workers = workers
        self._owns = False
        self._key: str | None = None
        self._thread: threading.Thread | None = None
        self._outcome: dict[str, Any] = {}
        self._temp: str | None = None
        if not ray.is_initialized():
            if address and address != "auto":
                check_reachable(address)
            if address:
                _connect(address)
            else:
                import tempfile

                # its session folder in a directory of its own, removed by close() (not left under /tmp/ray)
                self._temp = tempfile.mkdtemp(prefix="psray-", dir="/tmp" if os.path.isdir("/tmp") else None)
                try:
                    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                             _temp_dir=self._temp)
                except (ConnectionError, RuntimeError, TimeoutError) as exc:
                    shutil.rmtree(self._temp, ignore_errors=True)
                    raise BackendUnavailableError(
                        f"Ray could not start ({' '.join(str(exc).split())[:300]}); use --backend local, or start a "
                        "head node with `ray start --head` and pass --address HOST:6379.") from None
            self._owns = True

    def _start(self, root: Path) -> _Channel:
        """Start the sweep's Tuner in a driver thread (on the first stage)."""
        ch = _Channel()
        self._key = f"{os.getpid()}-{id(ch)}"
        _CHANNELS[self._key] = ch
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # no experiment banner on stdout (verbose=0)
        tuner = tune.Tuner(
            tune.with_resources(_ray_trainable, {"cpu": 1}),
            tune_config=tune.TuneConfig(search_alg=_Feed(self._key), num_samples=-1,
                                        max_concurrent_trials=self.workers, reuse_actors=True,
                                        trial_dirname_creator=_dirname),
            run_config=tune.RunConfig(name="sweep", storage_path=str((root.parent / "ray").resolve()), verbose=0,
                                      callbacks=[_Forward(self._key)], stop=_Stop(self._key)),
        )

        def fit() -> None:
            try:
                self._outcome["grid"] = tuner.fit()
            except BaseException as exc:  # handed to the driver thread
                self._outcome["error"] = exc
            finally:
                ch.results.put(_DONE)

        self._thread = threading.Thread(target=fit, name="paramsym-sweep-tune", daemon=True)
        self._thread.start()
        return ch

    def iterate(self, trials: Sequence[Mapping[str, Any]], root: Path) -> Iterator[dict[str, Any]]:
        """Queue ``trials`` for the Tuner; yield each summary as it is reported.

        Closing the iterator early stops the experiment (a Tune ``Stopper``): running trials are
        ended (their checkpoints stay), finished ones keep their directories.
        """
        if not trials:
            return
        if self._outcome:
            raise BackendUnavailableError("the Ray Tune experiment of this sweep has already ended; start a new "
                                          "backend (rerun with --resume).")
        ch = _CHANNELS[self._key] if self._key is not None else self._start(root)
        for t in trials:
            ch.todo.put({"trial": dict(t), "root": str(root.resolve())})
        left = {t["id"] for t in trials}
        finished = False
        try:
            while left:
                item = ch.results.get()
                if item == _DONE:
                    ch.results.put(_DONE)
                    break
                if item["id"] in left:
                    left.discard(item["id"])
                    yield item
            finished = not left
        finally:
            if not finished:
                ch.abort.set()
                self._join()
        if left:
            err = self._outcome.get("error")
            why = f": {' '.join(str(err).split())[:400]}" if err is not None else ""
            raise BackendUnavailableError(f"Ray Tune ended with {len(left)} trial(s) not run{why}; finished trials "
                                          "are kept: rerun with --resume.")

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._key is not None:
            _CHANNELS.pop(self._key, None)

    def close(self) -> None:
        if self._key is not None and self._key in _CHANNELS:
            _CHANNELS[self._key].finish.set()
        self._join()
        if self._owns:
            ray.shutdown()
            self._owns = False
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None
