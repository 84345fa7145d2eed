"""What a stored row says about itself (issue 33): its paper statistic, its deviations from the paper, whether
``main`` would run it so (stale, computed), its real wall time, and verdicts re-judged under today's criteria.

:func:`annotate` is applied to every row of ``docs/reproductions.json`` before the pages are written
(:func:`paramsym.reproduce.docs.write_docs`):

* ``kind``, ``statistic`` and ``deviations`` come from the claim and the registry of the papers' statistics
  (:mod:`paramsym.paper_stats`), never typed into the store;
* ``stale`` is computed: the row's ``config_hash`` against the hash of the configuration this code would run
  for the row's run and budget (:func:`paramsym.reproduce.engine.run_config`); a stale row keeps its numbers
  and says why;
* a row whose claim's criterion changed since it was measured is **re-judged from what the store holds**
  (:data:`REJUDGE`): the learned transformer's four claims from the per-seed values of the same run (kept in
  ``transformer-learned-objectives``), the lifting claim from its stored matched ratios; nothing is
  recomputed or invented, and a row whose new protocol needs a new run is *not evaluated* until it is run;
* the learned transformer's stored wall seconds were the sum of its 27 sub-runs' seconds, which ran two at a
  time: that is no wall time, so it is shown as such (:data:`SUMMED_WALL`); new runs record the elapsed wall
  (:func:`paramsym.runs.reuse.elapsed_seconds`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..claims import Measured, Rows
from ..paper_stats import OWN, STATS
from ..runs.provenance import config_hash
from .engine import BY_ID, run_config

__all__ = ["REJUDGE", "SUMMED_WALL", "annotate", "annotate_row"]

#: runs whose stored ``seconds`` summed their sub-runs' seconds (made before issue 33): run → explanation
SUMMED_WALL = {"transformer": "elapsed wall not recorded; the stored figure is the sum of its 27 sub-runs' seconds, "
                              "which ran two at a time"}


def _transformer_result(store: Rows) -> dict[str, Any] | None:
    obj = store.get("transformer-learned-objectives")
    if not obj or not (obj.get("values") or {}).get("objectives"):
        return None
    per = obj["values"]["objectives"]
    rho = next((row.get("rho") for rows in per.values() for row in rows if row.get("rho") is not None), None)
    return {"per_seed": per, "rho": rho}


def _lifting_result(row: dict[str, Any]) -> dict[str, Any] | None:
    v = row.get("values") or {}
    if "ratios" not in v:
        return None
    return {"matched": {"overlap": True, "ratios": v["ratios"], "displacements": v["range"]}, "rhos": v["rhos"],
            "median": v["median"], "per_seed": {"relu2881-unit": [{"seed": s} for s in v["seeds"]]},
            "same_rho_ratio": v.get("same_rho_ratio"), "unit_rescaling": v.get("unit_rescaling"),
            "unit_beta": v.get("unit_beta"), "all_beta": v.get("all_beta")}


def _from_transformer_run(row: dict[str, Any], store: Rows) -> dict[str, Any] | None:
    return _transformer_result(store) if row.get("config_hash") == (store.get("transformer-learned-objectives")
                                                                     or {}).get("config_hash") else None


#: claim → (the run result rebuilt from the store, or None; what the re-judged row says)
REJUDGE: dict[str, tuple[Callable[[dict[str, Any], Rows], dict[str, Any] | None], str]] = {
    **{c: (_from_transformer_run, "re-judged (issue 33) from the stored per-seed values of the same run under the "
                                  "registry's statistic") for c in ("transformer-drift-random-learned",
                                                                    "transformer-drift-uncompensated-learned",
                                                                    "transformer-motion", "transformer-composition")},
    "lifting-subnetwork-ratio": (lambda row, store: _lifting_result(row),
                                 "not evaluated: protocol v3 (statistic fixed before its run, issue 33) runs on fresh "
                                 "seeds 10–14, not run yet; the three statistics shown are protocol v2's run (seeds "
                                 "5–9)"),
}


def annotate_row(row: dict[str, Any], store: Rows) -> dict[str, Any]:
    """``row`` with ``kind``, ``statistic``, ``deviations``, computed ``stale``, real wall and today's verdict."""
    claim = BY_ID.get(row["claim"])
    if claim is None:
        return row
    out = dict(row, kind=claim.kind, criterion=claim.criterion)
    stat = STATS.get(claim.id)
    out["statistic"] = stat.statistic if stat else OWN
    out["deviations"] = list(stat.deviations) if stat else []
    if out.get("config_hash") and out.get("budget") in ("quick", "full"):
        want = config_hash(run_config(claim.run, out["budget"] == "quick"))
        if out["config_hash"] != want:
            out["stale"] = True
            out["stale_reason"] = (f"its config_hash {out['config_hash']!r} differs from the configuration this code "
                                   f"runs ({want!r})")
        elif not out.get("stale_reason"):
            out["stale"] = False
    legacy = out.get("wall_rule") != "elapsed"  # made before issue 33 (rows now record the elapsed wall)
    if legacy and claim.run in SUMMED_WALL and (out.get("seconds") is not None or "seconds_summed" in out):
        out["seconds_summed"] = out["seconds"] if out.get("seconds") is not None else out["seconds_summed"]
        out["seconds"] = None
        out["wall_note"] = SUMMED_WALL[claim.run]
    rule = REJUDGE.get(claim.id)
    if legacy and rule is not None and out.get("error") is None and out.get("code_version"):
        result = rule[0](out, store)
        if result is not None:
            m: Measured = claim.measure(result)
            evaluated = out.get("budget") == "full" and not (claim.id == "lifting-subnetwork-ratio" and out["stale"])
            out.update(ours=m.ours, values=m.values, holds=bool(m.holds) if evaluated else None, rejudged=rule[1])
    return out


def annotate(store: Rows) -> Rows:
    """Every row of ``store`` annotated (:func:`annotate_row`)."""
    return {cid: annotate_row(r, store) for cid, r in store.items()}
