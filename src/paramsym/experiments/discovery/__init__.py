"""The discovery paper's artefacts (Section 6): Table 1 (:mod:`.table1`, hybrid vs finite
objectives), the lifting comparison of Fig. 2(c) (:mod:`.lifting`) and the learned transformer
action (:mod:`.transformer`)."""

from typing import Any


def run_experiment(kind: str, cfg: Any, out: Any, *, progress: bool = True, resume: bool = False,
                   command: str | None = None, **options: Any) -> dict[str, Any]:
    """An experiment of this package through the run verb (:func:`paramsym.runs.execute.execute`:
    ``config.json`` with its provenance, ``env.json``, ``metrics.json``, ``report.md``) around its
    kind's ``compute``; returns the metrics. ``resume``: continue the run in ``out`` (finished
    sub-runs reused, interrupted ones resumed from their checkpoints); ``options`` reach
    ``compute`` (``reuse``, a custom ``problem``).

    Raises:
        ConfigError: ``cfg`` does not validate (its ``overrides`` must be typed: ``DiscoverOverrides``).
    """
    from ...runs.execute import execute

    cfg.validate()  # before config.json is written: e.g. untyped overrides (a named ConfigError)
    return execute(kind, cfg, out, resume=resume, command=command, progress=progress, seed=cfg.seeds[0],
                   options=options).metrics
