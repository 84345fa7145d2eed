"""The files of a discovery run directory: ``config.json`` (resolved configuration, ``kind =
"discovery"``) and ``block.json`` (the trained block: names, shapes, selected entries, μ's std).

Named errors for a missing, corrupt or foreign file (:class:`~paramsym.errors.RunDirError`,
:class:`~paramsym.errors.RunFileError`) and for a target whose block is not the recorded one
(:class:`~paramsym.errors.BlockMismatchError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import to_document
from ..errors import BlockMismatchError, RunDirError, RunFileError
from ..runs.rundir import RunDir
from ..targets import Target
from .config import DiscoverConfig
from .problem import DiscoveryProblem

__all__ = ["KIND", "check_block", "describe_block", "load_config", "read_block", "save_config"]

KIND = "discovery"


def save_config(run: RunDir, cfg: DiscoverConfig, command: str | None = None) -> None:
    """Write the resolved configuration to ``config.json`` in the one shape of every run
    (:func:`to_document`: ``{"kind": "discovery", <fields>, "provenance": {...}}``, as
    :func:`paramsym.runs.execute.execute` writes it)."""
    from ..runs.provenance import provenance

    run.write_json("config.json", to_document(KIND, cfg, provenance(cfg, command=command)))


def load_config(run: RunDir) -> DiscoverConfig:
    """The configuration saved in ``run``, a discovery run: :func:`paramsym.runs.execute.load_run_config`
    (the one reader of a run's ``config.json``: validated, former keys renamed, its ``config_hash``
    checked) with the kind checked first.

    Raises:
        RunDirError: ``run`` is not a discovery run (another kind, or no ``config.json``).
        RunFileError: ``config.json`` corrupt, or edited since the run started.
        ConfigFileError: a field unknown or of the wrong type (named).
    """
    from ..runs.execute import load_run_config

    data = run.read_json("config.json")
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise RunDirError(f"{str(run.path)!r} is not a discovery run directory (config.json kind is not {KIND!r}); "
                          "pass a directory written by `paramsym discover`.")
    return load_run_config(run)


def describe_block(problem: DiscoveryProblem) -> dict[str, Any]:
    """What ``block.json`` records: the target's name, ``p``, ``q``, μ's std and its block
    (parameter names, shapes and selected flat indices; ``None`` for a function target)."""
    target = problem.target
    block = getattr(target, "block", None)
    entries = None if block is None else [
        {"name": e.name, "shape": list(e.shape), "indices": e.index.tolist()} for e in block.entries]
    return {"name": problem.name, "p": int(target.p), "q": int(target.q), "perturb_std": float(problem.perturb_std),
            "entries": entries}


def read_block(run: RunDir) -> dict[str, Any]:
    """The run's ``block.json``, checked for the form :func:`describe_block` writes.

    Raises:
        RunFileError: missing keys or values of the wrong type (a corrupt file).
    """
    data = run.read_json("block.json")

    def ints(x: Any) -> bool:
        return isinstance(x, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in x)

    entries = data.get("entries") if isinstance(data, dict) else None
    ok = isinstance(data, dict) and isinstance(data.get("p"), int) and (entries is None or (
        isinstance(entries, list) and all(
            isinstance(e, dict) and isinstance(e.get("name"), str) and ints(e.get("shape")) and ints(e.get("indices"))
            for e in entries)))
    if not ok:
        raise RunFileError(f"{str(run.file('block.json'))!r} is not a block record (expected 'p' and 'entries' with "
                           "'name', 'shape' and 'indices'); restore it from the run's files or delete it.")
    return data


def check_block(recorded: Mapping[str, Any], target: Target, where: str = "the run") -> None:
    """Raise :class:`BlockMismatchError` unless ``target``'s block is the ``recorded`` one."""
    block = getattr(target, "block", None)
    mine = None if block is None else [(e.name, list(e.shape), e.index.tolist()) for e in block.entries]
    theirs = recorded.get("entries")
    theirs = None if theirs is None else [(e["name"], list(e["shape"]), list(e["indices"])) for e in theirs]
    if mine == theirs and int(recorded.get("p", -1)) == int(target.p):
        return
    if mine is None or theirs is None:
        diff = f"p = {target.p} vs recorded p = {recorded.get('p')}"
    else:
        diffs = []
        names_a, names_b = [m[0] for m in mine], [t[0] for t in theirs]
        if names_a != names_b:
            diffs.append(f"names {names_a} vs recorded {names_b}")
        for (n, sa, ia), (_, sb, ib) in zip(mine, theirs):
            if sa != sb:
                diffs.append(f"{n}: shape {tuple(sa)} vs recorded {tuple(sb)}")
            elif ia != ib:
                diffs.append(f"{n}: {len(ia)} selected entries vs recorded {len(ib)} (different indices)")
        diff = "; ".join(diffs) or f"p = {target.p} vs recorded p = {recorded.get('p')}"
    raise BlockMismatchError(f"the target's parameter block differs from the block {where} was trained on: {diff}. "
                             "Pass the same model and block selection as in training.")
