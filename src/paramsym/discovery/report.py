"""Report of a discovery run, regenerated from the run directory's files only.

Figures: loss curves (``history.json``), generated-curve output drift against the matched random
translation (``curves.json``), per-unit compensation along a curve (when present), and
error/motion heatmaps over the ρ × factors grid (``metrics.json``).
"""

from __future__ import annotations

import numpy as np

from .. import plots
from ..errors import RunFileError
from ..runs.rundir import RunDir
from ..verdict import METRICS, declared_cell

#: What the report reads from each file: the JSON type and the keys it needs.
_FORMS = {
    "metrics.json": (dict, ("preset", "objective", "seed", "p", "q", "steps", "scales")),
    "config.json": (dict, ()),
    "history.json": (list, ()),
    "curves.json": (dict, ("t", "learned_median", "learned_q25", "learned_q75", "random_median", "random_q25",
                           "random_q75")),
}


def read_checked(run: RunDir, name: str):
    """``run``'s JSON file ``name``, checked to be of the form the report reads (:data:`_FORMS`).

    Raises:
        RunFileError: the file holds valid JSON of another form (e.g. ``null``, or a missing key),
            naming the file and what it lacks.
    """
    obj = run.read_json(name)
    kind, keys = _FORMS[name]
    where = f"{str(run.path / name)!r}"
    if not isinstance(obj, kind):
        raise RunFileError(f"{where} holds a JSON {type(obj).__name__}, expected a JSON {kind.__name__ if kind is list else 'object'}; "
                           "restore the run's files, or rerun the command that made it.")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise RunFileError(f"{where} lacks {', '.join(missing)}; restore the run's files, or rerun the command that made it.")
    return obj


def _grid(cells: list[dict], key: str) -> tuple[np.ndarray, list[float], list[int]]:
    rhos = sorted({c["rho"] for c in cells})
    facs = sorted({c["factors"] for c in cells})
    arr = np.full((len(rhos), len(facs)), np.nan)
    for c in cells:
        arr[rhos.index(c["rho"]), facs.index(c["factors"])] = c.get(key, np.nan)
    return arr, rhos, facs


def _floats(values) -> np.ndarray:
    """JSON numbers as floats; ``null`` (a NaN or inf stored by a diverged run) as NaN, drawn as a gap."""
    return np.asarray([np.nan if v is None else float(v) for v in values], dtype=float)


def _num(v) -> float:
    return float("nan") if v is None else float(v)


def make_figures(run: RunDir) -> list[tuple[str, str]]:
    """Write the figures; return ``(caption, relative path)`` pairs (empty without matplotlib)."""
    figs: list[tuple[str, str]] = []
    metrics = read_checked(run, "metrics.json")
    if run.has("history.json"):
        hist = read_checked(run, "history.json")
        if hist:
            steps = [h["step"] for h in hist]
            series = {k: np.fmax(_floats([h.get(k, 0.0) for h in hist]), 1e-16)
                      for k in ("total", "inv", "trans", "comp", "pres", "scale", "div")
                      if any(_num(h.get(k, 0.0)) > 0 for h in hist)}
            if plots.lines(run.figures / "losses.png", steps, series, title="training losses", xlabel="step", ylabel="loss", logy=True):
                figs.append(("Training losses (means over logging intervals).", "figures/losses.png"))
    if run.has("curves.json"):
        cv = read_checked(run, "curves.json")
        t = _floats(cv["t"])
        bands = {
            "learned action": (_floats(cv["learned_q25"]), _floats(cv["learned_q75"])),
            "random translation (matched motion)": (_floats(cv["random_q25"]), _floats(cv["random_q75"])),
        }
        learned = _floats(cv["learned_median"])
        if plots.lines(
            run.figures / "curves.png", t,
            {"learned action": np.maximum(learned, 1e-16),
             "random translation (matched motion)": np.maximum(_floats(cv["random_median"]), 1e-16)},
            title="output drift along generated curves θ(t) = a(exp(t h), θ0)", xlabel="t",
            ylabel="‖F(θ(t)) − F(θ0)‖ / s_F", logy=True, bands=bands,
            ylim=(max(1e-9, 0.1 * min([float(x) for x in learned if x > 0] or [1e-9])), None),
        ):
            figs.append(("Output drift along generated curves (median and quartiles over fresh θ0) against a "
                         "random translation calibrated to the same RMS motion at t = 0.3.", "figures/curves.png"))
        if "unit_moving" in cv:
            mv, cp = _floats(cv["unit_moving"]), _floats(cv["unit_compensators"])
            if plots.lines(run.figures / "compensation.png", t,
                           {"moving unit ΔY_c": mv, "compensators ΔY_B": cp, "sum": mv + cp},
                           title="per-unit output changes along one curve", xlabel="t", ylabel="ΔY / s_F"):
                figs.append(("Opposing output changes of the moving unit and the compensators along one curve; "
                             "their sum is the total output change.", "figures/compensation.png"))
    cells = metrics.get("verdict", {}).get("cells", [])
    if cells:
        for key, log in (("output_err_p95", True), ("composition_err_p95", True), ("transport_err_p95", True), ("motion_median", False)):
            arr, rhos, facs = _grid(cells, key)
            m = METRICS[key]
            thr = m.tolerance if m.bound == "upper" else None
            if plots.heatmap(run.figures / f"grid_{key}.png", arr, [f"ρ={r}" for r in rhos], [f"{f} factor(s)" for f in facs],
                             title=m.label + ("" if thr is None else f" (tolerance {thr:g}, red = over)"),
                             log=log, threshold=thr, fmt="{:.1e}" if log else "{:.3f}"):
                figs.append((m.label + " over the test grid.", f"figures/grid_{key}.png"))
    return figs


def _declared(verdict: dict) -> tuple[float, int]:
    """The declared (ρ, factors) of a verdict dict: its declared cell's, else the grid's default
    (:func:`paramsym.verdict.declared_cell`), else (0.5, 1)."""
    d = verdict.get("declared") or {}
    if "rho" in d:
        return float(d["rho"]), int(d["factors"])
    cells = verdict.get("cells") or []
    if cells:
        return declared_cell([c["rho"] for c in cells], [c["factors"] for c in cells])
    return 0.5, 1


def _fmt(x: float) -> str:
    return f"{x:.3g}" if isinstance(x, (int, float)) else str(x)


def render(run: RunDir) -> str:
    """Markdown report (figures regenerated)."""
    m = read_checked(run, "metrics.json")
    cfg = read_checked(run, "config.json")
    figs = make_figures(run)
    v = m.get("verdict", {})
    d = v.get("declared", {})
    rho0, k0 = _declared(v)
    judged = [k for k in (1, 2) if any(c["rho"] == rho0 and c["factors"] == k for c in v.get("cells", []))]
    with_factors = " and ".join({1: "one", 2: "two"}[k] for k in judged) or "no"
    lines = [
        f"# Discovery report: `{m['preset']}` ({m['objective']} objective, seed {m['seed']})",
        "",
        m.get("description", ""),
        "",
        f"Block dimension p = {m['p']}, output dimension q = {m['q']}; {m['steps']} training steps. "
        f"Scales: s_F = {_fmt(m['scales']['s_F'])}, s_θ = {_fmt(m['scales']['s_theta'])}, β = {_fmt(m['scales']['beta'])}.",
        "",
        f"**Verdict: {'fits' if v.get('fits') else 'does not fit'}** every tolerance at ρ = {rho0:g} with "
        f"{with_factors} factor{'s' if len(judged) != 1 else ''}"
        + ("" if judged else " (the configured grid has no one- or two-factor cell at this ρ)") + ".",
        "",
    ]
    if d:
        nf = int(d.get("factors", k0))
        lines += [f"## Declared cell (ρ = {float(d.get('rho', rho0)):g}, {nf} factor{'s' if nf != 1 else ''})", "",
                  "| metric | value | tolerance | ok |", "|---|---|---|---|"]
        for key, mt in METRICS.items():
            if key not in d or not mt.judged:
                continue
            if mt.one_factor_only and nf != 1:
                tol_text, ok_text = "(reported)", "—"
            else:
                tol_text, ok_text = f"{mt.sign} {mt.tolerance:g}", "yes" if mt.passes(d[key]) else "**no**"
            lines.append(f"| {mt.label} | {_fmt(d[key])} | {tol_text} | {ok_text} |")
        lines += ["", f"Median relative change of the block ‖Δθ‖/‖θ‖: {_fmt(d.get('motion_rel_median', float('nan')))}.", ""]
    if "reference_span" in m:
        rs = m["reference_span"]
        lines += ["## Known symmetry", "",
                  f"Cosine between the learned field and its projection onto the span of the {rs['name']} directions at "
                  f"{rs['points']} held-out points: median {_fmt(rs['median'])}, 5th percentile {_fmt(rs['p05'])}, "
                  f"minimum {_fmt(rs['min'])}.", ""]
    if v.get("cells"):
        keys = [k for k in ("output_err_p95", "composition_err_p95", "inverse_err_p95", "subdivision_err_p95",
                            "transport_err_p95", "motion_median") if k in v["cells"][0]]
        lines += ["## Test grid", "", "| ρ | factors | " + " | ".join(METRICS[k].label for k in keys) + " | fits |",
                  "|---|---|" + "---|" * len(keys) + "---|"]
        for c in v["cells"]:
            lines.append(f"| {c['rho']} | {c['factors']} | " + " | ".join(_fmt(c[k]) for k in keys) + f" | {'yes' if c['fits'] else 'no'} |")
        lines.append("")
    if m.get("final_losses"):
        lines += ["## Final training losses", "", "| " + " | ".join(m["final_losses"]) + " |",
                  "|" + "---|" * len(m["final_losses"]), "| " + " | ".join(_fmt(x) for x in m["final_losses"].values()) + " |", ""]
    if figs:
        lines += ["## Figures", ""]
        for caption, path in figs:
            lines += [f"![{caption}]({path})", "", caption, ""]
    else:
        lines += ["(Figures skipped: matplotlib is not installed; `pip install paramsym[viz]`.)", ""]
    lines += ["## Configuration", "", "```json", _json(cfg), "```", ""]
    return "\n".join(lines)


def _json(obj) -> str:
    import json

    return json.dumps(obj, indent=2)
