"""``paramsym attention build``: a random equivariant attention layer (RMHSA) for one partial G-clustering.

:class:`BuildConfig` names the group, the representation on tokens, the number of heads and the
index of the clustering in the enumeration order of ``paramsym attention clusterings``;
:func:`build_layer` draws the layer (:func:`paramsym.attention.structure.build_equivariant_rmhsa`:
``M`` of shape ``(heads, n, n)`` and ``R`` of shape ``(heads, n, n)`` in the commutant of the
clustering's stabilisers, optionally with noise of size ``perturb`` added to ``M[0]``) and returns
its tensors, the safetensors metadata :func:`paramsym.attention.loading.load_weights` reads back,
the JSON result and the text the command prints. The run kind ``attention-build``
(:mod:`paramsym.kinds.math`) writes the tensors to ``layer.safetensors`` in the run directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..groups.memory import MemoryBudget
from .commands import _budget, _check_budget, _check_specs, _int, _rep_name, _seed

__all__ = ["BUILD_FLAGS", "BuildConfig", "build_config", "build_layer"]


@dataclass(frozen=True)
class BuildConfig:
    """``paramsym attention build``: one random equivariant layer.

    Attributes:
        group: group spec.
        heads: number of heads ``>= 1``.
        index: the clustering's index (``>= 0``) as listed by ``paramsym attention clusterings``.
        rep: representation on tokens.
        copies: take the representation ``C >= 1`` times.
        seed: seed of the layer's random entries.
        perturb: size of the noise added to ``M`` of head 0 (finite; ``0``: exactly equivariant).
        max_memory: budget for dense representation matrices and the counts (``None``: 2 GiB).
    """

    group: str = "D4"
    heads: int = 3
    index: int = 0
    rep: str = "regular"
    copies: int = 1
    seed: int = 0
    perturb: float = 0.0
    max_memory: MemoryBudget | None = None

    @classmethod
    def quick(cls) -> BuildConfig:
        """C2 on its regular representation, one head (milliseconds)."""
        return cls(group="C2", heads=1)

    def validate(self) -> BuildConfig:
        """Raises :class:`ConfigError` naming the first bad field."""
        import math

        from .commands import _check_int

        _check_specs(self)
        _check_int(self, "heads", 1)
        _check_int(self, "index", 0)
        _check_int(self, "copies", 1)
        if isinstance(self.perturb, bool) or not isinstance(self.perturb, (int, float)) or not math.isfinite(
                self.perturb):
            raise ConfigError(f"perturb must be a finite number; received {self.perturb!r}.")
        _check_budget(self)
        return self


def _finite(raw: Any, flag: str) -> float:
    from ..options import float_option

    return float_option(raw, flag)


BUILD_FLAGS = {"group": None, "heads": _int(1), "index": _int(0), "rep": None, "copies": _int(1), "seed": _seed,
               "perturb": _finite, "max_memory": _budget}


def build_config(args: Any) -> BuildConfig:
    """The configuration of ``paramsym attention build`` from its parsed flags (an ``argparse.Namespace``)."""
    from ..options import config_from_flags

    return config_from_flags(BuildConfig(), args, BUILD_FLAGS).validate()


def build_layer(cfg: BuildConfig, *, progress: bool = False) -> tuple[dict[str, Any], dict[str, str], dict[str, Any], str]:
    """``(tensors {"M", "R"}, safetensors metadata, result, text)`` of the layer of ``cfg``.

    Raises:
        ShapeError: ``index`` is not below the number of clusterings.
    """
    import itertools

    import torch

    from ..errors import ShapeError
    from ..groups.finite import FiniteGroup
    from ..groups.reps import Representation
    from .clusterings import count_partial_clusterings, enumerate_partial_clusterings
    from .structure import build_equivariant_rmhsa

    cfg.validate()
    G = FiniteGroup.parse(cfg.group)
    rep = Representation.parse(G, cfg.rep, cfg.copies, max_memory=cfg.max_memory, progress=progress)
    total = count_partial_clusterings(G, cfg.heads, max_memory=cfg.max_memory)
    if not 0 <= cfg.index < total:
        raise ShapeError(f"--index {cfg.index}: there are {total} clusterings, indices 0..{total - 1}.")
    clustering = next(itertools.islice(enumerate_partial_clusterings(G, cfg.heads, limit=max(total, 1)), cfg.index,
                                       None))
    gen = torch.Generator().manual_seed(cfg.seed)
    M, R = build_equivariant_rmhsa(clustering, rep, generator=gen)
    if cfg.perturb:
        M = M.clone()
        M[0] += cfg.perturb * torch.randn(M.shape[1:], generator=gen, dtype=M.dtype)
    meta = {"group": G.name, "rep": _rep_name(cfg.rep, cfg.copies), "clustering": json.dumps(clustering.to_dict()),
            "perturb": str(float(cfg.perturb))}
    result = {"group": G.name, "rep": meta["rep"], "heads": cfg.heads, "dim": int(M.shape[-1]), "index": cfg.index,
              "clusterings": total, "clustering": clustering.to_dict(), "perturb": float(cfg.perturb)}
    text = (f"{cfg.heads} heads on R^{M.shape[-1]} for clustering [{cfg.index}]\n"
            + "  " + clustering.describe().replace("\n", "\n  ") + "\n")
    return {"M": M, "R": R}, meta, result, text
