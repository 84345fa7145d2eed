"""The ``align-census`` run kind: ``paramsym align A B --census-groups`` — two Hugging Face
checkpoints of any architecture the census traces, aligned over the census's whole group
(:func:`paramsym.kinds.census_plan.census_plan`: permutations, the residual rotation of folded
RMSNorm models, per-head GL / rotary commutant) and merged.

The run directory holds, besides the run verb's files, ``aligned_b/`` and ``merged/``
(``from_pretrained``-loadable) and ``alignment.json``
(:func:`paramsym.alignment.checkpoints.align_checkpoints`); the metrics are the alignment's record
(distances per stage, the groups, the kept stage). ``alignment.json`` (written last) is the
checkpoint: ``--resume`` of a run interrupted before it aligns again (an interrupted attempt's
``aligned_b/`` / ``merged/`` moved aside), after it reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["KIND", "AlignCensusConfig", "render", "run"]

KIND = "align-census"


@dataclass(frozen=True)
class AlignCensusConfig:
    """Attributes:
        models: the two checkpoints A and B (directories written by ``save_pretrained``, or a
            known name such as ``minilm``).
        symmetries: the groups, a subset of ``permutation, rotation, attention`` containing
            ``permutation`` (``None``: ``permutation, attention``).
        seed: seed of the tracing inputs and of the matching.
    """

    models: tuple[str, ...] = ()
    symmetries: tuple[str, ...] | None = None
    seed: int = 0

    @classmethod
    def quick(cls) -> AlignCensusConfig:
        """all-MiniLM-L6-v2 aligned with itself (the identity is the answer)."""
        return cls(models=("minilm", "minilm"))

    def validate(self) -> None:
        if len(self.models) != 2:
            raise ConfigError(f"--census-groups aligns two checkpoints A B; received {len(self.models)}.")


def run(cfg: AlignCensusConfig, out, *, progress: bool = True) -> dict[str, Any]:
    """Align B to A over the census's groups into ``out``; return the alignment's record."""
    import torch  # noqa: F401  (the models below)

    from ..alignment.checkpoints import align_checkpoints
    from ..models.loading import load_model
    from .census_plan import census_plan

    cfg.validate()
    ma, mb = (load_model(m, head="auto", quiet=True, argument=w) for m, w in zip(cfg.models, "AB"))
    plan = census_plan(ma, cfg.seed, None if cfg.symmetries is None else list(cfg.symmetries))
    spec = plan["spec"]
    if out.has("alignment.json"):  # resumed after the alignment finished (it writes alignment.json last)
        info = out.read_json("alignment.json")
    else:
        from ..runs.reuse import move_aside

        for partial in ("aligned_b", "merged"):  # an interrupted attempt's outputs: kept beside, never mixed
            if out.has(partial):
                move_aside(out.file(partial))
        info = align_checkpoints(ma, mb, spec, out.path, seed=cfg.seed, attention=plan["attention"],
                                 rotation=plan["rotation"])
    return info | {"A": cfg.models[0], "B": cfg.models[1], "log10_order": spec.log10_order(),
                   "omitted": spec.omitted, "symmetries": plan["symmetries"]}


def summary_line(info: dict[str, Any]) -> str:
    """The line ``paramsym align --census-groups`` prints."""
    qk = info.get("attention_query_key")
    syms = [s if s != "attention" or not qk else f"attention (query/key: GL(d_k) on {qk['gl']} layers, rotary "
            f"commutant on {qk['rotary_commutant']})" for s in info["symmetries"][1:]]
    return (f"aligned B to A over {len(info['perms'])} permutation groups (log10 order {info['log10_order']:.1f})"
            f"{' and ' + ', '.join(syms) if syms else ''}: distance "
            + " -> ".join(f"{v:.4g}" for v in info["distance"].values()) + f" ({', '.join(info['distance'])}); wrote "
            f"{info['aligned_b']} and {info['merged']}")


def render(run_dir) -> str:
    """``report.md``: the summary line, then the configuration and the scalar metrics."""
    from ..runs.reports import render_generic

    info = run_dir.read_json("metrics.json")
    head = f"# Alignment over the census's groups\n\n{summary_line(info)}.\n\n"
    return head + render_generic(run_dir, "Run").split("\n", 1)[1]
