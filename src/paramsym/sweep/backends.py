"""Where trials run: a local process pool, or Ray Tune (one machine or a cluster).

Both backends call the same :func:`~paramsym.sweep.trials.run_trial` on the same
trial mappings, in worker processes with one torch thread each, so they return the same
summaries for the same trials. ``iterate(trials, root)`` yields each trial's summary in the
driver as the trial finishes. If the driver stops iterating (an error, an interrupt), pending
trials are cancelled; finished trials keep their directories, and a trial cut short
keeps its checkpoints, so ``--resume`` continues where the sweep stopped.

Ray is imported only by :mod:`.ray_backend` (loaded by :func:`make_backend` for ``ray``);
``pip install 'paramsym[ray]'`` provides it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import BackendUnavailableError, ConfigError

__all__ = ["LocalBackend", "make_backend"]



def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


class LocalBackend:
    """A :class:`concurrent.futures.ProcessPoolExecutor` of ``workers`` spawned processes, kept for
    the whole sweep (a worker imports torch once) and shut down by :meth:`close`.

    Scripts that call :func:`run_sweep` with this backend need the usual
    ``if __name__ == "__main__":`` guard (spawned workers import the main module).
    """

    name = "local"

    def __init__(self, workers: int = 1):
        if workers < 1:
            raise ConfigError(f"--workers must be ≥ 1; received {workers}.")
        self.workers = workers
        self._pool = None

    def iterate(self, trials: Sequence[Mapping[str, Any]], root: Path) -> Iterator[dict[str, Any]]:
        """Run ``trials``; yield each summary as its trial finishes (in completion order).

        Closing the iterator early cancels the trials not yet started and waits for the running
        ones (their results are on disk and are read by a resumed sweep).
        """
        import multiprocessing as mp
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool

        from .trials import run_trial

        if not trials:
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("spawn"),
                                             initializer=_init_worker)
        pending = {self._pool.submit(run_trial, dict(t), str(root)) for t in trials}
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    try:
                        yield fut.result()
                    except BrokenProcessPool:
                        raise BackendUnavailableError(
                            "a sweep worker process died (killed, out of memory, or a script without an "
                            "`if __name__ == '__main__':` guard); finished trials are kept: rerun with --resume, "
                            "perhaps with fewer --workers.") from None
        finally:
            for fut in pending:
                fut.cancel()
            wait(pending)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def make_backend(name: str, workers: int = 1, address: str | None = None) -> Any:
    """``local`` or ``ray`` (``address`` only with ``ray``)."""
    if name == "local":
        if address:
            raise ConfigError("--address is for --backend ray; drop it or add --backend ray.")
        return LocalBackend(workers)
    if name == "ray":
        try:
            from .ray_backend import RayBackend
        except ImportError:
            raise BackendUnavailableError(
                "--backend ray needs Ray Tune: pip install 'paramsym[ray]' (ray[tune]); or use --backend local."
            ) from None
        return RayBackend(workers, address)
    raise ConfigError(f"--backend must be 'local' or 'ray'; received {name!r}.")
