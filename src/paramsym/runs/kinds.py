"""The run kinds: what a run kind is (:class:`RunKind`, and :class:`KindSpec` once loaded), the
table of every kind (:data:`KINDS`) with the lazy loader of each, and :func:`get_kind`.

Each kind is named by the dotted path of its loader (``"paramsym.kinds.loaders:census"``): the
kinds live above this layer (:mod:`paramsym.kinds`, :mod:`paramsym.experiments`,
:mod:`paramsym.sweep`), and this module never imports them statically. It also reads a run
directory's ``config.json`` checked for its kind (:func:`checked_config`), the first step of
every dispatch by kind. Cheap to import (no torch): a kind's modules load only when its
``load()`` is called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import RunDirError

__all__ = ["KINDS", "KindSpec", "RunKind", "checked_config", "get_kind"]


@dataclass(frozen=True)
class KindSpec:
    """What a run kind is made of, once loaded.

    Attributes:
        config: its configuration dataclass, with ``quick()``.
        run: ``run(cfg, out, *, progress, **options) -> metrics`` (the kind's own files only).
        render: ``render(run_dir) -> str``, the markdown of ``report.md``.
        managed: :func:`~paramsym.runs.execute.execute` writes ``config.json``, ``env.json``, ``metrics.json`` and
            ``report.md`` around ``run`` (every kind is: the one run verb).
    """

    config: type | None
    run: Callable[..., dict[str, Any]] | None
    render: Callable[[Any], str]
    managed: bool = False


@dataclass(frozen=True)
class RunKind:
    """One run kind: its name, one line of help, the command making it, a lazy loader."""

    name: str
    help: str
    command: str
    #: ``"package.module:function"`` returning the kind's :class:`KindSpec` (imported only when loaded)
    loader: str
    #: the command takes ``--resume DIR``
    resumable: bool = False

    def load(self) -> KindSpec:
        """The kind's :class:`KindSpec`: imports the loader's module (only now) and calls it."""
        import importlib

        module, _, function = self.loader.partition(":")
        return getattr(importlib.import_module(module), function)()


KINDS: dict[str, RunKind] = {
    k.name: k
    for k in (
        RunKind("discovery", "learned symmetry of a parameter block, with its verdict", "paramsym discover", "paramsym.kinds.loaders:discovery", True),
        RunKind("discovery-objectives", "hybrid vs finite objectives at the same step budget",
                "paramsym experiment objectives", "paramsym.kinds.loaders:objectives", True),
        RunKind("discovery-lifting", "ReLU (2,8,8,1): one unit vs all weights, full-network error",
                "paramsym experiment lifting", "paramsym.kinds.loaders:lifting", True),
        RunKind("transformer-discovery", "all-MiniLM-L6-v2 FFN unit + compensators: learned edits installed in the "
                "full model, drift vs random/uncompensated", "paramsym experiment transformer", "paramsym.kinds.loaders:transformer", True),
        RunKind("attribution", "parameter-level attribution of a learned symmetry", "paramsym attribute",
                "paramsym.kinds.loaders:attribution", True),
        RunKind("attention", "equivariant-attention component counts over a range of copies (table, figure)",
                "paramsym attention table", "paramsym.kinds.loaders:attention", True),
        RunKind("attention-count", "c_(G,d)(V) and the Theorem 9 bound for one V = R^C ⊗ ρ",
                "paramsym attention count", "paramsym.kinds.loaders:attention_count", True),
        RunKind("attention-clusterings", "partial G-clusterings of a set of heads (count and listing)",
                "paramsym attention clusterings", "paramsym.kinds.loaders:attention_clusterings", True),
        RunKind("attention-classify", "the partial G-clustering of an attention layer, or the failing condition",
                "paramsym attention classify", "paramsym.kinds.loaders:attention_classify", True),
        RunKind("attention-build", "a random equivariant attention layer (RMHSA) for one partial G-clustering",
                "paramsym attention build", "paramsym.kinds.loaders:attention_build", True),
        RunKind("group", "a finite group: classes, character table, real irreps, a decomposition", "paramsym group",
                "paramsym.kinds.loaders:group", True),
        RunKind("census", "every known parameter symmetry of a model, with its dimension, verified on the weights",
                "paramsym census", "paramsym.kinds.loaders:census", True),
        RunKind("census-export", "a model's permutation spec or MergeKit architecture file, verified through the "
                "file alone", "paramsym census", "paramsym.kinds.loaders:census_export", True),
        RunKind("affine", "exact affine symmetry algebra of a named block", "paramsym affine", "paramsym.kinds.loaders:affine", True),
        RunKind("compensate", "closed-form (or learned) compensating action on one FFN unit of a real model",
                "paramsym compensate", "paramsym.kinds.loaders:compensate", True),
        RunKind("teleport", "training with and without symmetry teleports, over seeds (step ratio, level-set error)",
                "paramsym teleport", "paramsym.kinds.loaders:teleport", True),
        RunKind("teleport-learned", "one teleport along the learned action of a discovery run",
                "paramsym teleport", "paramsym.kinds.loaders:teleport_learned", True),
        RunKind("align", "two models aligned modulo their symmetries and merged (loss barriers)", "paramsym align",
                "paramsym.kinds.loaders:align", True),
        RunKind("align-census", "two HF checkpoints of any traced architecture aligned over the census's groups "
                "and merged", "paramsym align", "paramsym.kinds.loaders:align_census", True),
        RunKind("align-stream", "two saved checkpoints aligned by weight matching and merged, read one tensor at a "
                "time and written shard by shard", "paramsym align", "paramsym.kinds.loaders:align_stream", True),
        RunKind("sweep", "recipe search: candidates, the best continued, replication on fresh seeds",
                "paramsym sweep", "paramsym.sweep.kind:kind_spec", True),
    )
}


def get_kind(name: str | None) -> RunKind:
    """The run kind ``name``; :class:`RunDirError` lists the known kinds otherwise."""
    if name not in KINDS:
        raise RunDirError(f"unknown run kind {name!r} in config.json; known kinds: {sorted(KINDS)}. The directory was "
                          "made by another program or a newer paramsym; open it with the version that made it.")
    return KINDS[name]


def checked_config(run) -> dict[str, Any]:
    """``config.json`` of ``run``, checked to be an object with a string ``kind``
    (:meth:`paramsym.runs.rundir.RunDir.kind`; a corrupt file is a named :class:`RunFileError`)."""
    run.kind()
    return run.read_json("config.json")
