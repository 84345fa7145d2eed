"""The pure-math run kinds: ``group``, ``attention`` (the component table), ``attention-count``,
``attention-clusterings``, ``attention-classify`` and ``attention-build``.

Each command's computation is one function of its typed configuration returning ``(result,
text)`` (:func:`paramsym.groups.cli.describe_outputs`, :mod:`paramsym.attention.commands`):
``result`` is what ``--json`` prints, ``text`` what the command prints otherwise. As a run kind
(``paramsym group D4 --out DIR``, managed by :func:`paramsym.runs.execute.execute`),
:func:`run` of the kind makes the same call, writes the text to ``output.txt`` (the kind's own
file: ``--resume`` of a finished run prints it again) and returns ``result`` as the metrics; its
report is the configuration and that text (the table's report is
:func:`paramsym.attention.report.render`, with its figure). The computations take seconds, so
they keep no checkpoint: ``--resume`` of an unfinished run computes it again.

``attention-build`` (:func:`run_build`) also writes the layer it draws to ``layer.safetensors``
(:data:`LAYER`, the input of ``paramsym attention classify``); its metrics carry the file's
``sha256``, so a resumed run that ends with the same ``metrics.json`` wrote the same bytes.

The commands print the same with and without ``--out``. Nothing here imports torch
(``attention-classify`` loads its weights with it).

:data:`MATH_PRESETS` are the named cases of the papers these commands reproduce, as
:class:`~paramsym.presets.Preset` rows for ``paramsym list`` (``fields``: the configuration
fields the row's command sets).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..presets import Preset, PresetTable

__all__ = ["LAYER", "MATH_PRESETS", "OUTPUT", "render", "run_build", "runner"]

#: the kind's own file: what the command printed
OUTPUT = "output.txt"
#: the layer ``attention-build`` writes
LAYER = "layer.safetensors"

TITLES = {
    "group": "Finite group",
    "attention-count": "Components of the equivariance locus",
    "attention-clusterings": "Partial G-clusterings",
    "attention-classify": "Equivariance of an attention layer",
    "attention-build": "A random equivariant attention layer",
}


def runner(outputs: Callable[..., tuple[dict[str, Any], str]]) -> Callable[..., dict[str, Any]]:
    """The managed kind's ``run(cfg, out, *, progress) -> metrics`` of an ``outputs(cfg, progress=)``
    function: the text to ``output.txt``, the result as the metrics."""

    def run(cfg: Any, out, *, progress: bool = False) -> dict[str, Any]:
        result, text = outputs(cfg, progress=progress)
        out.write_text(OUTPUT, text)
        return result

    run.__doc__ = f"Run {outputs.__module__}.{outputs.__name__} into ``out`` (``output.txt``); return its result."
    return run


def run_build(cfg: Any, out, *, progress: bool = False) -> dict[str, Any]:
    """The ``attention-build`` run: :func:`paramsym.attention.build.build_layer` of ``cfg`` written to
    ``layer.safetensors`` (atomically) and its text to ``output.txt``; the metrics are the layer's
    description with the file's name and ``sha256``."""
    import hashlib

    from ..attention.build import build_layer
    from ..runs.rundir import save_tensors

    tensors, meta, result, text = build_layer(cfg, progress=progress)
    save_tensors(out.file(LAYER), tensors, metadata=meta)
    out.write_text(OUTPUT, f"{LAYER}: {text}")
    return {"file": LAYER, "sha256": hashlib.sha256(out.file(LAYER).read_bytes()).hexdigest(), **result}


def render(run_dir) -> str:
    """``report.md`` of a pure-math run: its command, configuration and printed output (files only)."""
    from ..errors import RunFileError

    cfg = run_dir.read_json("config.json")
    kind = cfg["kind"]
    if not run_dir.has(OUTPUT):
        raise RunFileError(f"{str(run_dir.file(OUTPUT))!r} is missing (the output of the {kind} run); rerun the "
                           "command with --resume to write it again.")
    text = run_dir.file(OUTPUT).read_text(encoding="utf-8")
    prov = cfg.get("provenance") if isinstance(cfg.get("provenance"), dict) else {}
    fields = {k: v for k, v in cfg.items() if k not in ("kind", "provenance")}
    lines = [f"# {TITLES.get(kind, kind)}", ""]
    if prov.get("command"):
        lines += [f"`{prov['command']}` (code `{prov.get('code_version')}`, config hash `{prov.get('config_hash')}`, "
                  f"{prov.get('date_utc')})", ""]
    lines += ["| field | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in fields.items()]
    lines += ["", "```text", text.rstrip("\n"), "```", ""]
    return "\n".join(lines)


def _math(name: str, kind: str, command: str, summary: str, **fields: Any) -> Preset:
    return Preset(name, kind, command, summary, fields=fields)


#: named cases of the papers, one row per command line (``paramsym list``)
MATH_PRESETS: PresetTable = PresetTable("pure-math case", (
    _math("D4", "group", "paramsym group D4", "dihedral group of order 8: 5 classes, character table, real irreps, "
          "R[D4] = 1+1+1+1+2·2", group="D4"),
    _math("Q8", "group", "paramsym group Q8", "quaternion group: its 2-dimensional complex irrep is quaternionic "
          "(one real irrep of dimension 4)", group="Q8"),
    _math("d4-96-copies", "attention-count", "paramsym attention count --group D4 --copies 96 --heads 8",
          "Theorem 9's example: c_(G,d)(R^96 ⊗ R[D4]) with 8 heads (2,000,425) and the bound c^16/8!",
          group="D4", copies=96, heads=8),
    _math("d4-growth", "attention", "paramsym attention table --group D4 --copies 1..12 --heads 8",
          "growth of c and of the Theorem 9 bound with the copies C of R[D4], 8 heads",
          group="D4", copies=list(range(1, 13)), heads=8),
    _math("c6-3-heads", "attention-clusterings", "paramsym attention clusterings --group C6 --heads 3",
          "the partial C6-clusterings of 3 heads, up to isomorphism", group="C6", heads=3),
))
