"""Run the claims: resolve ids, run each needed run once, measure, return one row per claim.

A row (``dict``) has ``claim``, ``kind`` (``reproduction`` | ``related`` | ``measurement``),
``paper``, ``ours`` and ``holds`` (``True``, ``False`` or ``None`` = not evaluated: a run that
failed, or a trained claim at the ``--quick`` budget), and also ``source``, ``statement``,
``criterion``, ``budget`` (``quick``/``full``), ``run``, ``command``, the provenance of the run
that produced the numbers — ``code_version``, ``config_hash``, ``date_utc``, ``seconds`` and
``cpu_seconds`` (wall and CPU of that run, including the sub-runs it reused), ``reused`` (this call read a finished run), ``stale`` / ``stale_reason`` — and
``full_time`` (documented), ``figures`` (paths under ``out``), ``values`` and ``error``, and the paper's
``statistic`` and our ``deviations`` from it (:mod:`paramsym.paper_stats`). Wall seconds are the elapsed
time (``wall_rule: "elapsed"``: the union of this call's span and the spans of the sub-runs it reused),
CPU seconds their sum.

**Run directories and reuse.** Each run lives in ``out/<run>/`` (the experiment's own layout)
with ``out/<run>/reproduce.json``: format, run, budget, status (``running`` / ``finished``),
:func:`paramsym.runs.provenance.provenance` of the run's resolved configuration
(:attr:`~.runs.RunSpec.config` at the budget, with the run name, budget and command), seconds,
error and result. The rule, checked for every requested run *before anything is written*:

* no directory (or an empty one): run it;
* a ``reproduce.json`` of this run whose ``config_hash`` and ``code_version`` match
  (:func:`paramsym.runs.provenance.stale_reason`): reuse it when finished without error, else run
  again in place (an interrupted run resumes; experiments reuse their matching sub-runs);
* otherwise the run is **stale** (another budget, configuration, recipe or code) and ``reuse``
  decides: ``"refuse"`` (default) raises :class:`~paramsym.errors.StaleRunError` naming the run
  and why; ``"rerun"`` moves the directory aside to ``<run>.stale-<UTC time>`` (nothing is
  deleted) and runs it again; ``"stale"`` reuses a finished stale run and marks its rows
  ``stale: true`` with the reason;
* a directory holding files without a ``reproduce.json``, a corrupt one, or one of another run:
  :class:`~paramsym.errors.ForeignRunError`; nothing is touched.
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..errors import ForeignRunError, ParamsymError, RunFileError, StaleRunError, UnknownClaimError
from ..paper_stats import OWN, STATS
from ..runs.provenance import provenance, stale_reason
from ..runs.reuse import RECORD, SUBRUNS, check_reuse, cpu_seconds, elapsed_seconds, move_aside
from ..runs.rundir import read_json, write_json
from .claims import Claim
from .registry import CLAIMS, RUNS

__all__ = ["FORMAT", "RECORD", "claim_ids", "closest_claims", "get_claims", "markdown", "plan_run", "preflight",
           "reproduce", "run_config", "run_one", "short_version", "summary"]

BY_ID: dict[str, Claim] = {c.id: c for c in CLAIMS}
#: format tag of ``reproduce.json``
FORMAT = "paramsym-reproduce/2"
_HINT = ("pass --rerun to recompute it (the old directory is kept beside it as <run>.stale-<time>) or --reuse-stale "
         "to reuse it marked stale")


def claim_ids() -> list[str]:
    """Every registered claim id, in registry order."""
    return [c.id for c in CLAIMS]


def closest_claims(name: str, n: int = 5) -> list[str]:
    """Up to ``n`` claim ids close to ``name``: by spelling (difflib ratio ≥ 0.6) or sharing a word of it."""
    ids = claim_ids()
    close = difflib.get_close_matches(name, ids, n=n, cutoff=0.6)
    words = {w for w in name.lower().replace("_", "-").split("-") if len(w) >= 3}
    for cid in ids:
        if len(close) >= n:
            break
        if cid not in close and words & set(cid.split("-")):
            close.append(cid)
    return close


def get_claims(names: Iterable[str]) -> list[Claim]:
    """The claims named (``all`` = every claim), in registry order, without duplicates.

    Raises:
        UnknownClaimError: a name that is no claim id (the message names the closest ids, if any).
    """
    names = list(names)
    if not names:
        raise UnknownClaimError("name a claim or `all`; `paramsym reproduce --list` lists the "
                                f"{len(CLAIMS)} claims.")
    for n in names:
        if n != "all" and n not in BY_ID:
            close = closest_claims(n)
            hint = (f"closest: {', '.join(close)}" if close else "no claim id is close to it")
            raise UnknownClaimError(f"unknown claim {n!r}; {hint} (`paramsym reproduce --list` lists all "
                                    f"{len(CLAIMS)}, or use `all`).")
    if "all" in names:
        return list(CLAIMS)
    wanted = set(names)
    return [c for c in CLAIMS if c.id in wanted]


def run_config(name: str, quick: bool) -> dict[str, Any]:
    """The resolved configuration of run ``name`` at the budget, as hashed for provenance."""
    spec = RUNS[name]
    return {"run": name, "budget": "quick" if quick else "full", "command": spec.command, "config": spec.config(quick)}


def _read_record(d: Path, name: str) -> dict[str, Any]:
    path = d / RECORD
    try:
        rec = read_json(path, "a `paramsym reproduce` run record")
    except RunFileError as exc:
        raise ForeignRunError(f"--out: {str(path)!r} is corrupt or unreadable ({' '.join(str(exc).split())[:160]}); "
                              "move it away or choose another --out (nothing was touched).") from None
    if not isinstance(rec, dict) or rec.get("run") != name or rec.get("budget") not in ("quick", "full"):
        what = f"run {rec.get('run')!r}" if isinstance(rec, dict) and "run" in rec else "something else"
        raise ForeignRunError(f"--out: {str(path)!r} is not a record of run {name!r} (it describes {what}); move it "
                              "away or choose another --out (nothing was touched).")
    return rec


def plan_run(name: str, out: Path, quick: bool, reuse: str = "refuse") -> dict[str, Any]:
    """What to do with ``out/name`` (module docstring); writes nothing.

    Returns ``{"action": "new" | "reuse" | "resume" | "rerun", "stale": bool, "reason", "record"}``.

    Raises:
        ForeignRunError: files not made by ``paramsym reproduce``, a corrupt or foreign record.
        StaleRunError: a stale run under ``reuse="refuse"`` (or an unfinished stale one under ``"stale"``).
    """
    check_reuse(reuse)
    d = out / name
    if d.exists() and not d.is_dir():
        raise ForeignRunError(f"--out: {str(d)!r} is a file where run {name!r} belongs; move it away or choose another "
                              "--out (nothing was touched).")
    if not d.exists() or not any(d.iterdir()):
        return {"action": "new", "stale": False, "reason": None, "record": None}
    if not (d / RECORD).exists():
        raise ForeignRunError(f"--out: {str(d)!r} holds files not made by `paramsym reproduce` (no {RECORD}); move "
                              "them away or choose another --out (nothing was touched).")
    rec = _read_record(d, name)
    cfg = run_config(name, quick)
    reason = stale_reason(rec if rec.get("format") == FORMAT else None, cfg)
    if reason is not None and rec.get("budget") != cfg["budget"]:
        reason = f"it is the {rec.get('budget')} budget, not the {cfg['budget']} one"
    # records of the first format were written only when a run had finished (no status field)
    finished = rec.get("status", "finished") == "finished" and rec.get("error") is None
    if reason is None:
        return {"action": "reuse" if finished else "resume", "stale": False, "reason": None, "record": rec}
    if reuse == "stale" and finished:
        return {"action": "reuse", "stale": True, "reason": reason, "record": rec}
    if reuse == "rerun":
        return {"action": "rerun", "stale": True, "reason": reason, "record": rec}
    state = "finished" if finished else "unfinished (cannot be reused)"
    raise StaleRunError(f"--out: the {state} run {str(d)!r} is stale: {reason}; "
                        + (_HINT if finished else "pass --rerun to recompute it (the old directory is kept beside it)")
                        + ".")


def run_one(name: str, out: Path, quick: bool, reuse: str = "refuse", plan: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    """Run (or reuse) run ``name`` at the budget into ``out/name`` (:func:`plan_run`); return its record."""
    plan = plan or plan_run(name, out, quick, reuse)
    if plan["action"] == "reuse":
        rec = plan["record"]
        return {**rec, "reused": True, "stale": bool(plan["stale"] or rec.get("stale")),
                "stale_reason": plan["reason"] or rec.get("stale_reason")}
    spec = RUNS[name]
    budget = "quick" if quick else "full"
    d = out / name
    moved = str(move_aside(d)) if plan["action"] == "rerun" else None
    d.mkdir(parents=True, exist_ok=True)
    cfg = run_config(name, quick)
    prov = provenance(cfg, command=spec.command, budget=budget)
    head = {"format": FORMAT, "run": name, **prov}
    write_json(d / RECORD, {**head, "status": "running"})
    t0, c0 = time.time(), cpu_seconds()
    error, result = None, None
    try:
        result = spec.run(d, quick, reuse)
    except ParamsymError as exc:
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    except Exception as exc:  # noqa: BLE001 - a failing run must not hide the other claims
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    wall, cpu = time.time() - t0, cpu_seconds() - c0
    subs: dict[str, Any] = {}
    if (d / SUBRUNS).exists():
        try:
            subs = read_json(d / SUBRUNS, "the sub-run list")
        except RunFileError:
            subs = {}
    reused = {k: v for k, v in subs.items() if v.get("reused")}
    stale_subs = {k: v.get("stale_reason") for k, v in subs.items() if v.get("stale")}
    rec = {**head, "status": "finished", "wall_rule": "elapsed",
           "seconds": _elapsed(t0, wall, reused.values()),
           "cpu_seconds": cpu + sum(v.get("cpu_seconds") or 0.0 for v in reused.values()),
           "seconds_this_call": wall, "cpu_seconds_this_call": cpu, "subruns_reused": sorted(reused),
           "stale": bool(stale_subs), "stale_reason": "; ".join(f"sub-run {k}: {v}" for k, v in stale_subs.items())
           or None, "moved_stale_to": moved, "error": error, "result": result}
    write_json(d / RECORD, rec)
    return {**read_json(d / RECORD), "reused": False}


def _elapsed(t0: float, wall: float, reused: Iterable[dict[str, Any]]) -> float | None:
    """The elapsed wall time of a run: this call's span and the spans of the sub-runs it reused (their union,
    :func:`~paramsym.runs.reuse.elapsed_seconds`; parallel sub-runs overlap); ``None`` when a reused sub-run's
    span is unknown (a sub-run recorded before its finishing time was kept)."""
    import datetime as dt

    spans = [(t0, t0 + wall)]
    for v in reused:
        if v.get("seconds") is None or not v.get("date_utc"):
            return None
        end = dt.datetime.fromisoformat(str(v["date_utc"])).timestamp()
        spans.append((end - float(v["seconds"]), end))
    return elapsed_seconds(spans)


def _row(claim: Claim, rec: dict[str, Any], out: Path | None) -> dict[str, Any]:
    spec = RUNS[claim.run]
    row: dict[str, Any] = {
        "claim": claim.id, "kind": claim.kind, "source": claim.source, "statement": claim.statement,
        "paper": claim.paper, "ours": None, "holds": None, "criterion": claim.criterion, "budget": rec["budget"],
        "run": claim.run, "command": spec.command, "code_version": rec.get("code_version"),
        "config_hash": rec.get("config_hash"), "date_utc": rec.get("date_utc"), "seconds": rec.get("seconds"),
        "cpu_seconds": rec.get("cpu_seconds"), "reused": bool(rec.get("reused")), "stale": bool(rec.get("stale")),
        "stale_reason": rec.get("stale_reason"), "full_time": spec.full_time, "exact": spec.exact, "figures": [],
        "values": {}, "error": rec.get("error"), "wall_rule": rec.get("wall_rule"),
        "statistic": STATS[claim.id].statistic if claim.id in STATS else OWN,
        "deviations": list(STATS[claim.id].deviations) if claim.id in STATS else [],
    }
    if rec.get("error") is None:
        try:
            m = claim.measure(rec["result"])
            evaluated = rec["budget"] == "full" or spec.exact
            row.update(ours=m.ours, holds=bool(m.holds) if evaluated else None, values=m.values)
        except (KeyError, TypeError, ValueError, IndexError, StopIteration, ZeroDivisionError) as exc:
            row["error"] = f"the run's result lacks what the claim reads ({type(exc).__name__}: {exc})"
    if row["error"] is not None:
        row["ours"] = f"error: {row['error']}"
    if out is not None:
        row["figures"] = sorted(str(p) for p in (out / claim.run).rglob("*.png"))
    return row


def summary(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``{reproduced, failing, not_evaluated, related, measurements}`` (claim ids) and ``counts``.

    ``reproduced`` / ``failing`` / ``not_evaluated``: reproduction claims whose ``holds`` is
    ``True`` / ``False`` / ``None``; ``related`` and ``measurements``: shown, never counted.
    """
    rows = list(rows)
    out: dict[str, Any] = {
        "reproduced": [r["claim"] for r in rows if r["kind"] == "reproduction" and r["holds"] is True],
        "failing": [r["claim"] for r in rows if r["kind"] == "reproduction" and r["holds"] is False],
        "not_evaluated": [r["claim"] for r in rows if r["kind"] == "reproduction" and r["holds"] is None],
        "related": [r["claim"] for r in rows if r["kind"] == "related"],
        "measurements": [r["claim"] for r in rows if r["kind"] == "measurement"],
        "stale": [r["claim"] for r in rows if r.get("stale")],
    }
    out["counts"] = {k: len(v) for k, v in out.items()}
    return out


def preflight(names: Iterable[str], out: str | os.PathLike | None, quick: bool = False, reuse: str = "refuse"
              ) -> dict[str, dict[str, Any]]:
    """Check every run the claims need (:func:`plan_run`) before anything runs; ``{}`` without ``out``."""
    check_reuse(reuse)
    claims = get_claims(names)
    if out is None or not Path(out).exists():
        return {}
    root = Path(out)
    if not root.is_dir():
        raise ForeignRunError(f"--out {str(root)!r} is a file; give a directory (new, or one from an earlier "
                              "`paramsym reproduce --out`).")
    check_reproduce_root(root)
    return {name: plan_run(name, root, quick, reuse) for name in dict.fromkeys(c.run for c in claims)}


def check_reproduce_root(root: Path) -> None:
    """Refuse an ``--out`` that is itself a run directory (another command's run, or one run of an
    earlier ``reproduce --out``, e.g. ``R/groups``): its files would be mixed with the runs'.

    Raises:
        ForeignRunError: ``root`` holds a ``config.json`` or a ``reproduce.json`` (named), or a
            corrupt ``config.json``. (Files of the user's own beside the run directories are left
            alone, and a run's directory holding foreign files is refused by :func:`plan_run`.)
    """
    from ..runs.rundir import stored_run_kind

    try:
        have = stored_run_kind(root)
    except RunFileError as exc:
        raise ForeignRunError(f"--out {str(root)!r} holds an unreadable config.json ({exc}); give a new directory or "
                              "one from an earlier `paramsym reproduce --out` (nothing was touched).") from None
    if have is not None:
        what = "one run of an earlier `paramsym reproduce --out`" if have == "reproduce-run" else f"a {have!r} run"
        raise ForeignRunError(f"--out {str(root)!r} is the directory of {what}, not a `paramsym reproduce --out` "
                              "directory; give a new directory or the --out of an earlier `paramsym reproduce` "
                              "(nothing was touched).")


def reproduce(names: Iterable[str], *, quick: bool = False, out: str | os.PathLike | None = None,
              log: Callable[[str], None] | None = None, reuse: str = "refuse") -> list[dict[str, Any]]:
    """Reproduce the claims ``names`` (``["all"]`` = all); one row per claim (module docstring).

    Args:
        names: claim ids or ``all``.
        quick: the reduced budgets (``--quick``).
        out: keep the run directories (and figures) here; ``None``: a temporary directory, removed.
        log: called with one line per run started and finished (progress on stderr).
        reuse: what to do with stale runs and sub-runs: ``"refuse"`` (default), ``"rerun"``, ``"stale"``.

    Raises:
        UnknownClaimError: an unknown id; ForeignRunError, StaleRunError: see :func:`plan_run` —
        all checked for every run before anything runs or is written.
    """
    claims = get_claims(names)
    plans = preflight(names, out, quick, reuse)
    keep = out is not None
    root = Path(out) if keep else Path(tempfile.mkdtemp(prefix="paramsym-reproduce-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        recs: dict[str, dict[str, Any]] = {}
        for name in dict.fromkeys(c.run for c in claims):
            plan = plans.get(name)
            if log:
                what = {"reuse": "reusing", "resume": "resuming", "rerun": "rerunning stale"}.get(
                    (plan or {}).get("action"), "running")
                log(f"run {name} ({'quick' if quick else 'full'}): {what} …")
            recs[name] = run_one(name, root, quick, reuse, plan)
            if log:
                r = recs[name]
                wall = "wall unknown" if r.get("seconds") is None else f"{r['seconds']:.1f} s wall"
                state = f"{wall}, {r['cpu_seconds']:.1f} s CPU"
                state = f"reused (it took {state}; {r.get('code_version')})" if r.get("reused") else state
                state += " — STALE: " + str(r.get("stale_reason")) if r.get("stale") else ""
                log(f"run {name}: {state}" + (f" — {r['error']}" if r.get("error") else ""))
        return [_row(c, recs[c.run], root if keep else None) for c in claims]
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def _holds(h: bool | None) -> str:
    return "—" if h is None else ("yes" if h else "no")


def _seconds(r: dict[str, Any]) -> str:
    s, c = r.get("seconds"), r.get("cpu_seconds")
    if s is None and c is None:
        return "—"
    return f"{'—' if s is None else f'{s:.0f}'} / {'—' if c is None else f'{c:.0f}'}" + (" (reused)" if r.get("reused") else "") + (" STALE" if r.get("stale") else "")


def short_version(v: str | None) -> str:
    """``abcdef123456`` or ``abcdef123456-dirty`` (the first 12 digits of the SHA); ``—`` without one."""
    if not v:
        return "—"
    return v[:12] + ("-dirty" if "-dirty" in v else "")


def markdown(rows: list[dict[str, Any]]) -> str:
    """The table ``| claim | kind | source | paper | ours | holds | budget | wall / CPU s |`` and the summary."""
    lines = ["| claim | kind | source | paper | ours | holds | budget | wall / CPU s | code |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ours = str(r["ours"]).replace("|", "\\|")
        lines.append(f"| `{r['claim']}` | {r['kind']} | {r['source']} | {r['paper']} | {ours} | {_holds(r['holds'])} | "
                     f"{r['budget']} | {_seconds(r)} | {short_version(r.get('code_version'))} |")
    s = summary(rows)
    lines += ["", "Summary: " + "; ".join(f"{k.replace('_', ' ')} {s['counts'][k]}" + (f" ({', '.join(s[k])})" if s[k]
                                                                                  and k in ("failing", "stale") else "")
                                          for k in ("reproduced", "failing", "not_evaluated", "related", "measurements",
                                                    "stale"))]
    return "\n".join(lines)
