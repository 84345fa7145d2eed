"""Named errors of paramsym.

Every error says what argument was wrong, what was expected, what was received and what to do.
Each class also subclasses the matching builtin (``ValueError``, ``KeyError``, ...) so that
callers who catch builtins keep working.
"""

from __future__ import annotations


class ParamsymError(Exception):
    """Base class of every error raised by paramsym."""


class ConfigError(ParamsymError, ValueError):
    """An invalid configuration key or value (CLI ``--set``, a preset file, a dataclass)."""


class ParameterNameError(ParamsymError, KeyError):
    """A parameter name that the model does not have."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class MaskError(ParamsymError, ValueError):
    """A parameter mask or index selection that does not fit the tensor it selects from."""


class NonFiniteError(ParamsymError, ValueError):
    """Parameters, inputs or outputs that contain NaN or infinity."""


class DegenerateTargetError(ParamsymError, ValueError):
    """A target whose output does not depend on the selected parameter block (s_F = 0)."""


class ActionError(ParamsymError, TypeError):
    """An object used as a group action that is not a :class:`paramsym.actions.base.GroupAction`."""


class ShapeError(ParamsymError, ValueError):
    """A tensor or matrix of the wrong shape."""


class GroupError(ParamsymError, ValueError):
    """An invalid group, group element or generator set."""


class RepresentationError(ParamsymError, ValueError):
    """A map that is not a valid (orthogonal) group representation."""


class TooLargeError(ParamsymError, ValueError):
    """A problem too large to enumerate or to hold in memory with the chosen method."""


class UnsupportedLayerError(ParamsymError, ValueError):
    """A layer that cannot be written in the requested form (e.g. an attention query bias in RMHSA)."""


class InputFileError(ParamsymError, ValueError):
    """An input file (weights, representation, group) that is missing, unreadable or lacks the
    expected entries."""


class RunDirError(ParamsymError, RuntimeError):
    """A run directory that is missing, incomplete or incompatible with the requested action."""


class ConvergenceError(ParamsymError, RuntimeError):
    """A numerical procedure that did not reach its stated tolerance."""


def check_finite(name: str, value, hint: str = "") -> None:
    """Raise :class:`NonFiniteError` if ``value`` (a tensor or array) has NaN or inf entries.

    Args:
        name: what the value is, as the user knows it (``"batch X"``, ``"parameter fc1.weight"``).
        value: a ``torch.Tensor`` or ``numpy.ndarray``.
        hint: what the user should do about it.
    """
    import numpy as np

    try:
        import torch

        if isinstance(value, torch.Tensor):
            bad = int((~torch.isfinite(value.detach())).sum())
            total = value.numel()
        else:
            arr = np.asarray(value)
            bad = int((~np.isfinite(arr)).sum())
            total = arr.size
    except ImportError:  # pragma: no cover - torch is a hard dependency
        arr = np.asarray(value)
        bad = int((~np.isfinite(arr)).sum())
        total = arr.size
    if bad:
        msg = f"{name} has {bad} non-finite entries (NaN or inf) out of {total}; expected all finite."
        if hint:
            msg += " " + hint
        raise NonFiniteError(msg)


class OutputFileError(ParamsymError, RuntimeError):
    """An output path that cannot be written (a directory, an existing file, no permission)."""


class RunFileError(RunDirError):
    """A file of a run directory that cannot be written or read back: a path that is not a
    writable directory, or a truncated / corrupt ``*.json`` or ``*.safetensors`` file."""


class ConfigFileError(RunFileError, ConfigError):
    """A run's ``config.json`` whose configuration does not read back: not an object, an unknown
    field, or a value of the wrong type (:func:`paramsym.config.from_document`; both a corrupt run
    file and a configuration error)."""


class BlockMismatchError(RunDirError):
    """A target whose parameter block (names, shapes, selected entries) differs from the block
    a run was trained on."""


class ToleranceError(ConfigError):
    """A rank or comparison tolerance outside its valid range (e.g. not in (0, 1))."""


class TooFewSamplesError(ConfigError):
    """Too few sample points for the number of unknowns of a linear system (the message says how
    many are needed)."""


class EmptyBlockError(MaskError):
    """A parameter block (or target) with no parameters to act on."""


class UnknownArchitectureError(ParamsymError, ValueError):
    """A model whose architecture (HF ``config.model_type``) has no adapter; the message lists the
    known ones and how to register one."""


class AttentionImplementationError(ParamsymError, ValueError):
    """An attention implementation without forward-mode derivatives (fused SDPA/flash kernels)
    that cannot be switched to the eager path."""


class UnsupportedModelError(ParamsymError, ValueError):
    """A model the census cannot analyse: no parameters, or no module it knows (the message lists
    what it knows and what it found)."""


class SweepSpecError(ConfigError):
    """A malformed sweep spec (``paramsym sweep``): unknown key (the closest known one is named),
    wrong type, empty search space, duplicate or reused seeds."""


class BackendUnavailableError(ParamsymError, RuntimeError):
    """A sweep backend that cannot be used: Ray not installed, or a Ray cluster address that
    cannot be reached (the message says how to start a head node or to use ``--backend local``)."""


class ArchitectureMismatchError(ShapeError):
    """Two models that must share an architecture (alignment, merging) differ: the message names
    the tensors present in only one of them and those whose shapes differ."""


class SymmetryNotApplicableError(ActionError):
    """A symmetry requested for a model that does not have it (e.g. positive rescaling of units
    behind a non-homogeneous activation, per-head GL alignment under rotary embeddings)."""


class LevelSetError(ParamsymError, RuntimeError):
    """A teleport (``paramsym.teleport``, ``strict=True``) that would leave the loss level set: the
    relative loss change exceeded the tolerance (the message names both)."""


class UnknownClaimError(ConfigError):
    """A ``paramsym reproduce`` claim id that is not in the registry (the message names the
    closest id and lists the known ones)."""


# -- validation of user-supplied seeds and sizes (issue 20: every bad input a named one-line error) --------
#: the largest seed accepted (as :data:`paramsym.options.MAX_SEED`): it fits torch's signed 64-bit
#: ``manual_seed``, and so does ``seed + 1``
MAX_SEED = 2**63 - 1


def check_seed(seed: object, name: str = "seed") -> int:
    """``seed`` as an ``int`` in ``[0, 2**63)``, the Python-API twin of :func:`paramsym.options.seed_option`.

    Args:
        seed: the value received (``bool`` and non-integral values are refused).
        name: the argument as the user knows it (``"seed"``, ``"--seed"``).

    Raises:
        ConfigError: not an integer, negative, or ``>= 2**63``.
    """
    import numbers

    ok = isinstance(seed, numbers.Integral) and not isinstance(seed, bool)
    if not ok or not 0 <= int(seed) <= MAX_SEED:
        shown = repr(seed) if len(repr(seed)) <= 60 else repr(seed)[:57] + "..."
        raise ConfigError(f"{name} must be an integer seed with 0 <= seed < 2**63; received {shown}. Give a seed such as 0.")
    return int(seed)


# -- grammar / loading (issue 19 item 3, issue 20 item 2) -------------------------------------
class PickleWeightsError(InputFileError):
    """A model directory whose only weights are pickles (``pytorch_model.bin``, ``*.pt``): never
    unpickled (it could run code); the message names the file and how to convert it to safetensors."""


class MemoryBudgetError(ConfigError):
    """A memory budget (``--max-memory``, ``max_memory=``) that is not a size > 0: expected
    ``512MiB``, ``2GiB`` or a number of bytes (``paramsym.groups.memory.MemoryBudget``)."""


# -- census (issue 18) -------------------------------------------------------------------------
class TraceError(UnsupportedModelError):
    """The census's tracer cannot follow a model without an adapter: the message names the module,
    why it could not be followed, and what was found before it."""


class ExportPathExistsError(OutputFileError):
    """An export path that already exists; nothing is overwritten (choose a new path or delete it)."""


# -- reproduce provenance (issue 16) --------------------------------------------------------------
class StaleRunError(RunDirError):
    """A finished run or sub-run whose provenance does not match the request (another ``config_hash``
    or ``code_version``, or none): refused instead of reused silently (the message names the run,
    why it is stale, and ``--rerun`` / ``--reuse-stale``)."""


class ForeignRunError(RunDirError):
    """A run directory holding files this command did not make: another kind's run, the same kind
    with another configuration, files of no run, a corrupt ``config.json`` or ``reproduce.json``
    (the run verb's ``--out`` rule, ``paramsym reproduce --out``): nothing is overwritten
    or deleted."""


# -- checkpoints (issue 34) ------------------------------------------------------------------------
class CheckpointError(InputFileError):
    """A safetensors checkpoint whose index and shards disagree (a shard missing from the index or
    from the directory, an index naming a tensor no shard holds), a truncated shard, or a model
    tensor the checkpoint stores under no name an export can state; raised from the headers, before
    any tensor is allocated (the message names the file and the tensor)."""


class MergekitVersionError(ConfigError):
    """A MergeKit architecture file of another MergeKit version than the one asked for (0.1.5's
    ``vocabulary_axis`` versus 0.1.4's ``is_embed``): the other version would drop the field silently."""


# -- checkpoints (issue 36) -------------------------------------------------------------------
class IncompleteCheckpointError(CheckpointError):
    """A saved model whose weights do not match its architecture: a parameter or buffer the
    architecture needs is not stored, a stored tensor the architecture has no place for, a tensor
    of another shape, or a non-floating dtype where a weight belongs (the message names them).
    Refused instead of filled with freshly initialised weights."""
