"""Our own measurements documented in docs/ (not paper claims): teleportation, alignment, compensation.

Same shape as the paper claims (:class:`~.claims.Claim` rows read from :class:`~.runs.RunSpec`
runs, rendered into generated blocks by :mod:`.docs`), with source ``[Measurement] PAGE`` and,
as ``paper``, the aim the page states (there is no paper number). Every run here calls a
documented ``paramsym`` command with ``--json`` in a subprocess (:func:`~.runs.run_cli`), so the
numbers are the command's. All are seeded and deterministic: ``--quick`` runs a subset of the
cases whose numbers are the full run's (``exact=True``); the renderers name the missing cases.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .claims import Claim, Measured
from .runs import RunSpec, run_cli

__all__ = ["MEASUREMENT_CLAIMS", "MEASUREMENT_RUNS", "render_actions", "render_align", "render_compensation",
           "render_teleport"]

TELEPORT_PRESETS = ("booth", "rosenbrock", "regression-mlp")
TELEPORT_FULL = (*TELEPORT_PRESETS, "digits-mlp")
ALIGN_FULL = (32, 16)
ALIGN_QUICK = (32,)
#: (label, model, layer, unit); tiny models: the first layer's unit 7
COMP_FULL = (("all-MiniLM-L6-v2, layer 3 unit 7", "minilm", 3, 7), ("all-MiniLM-L6-v2, layer 3 unit 100", "minilm", 3, 100),
             ("all-MiniLM-L6-v2, layer 2 unit 42", "minilm", 2, 42), ("gpt2-tiny (Conv1D), layer 0 unit 7", "gpt2-tiny", 0, 7),
             ("pythia-tiny (GPT-NeoX), layer 0 unit 7", "pythia-tiny", 0, 7),
             ("llama-tiny (gated), layer 0 unit 7", "llama-tiny", 0, 7))
COMP_QUICK = COMP_FULL[:1] + COMP_FULL[3:4]


def _teleport(quick: bool) -> Callable[[Path], dict[str, Any]]:
    def go(out: Path, reuse: str = "refuse") -> dict[str, Any]:
        return {p: run_cli(["teleport", "--preset", p, "--json", "--threads", "1"], out, f"{p}.json")
                for p in TELEPORT_PRESETS}

    return go


def _teleport_digits(quick: bool) -> Callable[[Path], dict[str, Any]]:
    def go(out: Path, reuse: str = "refuse") -> dict[str, Any]:
        seeds = ["--seeds", "2"] if quick else []
        return {"digits-mlp": run_cli(["teleport", "--preset", "digits-mlp", *seeds, "--json", "--threads", "1"], out,
                                      "digits-mlp.json")}

    return go


def _align(quick: bool) -> Callable[[Path], dict[str, Any]]:
    def go(out: Path, reuse: str = "refuse") -> dict[str, Any]:
        return {str(w): run_cli(["align", "--preset", "digits-mlp", "--width", str(w), "--json", "--threads", "1"],
                                out, f"digits-width{w}.json") for w in (ALIGN_QUICK if quick else ALIGN_FULL)}

    return go


def _comp(quick: bool) -> Callable[[Path], dict[str, Any]]:
    def go(out: Path, reuse: str = "refuse") -> dict[str, Any]:
        res = {}
        for label, model, layer, unit in (COMP_QUICK if quick else COMP_FULL):
            r = run_cli(["compensate", "--model", model, "--layer", str(layer), "--unit", str(unit), "--tokens", "16",
                         "--seed", "0", "--json"], out, f"{model}-{layer}-{unit}.json")
            r.pop("sweep", None)
            res[label] = r
        return res

    return go


def _actions(quick: bool) -> Callable[[Path], dict[str, Any]]:
    def go(out: Path, reuse: str = "refuse") -> dict[str, Any]:
        import json

        from .action_checks import action_checks

        res = action_checks()
        out.mkdir(parents=True, exist_ok=True)
        (out / "result.json").write_text(json.dumps(res, indent=1))
        return res

    return go


MEASUREMENT_RUNS: tuple[RunSpec, ...] = (
    RunSpec("action-checks", "python -m paramsym.experiments.reproduce.action_checks", _actions(False), _actions(True),
            "≈ 5 s (7 small float64 modules, 64 samples per cell)", exact=True),
    RunSpec("teleport-presets", "paramsym teleport --preset P --json (P = booth, rosenbrock, regression-mlp)",
            _teleport(False), _teleport(True), "≈ 1 min (≈ 20 s per preset; seeded, so --quick is the full run)",
            exact=True),
    RunSpec("teleport-digits", "paramsym teleport --preset digits-mlp --json", _teleport_digits(False),
            _teleport_digits(True), "≈ 2 min (10 seeds × 2 optimizers × 600 steps, with and without teleports); "
            "--quick: 2 seeds"),
    RunSpec("align-digits", "paramsym align --preset digits-mlp --width W --json (W = 32, 16)", _align(False),
            _align(True), "≈ 20 s per width (models trained once and cached); --quick runs width 32", exact=True),
    RunSpec("compensation-models", "paramsym compensate --model M --layer L --unit U --tokens 16 --json (6 cases)",
            _comp(False), _comp(True), "≈ 1–2 min (≈ 10 s per case); --quick runs 2 of the 6 cases", exact=True),
)


# ------------------------------------------------------------------------------- claims


def _opt(r: dict[str, Any], preset: str, name: str) -> dict[str, Any]:
    return r[preset]["optimizers"][name]


def _tp_booth(r):
    s = r["booth"]["per_seed"][0]
    st = s["steps_to_target"]
    ok = st["teleport"] is not None and st["teleport"] <= 9 and r["booth"]["max_loss_change"] <= 1e-10
    return Measured(f"target {s['target']:.2g} at step {st['teleport']} (plain GD: {st['baseline']})", ok,
                    {"table": _tp_table(r), "presets": list(r)})


def _tp_table(r: dict[str, Any]) -> list[dict[str, Any]]:
    """One compact row per (preset, optimizer) for the teleport block."""
    rows = []
    for preset, res in r.items():
        for name, o in res["optimizers"].items():
            steps = [[s["steps_to_target"]["baseline"], s["steps_to_target"]["teleport"]]
                     for s in res["per_seed"] if s["optimizer"] == name]
            rows.append({"preset": preset, "optimizer": name, "lr": res["lr"][name], "seeds": o["seeds"], "steps": steps,
                         "step_ratio": o["step_ratio"], "grad_norm_factor": o["grad_norm_factor"],
                         "max_loss_change": o["max_loss_change"], "teleport_share": o["teleport_time_fraction"],
                         "final_baseline": _med(o["final_loss_baseline"]),
                         "final_teleport": _med(o["final_loss_teleport"]),
                         "val": [o[k] for k in ("val_acc_at_target_baseline", "val_acc_at_target_teleport",
                                                "val_acc_baseline", "val_acc_teleport")] if "val_acc_baseline" in o
                         else None})
    return rows


def _tp_rosen(r):
    g = _opt(r, "rosenbrock", "gd")
    ok = g["reached"] == g["seeds"] and max(g["final_loss_teleport"]) <= 1e-6
    return Measured(f"{g['reached']}/{g['seeds']} seeds; final loss ≤ {max(g['final_loss_teleport']):.2g} "
                    f"(plain GD ≥ {min(g['final_loss_baseline']):.3g})", ok, {})


def _tp_reg(r):
    parts, ok = [], r["regression-mlp"]["max_loss_change"] <= 1e-10
    for name in ("gd", "adagrad"):
        g = _opt(r, "regression-mlp", name)
        fast = sum(x >= 2 for x in g["step_ratios"])
        ok = ok and fast >= 4
        parts.append(f"{name}: {fast}/{g['seeds']}")
    return Measured("seeds at the baseline's final loss by half the steps: " + ", ".join(parts), ok, {})


def _tp_digits(r):
    opts = r["digits-mlp"]["optimizers"]
    ok = all(o["step_ratio"] > 1 for o in opts.values())
    return Measured(", ".join(f"{k}: step ratio {o['step_ratio']:.3g}" for k, o in opts.items()), ok,
                    {"table": _tp_table(r), "presets": list(r)})


def _align_claim(r):
    ok = all(v["barrier_permutation"] < v["barrier_before"]
             and max(v["function_error"], v["function_error_permutation"]) <= 1e-10 for v in r.values())
    return Measured("; ".join(f"width {w}: test barrier {v['barrier_before']:.3g} → {v['barrier_permutation']:.3g}"
                              for w, v in r.items()), ok, {"widths": r})


def _comp_claim(r):
    lo = min(min(v["ratio_random"], v["ratio_uncompensated"]) for v in r.values())
    return Measured(f"smallest control ratio {lo:,.0f} over {len(r)} cases", lo >= 10,
                    {"min_ratio": lo, "cases": {k: {f: v[f] for f in ("drift_relative", "ratio_random",
                                                                       "ratio_uncompensated", "condition_number",
                                                                       "units_changed")} for k, v in r.items()}})


def _actions_claim(r):
    worst = max(max(v["output"], v["output2"], v["composition"], v["inverse"]) for v in r.values())
    still = min(v["motion"] for v in r.values())
    ok = all(v["passed"] for v in r.values()) and worst <= 1e-12 and still > 0.05
    return Measured(f"{len(r)} actions: worst error {worst:.2g}, smallest median motion {still:.2g} s_θ", ok,
                    {"cases": r})


M = "[Measurement]"
MEASUREMENT_CLAIMS: tuple[Claim, ...] = tuple(replace(c, kind="measurement") for c in (
    Claim("actions-verdict", f"{M} docs/actions.md", "every exact catalogue action passes the verdict",
          "aim: float64 rounding on every error, parameters move", "check_action passes; output, composition and inverse "
          "errors ≤ 1e-12; median motion > 0.05 s_θ in every case", "action-checks", _actions_claim),
    Claim("teleport-booth", f"{M} docs/teleport.md", "teleporting GD on Booth reaches the target sooner",
          "aim: loss ≤ 4.9e-3 by step 9", "teleported run reaches it by step 9; teleports stay on the level set "
          "(≤ 1e-10 relative)", "teleport-presets", _tp_booth),
    Claim("teleport-rosenbrock", f"{M} docs/teleport.md", "teleporting GD on Rosenbrock converges",
          "aim: final loss ≤ 1e-6 in 5/5 seeds", "every seed's final teleported loss ≤ 1e-6", "teleport-presets",
          _tp_rosen),
    Claim("teleport-regression-mlp", f"{M} docs/teleport.md", "teleporting a ReLU regression MLP trains faster",
          "aim: baseline's final loss by half the steps in ≥ 4/5 seeds", "step ratio ≥ 2 in ≥ 4 of 5 seeds for GD and "
          "AdaGrad; teleports change the loss ≤ 1e-10 relative", "teleport-presets", _tp_reg),
    Claim("teleport-digits-mlp", f"{M} docs/teleport.md", "teleporting the digits MLP reaches the target sooner",
          "aim: fewer steps (median step ratio > 1)", "median step ratio > 1 for SGD and Adam", "teleport-digits",
          _tp_digits),
    Claim("align-digits-mlp", f"{M} docs/alignment.md", "aligning two digits MLPs lowers the loss barrier",
          "aim: lower barrier, function unchanged", "permutation barrier below the unaligned one, B's function "
          "unchanged to ≤ 1e-10", "align-digits", _align_claim),
    Claim("compensation-models", f"{M} docs/compensation.md", "closed-form compensation beats both controls",
          "aim: compensated drift far below the controls", "ratio to the random and to the uncompensated control ≥ 10 "
          "in every case", "compensation-models", _comp_claim),
))


# ------------------------------------------------------------------------------- renderers


def _missing(present: Any, full: Any) -> str:
    gone = [str(x) for x in full if str(x) not in present]
    return f"\n\nNot in this (`--quick`) run: {', '.join(gone)} — run the full budget for them." if gone else ""


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def render_teleport(rows: dict[str, dict[str, Any]]) -> str:
    """The teleport presets table (block ``teleport``) from ``teleport-booth``'s and ``teleport-digits-mlp``'s values."""
    v = rows["teleport-booth"]["values"]
    d = rows.get("teleport-digits-mlp", {}).get("values") or {"table": [], "presets": []}
    v = {"table": v["table"] + d["table"], "presets": v["presets"] + d["presets"]}
    out = ["| preset | optimizer (lr) | seeds | steps to target: baseline → teleport (per seed) | step ratio (median) "
           "| ‖∇L‖ factor (median) | max rel. loss change of a teleport | teleport share of the run | final loss "
           "(median): baseline → teleport |", "|---|---|---|---|---|---|---|---|---|"]
    for t in v["table"]:
        steps = ", ".join(f"{_na(b)}→{_na(e)}" for b, e in t["steps"])
        out.append(f"| `{t['preset']}` | {t['optimizer']} ({t['lr']:g}) | {t['seeds']} | {steps} | {t['step_ratio']:.3g} | "
                   f"{t['grad_norm_factor']:.3g} | {t['max_loss_change']:.2g} | {t['teleport_share']:.2g} | "
                   f"{t['final_baseline']:.3g} → {t['final_teleport']:.3g} |")
    val = [t for t in v["table"] if t.get("val")]
    if val:
        out += ["", "Validation accuracy (median over seeds), baseline → teleport:", "",
                "| preset | optimizer | at the target | at the end |", "|---|---|---|---|"]
        out += [f"| `{t['preset']}` | {t['optimizer']} | {t['val'][0]:.4f} → {t['val'][1]:.4f} | "
                f"{t['val'][2]:.4f} → {t['val'][3]:.4f} |" for t in val]
    return "\n".join(out) + _missing(v["presets"], TELEPORT_FULL)


def _na(x: Any) -> str:
    return "—" if x is None else str(x)


def render_align(rows: dict[str, dict[str, Any]]) -> str:
    r = rows["align-digits-mlp"]["values"]["widths"]
    out = ["| width | B aligned by | barrier (train) | barrier (test) | ‖θ_A − θ_B‖ | B's function error |",
           "|---|---|---|---|---|---|"]
    for w, v in r.items():
        d = v["distance"]
        out.append(f"| {w} | — (before) | {v['barrier_before_train']:.3g} | {v['barrier_before']:.3g} | "
                   f"{d['before']:.4g} | — |")
        out.append(f"| {w} | permutation | {v['barrier_permutation_train']:.3g} | {v['barrier_permutation']:.3g} | "
                   f"{d['permutation']:.4g} | {v['function_error_permutation']:.2g} |")
        if "barrier_full" in v:
            out.append(f"| {w} | permutation + rescaling | {v['barrier_full_train']:.3g} | {v['barrier_full']:.3g} | "
                       f"{d['full']:.4g} | {v['function_error']:.2g} |")
    ends = "; ".join(f"width {w}: test loss {v['endpoints']['A']['test_loss']:.3g} / {v['endpoints']['B']['test_loss']:.3g}, "
                     f"test accuracy {v['endpoints']['A']['test_acc']:.3g} / {v['endpoints']['B']['test_acc']:.3g}"
                     for w, v in r.items())
    return "\n".join(out) + f"\n\nEnd models A / B (seeds 0 / 1): {ends}." + _missing(r, ALIGN_FULL)


def render_compensation(rows: dict[str, dict[str, Any]]) -> str:
    r = rows["compensation-models"]["values"]["cases"]
    out = ["| model | drift (float32) | ratio random | ratio uncompensated | cond | units changed |",
           "|---|---|---|---|---|---|"]
    for label, v in r.items():
        out.append(f"| {label} | {v['drift_relative']:.3g} | {v['ratio_random']:,.0f} | {v['ratio_uncompensated']:,.0f} | "
                   f"{v['condition_number']:.3g} | {v['units_changed']} |")
    return "\n".join(out) + _missing(r, [c[0] for c in COMP_FULL])


def render_actions(rows: dict[str, dict[str, Any]]) -> str:
    """The verdict table of docs/actions.md (block ``action-checks``)."""
    r = rows["actions-verdict"]["values"]["cases"]
    out = ["| action, module | output (1 / 2 factors) | composition | inverse | motion (s_θ) |", "|---|---|---|---|---|"]
    for label, v in r.items():
        out.append(f"| {label} | {v['output']:.2g} / {v['output2']:.2g} | {v['composition']:.2g} | {v['inverse']:.2g} | "
                   f"{v['motion']:.3g} |")
    return "\n".join(out)
