"""The ``affine`` run kind: the exact affine symmetry algebra of a named block (``paramsym affine``).

Configuration :class:`AffineConfig` (``quick()``: ``linear2x2``); :func:`run` solves
``⟨∇F_k(θ_j), Aθ_j + b⟩ = 0`` for the preset's ansatz (:func:`paramsym.exact.affine.solve_affine`),
then analyses the algebra it found (commutativity; closure residual of the structure constants
where that costs at most about 5·10¹⁰ flops). Its metrics are the solver's
:meth:`~paramsym.exact.affine.AffineAlgebra.summary` without the wall-clock ``seconds`` (that goes
to ``timing.json``), plus ``preset``, ``expected``, ``commutativity`` and ``closure_residual``
(or ``closure_skipped``); :func:`render` writes the report from them.

This is the worked example of the run-kind protocol (:mod:`paramsym.kinds.catalog`):
a typed config with ``quick()``, ``run(cfg, out, *, progress) -> metrics`` and ``render(run)``,
registered once in :data:`~paramsym.runs.kinds.KINDS` with ``managed=True``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..groups.memory import MemoryBudget

__all__ = ["AffineConfig", "KIND", "render", "run"]

KIND = "affine"
#: structure constants cost O(d² s³) flops; beyond this the closure check is skipped (a few seconds)
CLOSURE_FLOPS = 5e10


@dataclass(frozen=True)
class AffineConfig:
    """One ``paramsym affine`` run.

    Attributes:
        preset: a key of :data:`paramsym.exact.presets.AFFINE_PRESETS`.
        tol: rank tolerance: ``σ ≤ tol·σ_max`` is null.
        rule: dimension rule, ``gap`` or ``threshold``.
        samples: sample points (``None``: the preset's count, else the solver's automatic count).
        seed: seed of the block; the sample points use ``seed + 1``.
        max_memory: memory budget of the solver and the algebra checks, in bytes.
    """

    preset: str = "relu242"
    tol: float = 1e-6
    rule: str = "gap"
    samples: int | None = None
    seed: int = 0
    max_memory: MemoryBudget = MemoryBudget(2 * 2**30)

    @classmethod
    def quick(cls) -> AffineConfig:
        """The smallest block (``linear2x2``, 72 unknowns)."""
        return cls(preset="linear2x2")

    def validate(self) -> None:
        """Check the fields (a named :class:`ConfigError` for the first bad one)."""
        from ..exact.presets import AFFINE_PRESETS
        from ..exact.spectrum import check_tolerance

        AFFINE_PRESETS.get_preset(self.preset)
        check_tolerance(self.tol, "--tol")
        if self.rule not in ("gap", "threshold"):
            raise ConfigError(f"--rule must be gap or threshold; received {self.rule!r}.")
        if self.samples is not None and self.samples < 1:
            raise ConfigError(f"--samples must be an integer >= 1; received {self.samples}.")


def run(cfg: AffineConfig, out, *, progress: bool = False) -> dict[str, Any]:
    """Solve and analyse the affine algebra of ``cfg.preset``; return the metrics (module docstring)."""
    import torch

    from ..exact.affine import AffineSolverConfig, solve_affine
    from ..exact.presets import build_preset, expected_dimension
    from ..groups.algebra import structure_constants
    from ..groups.brackets import commutativity

    cfg.validate()
    target, ansatz = build_preset(cfg.preset, cfg.seed)
    solver = AffineSolverConfig(samples=cfg.samples, tol=cfg.tol, rule=cfg.rule, max_memory=cfg.max_memory)
    res = solve_affine(target, ansatz, solver, generator=torch.Generator().manual_seed(cfg.seed + 1), progress=progress)
    metrics = res.summary()
    out.write_json("timing.json", {"seconds": metrics.pop("seconds")})
    metrics["preset"], metrics["expected"] = cfg.preset, expected_dimension(cfg.preset)
    metrics["target"] = repr(target)
    if res.dimension:
        aug = res.augmented()
        metrics["commutativity"] = commutativity(aug, max_memory=cfg.max_memory)  # O(d s²) memory
        d_, s_ = aug.shape[0], aug.shape[-1]
        if d_ * d_ * s_**3 <= CLOSURE_FLOPS:
            metrics["closure_residual"] = structure_constants(aug)[1]
        else:
            metrics["closure_residual"] = None
            metrics["closure_skipped"] = (f"{d_} generators of size {s_}: the closure check would cost about "
                                          f"{d_ * d_ * s_**3:.1e} flops; run paramsym.groups.algebra.structure_constants "
                                          "from Python if you need it")
    return metrics


def _e(v: Any) -> str:
    return "—" if v is None else f"{v:.2e}"


def render(run_dir) -> str:
    """``report.md`` of an affine run, from its ``config.json`` and ``metrics.json``."""
    cfg = run_dir.read_json("config.json")
    m = run_dir.read_json("metrics.json")
    rel = m["relative_singular_values"]
    d = m["dimension"]
    lo = max(0, len(rel) - d - 3)
    lines = [f"# Exact affine symmetry algebra: {m['preset']}", "",
             f"{m['target']}, {m['unknowns']} unknowns, {m['samples']} sample points, {m['method']}.", "",
             "| quantity | value |", "|---|---|",
             f"| status | {m['status']} |",
             f"| dimension (expected) | {d} ({m['expected']}) |",
             f"| gap σ_(d+1)/σ_(d) | {m['gap']:.3g} |" if m.get("gap") is not None else "| gap | — |",
             f"| rule, tolerance | {cfg['rule']}, {cfg['tol']:g} |",
             f"| held-out relative invariance residual (max) | {_e(m.get('max_residual'))} |",
             f"| commutativity | {_e(m.get('commutativity'))} |",
             f"| closure residual | {_e(m.get('closure_residual'))} |", "",
             "Smallest relative singular values σ/σ_max: " + " ".join(f"{x:.2e}" for x in rel[lo:]), ""]
    if m.get("closure_skipped"):
        lines += [f"Closure check skipped: {m['closure_skipped']}.", ""]
    return "\n".join(lines)
