"""The ``align`` run kind: two models aligned modulo their symmetries and merged (``paramsym align``).

:class:`AlignConfig` names two model files (``models``: safetensors MLP chains or
``save_pretrained`` directories) or a preset (``preset``: two models trained here from seeds 0
and 1, :mod:`paramsym.kinds.align_presets`). :func:`run` aligns B to A
(:func:`paramsym.alignment.align.align`: weight matching, then the continuous symmetries that
apply; with ``stages`` also the canonical-form stages, budget ``refine``) and writes
``merged.safetensors`` (``θ_A + α (θ_B^aligned − θ_A)``, ``α = merge``, 0.5 by default, of the
stage :func:`paramsym.alignment.io.plan_merge` picks — the last whose merge reloads — the later
ones named with why; for Hugging Face pairs also the ``save_pretrained`` directory ``merged/``),
``path_loss.png`` and ``result.json`` (the summary, the path curves of every stage and the merged
model's losses). Metrics: the summary
(``barrier_before``, ``barrier_permutation``, ``barrier_full`` (+ ``_train``), ``function_error``,
distances, ...) plus ``points`` and ``model``, without the wall-clock ``seconds`` (in
``timing.json``).

Checkpoint: a preset's two trained models are cached as safetensors as each finishes (under
``cache_dir``, keyed by every training setting), so ``--resume`` of a run interrupted while
training reuses the finished model and trains only the other; the training and the alignment
are seeded, so the resumed run's ``metrics.json`` equals an uninterrupted one's byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..alignment.refine_config import RefineConfig
from ..errors import ConfigError
from ..groups.memory import MemoryBudget
from ..presets import Preset, PresetTable

__all__ = ["ALIGN_PRESETS", "KIND", "AlignConfig", "render", "run"]

KIND = "align"


def _preset(name: str, summary: str) -> Preset:
    return Preset(name, KIND, "paramsym align --preset " + name, summary)


#: the ``paramsym align --preset`` entries (listed by ``paramsym list``; built by
#: :func:`paramsym.kinds.align_presets.load_preset`)
ALIGN_PRESETS: PresetTable = PresetTable("alignment preset", [
    _preset("digits-mlp", "two MLPs 64→32→32→10 trained on digits from seeds 0 and 1 (cached), aligned and merged"),
    _preset("modadd-transformer", "two 2-layer GPT-2s trained on addition mod 23 from seeds 0 and 1 (cached), "
            "aligned and merged"),
    _preset("vit-digits", "two 4-layer Vision Transformers (HF ViT, 8×8 digits in 2×2 patches) trained from seeds 0 and 1 "
            "(cached), aligned and merged"),
    _preset("lm-stdlib", "two 4-layer byte-level GPT-2 LMs (d 128, tied embeddings) trained on the Python standard "
            "library's sources from seeds 0 and 1 (cached), aligned and merged"),
])


@dataclass(frozen=True)
class AlignConfig:
    """One ``paramsym align`` run.

    Attributes:
        models: the two models A, B (files or directories); empty with ``preset``.
        preset: a key of :data:`ALIGN_PRESETS` (``None`` with ``models``).
        symmetries: subset of ``permutation``, ``rescaling``, ``attention`` (``None``: all that apply).
        data: evaluation data of model files: ``auto``, ``digits``, ``digits-images``, ``stdlib``, ``modadd:P``.
        activation: activation of an MLP given as safetensors.
        width: the preset's hidden width (digits-mlp) / ``n_embd`` (modadd); ``None``: the preset's.
        cache_dir: where presets cache their trained models (``None``: ``$PARAMSYM_CACHE`` or
            ``~/.cache/paramsym``; the command records the resolved directory).
        points: points on the path, both ends included.
        seed: seed of the coordinate-descent order.
        max_memory: memory budget of the path curves, in bytes (checked before any work).
        merge: ``α`` of the merged model ``θ_A + α (θ_B^aligned − θ_A)`` in ``[0, 1]`` (``None``:
            0.5, the midpoint); a Hugging Face pair's merged model is also written as the
            ``save_pretrained`` directory ``merged/``.
        stages: the stages reported (:data:`paramsym.alignment.align.STAGES`; before, permutation
            and full always run); ``canonical``, ``orthogonal`` and ``refined`` run on the canonical
            form of a Hugging Face pre-norm transformer
            (:func:`paramsym.kinds.canonical_pair.canonical_pair_of`).
        refine: the budget of the ``refined`` stage (steps, lr, ``max_condition`` κ, ...).
    """

    models: tuple[str, ...] = ()
    preset: str | None = None
    symmetries: tuple[str, ...] | None = None
    data: str = "auto"
    activation: str = "relu"
    width: int | None = None
    cache_dir: str | None = None
    points: int = 25
    seed: int = 0
    max_memory: MemoryBudget = MemoryBudget(2 * 2**30)
    merge: float | None = None
    stages: tuple[str, ...] = ("before", "permutation", "full")
    refine: RefineConfig = RefineConfig()

    @classmethod
    def quick(cls) -> AlignConfig:
        """The digits MLP preset at width 8, 5 path points (seconds once its models are cached)."""
        return cls(preset="digits-mlp", width=8, points=5)

    def validate(self) -> None:
        """Check the fields (a named :class:`ConfigError` for the first bad one)."""
        if (self.preset is None) == (not self.models):
            raise ConfigError("give either two models A B or --preset NAME (not both, not neither).")
        if self.models and len(self.models) != 2:
            raise ConfigError(f"give exactly two models A B; received {len(self.models)}: {list(self.models)}.")
        if self.preset is not None:
            ALIGN_PRESETS.get_preset(self.preset)
        if self.width is not None and self.width < 2:
            raise ConfigError(f"--width must be an integer >= 2 (the hidden width / n_embd of the preset); received "
                              f"{self.width}.")
        if self.merge is not None:
            import math

            if isinstance(self.merge, bool) or not isinstance(self.merge, (int, float)) or not math.isfinite(self.merge) \
                    or not 0.0 <= self.merge <= 1.0:
                raise ConfigError(f"--merge must be a number α in [0, 1] (0 = A, 1 = the aligned B, 0.5 = the midpoint); "
                                  f"received {self.merge!r}.")
        from ..alignment.align import check_points, check_stages

        extra = check_stages(self.stages, None, built=True)
        self.refine.validate()
        check_points(self.points, self.max_memory, 3 + len(extra))


def _title(cfg: dict[str, Any]) -> str:
    return f"Alignment: preset {cfg['preset']}" if cfg.get("preset") else "Alignment"


def run(cfg: AlignConfig, out, *, progress: bool = False) -> dict[str, Any]:
    """Align, merge and write the run's files (module docstring); return the metrics."""
    import torch

    from ..alignment.align import align
    from ..alignment.io import data_for, load_pair, write_outputs

    cfg.validate()
    syms = None if cfg.symmetries is None else list(cfg.symmetries)
    gen = torch.Generator().manual_seed(cfg.seed)
    if cfg.preset:
        from .align_presets import load_preset

        arch, a, b, data, info = load_preset(cfg.preset, cache_dir=cfg.cache_dir, width=cfg.width)
    else:
        arch, a, b, info = load_pair(cfg.models[0], cfg.models[1], cfg.activation)
        data, name = data_for(arch, cfg.data, info)
        info = dict(info) | {"A": cfg.models[0], "B": cfg.models[1], "data": name}
    extra = {}
    if set(cfg.stages) - {"before", "permutation", "full"}:
        extra = {"stages": cfg.stages, "canonical": _canonical(arch, a, b, data, cfg.stages),
                 "refine": replace(cfg.refine, progress=progress or cfg.refine.progress)}
    result = align(arch, a, b, data, symmetries=syms, points=cfg.points, generator=gen, max_memory=cfg.max_memory,
                   **extra)
    summary = result.summary() | {"points": cfg.points, "model": info}
    alpha = 0.5 if cfg.merge is None else float(cfg.merge)
    merge = _plan(arch, result, a, data, alpha, extra.get("canonical"))
    summary["merge"] = _merge_record(arch, merge, data, alpha)
    write_outputs(out, result, a, summary, _title({"preset": cfg.preset}), merge=merge)
    out.write_json("timing.json", {"seconds": summary.pop("seconds")})
    return summary


def _plan(arch, result, a, data, alpha: float, pair):
    """The merge (:func:`paramsym.alignment.io.plan_merge`); a canonical-form stage's reload is checked on
    8 test inputs in A's dtype to the census's rounding rule (``L`` attention layers, the widest fan-in)."""
    from ..alignment.io import plan_merge
    from ..census.precision import rounding_tolerance

    dtype = next(iter(a.values())).dtype
    width = max((t.shape[-1] for t in a.values() if t.dim() == 2), default=1)
    tol = rounding_tolerance(dtype, len(arch.attention), width)
    return plan_merge(result, arch, a, alpha, canonical=pair, x=data.x_test[:8], dtype=dtype, tolerance=tol)


def _canonical(arch, a, b, data, stages):
    """The :class:`~paramsym.alignment.orthogonal.CanonicalPair` of the canonical-form stages; a refusal of
    the canonical form keeps its error class, prefixed with the stages asked for and the remedy."""
    from ..errors import ParamsymError
    from .canonical_pair import canonical_pair_of

    try:
        return canonical_pair_of(arch, a, b, data)
    except ParamsymError as exc:
        asked = [s for s in stages if s in ("canonical", "orthogonal", "refined")]
        text = (str(exc).splitlines() or [""])[0]
        raise type(exc)(f"--stages {','.join(asked)} run on the canonical form of both models, which does not apply "
                        f"here: {text} Drop those stages (before, permutation and full apply).") from None


def _merge_record(arch, merge, data, alpha: float) -> dict[str, Any]:
    """Where the merged model is written, its stage and α, the stages not merged and why, and its
    train/test loss and accuracy (float64)."""
    import torch

    from ..alignment.path import evaluate

    rec: dict[str, Any] = {"alpha": alpha, "stage": merge.stage,
                           "path": "merged/" if merge.module is not None else "merged.safetensors"}
    if merge.skipped:
        rec["not_merged"] = merge.skipped
    if merge.reload_error is not None:
        rec["reload_error"] = merge.reload_error
    for split in ("train", "test"):
        x = getattr(data, f"x_{split}")
        x = x.double() if torch.is_floating_point(x) else x
        rec[f"{split}_loss"], rec[f"{split}_acc"] = evaluate(merge.forward, merge.params, x, getattr(data, f"y_{split}"))
    return rec


def render(run_dir) -> str:
    """``report.md`` of an align run, from its ``metrics.json`` and ``timing.json``."""
    from ..alignment.io import render_report

    m = run_dir.read_json("metrics.json")
    seconds = run_dir.read_json("timing.json")["seconds"] if run_dir.has("timing.json") else None
    return render_report(m | {"seconds": seconds}, _title(run_dir.read_json("config.json")))
