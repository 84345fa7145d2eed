"""The one run verb: run directories, provenance, the run-kind registry, :func:`execute`, reports, reuse.

* :mod:`.rundir` — :class:`RunDir` (a run directory: atomic JSON and safetensors files, the list of
  starts in ``env.json``), the tensor and JSON file helpers, :func:`default_run_dir`;
* :mod:`.provenance` — code version, config hash, :func:`~.provenance.provenance`, staleness;
* :mod:`.reuse` — the one reuse rule (equal config hash and code version, else rerun or a named
  refusal) for every finished run that another run reads;
* :mod:`.kinds` — the table of run kinds (:data:`~.kinds.KINDS`), each loaded lazily by its
  dotted path (the kinds live above this layer, in :mod:`paramsym.kinds` and
  :mod:`paramsym.experiments`; this package never imports them statically);
* :mod:`.execute` — :func:`~.execute.execute` (fresh or ``--resume``) and
  :func:`~.execute.load_run_config`;
* :mod:`.reports` — ``report.md`` of any run directory, rendered by its kind.

Importing this package never imports torch (``paramsym attention table --out DIR`` writes a run
directory without it). The names of :mod:`.rundir` are importable from here.
"""

from .rundir import (
    RunDir,
    atomic_write_bytes,
    default_run_dir,
    ensure_dir,
    environment,
    git_sha,
    load_tensors,
    read_json,
    save_tensors,
    tensors_to_bytes,
    write_json,
)

__all__ = ["RunDir", "atomic_write_bytes", "default_run_dir", "ensure_dir", "environment", "git_sha", "load_tensors",
           "read_json", "save_tensors", "tensors_to_bytes", "write_json"]
