"""Inputs and outputs of ``paramsym align``: two models from files, their data, the run directory.

Models: a ``.safetensors`` file holding an MLP chain (:func:`~paramsym.alignment.arch.mlp_architecture`)
or a Hugging Face ``save_pretrained`` directory (``config.json``; loaded offline with eager
attention, causal-LM head when the config names one). Both must have the same tensor names and
shapes (:class:`~paramsym.errors.ArchitectureMismatchError` otherwise, naming the differences).

Outputs (:func:`write_outputs`): ``result.json`` (the summary and the path curves),
``report.md``, ``path_loss.png`` (test loss along the path for each stage, train dashed) and
``merged.safetensors`` — the midpoint ``(θ_A + θ_{aligned B}) / 2`` of the fullest stage, in
A's dtype.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from torch import Tensor

from ..errors import ConfigError, InputFileError
from ..models.datasets import Split, digits, digits_images, modular_addition
from ..runs.rundir import RunDir, save_tensors
from .align import CANONICAL_STAGES, AlignmentResult
from .arch import Architecture, check_same_architecture, hf_architecture, mlp_architecture
from .path import interpolate

__all__ = ["Merge", "data_for", "load_pair", "load_side", "plan_merge", "render_report", "summary_stages",
           "write_outputs"]


def load_side(path: str | os.PathLike, side: str = ""):
    """``("mlp", params)`` for a safetensors file, ``("hf", model)`` for a save_pretrained directory.

    Raises:
        InputFileError: missing, unreadable or not a safetensors file / HF directory (names the path).
        IncompleteCheckpointError: an incomplete checkpoint or integer weights
            (:mod:`paramsym.models.checks`).
        NonFiniteError: NaN or infinite weights.
    """
    p = Path(path)
    who = f"model {side + ' ' if side else ''}{str(p)!r}"
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise InputFileError(f"{str(p)!r} is a directory without config.json; give a safetensors file or a "
                                 "directory written by save_pretrained.")
        from ..models.loading import load_model

        return "hf", load_model(p, head="auto", quiet=True, argument=who)
    if not p.exists():
        raise InputFileError(f"model file {str(p)!r} does not exist; give a .safetensors file or a save_pretrained directory.")
    from ..runs.rundir import load_tensors

    params = load_tensors(p, user_file="a model's parameters (A or B)")
    if not params:
        raise InputFileError(f"{str(p)!r} holds no tensors; expected the parameters of a model.")
    from ..models.checks import check_weight_tensors

    check_weight_tensors(params, who)  # integer or NaN/inf weights: named, before any work
    return "mlp", params


def load_pair(path_a: str | os.PathLike, path_b: str | os.PathLike, activation: str = "relu",
              n_classes: int | None = None) -> tuple[Architecture, dict[str, Tensor], dict[str, Tensor], dict]:
    """``(arch, θ_A, θ_B, info)`` of two models of the same architecture.

    Raises:
        InputFileError: an unreadable model.
        ArchitectureMismatchError: different kinds (file vs directory) or tensor names/shapes.
    """
    (ka, xa), (kb, xb) = load_side(path_a, "A"), load_side(path_b, "B")
    if ka != kb:
        raise _mismatch(f"A is {'an MLP safetensors file' if ka == 'mlp' else 'an HF directory'} and B is "
                        f"{'an MLP safetensors file' if kb == 'mlp' else 'an HF directory'}")
    if ka == "mlp":
        check_same_architecture(xa, xb)
        return mlp_architecture(xa, activation), xa, xb, {"kind": "mlp"}
    if type(xa) is not type(xb):
        raise _mismatch(f"A is a {type(xa).__name__} and B a {type(xb).__name__}")
    ties = [bool(getattr(m.config, "tie_word_embeddings", False)) for m in (xa, xb)]
    if ties[0] != ties[1]:
        raise _mismatch(f"{'A' if ties[0] else 'B'} ties its LM head to the token embedding (tie_word_embeddings=True) and "
                        f"{'B' if ties[0] else 'A'} does not, so one model has a separate lm_head.weight the other lacks "
                        "(untie both, e.g. save both with tie_word_embeddings=False)", hf=True)
    pa = {k: v.detach() for k, v in xa.named_parameters()}
    pb = {k: v.detach() for k, v in xb.named_parameters()}
    check_same_architecture(pa, pb)
    vocab = getattr(xa.config, "vocab_size", None)
    info = {"kind": "hf", "vocab_size": vocab, "model_type": xa.config.model_type}
    if xa.config.model_type == "vit":
        info |= {"image_size": xa.config.image_size, "num_channels": xa.config.num_channels}
    if getattr(xa.config, "n_positions", None):
        info["n_positions"] = int(xa.config.n_positions)
    return hf_architecture(xa.double(), n_classes=n_classes), pa, pb, info


def _mismatch(text: str, hf: bool = False):
    from ..errors import ArchitectureMismatchError

    advice = "" if hf else " (both safetensors files or both HF directories)"
    return ArchitectureMismatchError(f"models A and B do not have the same architecture: {text}. Give two models of "
                                     f"one architecture{advice}.")


def data_for(arch: Architecture, name: str = "auto", info: Mapping | None = None) -> tuple[Split, str]:
    """The evaluation data: ``digits`` (standardised, split seed 0), ``digits-images`` (the same
    split as ``(N, 1, 8, 8)`` images, :func:`~paramsym.models.datasets.digits_images`),
    ``stdlib`` (64 next-token windows each of the train and test files of
    :func:`~paramsym.models.corpus.stdlib_corpus`, context ``min(64, n_positions)``: the loss is
    then over every position), ``modadd`` / ``modadd:P`` (split seed 0, 80% for training, as in
    the ``modadd-transformer`` preset), or ``auto`` (digits for a 64 → … → 10 MLP; for a Hugging
    Face model digits-images for a one-channel 8×8 ViT, stdlib for a 256-token vocabulary, else
    modadd with ``P = vocab − 1``).

    Raises:
        ConfigError: an unknown name, ``auto`` on a model it cannot place, data that does not fit
            the model (an MLP's input width or output count, an HF model's vocabulary or image size).
    """
    info = dict(info or {})
    if name == "auto":
        widths = arch.info.get("widths")
        if arch.kind == "mlp" and widths and widths[0] == 64 and widths[-1] == 10:
            name = "digits"
        elif arch.kind == "hf" and info.get("model_type") == "vit":
            name = "digits-images"
        elif arch.kind == "hf" and info.get("vocab_size") == 256:
            name = "stdlib"
        elif arch.kind == "hf" and info.get("vocab_size"):
            name = f"modadd:{int(info['vocab_size']) - 1}"
        else:
            raise ConfigError(f"cannot choose data for this {arch.kind} model automatically (widths "
                              f"{arch.info.get('widths')}); pass --data digits, digits-images, stdlib or modadd:P.")
    if name == "digits":
        data = digits(0)
    elif name == "digits-images":
        if arch.kind != "hf" or info.get("image_size") != 8 or info.get("num_channels") != 1:
            raise ConfigError(f"--data digits-images needs a ViT taking one-channel 8×8 images; this model takes "
                              f"{info.get('num_channels')}-channel {info.get('image_size')}-pixel images "
                              f"({info.get('model_type', arch.kind)}).")
        data = digits_images(0)
        arch.info["n_classes"] = None
    elif name == "stdlib":
        if arch.kind != "hf" or info.get("vocab_size") != 256:
            raise ConfigError(f"--data stdlib is byte tokens (vocabulary 256); this model's vocabulary is "
                              f"{info.get('vocab_size')}. Use a byte-level language model.")
        from ..models.corpus import lm_windows, stdlib_corpus

        corpus = stdlib_corpus()
        context = min(64, int(info.get("n_positions") or 64))
        data = Split(*lm_windows(corpus.train, context, 64), *lm_windows(corpus.test, context, 64))
        arch.info["positions"] = "all"
        arch.info["n_classes"] = None
    elif name.startswith("modadd"):
        text = name.split(":", 1)[1] if ":" in name else "23"
        if not text.isascii() or not text.isdigit():
            raise ConfigError(f"--data {name!r}: expected modadd:P with an integer P, e.g. modadd:23.")
        p = int(text)
        vocab = info.get("vocab_size")
        if isinstance(vocab, int) and p + 1 > vocab:
            raise ConfigError(f"--data {name!r} needs {p + 1} tokens (0..{p}), but the model's vocabulary has {vocab}; "
                              f"use modadd:P with P <= {vocab - 1}.")
        data = modular_addition(p, 0, 0.8)
        if arch.kind == "hf":
            arch.info["n_classes"] = data.num_classes
    else:
        raise ConfigError(f"unknown --data {name!r}; choose auto, digits, digits-images, stdlib or modadd:P.")
    widths = arch.info.get("widths")
    if arch.kind == "mlp" and widths:
        features, classes = int(data.x_train.shape[1]), data.num_classes
        if features != widths[0] or classes > widths[-1]:
            raise ConfigError(f"--data {name!r} has {features} input features and {classes} classes, but the MLP takes "
                              f"{widths[0]} inputs and has {widths[-1]} outputs (widths {widths}); pass data that fits "
                              "the model (digits: 64 inputs, 10 classes).")
    return data, name


def _fmt(x: float) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def summary_stages(summary: Mapping) -> list[str]:
    """The stages a summary holds, in its order (``barrier_{stage}`` keys: before, permutation, full and
    whatever stages :func:`~paramsym.alignment.align.align` adds)."""
    return [k[len("barrier_"):] for k in summary if k.startswith("barrier_") and not k.endswith("_train")]


def render_report(summary: Mapping, title: str = "Alignment") -> str:
    """``report.md``: the barriers (train and test) per stage, the function error, the distances, the merge."""
    lines = [f"# {title}", "", f"Symmetries: {', '.join(summary['symmetries'])} "
             f"(catalogue kinds: {', '.join(summary['kinds'])}).", "",
             "Barrier = max over α of L((1−α)θ_A + αθ_B) − ((1−α)L(θ_A) + αL(θ_B)) on a grid of "
             f"{summary.get('points', 25)} points.", "",
             "| stage | test-loss barrier | train-loss barrier | test acc drop | midpoint test loss | midpoint test acc "
             "| ‖θ_A − θ_B‖² |",
             "|---|---|---|---|---|---|---|"]
    for stage in summary_stages(summary):
        mid = summary[f"midpoint_{stage}"]
        lines.append(f"| {stage} | {_fmt(summary[f'barrier_{stage}'])} | {_fmt(summary[f'barrier_{stage}_train'])} | "
                     f"{_fmt(summary[f'acc_drop_{stage}'])} | {_fmt(mid['test_loss'])} | {_fmt(mid.get('test_acc'))} | "
                     f"{_fmt(summary['distance'].get(stage, float('nan')))} |")
    e = summary["endpoints"]
    merge = summary.get("merge")
    lines += ["", f"End models: A test loss {_fmt(e['A']['test_loss'])} (acc {_fmt(e['A']['test_acc'])}), "
              f"B test loss {_fmt(e['B']['test_loss'])} (acc {_fmt(e['B']['test_acc'])}).", "",
              f"Function error of the aligned B (relative output difference to B, float64): permutation "
              f"{summary['function_error_permutation']:.2e}, full {summary['function_error']:.2e}"
              + "".join(f", {s} {summary[f'function_error_{s}']:.2e}" for s in ("canonical", "orthogonal", "refined")
                        if f"function_error_{s}" in summary) + ".", "",
              *([f"Alignment time: {summary['seconds']['full']:.3g} s.", ""] if summary.get("seconds") else []),
              *([f"Merged model: θ_A + {merge['alpha']:g}·(θ_B^aligned − θ_A) of stage `{merge['stage']}` in "
                 f"`{merge['path']}`"
                 + (f" (between the canonical forms of A and B, LM head untied; reloaded by from_pretrained: relative "
                    f"output difference {merge['reload_error']:.1e})" if "reload_error" in merge else "")
                 + f" (test loss {_fmt(merge['test_loss'])}, test acc {_fmt(merge['test_acc'])}); the "
                 "curves of every stage are in result.json.", ""] if merge else []),
              *(_not_merged(merge.get("not_merged", {})) if merge else []),
              "![loss along the path, one curve per stage](path_loss.png)", ""]
    return "\n".join(lines)


def _not_merged(skipped: Mapping[str, str]) -> list[str]:
    """Report lines naming the stages not merged, those with one reason together."""
    by: dict[str, list[str]] = {}
    for stage, why in skipped.items():
        by.setdefault(why, []).append(f"`{stage}`")
    return [f"Not merged: stage{'s' if len(v) > 1 else ''} {', '.join(v)}: {why}." for why, v in by.items()] + \
        ([""] if by else [])


@dataclass
class Merge:
    """The merged model of ``paramsym align --merge`` (:func:`plan_merge`).

    Attributes:
        stage: the stage merged.
        params: ``θ_A + α (θ_B^stage − θ_A)`` (float64; for a canonical-form stage, between the
            canonical forms of A and B).
        module: the Hugging Face model whose class and configuration ``merged/`` is written with
            (A's, or the canonical model's: LM head untied); ``None`` for an MLP chain.
        forward: the function of ``params`` (the architecture's ``forward``).
        skipped: later stage → why it was not merged.
        reload_error: for a canonical-form stage, the relative output difference between the
            model reloaded by ``from_pretrained`` and the in-memory merge (``None`` otherwise).
    """

    stage: str
    params: dict[str, Tensor]
    module: object
    forward: object
    skipped: dict[str, str] = field(default_factory=dict)
    reload_error: float | None = None


def _reload_error(module, params: Mapping[str, Tensor], x: Tensor, dtype) -> tuple[float, list[str]]:
    """Write ``module`` holding ``params`` (in ``dtype``) with ``save_pretrained``, load it back with its
    class's ``from_pretrained``; the relative output difference on ``x`` and the unexpected keys (dropped)."""
    import copy
    import tempfile

    import torch

    from ..quiet import quiet_loading
    from .checkpoints import save_pretrained_params

    mem = copy.deepcopy(module).to(dtype).eval()
    with torch.no_grad():
        own = dict(mem.named_parameters())
        for k, v in params.items():
            own[k].copy_(v)
    with tempfile.TemporaryDirectory() as d, quiet_loading():
        save_pretrained_params(mem, {}, d)
        loaded, info = type(module).from_pretrained(d, attn_implementation="eager", local_files_only=True,
                                                    torch_dtype=dtype, output_loading_info=True)
    loaded.eval()
    xin = x.to(dtype) if x.is_floating_point() else x
    with torch.no_grad():
        want, got = (m(xin)[0] for m in (mem, loaded))
    return float((got.double() - want.double()).norm() / want.double().norm()), sorted(info.get("unexpected_keys", []))


def plan_merge(result: AlignmentResult, arch: Architecture, a: Mapping[str, Tensor], alpha: float, *,
               canonical=None, x: Tensor | None = None, dtype=None, tolerance: float = 0.0) -> Merge:
    """The stage merged — the last stage of ``result`` whose merge loads as a model — and why each later
    stage was not merged.

    A stage of A's coordinates (before, permutation, full) merges when its tensors are A's (names and
    shapes). A canonical-form stage (canonical, orthogonal, refined; ``canonical`` the
    :class:`~paramsym.alignment.orthogonal.CanonicalPair`) merges between the canonical forms of A and
    B, written with the canonical model's class and configuration (LM head untied), when that
    checkpoint, reloaded by ``from_pretrained``, computes the in-memory merge on ``x`` to
    ``tolerance`` (relative, in ``dtype``) and drops no tensor. That holds where the canonical model
    keeps its class's modules — RMS-norm models (Llama, ...), whose stream rotations the class
    computes exactly. A LayerNorm model's canonical form computes RMS norms on a centred stream:
    its class reloads them as LayerNorms, equal only on a centred stream (a rotation with
    ``Q 𝟙 = ±𝟙``), and GPT-2's LM head has no bias for the final norm's folded bias; such a stage is
    named with the measured difference and the dropped tensors instead.

    Returns:
        :class:`Merge`.
    """
    import torch

    skipped: dict[str, str] = {}
    A = {n: t.double() for n, t in a.items()}
    for stage in reversed(list(result.stages)):
        p = result.stages[stage]
        if stage in CANONICAL_STAGES and (canonical is None or x is None):
            skipped[stage] = "a canonical-form stage merges between the canonical forms: pass canonical= and x="
            continue
        if stage in CANONICAL_STAGES:
            merged = interpolate({n: t.double() for n, t in canonical.a.items()}, p, alpha)
            module = canonical.arch.module
            err, dropped = _reload_error(module, merged, x, dtype or torch.float32)
            if err <= tolerance and not dropped:
                return Merge(stage, merged, module, canonical.arch.forward, dict(reversed(list(skipped.items()))), err)
            skipped[stage] = (f"the merge of the canonical forms, written as {type(module).__name__} and reloaded by "
                              f"from_pretrained, computes other outputs (relative difference {err:.2e} > {tolerance:.1e}"
                              + (f"; the class has no tensor for {dropped[:3]}" if dropped else "") + "): where the class "
                              "has LayerNorms the canonical form has RMS norms on a centred stream, equal only while the "
                              "stream stays centred (rotations with Q𝟙 = ±𝟙), and the final norm's bias folded into an "
                              "LM-head bias; the last stage that reloads was merged instead")
            continue
        missing, added = sorted(set(a) - set(p)), sorted(set(p) - set(a))
        shapes = sorted(n for n in set(a) & set(p) if p[n].shape != a[n].shape)
        if not (missing or added or shapes):
            return Merge(stage, interpolate(A, p, alpha), arch.module, arch.forward,
                         dict(reversed(list(skipped.items()))))
        skipped[stage] = f"its tensors are not A's (missing {missing[:3]}, added {added[:3]}, reshaped {shapes[:3]})"
    return Merge("before", dict(A), arch.module, arch.forward, dict(reversed(list(skipped.items()))))


def write_outputs(out: str | os.PathLike | RunDir, result: AlignmentResult, a: Mapping[str, Tensor], summary: Mapping,
                  title: str = "Alignment", *, merge: Merge) -> RunDir:
    """Write ``result.json``, ``report.md``, ``path_loss.png`` and ``merged.safetensors`` to a new
    (or empty) directory ``out`` (or into the run directory ``out`` of the ``align`` run kind).

    The merged model is ``merge`` (:func:`plan_merge`), in A's dtype; with ``merge.module`` (a
    Hugging Face model) it is also written as the ``save_pretrained`` directory ``merged/``
    (``from_pretrained`` loads it)."""
    from .. import plots
    from .checkpoints import save_pretrained_params

    run = out if isinstance(out, RunDir) else RunDir.fresh(out)
    run.create()
    stage, alpha = merge.stage, float(summary.get("merge", {}).get("alpha", 0.5))
    dtype = next(iter(a.values())).dtype
    merged = {n: t.to(dtype) for n, t in merge.params.items()}
    save_tensors(run.file("merged.safetensors"), merged, {"stage": stage, "alpha": repr(float(alpha))})
    if merge.module is not None:
        import copy

        save_pretrained_params(copy.deepcopy(merge.module).to(dtype), merged, run.file("merged"))
    skipped = merge.skipped
    run.write_json("result.json", dict(summary) | {"curves": {k: c.as_dict() for k, c in result.curves.items()},
                                                   "merged": "merged.safetensors", "merged_stage": stage,
                                                   "merged_alpha": float(alpha), "not_merged": skipped})
    series, alphas = {}, result.curves["before"].alphas
    for name, c in result.curves.items():
        series[f"{name} (test)"] = c.test_loss
    for name, c in result.curves.items():
        series[f"{name} (train)"] = c.train_loss
    plots.lines(run.file("path_loss.png"), alphas, series, title=f"{title}: loss along (1−α)θ_A + αθ_B",
                xlabel="α", ylabel="cross-entropy")
    run.write_text("report.md", render_report(summary, title))
    return run
