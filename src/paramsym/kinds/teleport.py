"""The ``teleport`` and ``teleport-learned`` run kinds (``paramsym teleport``).

``teleport`` — :class:`~paramsym.kinds.teleport_presets.TeleportConfig` (``quick()``:
``booth``): each (optimizer, seed) job trains the same initialisation without and with
teleports (:func:`paramsym.kinds.teleport_mlp.run`). Every finished job is written to
``checkpoint/<optimizer>-seed<seed>.json`` before the next starts, so ``--resume`` continues an
interrupted run at the first missing job; the jobs are seeded and independent, so the resumed
run's ``metrics.json`` equals an uninterrupted one's byte for byte. Files besides the common
ones: ``result.json`` (every seed's loss curves and teleports, with wall times),
``loss_<optimizer>.png``. Metrics: the summary of
:func:`paramsym.kinds.teleport_report.summary` without its wall-clock entries (``seconds``,
``wall_time_overhead``, ``teleport_time_fraction``, each teleport's ``seconds``); those stay in
``result.json`` and ``timing.json``.

``teleport-learned`` — :class:`LearnedTeleportConfig`: one teleport along the learned action of
a ``paramsym discover`` run (:func:`paramsym.kinds.teleport_learned.learned_teleport`);
metrics: its result without ``seconds`` (in ``timing.json``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .teleport_presets import TeleportConfig

__all__ = ["KIND", "LEARNED_KIND", "LearnedTeleportConfig", "TeleportConfig", "metrics_of", "render",
           "render_learned", "run", "run_learned", "timing_of"]

KIND = "teleport"
LEARNED_KIND = "teleport-learned"
_TIMED = ("wall_time_overhead", "teleport_time_fraction")


def metrics_of(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without its wall-clock entries (module docstring)."""
    out = copy.deepcopy(summary)
    out.pop("seconds", None)
    for d in out.get("optimizers", {}).values():
        for k in _TIMED:
            d.pop(k, None)
    for row in out.get("per_seed", []):
        for t in row.get("teleports", []):
            t.pop("seconds", None)
    return out


def timing_of(summary: dict[str, Any]) -> dict[str, Any]:
    """The wall-clock entries of the summary (``timing.json``)."""
    return {"seconds": summary.get("seconds"),
            "optimizers": {o: {k: d[k] for k in _TIMED if k in d} for o, d in summary.get("optimizers", {}).items()},
            "teleport_seconds": [[t.get("seconds") for t in row.get("teleports", [])]
                                 for row in summary.get("per_seed", [])]}


def run(cfg: TeleportConfig, out, *, progress: bool = False) -> dict[str, Any]:
    """Run ``cfg``'s jobs (reusing those in ``out/checkpoint/``), write ``result.json`` and the loss
    curves; return the metrics."""
    from ..runs.rundir import read_json, write_json
    from .teleport_mlp import run as run_preset
    from .teleport_report import summary, write_outputs

    cfg.validate()
    ckpt = out.path / "checkpoint"

    def job(optimizer: str, seed: int, compute):
        path = ckpt / f"{optimizer}-seed{seed}.json"
        if path.is_file():
            return read_json(path, "a teleport checkpoint")
        rec = compute()
        write_json(path, rec)
        return rec

    result = run_preset(cfg, progress=progress, job=job)
    write_outputs(result, out.path)
    s = summary(result)
    out.write_json("timing.json", timing_of(s))
    return metrics_of(s)


def render(run_dir) -> str:
    """``report.md`` of a teleport run, from its ``result.json`` (and the figures beside it)."""
    from .teleport_report import render as render_result

    result = run_dir.read_json("result.json")
    figures = [f"loss_{o}.png" for o in result["optimizers"] if run_dir.file(f"loss_{o}.png").is_file()]
    return render_result(result, figures)


@dataclass(frozen=True)
class LearnedTeleportConfig:
    """One ``paramsym teleport --action RUN_DIR`` run.

    Attributes:
        action: a finished ``paramsym discover`` run directory (its target and learned action).
        tol: level-set tolerance, relative loss change (a learned action is approximate: 1e-6).
        steps: ascent steps of the teleport; step_size: their size.
        seed: seed of the regression targets Y ~ N(0, 1).
    """

    action: str = ""
    tol: float = 1e-6
    steps: int = 10
    step_size: float = 0.1
    seed: int = 0

    @classmethod
    def quick(cls) -> LearnedTeleportConfig:
        """The defaults (one teleport is seconds); ``action`` must still be set."""
        return cls()

    def validate(self) -> None:
        """Check the fields (a named :class:`ConfigError` for the first bad one)."""
        if not self.action:
            raise ConfigError("--action must name a finished `paramsym discover` run directory; received none.")
        if not (self.tol > 0) or self.steps < 1 or not (self.step_size > 0):
            raise ConfigError(f"teleport --action needs tol > 0, steps >= 1, step_size > 0; received tol {self.tol!r}, "
                              f"steps {self.steps!r}, step_size {self.step_size!r}.")


def run_learned(cfg: LearnedTeleportConfig, out, *, progress: bool = False) -> dict[str, Any]:
    """Teleport the discovery run's target along its learned action; return the metrics."""
    from .teleport_learned import learned_teleport

    cfg.validate()
    res = learned_teleport(cfg.action, tol=cfg.tol, steps=cfg.steps, step_size=cfg.step_size, seed=cfg.seed)
    out.write_json("timing.json", {"seconds": res.pop("seconds")})
    return res


def render_learned(run_dir) -> str:
    """``report.md`` of a learned teleport, from its ``metrics.json``."""
    m = run_dir.read_json("metrics.json")
    refused = "none" if m.get("refused_change") is None else f"{m['refused_change']:.3g}"
    lines = [f"# Teleport along the learned action of `{m['run_dir']}`", "",
             f"Action {m['action']} on {', '.join(f'{k} {v}' for k, v in m['tensors'].items())} (p = {m['p']}).", "",
             "| quantity | value |", "|---|---|",
             f"| status | {m['status']} |", f"| accepted ascent steps | {m['steps']} |",
             f"| loss before → after | {m['loss_before']:.6g} → {m['loss_after']:.6g} |",
             f"| relative loss change (tolerance) | {m['rel_loss_change']:.3g} ({m['tol']:.0e}: "
             f"{'within' if m['within_tol'] else 'EXCEEDED'}) |",
             f"| refused step's change | {refused} |", f"| gradient-norm factor | {m['grad_norm_factor']:.4g} |",
             f"| parameter change ‖θ' − θ‖/‖θ‖ | {m['param_change']:.3g} |",
             f"| output change | {m['output_change']:.3g} |", ""]
    return "\n".join(lines)
