"""Run the claims: resolve ids, run each needed run once, measure, return one row per claim.

A row (``dict``) has at least ``claim``, ``paper``, ``ours`` and ``holds``, and also
``source``, ``statement``, ``criterion``, ``budget`` (``quick``/``full``), ``run``,
``command``, ``seconds`` / ``cpu_seconds`` (of the run; of the earlier run when reused),
``full_time`` (documented), ``figures`` (paths under ``out``) and ``error`` (``None``, or the
one-line error of a run that failed — its claims then do not hold).

Run directories: ``out/<run>/`` (the experiments' own layout) plus ``out/<run>/reproduce.json``
(budget, timing, result). A run whose ``reproduce.json`` has the requested budget is reused, not
recomputed, so ``paramsym reproduce all --out DIR`` resumes an interrupted reproduction; the
experiments themselves also reuse their finished sub-runs.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ...errors import ParamsymError, UnknownClaimError
from .claims import Claim
from .registry import CLAIMS, RUNS

__all__ = ["claim_ids", "get_claims", "reproduce", "run_one"]

BY_ID: dict[str, Claim] = {c.id: c for c in CLAIMS}


def claim_ids() -> list[str]:
    """Every registered claim id, in registry order."""
    return [c.id for c in CLAIMS]


def get_claims(names: Iterable[str]) -> list[Claim]:
    """The claims named (``all`` = every claim), in registry order, without duplicates.

    Raises:
        UnknownClaimError: a name that is no claim id (the message names the closest id and lists all).
    """
    names = list(names)
    if not names:
        raise UnknownClaimError(f"name a claim or `all`; known claims: {', '.join(claim_ids())}.")
    if "all" in names:
        return list(CLAIMS)
    for n in names:
        if n not in BY_ID:
            close = difflib.get_close_matches(n, claim_ids(), n=1, cutoff=0.0)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UnknownClaimError(f"unknown claim {n!r}; {hint}known claims: {', '.join(claim_ids())} "
                                    "(or `all`; `paramsym reproduce --list`).")
    wanted = set(names)
    return [c for c in CLAIMS if c.id in wanted]


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_one(name: str, out: Path, quick: bool) -> dict[str, Any]:
    """Run (or reuse) run ``name`` at the budget into ``out/name``; return its ``reproduce.json`` record."""
    spec = RUNS[name]
    budget = "quick" if quick else "full"
    d = out / name
    rec_path = d / "reproduce.json"
    if rec_path.exists():
        try:
            rec = json.loads(rec_path.read_text())
            if rec.get("budget") == budget and rec.get("error") is None:
                return {**rec, "reused": True}  # seconds: of the run that made it
        except (OSError, json.JSONDecodeError):
            pass
    d.mkdir(parents=True, exist_ok=True)
    t0, c0 = time.time(), _cpu()
    error, result = None, None
    try:
        result = (spec.quick if quick else spec.full)(d)
    except ParamsymError as exc:
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    except Exception as exc:  # noqa: BLE001 - a failing run must not hide the other claims
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    rec = {"run": name, "budget": budget, "command": spec.command, "seconds": time.time() - t0,
           "cpu_seconds": _cpu() - c0, "error": error, "result": result}
    rec_path.write_text(json.dumps(rec, indent=1, default=_jsonable))
    return {**json.loads(rec_path.read_text()), "reused": False}


def _jsonable(obj: Any) -> Any:
    try:
        return float(obj)
    except (TypeError, ValueError):
        return str(obj)


def _row(claim: Claim, rec: dict[str, Any], out: Path | None) -> dict[str, Any]:
    spec = RUNS[claim.run]
    row: dict[str, Any] = {
        "claim": claim.id, "source": claim.source, "statement": claim.statement, "paper": claim.paper,
        "ours": None, "holds": False, "criterion": claim.criterion, "budget": rec["budget"], "run": claim.run,
        "command": spec.command, "seconds": rec["seconds"], "cpu_seconds": rec["cpu_seconds"],
        "full_time": spec.full_time, "exact": spec.exact, "figures": [], "values": {}, "error": rec.get("error"),
    }
    if rec.get("error") is None:
        try:
            m = claim.measure(rec["result"])
            row.update(ours=m.ours, holds=bool(m.holds), values=m.values)
        except (KeyError, TypeError, ValueError, IndexError, StopIteration, ZeroDivisionError) as exc:
            row["error"] = f"the run's result lacks what the claim reads ({type(exc).__name__}: {exc})"
    if row["error"] is not None:
        row["ours"] = f"error: {row['error']}"
    if out is not None:
        row["figures"] = sorted(str(p) for p in (out / claim.run).rglob("*.png"))
    return row


def reproduce(names: Iterable[str], *, quick: bool = False, out: str | os.PathLike | None = None,
              log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Reproduce the claims ``names`` (``["all"]`` = all); one row per claim (module docstring).

    Args:
        names: claim ids or ``all``.
        quick: the reduced budgets (``--quick``).
        out: keep the run directories (and figures) here; ``None``: a temporary directory, removed.
        log: called with one line per run started and finished (progress on stderr).

    Raises:
        UnknownClaimError: an unknown id (checked before anything runs).
    """
    claims = get_claims(names)
    keep = out is not None
    root = Path(out) if keep else Path(tempfile.mkdtemp(prefix="paramsym-reproduce-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        recs: dict[str, dict[str, Any]] = {}
        for name in dict.fromkeys(c.run for c in claims):
            if log:
                log(f"run {name} ({'quick' if quick else 'full'}) …")
            recs[name] = run_one(name, root, quick)
            if log:
                r = recs[name]
                state = f"{r['seconds']:.1f} s wall, {r['cpu_seconds']:.1f} s CPU"
                state = f"reused (it took {state})" if r.get("reused") else state
                log(f"run {name}: {state}" + (f" — {r['error']}" if r.get("error") else ""))
        return [_row(c, recs[c.run], root if keep else None) for c in claims]
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table ``| claim | paper | ours | holds |`` (with the source and budget)."""
    lines = ["| claim | source | paper | ours | holds | budget |", "|---|---|---|---|---|---|"]
    for r in rows:
        ours = str(r["ours"]).replace("|", "\\|")
        lines.append(f"| `{r['claim']}` | {r['source']} | {r['paper']} | {ours} | "
                     f"{'yes' if r['holds'] else 'no'} | {r['budget']} |")
    return "\n".join(lines)
