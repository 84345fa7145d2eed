"""The ``census-export`` run kind: a model's verified export (``paramsym census --export FORMAT --out DIR``).

:class:`CensusExportConfig` names the format (``permutation-spec``, ``mergekit``,
``mergekit-0.1.4``, ``mergekit-0.0``: :data:`paramsym.census.export.FORMATS`) and the model (a
built-in ``preset`` or a ``save_pretrained`` directory ``model``). :func:`run` traces the model's
spaces, verifies the description through the written data alone
(:func:`paramsym.census.export.export`; with ``without_weights``,
:func:`paramsym.census.configspec.spec_without_weights`, which reads no weight) and writes it into
the run directory as :func:`artifact` of the format — ``permutation_spec.json`` or
``mergekit_architecture.json`` (MergeKit's architecture files are JSON). The metrics are the
export's record (``file``, its ``sha256``, ``format``, ``verification``, and for a spec the
permutation groups and their ``log10_order``). The export is the kind's only file: ``--resume`` of a
run interrupted after writing it moves the file aside (never deleted) and exports again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..groups.memory import MemoryBudget

__all__ = ["ARTIFACTS", "KIND", "CensusExportConfig", "artifact", "render", "run", "summary_line"]

KIND = "census-export"
#: the file each format is written to inside the run directory
ARTIFACTS = {"permutation-spec": "permutation_spec.json", "mergekit": "mergekit_architecture.json",
             "mergekit-0.1.4": "mergekit_architecture.json", "mergekit-0.0": "mergekit_architecture.json"}


def artifact(fmt: str) -> str:
    """The file name of format ``fmt``'s export in a run directory (:data:`ARTIFACTS`)."""
    if fmt not in ARTIFACTS:
        raise ConfigError(f"--export must be one of {list(ARTIFACTS)}; received {fmt!r}.")
    return ARTIFACTS[fmt]


@dataclass(frozen=True)
class CensusExportConfig:
    """One ``paramsym census --export`` run.

    Attributes:
        format: the export format (``--export``; :data:`ARTIFACTS`).
        preset: a built-in Hugging Face model (``None`` when ``model`` is given).
        model: a ``save_pretrained`` directory (``None`` when ``preset`` is given).
        dtype: the dtype the export is traced and verified in (``float64`` or ``float32``).
        seed: seed of the preset's random weights, the tracing inputs and the verification's group elements.
        tokens: tokens per tracing sequence (``>= 2``).
        without_weights: derive a permutation spec from ``config.json`` and the checkpoint's headers
            (a two-layer random copy traced and checked; no weight read): ``format`` must be
            ``permutation-spec`` and ``model`` a directory.
        max_memory: refuse before loading when the estimate exceeds it (``None``: no budget).
    """

    format: str = "permutation-spec"
    preset: str | None = None
    model: str | None = None
    dtype: str = "float64"
    seed: int = 0
    tokens: int = 8
    without_weights: bool = False
    max_memory: MemoryBudget | None = None

    @classmethod
    def quick(cls) -> CensusExportConfig:
        """The permutation spec of the tiny GPT-2 preset (a second)."""
        return cls(preset="gpt2-tiny")

    def validate(self) -> None:
        """Check the fields (a named :class:`ConfigError` for the first bad one)."""
        artifact(self.format)
        if (self.preset is None) == (self.model is None):
            raise ConfigError("--export needs exactly one of --model DIR or --preset NAME.")
        if self.preset is not None:
            from ..census.presets import NON_HF_PRESETS, PRESETS

            PRESETS.get_preset(self.preset)
            if self.preset in NON_HF_PRESETS:
                raise ConfigError(f"--export needs a Hugging Face model; preset {self.preset!r} is a plain torch model. "
                                  "Pass --model DIR or an HF preset (see `paramsym list`).")
        if self.dtype not in ("float64", "float32"):
            raise ConfigError(f"--dtype must be float64 or float32; received {self.dtype!r}.")
        if self.tokens < 2:
            raise ConfigError(f"--tokens must be an integer >= 2; received {self.tokens}.")
        if self.without_weights and (self.format != "permutation-spec" or self.model is None):
            raise ConfigError("--without-weights derives a permutation spec from a checkpoint directory: use it with "
                              "--export permutation-spec --model DIR.")
        if self.max_memory is not None:
            MemoryBudget(self.max_memory, "--max-memory")


def _stored(model: str):
    """The checkpoint's stored tensors (headers only) of ``model``, or None when it resolves to no
    directory with safetensors shards."""
    from pathlib import Path

    from ..census.stored import read_checkpoint
    from ..models.loading import resolve_model_path

    src = Path(resolve_model_path(model, "--model"))
    return read_checkpoint(src) if src.is_dir() and any(src.glob("*.safetensors")) else None


def _export_with_weights(cfg: CensusExportConfig, path) -> dict[str, Any]:
    """Load the model, trace its spaces, verify and write the export to ``path``; the export's record."""
    import torch

    from ..census import default_inputs
    from ..census.export import export
    from ..census.presets import build_preset
    from ..census.spaces import derive_spaces
    from ..census.stored import expert_pieces, loading_estimate, stored_names
    from ..census.walk import _output
    from ..groups.memory import check_memory
    from ..models.adapters import require_eager
    from ..models.loading import load_model

    # MergeKit picks a file by the checkpoint's class and reads its tensor names: load that class
    head = "checkpoint" if cfg.format.startswith("mergekit") else "auto"
    stored = _stored(cfg.model) if cfg.model else None  # the index and shards checked before loading
    if stored is not None and cfg.max_memory is not None:
        check_memory(loading_estimate(stored), f"loading {cfg.model!r} and exporting in float64", cfg.max_memory,
                     "Or export the permutation spec with --without-weights.")
    model = build_preset(cfg.preset, cfg.seed) if cfg.preset else load_model(
        cfg.model, head=head, quiet=True, argument="--model")
    if not hasattr(model, "config"):
        raise ConfigError(f"--export needs a Hugging Face model; {cfg.preset or cfg.model!r} is a "
                          f"{type(model).__name__}.")
    require_eager(model)
    pieces = expert_pieces(model, stored) if stored is not None else {}  # expert banks stored per expert (Mixtral)
    stored_as = stored_names(model, stored, pieces) if stored is not None else None  # as loaded: exact values
    model = model.to(torch.float32 if cfg.dtype == "float32" else torch.float64).eval()
    inputs = default_inputs(model, torch.Generator().manual_seed(cfg.seed), tokens=cfg.tokens)
    with torch.no_grad():
        spaces = derive_spaces(model, inputs, _output)
    rep = export(model, spaces, cfg.format, path, inputs, _output, seed=cfg.seed,
                 checkpoint_names=set(stored) if stored is not None else None, stored_as=stored_as, pieces=pieces)
    rep.pop("path")
    return rep


def _export_without_weights(cfg: CensusExportConfig, path) -> dict[str, Any]:
    """:func:`paramsym.census.configspec.spec_without_weights` written to ``path``; its record."""
    import torch

    from ..census.configspec import spec_without_weights
    from ..census.export import write_export
    from ..models.loading import resolve_model_path

    spec, rep = spec_without_weights(resolve_model_path(cfg.model, "--model"), seed=cfg.seed,
                                     max_memory=cfg.max_memory,
                                     dtype=torch.float32 if cfg.dtype == "float32" else torch.float64)
    write_export(path, spec)
    return {"format": "permutation-spec", "without_weights": True, **rep}


def run(cfg: CensusExportConfig, out, *, progress: bool = False) -> dict[str, Any]:
    """Verify and write ``cfg``'s export into ``out`` (:func:`artifact`); return its record as the metrics."""
    import hashlib

    cfg.validate()
    name = artifact(cfg.format)
    if out.has(name):  # resumed after the export was written, before the metrics: export again, the old file kept
        from ..runs.reuse import move_aside

        move_aside(out.file(name))
    rep = (_export_without_weights if cfg.without_weights else _export_with_weights)(cfg, out.file(name))
    return {"file": name, "sha256": hashlib.sha256(out.file(name).read_bytes()).hexdigest(), **rep}


def summary_line(rep: dict[str, Any], where: str) -> str:
    """What ``paramsym census --export`` prints: the file ``where`` and how it was verified."""
    ver = rep["verification"]
    if rep.get("without_weights"):
        return (f"wrote {where} (permutation-spec, without weights): {rep['perms']} permutation groups over "
                f"{rep['layers']} layers, named as the checkpoint stores them ({rep['stored_tensors']} tensors"
                + (f"; renamed {rep['renamed']}" if rep["renamed"] else "") + f"); checked on a "
                f"{rep['traced_layers']}-layer random copy through the file: {ver['max_error']:.1e} ≤ "
                f"{ver['tolerance']:.0e}")
    if "mergekit_version" in ver:
        return (f"wrote {where} ({rep['format']}, for MergeKit {ver['mergekit_version']}): {ver['tensors']} tensors "
                "named once" + (f" (tied: {', '.join(ver['tied'])})" if ver["tied"] else "") + "; vocabulary axes of "
                f"{', '.join(ver['vocabulary_axes'])} verified through the file: relabelling the vocabulary changes the "
                f"output by {ver['max_error']:.1e} ≤ {ver['tolerance']:.0e}")
    return (f"wrote {where} ({rep['format']}): {len(rep['perms'])} permutation groups, log10 order "
            f"{rep['log10_order']:.1f}; verified through the file: max relative output change {ver['max_error']:.1e} "
            f"≤ {ver['tolerance']:.0e}" + (f"; not expressible: {rep['omitted']}" if rep["omitted"] else ""))


def render(run_dir) -> str:
    """``report.md``: the summary line, then the configuration and the scalar metrics."""
    from ..runs.reports import render_generic

    rep = run_dir.read_json("metrics.json")
    head = f"# Verified export: {rep['format']}\n\n{summary_line(rep, rep['file'])}.\n"
    return head + render_generic(run_dir, "Run").split("\n", 1)[1]
