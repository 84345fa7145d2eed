"""The ``census`` run kind: every known parameter symmetry of a model, verified on its weights (``paramsym census``).

:class:`CensusConfig` names a built-in model (``preset``, :data:`paramsym.census.presets.PRESETS`)
or a ``save_pretrained`` directory (``model``); :func:`run` walks it
(:func:`paramsym.census.census`) and returns the census (``symmetries``, ``total_dimension``,
``attention_dimension``, ``parameters``, ``symmetric_fraction``, ``counting``, ``all_verified``,
...) as the metrics, without the wall-clock ``seconds`` (in ``timing.json``); :func:`render`
writes the table of ``report.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["KIND", "LAYOUTS", "CensusConfig", "render", "report_markdown", "run"]

KIND = "census"
#: the values of ``--layout`` (:func:`paramsym.census.census`'s ``layout``)
LAYOUTS = ("auto", "derived", "adapter")


@dataclass(frozen=True)
class CensusConfig:
    """One ``paramsym census`` run.

    Attributes:
        preset: a built-in model (``None`` when ``model`` is given).
        model: a ``save_pretrained`` directory (``None`` when ``preset`` is given).
        dtype: verification dtype, ``float64`` or ``float32``.
        seed: seed of the preset's random weights and of the verification (inputs, group elements).
        tokens: tokens per verification sequence (2 sequences; ``>= 2``).
        layout: where an HF model's spaces come from (:func:`paramsym.census.census`): ``auto``
            (the adapter where one exists, else traced; the residual stream always traced),
            ``derived`` (traced), ``adapter`` (adapters only).
        canonical: take the census of the model's canonical form
            (:func:`paramsym.census.canonical.canonical_form`, embeddings untied; HF models with an
            LM head, pre-norm) instead of the model itself.
    """

    preset: str | None = "mlp-relu"
    model: str | None = None
    dtype: str = "float64"
    seed: int = 0
    tokens: int = 8
    layout: str = "auto"
    canonical: bool = False

    @classmethod
    def quick(cls) -> CensusConfig:
        """The small ReLU MLP preset (well under a second)."""
        return cls(preset="mlp-relu")

    def validate(self) -> None:
        """Check the fields (a named :class:`ConfigError` for the first bad one)."""
        from ..census.presets import PRESETS

        if (self.preset is None) == (self.model is None):
            raise ConfigError("give exactly one of --preset NAME or --model DIR.")
        if self.preset is not None:
            PRESETS.get_preset(self.preset)
        if self.dtype not in ("float64", "float32"):
            raise ConfigError(f"--dtype must be float64 or float32; received {self.dtype!r}.")
        if self.layout not in LAYOUTS:
            raise ConfigError(f"--layout must be one of {list(LAYOUTS)}; received {self.layout!r}.")
        from ..census.presets import NON_HF_PRESETS

        if self.preset in NON_HF_PRESETS and self.layout != "auto":
            raise ConfigError(f"--layout {self.layout} chooses how a Hugging Face model's spaces are found; preset "
                              f"{self.preset!r} is a plain torch model, so it would be ignored. Drop --layout.")
        if self.tokens < 2:
            raise ConfigError(f"--tokens must be an integer >= 2 (rotary symmetries need distinct positions); "
                              f"received {self.tokens}.")


def run(cfg: CensusConfig, out, *, progress: bool = False) -> dict[str, Any]:
    """The census of ``cfg``'s model; ``seconds`` to ``timing.json``; return the census as metrics."""
    import torch

    from ..census import census, default_inputs
    from ..census.presets import PRESETS, build_preset, preset_inputs
    from ..models.loading import load_model

    cfg.validate()
    model = build_preset(cfg.preset, cfg.seed) if cfg.preset else load_model(  # --canonical: with its LM head
        cfg.model, head="checkpoint" if cfg.canonical else "image-or-base", quiet=True, argument="--model",
        hint=f"Or use --preset NAME ({sorted(PRESETS)}).")
    dtype = torch.float64 if cfg.dtype == "float64" else torch.float32
    inputs, gen = None, torch.Generator().manual_seed(cfg.seed)
    if cfg.preset:
        inputs = preset_inputs(cfg.preset, model, gen, tokens=cfg.tokens)
    elif hasattr(model, "config"):
        inputs = default_inputs(model, gen, tokens=cfg.tokens)
    if cfg.canonical:
        model = _canonical(model, inputs, cfg.seed)
    result = census(model, inputs, dtype=dtype, seed=cfg.seed, name=cfg.preset or cfg.model, copy_model=False,
                    progress=progress, layout=cfg.layout).to_json()
    out.write_json("timing.json", {"seconds": result.pop("seconds")})
    return result


def _canonical(model, inputs, seed: int):
    """``model``'s canonical form (float64, embeddings untied) for ``--canonical``."""
    import torch

    from ..census import default_inputs
    from ..census.canonical import canonical_form
    from ..census.walk import _output
    from ..models.adapters import require_eager

    if not hasattr(model, "config"):
        raise ConfigError(f"--canonical needs a Hugging Face transformer with an LM head; received a "
                          f"{type(model).__name__}. Drop --canonical.")
    work = require_eager(model).double().eval()
    batch = dict(inputs) if inputs is not None else default_inputs(work, torch.Generator().manual_seed(seed))
    return canonical_form(work, batch, _output, untie=True)


def report_markdown(result: dict, seconds: float | None = None) -> str:
    """The census as markdown: a summary and one table row per symmetry."""
    took = "" if seconds is None else f", {seconds:.2f} s"
    lines = [f"# Symmetry census: {result['model']}", "",
             f"model_type `{result['model_type']}`, verified in {result['dtype']} (tolerance {result['tolerance']:.0e})"
             f"{took}.", "",
             f"- parameters: {result['parameters']:,}",
             f"- total continuous symmetry dimension: {result['total_dimension']:,} "
             f"(attention {result['attention_dimension']:,})",
             f"- symmetric fraction: {result['symmetric_fraction']:.4%}",
             f"- counting: {result['counting']}", "",
             "| module | kind | dimension | discrete order | verified error | motion | verified |",
             "|---|---|---:|---|---:|---:|---|"]
    for e in result["symmetries"]:
        lines.append(f"| {e['module']} | {e['kind']} | {e['dimension']:,} | {e['discrete_order'] or ''} | "
                     f"{e['verified_error']:.2e} | {e['motion']:.3f} | {'yes' if e['verified'] else '**NO**'} |")
    rot = result.get("group", {}).get("residual_rotation")
    if rot:
        how = (f"{'verified' if rot['verified'] else '**NOT verified**'} on the canonical form (error "
               f"{rot['verified_error']:.1e}, motion {rot['motion']:.2f})" if "verified_error" in rot else rot.get("note", "").rstrip("."))
        lines += ["", f"Residual stream: {rot['group']}, dimension {rot['dimension']:,} — {how}."]
    if result.get("refused"):  # issue 34: entries refused per layer, with their reasons (not counted)
        lines += ["", "Refused (not claimed, not counted): "
                  + "; ".join(f"{r['module']} {r['kind']}: {r['reason']}" for r in result["refused"])]
    if result["unrecognised_modules"]:
        lines += ["", "Modules with parameters that no listed symmetry moves: "
                  + ", ".join(f"{u['module']} ({u['type']})" for u in result["unrecognised_modules"])]
    return "\n".join(lines) + "\n"


def render(run_dir) -> str:
    """``report.md`` of a census run, from its ``metrics.json`` (and ``timing.json`` if present)."""
    seconds = run_dir.read_json("timing.json").get("seconds") if run_dir.has("timing.json") else None
    return report_markdown(run_dir.read_json("metrics.json"), seconds)
