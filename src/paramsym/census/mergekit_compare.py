"""Agreement of the census with MergeKit's hand-written architecture files (issue 18, item 4).

MergeKit ships one JSON description per architecture in its wheel
(``mergekit/_data/architectures/*.json``). This module **reads those data files** (from an
installed ``mergekit`` package or a downloaded wheel: ``pip download mergekit --no-deps -d DIR``;
no MergeKit code is imported or copied) and compares, tensor by tensor, what each file states
with what the census finds on the tiny model of that architecture
(:mod:`paramsym.census.zoo`, built as the file's ``architectures[0]`` class where
``transformers`` has it):

* **names** — a file's tensor matches a model parameter by its name, one of its ``aliases``, or
  either without its first dotted component (MergeKit's loader adds or drops the model-class
  prefix, e.g. ``roberta.``); a name of a tied weight (``lm_head.weight`` tied to the embedding)
  matches the one shared tensor. Names the file lists that the model lacks, and parameters the
  file does not list, are disagreements about the tensor list (the model's ``named_parameters``
  is the reference); for a parameter the file leaves out, the output change with that parameter
  zeroed shows what the file loses;
* **statements** — ``vocabulary_axis: a`` says axis ``a`` indexes the vocabulary (no feature
  space): it agrees when the census puts no permutation on that axis; ``input_space`` /
  ``output_space`` (and ``head_split``) are compared with the census's groups where a file
  states them (none of the files of version 0.1.5 does); ``procedural_spaces`` of type
  ``residual`` tie the residual spaces of every layer into one — checked numerically: one
  permutation of the whole stream (the census's ``P_res``) against independent permutations per
  layer boundary;
* **what the census adds** — tensors carrying a verified census group that the file leaves
  without a space; the census's whole group is applied through the permutation spec (random
  elements, :func:`paramsym.census.permspec.verify_spec`) and the relative output change and
  weight motion are recorded.

A file that states a symmetry the census contradicts would be settled the same way: each side's
claimed symmetry applied to the tiny model, the output change measured.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import torch

from ..errors import InputFileError

__all__ = ["ARCHITECTURES", "compare", "mergekit_files"]

#: zoo name → MergeKit architecture file (MergeKit has no OPT file)
ARCHITECTURES = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "gemma": "gemma", "phi3": "phi3",
                 "gpt2": "gpt2", "gpt_neox": "gpt-neox", "bert": "bert", "roberta": "roberta",
                 "distilbert": "distilbert", "falcon": "falcon", "stablelm": "stablelm"}
_DIR = "mergekit/_data/architectures/"
#: where `paramsym reproduce census-mergekit` looks for MergeKit's wheel when no source is given
#: (`pip download mergekit --no-deps -d ~/.cache/paramsym/mergekit`); the benchmark script also
#: takes --mergekit / $PARAMSYM_MERGEKIT (the library reads no environment)
DEFAULT_DIR = Path.home() / ".cache" / "paramsym" / "mergekit"
_HOW = "pip download mergekit --no-deps -d ~/.cache/paramsym/mergekit"


def mergekit_files(source: str | os.PathLike | None = None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """MergeKit's architecture files as ``{file stem: parsed JSON}`` and where they came from.

    ``source``: a wheel (``mergekit-*.whl``), a directory holding one, or a ``mergekit`` package
    directory; default: ``~/.cache/paramsym/mergekit`` when it holds a wheel, else an installed
    ``mergekit`` (located with ``importlib.util.find_spec``, nothing imported).

    Raises:
        InputFileError: none found (says how to get them).
    """
    import importlib.util

    src = source
    if src is None and DEFAULT_DIR.is_dir() and any(DEFAULT_DIR.glob("mergekit-*.whl")):
        src = DEFAULT_DIR
    if src is None:
        spec = importlib.util.find_spec("mergekit")
        if spec is not None and spec.submodule_search_locations:
            src = list(spec.submodule_search_locations)[0]
    if src is None:
        raise InputFileError(f"the MergeKit comparison needs MergeKit's architecture files: run `{_HOW}` (or pass the "
                             "wheel: benchmarks/mergekit_agreement.py --mergekit WHEEL), or install mergekit.")
    path = Path(src)
    if path.is_dir() and not (path / "_data").is_dir():
        wheels = sorted(path.glob("mergekit-*.whl"))
        if not wheels:
            raise InputFileError(f"mergekit source {str(path)!r}: no mergekit-*.whl and no mergekit package there.")
        path = wheels[-1]
    out: dict[str, dict[str, Any]] = {}
    if path.is_dir():
        for f in sorted((path / "_data" / "architectures").glob("*.json")):
            out[f.stem] = json.loads(f.read_text())
        origin = {"source": str(path), "version": _installed_version()}
    elif path.is_file():
        with zipfile.ZipFile(path) as z:
            for n in z.namelist():
                if n.startswith(_DIR) and n.endswith(".json"):
                    out[n[len(_DIR):-5]] = json.loads(z.read(n))
        origin = {"source": path.name, "version": path.name.split("-")[1],
                  "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    else:
        raise InputFileError(f"mergekit source {str(path)!r} does not exist; pass a mergekit wheel or directory.")
    if not out:
        raise InputFileError(f"{str(path)!r} holds no {_DIR}*.json; is it a mergekit wheel?")
    return out, origin


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mergekit")
    except PackageNotFoundError:
        return "unknown"


def _entries(arch: dict[str, Any], layers: int) -> list[dict[str, Any]]:
    """Every tensor entry of a file, layer templates expanded (``${layer_index}`` → 0..L−1)."""
    out = [dict(e, _layer=None) for e in arch.get("pre_weights", []) + arch.get("post_weights", [])]
    for i in range(layers):
        for w in arch.get("layer_templates", {}).get("weights", []):
            e = json.loads(json.dumps(w).replace("${layer_index}", str(i)))
            out.append(dict(e, _layer=i))
    return out


def _match(entry: dict[str, Any], params: set[str]) -> str | None:
    names = [entry["name"], *entry.get("aliases", [])]
    for n in names:
        if n in params:
            return n
    for n in names:
        short = n.split(".", 1)[1] if "." in n else n
        if short in params:
            return short
        for p in params:
            if p.split(".", 1)[-1] == n:
                return p
    return None


def _model_for(name: str, arch: dict[str, Any]):
    import transformers

    from .zoo import tiny_model

    cls = next((a for a in arch.get("architectures", []) if hasattr(transformers, a)), None)
    if cls is None:  # e.g. StableLMEpochForCausalLM (remote code): the transformers port of the same model
        return tiny_model(name, causal_lm=any(a.endswith("ForCausalLM") for a in arch.get("architectures", []))), None
    return tiny_model(name, cls=cls), cls


def _compare_one(name: str, arch: dict[str, Any], seed: int) -> dict[str, Any]:
    from .export import export_tolerance
    from .permspec import PermutationSpec, axis_ids, spec_from_spaces, verify_spec
    from .spaces import derive_spaces
    from .walk import _output, default_inputs

    model, cls = _model_for(name, arch)
    model = model.double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    inputs = default_inputs(model, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        spaces = derive_spaces(model, inputs, _output)
    spec = spec_from_spaces(spaces, params)
    tol = export_tolerance(spaces, torch.float64)
    out_perm = "P_res" if spaces.output_in_stream else None
    rep = verify_spec(model, spec, params, inputs, _output, torch.Generator().manual_seed(seed + 1), output_perm=out_perm)
    L = len(spaces.layout.layers)
    entries = _entries(arch, L)
    names = set(params)
    canon = {id(p): n for n, p in model.named_parameters()}
    alias = {n: canon[id(p)] for n, p in model.named_parameters(remove_duplicate=False)}  # tied weights: one tensor
    matched: dict[str, dict[str, Any]] = {}
    only_mk = []
    for e in entries:
        m = _match(e, set(alias))
        if m is None:
            if not e.get("optional"):
                only_mk.append(e["name"])
        elif alias[m] not in matched or m == alias[m]:
            matched[alias[m]] = e
    only_model = sorted(names - set(matched))
    with torch.no_grad():  # what leaving a parameter out of the file loses: the output change with it zeroed
        base = _output(model(**inputs))
        left_out = {}
        for n in only_model:
            got = _output(torch.func.functional_call(model, {**params, n: torch.zeros_like(params[n])}, (), inputs))
            left_out[n] = float((got - base).norm() / base.norm()) if got.shape == base.shape else float("nan")
    agree, disagree, statements, stated_ok, adds = [], [], 0, 0, []
    for n, e in matched.items():
        checks = []
        if "vocabulary_axis" in e:
            ax = int(e["vocabulary_axis"])
            checks.append(ax < params[n].dim() and not axis_ids(spec.axes[n][ax]))
        for key, ax in (("input_space", 1), ("output_space", 0)):
            if key in e:
                checks.append(bool(axis_ids(spec.axes[n][min(ax, params[n].dim() - 1)])))
        statements += len(checks)
        stated_ok += sum(checks)
        (agree if all(checks) else disagree).append(n)
        if not any(k in e for k in ("input_space", "output_space")) and any(axis_ids(a) for a in spec.axes[n]):
            adds.append(n)
    res: dict[str, Any] = {
        "file": ARCHITECTURES[name] + ".json", "model_class": type(model).__name__, "file_class": cls,
        "tensors": len(names), "listed_both": len(matched), "only_mergekit": sorted(only_mk), "only_model": only_model,
        "only_model_zeroed_change": left_out,
        "statements": statements, "statements_agree": stated_ok, "agree": len(agree), "disagree": sorted(disagree),
        "census_adds": len(adds), "groups": len(spec.perms), "omitted": list(spec.omitted),
        "census_error": rep["max_error"], "census_motion": rep["min_motion"], "tolerance": tol,
        "spaces_stated": sum(1 for e in entries if "input_space" in e or "output_space" in e),
        "procedural_residual": [s["name"] for s in arch.get("layer_templates", {}).get("procedural_spaces", [])
                                if s.get("type") == "residual"],
    }
    if res["procedural_residual"]:  # tied residual spaces (MergeKit, the census) against untied per layer boundary
        prefix = spaces.layout.layers[0].module.rsplit(".", 1)[0] + "."
        untied = {"P_res_outer": spaces.hidden_size} | {f"P_res_{i}": spaces.hidden_size for i in range(L)}
        axes = {}
        for n, ids in spec.axes.items():
            tag = "P_res_outer"
            if n.startswith(prefix):
                tag = f"P_res_{int(n[len(prefix):].split('.', 1)[0])}"
            axes[n] = [tag if a == "P_res" else None for a in ids]
        tied = PermutationSpec({"P_res": spaces.hidden_size}, {n: [a if a == "P_res" else None for a in ids]
                                                               for n, ids in spec.axes.items()})
        gen = torch.Generator().manual_seed(seed + 2)
        res["residual_tied_error"] = verify_spec(model, tied, params, inputs, _output, gen, output_perm=out_perm)["errors"]["joint"]
        res["residual_untied_error"] = verify_spec(model, PermutationSpec(untied, axes), params, inputs, _output, gen,
                                                   )["errors"]["joint"]
    return res


def compare(names: list[str] | None = None, source: str | os.PathLike | None = None, seed: int = 0) -> dict[str, Any]:
    """The agreement table's data: ``{"mergekit": {version, source, sha256}, "architectures": {zoo
    name: {...}}}`` (module docstring; per architecture the counts, the names on either side only,
    the census's whole-group output change and motion, and for files with ``procedural_spaces``
    the tied and untied residual changes).

    Raises:
        InputFileError: MergeKit's files are not found (:func:`mergekit_files`).
        ConfigError: an unknown architecture name.
    """
    from ..errors import ConfigError

    files, origin = mergekit_files(source)
    names = list(ARCHITECTURES) if names is None else list(names)
    bad = [n for n in names if n not in ARCHITECTURES]
    if bad:
        raise ConfigError(f"MergeKit comparison: unknown architectures {bad}; known: {list(ARCHITECTURES)} (MergeKit has "
                          "no OPT file).")
    out = {}
    for n in names:
        stem = ARCHITECTURES[n]
        if stem not in files:
            out[n] = {"file": stem + ".json", "missing": True}
            continue
        out[n] = _compare_one(n, files[stem], seed)
    return {"mergekit": origin, "architectures": out}
