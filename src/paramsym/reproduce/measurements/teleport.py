"""Teleportation measurements (docs/teleport.md): the presets, the digits MLP, the paper's ‖∇L‖²
objective (a negative result) and a learned action's teleport (a negative result).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ...claims import Claim, Measured, missing_note
from ..runs import RunSpec, budgeted, kept, run_cli

__all__ = ["CLAIMS", "RUNS", "render_teleport", "render_teleport_grad_norm", "render_teleport_learned"]

M = "[Measurement]"
TELEPORT_PRESETS = ("booth", "rosenbrock", "regression-mlp")
TELEPORT_FULL = (*TELEPORT_PRESETS, "digits-mlp")
LEARNED_STEPS = 3000
LEARNED_QUICK_STEPS = 300
GRAD_NORM_SEEDS = 5
LEARNED_TIME = ("measured 170 CPU-s (748 s wall under load ≈ 8 on the 2 shared cores): the 3000-step relu242 "
                "discovery is nearly all of it; --quick: 300 steps")
GRAD_NORM_TIME = "measured 10 CPU-s (63 s wall under load) for the 10 teleported runs; ≈ 20 CPU-s with the baselines"


@budgeted
def _teleport(quick: bool, out: Path) -> dict[str, Any]:
    return {p: run_cli(["teleport", "--preset", p, "--json", "--threads", "1"], out, f"{p}.json")
            for p in TELEPORT_PRESETS}


@budgeted
def _teleport_digits(quick: bool, out: Path) -> dict[str, Any]:
    seeds = ["--seeds", "0,1"] if quick else []
    return {"digits-mlp": run_cli(["teleport", "--preset", "digits-mlp", *seeds, "--json", "--threads", "1"], out,
                                  "digits-mlp.json")}


@kept
def _teleport_grad_norm(quick: bool, out: Path) -> dict[str, Any]:
    import math

    from ...kinds.teleport_mlp import train_preset
    from ...kinds.teleport_presets import DEFAULT_STEPS, TeleportConfig

    def fin(x: float) -> float | None:
        return x if math.isfinite(x) else None

    res: dict[str, Any] = {}
    for opt in ("gd", "adagrad"):
        rows = []
        for seed in range(GRAD_NORM_SEEDS):
            cfg, steps = TeleportConfig("regression-mlp"), DEFAULT_STEPS["regression-mlp"]
            r = train_preset(cfg, opt, seed, steps, True, objective="grad-norm")
            base = train_preset(cfg, opt, seed, steps, False)
            tp = r["teleports"][0] if r["teleports"] else {}
            final = r["losses"][-1]
            rows.append({"seed": seed, "loss_start": r["losses"][0], "loss_final": fin(final),
                         "loss_final_baseline": fin(base["losses"][-1]),
                         "loss_after_teleport": fin(r["losses"][6]) if len(r["losses"]) > 6 else None,
                         "grad_norm_factor": fin(float(tp.get("factor", float("nan")))),
                         "diverged": not math.isfinite(final) or final >= 10 * r["losses"][0]})
        res[opt] = rows
    return res


@budgeted
def _teleport_learned(quick: bool, out: Path) -> dict[str, Any]:
    import shutil

    steps = LEARNED_QUICK_STEPS if quick else LEARNED_STEPS
    run_dir = out / "relu242"
    shutil.rmtree(run_dir, ignore_errors=True)  # a fresh discovery run each time (seeded, deterministic)
    disc = run_cli(["discover", "--preset", "relu242", "--steps", str(steps), "--device", "cpu", "--out",
                    str(run_dir), "--quiet", "--json"], out, "discover.json")
    tele = run_cli(["teleport", "--action", str(run_dir), "--json"], out, "teleport.json")
    return {"discovery_steps": steps, "teleport": tele,
            "discover_status": {k: disc[k] for k in ("status", "passed") if k in disc}}


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
                         "final_baseline": statistics.median(o["final_loss_baseline"]),
                         "final_teleport": statistics.median(o["final_loss_teleport"]),
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


def _grad_norm_claim(r):
    """The paper's objective on regression-mlp: how many teleported runs diverge."""
    n = {o: sum(x["diverged"] for x in rows) for o, rows in r.items()}
    ok = bool(n) and all(v >= 4 for v in n.values())  # no optimizer measured: nothing holds
    return Measured(", ".join(f"{o}: diverged in {v}/{len(r[o])} seeds" for o, v in n.items()), ok, {"optimizers": r})


def _learned_claim(r):
    """The negative result: a learned relu242 rescaling field does not teleport within 1e-6."""
    t = r["teleport"]
    ok = t["steps"] == 0 and t["status"] == "left_level_set" and (t["refused_change"] or 0) > t["tol"]
    return Measured(f"{t['steps']} steps accepted, status {t['status']}; the first refused step changed the loss by "
                    f"{t['refused_change']:.2g} (tolerance {t['tol']:g})" if t["refused_change"] is not None else
                    f"{t['steps']} steps accepted, status {t['status']}", ok, r)


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
    return "\n".join(out) + missing_note(v["presets"], TELEPORT_FULL)


def _na(x: Any) -> str:
    return "—" if x is None else str(x)


def render_teleport_grad_norm(rows: dict[str, dict[str, Any]]) -> str:
    """The ‖∇L‖² teleports of regression-mlp (block ``teleport-grad-norm``)."""
    r = rows["teleport-grad-norm"]["values"]["optimizers"]

    def f(x: Any) -> str:
        return "not finite" if x is None else f"{x:.3g}"

    out = ["| optimizer | seed | ‖∇L‖ factor of the teleport | loss at step 0 | loss one step after the teleport | "
           "final loss | final loss without teleport | diverged |", "|---|---|---|---|---|---|---|---|"]
    for o, rs in r.items():
        out += [f"| {o} | {x['seed']} | {f(x['grad_norm_factor'])} | {f(x['loss_start'])} | {f(x['loss_after_teleport'])} | "
                f"{f(x['loss_final'])} | {f(x.get('loss_final_baseline'))} | {'yes' if x['diverged'] else 'no'} |"
                for x in rs]
    return "\n".join(out)


def render_teleport_learned(rows: dict[str, dict[str, Any]]) -> str:
    """The learned-action teleport (block ``teleport-learned``)."""
    r = rows["teleport-learned"]["values"]
    t = r["teleport"]
    refused = "—" if t.get("refused_change") is None else f"{t['refused_change']:.2g}"
    return "\n".join([
        "| discovery steps | teleport status | ascent steps accepted | refused step's relative loss change | tolerance | "
        "kept relative loss change | parameter change |", "|---|---|---|---|---|---|---|",
        f"| {r['discovery_steps']} | `{t['status']}` | {t['steps']} | {refused} | {t['tol']:g} | {t['rel_loss_change']:.2g} | "
        f"{t['param_change']:.2g} |"])


RUNS: tuple[RunSpec, ...] = (
    RunSpec("teleport-presets", "paramsym teleport --preset P --json (P = booth, rosenbrock, regression-mlp)",
            _teleport(False), _teleport(True), "≈ 1 min (≈ 20 s per preset; seeded, so --quick is the full run)",
            exact=True),
    RunSpec("teleport-digits", "paramsym teleport --preset digits-mlp --json", _teleport_digits(False),
            _teleport_digits(True), "≈ 2 min (10 seeds × 2 optimizers × 600 steps, with and without teleports); "
            "--quick: 2 seeds"),
    RunSpec("teleport-grad-norm", "python -c 'from paramsym.kinds.teleport_mlp import train_preset; ...' "
            "(regression-mlp, GD and AdaGrad, 5 seeds, objective ‖∇L‖²; paramsym reproduce teleport-grad-norm)",
            _teleport_grad_norm(False), _teleport_grad_norm(True), GRAD_NORM_TIME, exact=True),
    RunSpec("teleport-learned", "paramsym discover --preset relu242 --steps 3000 --out RUN; paramsym teleport --action "
            "RUN --json", _teleport_learned(False), _teleport_learned(True), LEARNED_TIME),
)
CLAIMS: tuple[Claim, ...] = (
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
    Claim("teleport-grad-norm", f"{M} docs/teleport.md", "the paper's ‖∇L‖² teleport objective makes regression-mlp "
          "diverge (a negative result: why the preset uses the lookahead)", "aim: divergence in most seeds",
          "the teleported run's final loss is not finite or ≥ 10 × its starting loss in ≥ 4 of 5 seeds, for GD and for "
          "AdaGrad", "teleport-grad-norm", _grad_norm_claim),
    Claim("teleport-learned", f"{M} docs/teleport.md", "a learned rescaling field (relu242, 3000 discovery steps) "
          "is not accurate enough to teleport within the 1e-6 level-set tolerance (a negative result)",
          "aim: the negative result", "`paramsym teleport --action RUN` accepts no ascent step: status left_level_set "
          "with the refused step's relative loss change above 1e-6", "teleport-learned", _learned_claim),
)
