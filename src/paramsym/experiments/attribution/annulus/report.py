"""Figures and report sections of an annulus run (read the run directory only)."""

from __future__ import annotations

import numpy as np

from ....runs.rundir import RunDir, load_tensors, read_json

__all__ = ["make_figures", "report_sections"]


def _diagnostic_figures(run: RunDir, plt, plots, traces: dict, metrics: dict) -> list[str]:
    """Task metrics, endpoint distance and z₀ staleness along the flows; the cutoff sweep."""
    names = []
    diag = {k: tr["diagnostics"] for k, tr in traces.items() if tr.get("diagnostics")}
    if diag:
        panels = (("task_loss", "task loss (BCE)"), ("accuracy", "task accuracy"),
                  ("endpoint_distance", "‖f_t − f_end‖/‖f_0‖"), ("staleness", "staleness ‖J_t z₀ − t_t‖/‖t_t‖"))
        fig, axes = plt.subplots(1, 4, figsize=(18, 3.8))
        for ax, (field, title) in zip(axes, panels):
            for key, d in diag.items():
                pts = [(t, v) for t, v in zip(d["t"], d[field]) if v is not None]
                if pts:
                    ax.plot([a for a, _ in pts], [b for _, b in pts], label=key.replace("_", " "))
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("t")
            ax.grid(alpha=0.3)
            if field in ("task_loss", "staleness"):
                ax.set_yscale("log")
        axes[0].legend(fontsize=7)
        names.append(plots.save(fig, run.figures / "flow_diagnostics.png").name)
    sweep = metrics.get("cutoff_sweep")
    if sweep:
        fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
        for d, rows in sweep.items():
            taus = [r["rtol"] for r in rows]
            axes[0].semilogx(taus, [r["captured_energy"] for r in rows], "o-", label=f"{d}*")
            axes[1].loglog(taus, [max(r["residual"], 1e-16) for r in rows], "o-", label=f"{d}*")
            axes[2].semilogx(taus, [r["rank"] for r in rows], "o-", label=f"{d}*")
        for ax, t in zip(axes, ("captured energy ‖P_k t‖²/‖t‖²", "residual ‖Jc − t‖/‖t‖", "resolved rank")):
            ax.set_title(t, fontsize=9)
            ax.set_xlabel("τ")
            ax.invert_xaxis()
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        names.append(plots.save(fig, run.figures / "cutoff_sweep.png").name)
    return names


def _diagnostic_lines(metrics: dict) -> list[str]:
    from ....attribution.tables import markdown

    lines = []
    task = metrics.get("task")
    if task:
        lines += ["", f"Task at t = 0: BCE {task['loss']:.4g}, accuracy {task['accuracy']:.3f}; the Reynolds "
                  f"projection P(f): BCE {task['projected_loss']:.4g}, accuracy {task['projected_accuracy']:.3f}."]
    q = metrics.get("quadrature")
    if q:
        lines.append(f"Quadrature check: ‖P_{q['n']} f − P_{2 * q['n']} f‖/‖f‖ = {q['refined_change']:.2g} "
                     f"(‖P_{q['n']} f − P_{q['n'] // 2} f‖/‖f‖ = {q['coarsened_change']:.2g}); orbit closure over 2π: "
                     f"max |Π(2π)f − f| = {metrics.get('orbit_closure', float('nan')):.2g}.")
    rows = []
    for r in metrics["summary"]["flows"]:
        if "accuracy_end" not in r:
            continue
        rows.append({"flow": r["flow"], "dir": r["direction"],
                     "loss start → end": f"{_g(r.get('task_loss_start'))} → {_g(r.get('task_loss_end'))}",
                     "accuracy start → end": f"{_g(r.get('accuracy_start'))} → {_g(r.get('accuracy_end'))}",
                     "path length": r.get("path_length"), "‖θ_T − θ_0‖": r.get("distance_end"),
                     "‖f_T − f_end‖/‖f_0‖": r.get("endpoint_distance_end"), "z₀ staleness (end)": r.get("staleness_end")})
    if rows:
        lines += ["", "### Along the flows", "", markdown(rows)]
    if metrics.get("sparse"):
        lines += ["### Sparse attributions (t = 0; FISTA, λ = 1e-2·‖(JD⁻¹)ᵀt‖_∞, column-normalised)", "",
                  markdown(metrics["sparse"], ["target", "kind", "residual", "support", "participation_ratio",
                                               "objective_change"])]
    sweep = metrics.get("cutoff_sweep")
    if sweep:
        lines += ["### Cutoff sweep (t = 0)", ""]
        for d, rs in sweep.items():
            lines += [f"{d}*:", "", markdown(rs, ["rtol", "rank", "captured_energy", "residual", "projection_residual",
                                                   "direction_norm", "cos_to_reference"])]
    return lines


def _g(v) -> str:
    return "—" if v is None else f"{v:.4g}"


def make_figures(run: RunDir) -> list[str]:
    """Draw the figures of an annulus run from its files; returns the figure file names."""
    from .... import plots

    plt = plots.pyplot()
    if plt is None:
        return []
    cfg = run.read_json("config.json")["config"]
    names = []
    data = load_tensors(run.file("data.safetensors")) if run.has("data.safetensors") else None
    flow_files = sorted((run.path / "flows").glob("*.json")) if (run.path / "flows").exists() else []
    traces = {f.stem: read_json(f)["trace"] for f in flow_files}
    if traces:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, d in zip(axes, ("c", "b")):
            for key, tr in traces.items():
                if not key.endswith("_" + d):
                    continue
                (ln,) = ax.plot(tr["t"], tr["delta_norm"], label=f"{tr['mode']} (measured)")
            first = next((tr for k, tr in traces.items() if k.endswith("_" + d)), None)
            if first is not None:
                tp = [(t, v) for t, v in zip(first["t"], first["delta_predicted"]) if v is not None]
                ax.plot([a for a, _ in tp], [b for _, b in tp], "k--", label="prediction")
            ax.set_title(f"‖δ_t‖ along {'+c' if d == 'c' else '−b'}")
            ax.set_xlabel("t")
            ax.grid(alpha=0.3)
            ax.legend()
        names.append(plots.save(fig, run.figures / "delta_norm.png").name)
    for key in traces:
        path = run.path / "flows" / f"{key}.safetensors"
        if not path.exists():
            continue
        arr = load_tensors(path)
        times = arr[f"{key}.times"].tolist()
        n = len(times)
        phi = np.arange(arr[f"{key}.profile.0"].numel()) * 360.0 / arr[f"{key}.profile.0"].numel()
        fig, ax = plt.subplots(figsize=(6, 4))
        for i in (0, n // 2, n - 1):
            (ln,) = ax.plot(phi, arr[f"{key}.profile.{i}"].numpy(), label=f"t = {times[i]:.2f}")
            if i > 0:
                ax.plot(phi, arr[f"{key}.profile_pred.{i}"].numpy(), "--", color=ln.get_color(), label=f"predicted t = {times[i]:.2f}")
        ax.set_xlabel("φ (degrees)")
        ax.set_ylabel(f"d_t(φ) at r = {cfg['profile_radius']}")
        ax.set_title(f"angular deviation profile — {key.replace('_', ' ')}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        names.append(plots.save(fig, run.figures / f"profile_{key}.png").name)
        # decision boundaries along the flow
        fig, axes = plt.subplots(1, n, figsize=(3.0 * n, 3.2))
        ext = cfg["extent"]
        for i, ax in enumerate(np.atleast_1d(axes)):
            F = arr[f"{key}.field.{i}"].numpy()
            P = arr[f"{key}.field_pred.{i}"].numpy()
            ax.contourf(F, levels=[-1e9, 0, 1e9], colors=["#f4c7c3", "#c6dbef"], extent=(-ext, ext, -ext, ext))
            ax.contour(F, levels=[0], colors="b", extent=(-ext, ext, -ext, ext))
            ax.contour(P, levels=[0], colors="k", linestyles="--", extent=(-ext, ext, -ext, ext))
            if data is not None:
                x, y = data["x"].numpy(), data["y"].numpy()
                ax.scatter(x[y > 0.5, 0], x[y > 0.5, 1], s=3, c="navy")
                ax.scatter(x[y < 0.5, 0], x[y < 0.5, 1], s=3, c="darkred")
            ax.set_title(f"t = {times[i]:.2f}", fontsize=9)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
        fig.suptitle(f"decision boundary f = 0 — {key.replace('_', ' ')} (blue: flow, dashed: prediction)", fontsize=10)
        names.append(plots.save(fig, run.figures / f"boundary_{key}.png").name)
    names += _diagnostic_figures(run, plt, plots, traces, run.read_json("metrics.json"))
    for key in traces:
        path = run.path / "flows" / f"{key}.safetensors"
        arr = load_tensors(path) if path.exists() else {}
        if f"{key}.heatmap" not in arr:
            continue
        H = arr[f"{key}.heatmap"].numpy()
        tr = traces[key]
        fig, ax = plt.subplots(figsize=(6, 3.6))
        vmax = float(np.abs(H).max()) or 1.0
        im = ax.imshow(H, aspect="auto", origin="lower", cmap="RdBu_r", vmin=-vmax, vmax=vmax,
                       extent=(0, 360, tr["t"][0], tr["t"][-1]))
        fig.colorbar(im, ax=ax)
        ax.set_xlabel("φ (degrees)")
        ax.set_ylabel("flow time t")
        ax.set_title(f"d_t(φ) at r = {cfg['profile_radius']} — {key.replace('_', ' ')}", fontsize=9)
        names.append(plots.save(fig, run.figures / f"heatmap_{key}.png").name)
    return names


def report_sections(run: RunDir) -> str:
    """Annulus-specific report sections: training facts, side-by-side with the paper, figures."""
    from ....attribution.tables import markdown

    metrics = run.read_json("metrics.json")
    cfg = run.read_json("config.json")["config"]
    names = make_figures(run)
    info = metrics.get("info", {})
    lines = [f"## Annulus classifier ({cfg['data']}, {cfg['stage']})", ""]
    lines.append(
        f"MLP 2→{cfg['hidden']}×{cfg['depth']}→1 ({cfg['activation']}), {info.get('n_params')} parameters; "
        f"probe grid N = {info.get('n_probes')}; Reynolds over C_{cfg['n_quadrature']}; τ = {cfg['rtol']}, "
        f"gauge {cfg['gauge']}; Euler dt = {cfg['dt']} on [0, {cfg['t_end']}]."
    )
    if "loss_final" in info:
        lines.append(
            f"Training: {cfg['epochs']} epochs, BCE {info['loss_first']:.4f} → {info['loss_final']:.4f}, "
            f"train accuracy {info['train_accuracy']:.3f}."
        )
    lines += ["", "### Flows beside the paper", ""]
    rows = []
    for r in metrics["summary"]["flows"]:
        paper = ""
        if "paper_delta_start" in r:
            paper = f"{r['paper_delta_start']} → {r['paper_delta_end']} ({r['paper_delta_predicted']})"
        elif "paper_delta_end" in r:
            paper = f"end {r['paper_delta_end']}"
        if "paper_accuracy_end" in r:
            paper += f", accuracy {r['paper_accuracy_end']:.3f} (ours {_g(r.get('accuracy_end'))})"
        rows.append({
            "flow": r["flow"], "dir": r["direction"],
            "‖δ‖ start → end (pred.)": f"{r['delta_start']:.4g} → {r['delta_end']:.4g} ({r['delta_predicted']:.4g})",
            "|end−pred|/pred": r.get("delta_error_end_relative"),
            "‖f_t − pred‖/‖f_0‖": r.get("deviation_end_relative"),
            "RMS ratio (pred.)": f"{r.get('rms_ratio') or float('nan'):.3f} ({r.get('rms_ratio_predicted') or float('nan'):.3f})",
            "eq. error start → end": f"{r.get('equivariance_error_start', float('nan')):.3g} → {r.get('equivariance_error_end', float('nan')):.3g}",
            "residual start/end": f"{_fmt(r.get('residual_start'))} / {_fmt(r.get('residual_end'))}",
            "paper": paper,
        })
    lines.append(markdown(rows))
    lines += ["Per-tensor attribution at t = 0 (S = RMS sensitivity; c_share = ‖c_T‖²/‖c‖², "
              "Sc_share = ‖(S∘c)_T‖²/‖S∘c‖²):", ""]
    lines.append(markdown(metrics.get("tensor_table", []),
                          ["tensor", "numel", "dead", "S_mean", "S_max", "c_share", "Sc_share", "b_share", "Sb_share"]))
    lines += _diagnostic_lines(metrics)
    for n in names:
        lines.append(f"![{n}](figures/{n})")
    return "\n".join(lines) + "\n"


def _fmt(v) -> str:
    return "—" if v is None else f"{v:.3g}"
