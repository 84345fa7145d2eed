"""Figures and report sections of the ``hamiltonian`` preset, regenerated from the run directory.

Reads only ``metrics.json``, ``history.json``, ``config.json``, ``model.safetensors`` and
``walks.safetensors`` (angular profiles and parameter snapshots); never trains or solves.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .... import plots
from ....attribution.flows import predicted_profile
from ....runs.rundir import RunDir, load_tensors

#: figure files and captions, in report order
FIGURES = (
    ("ham_profiles.png", "Top: angular deviation profiles d_k(φ) of the learned potential V_θ(q; α) on "
     "the ring ‖q‖ = r along each walk (colour: step k, backward steps negative). Bottom: the "
     "change d_k − d_0, measured (colour) and predicted (dashed: d_0(φ + τ_k) − d_0 along +c, "
     "(e^{−τ_k} − 1) d_0 along −b)."),
    ("ham_walk.png", "Walks: phase shift of the profile against the predicted τ and its error (+c), "
     "‖δ‖ relative to its start against e^{−τ} (−b), and the unrealised part of the predicted "
     "motion ‖F_k − F_pred‖/‖F_pred − F_0‖ (resolved: stays at the lifting residual; fixed: "
     "grows with the distance walked)."),
    ("ham_potential.png", "The learned potential's angular deviation V − mean_φ V over the disc at "
     "the first profile α, and its change along the resolved walks: measured (V_end − V_0) beside "
     "the exact prediction (rotation by τ along +c, e^{−τ} shrinkage along −b)."),
    ("ham_sweep.png", "Perturbation sweep θ + ε ẑ: phase shift (ẑ = ĉ) against ε/‖c*‖, and ‖δ‖ "
     "(ẑ = ĉ, b̂) against the first-order prediction."),
    ("ham_alpha.png", "α sweep: force error against the Mexican-hat truth, relative defect, "
     "finite-rotation error at the configured angle and per-α lifting residuals."),
    ("ham_training.png", "Training loss (sum over the rollout window of ‖q − q̂‖ + ‖p − p̂‖)."),
)


def _steps(walk: dict[str, Any], key: str) -> np.ndarray:
    return np.array([s[key] for s in walk["steps"]], dtype=float)


def make_figures(run: RunDir) -> list[str]:
    """Write the preset's figures into ``run.figures``; returns the written file names."""
    plt = plots.pyplot()
    if plt is None:
        return []
    m = run.read_json("metrics.json")
    cfg = run.read_json("config.json")["config"]
    written = []
    tensors = load_tensors(run.file("walks.safetensors"))
    phi = tensors["phi"].numpy()
    walks = m["walks"]

    # profiles (top) and their change from step 0, measured against predicted (bottom)
    if walks:
        fig, axes = plt.subplots(2, len(walks), figsize=(4.2 * len(walks), 6.4), squeeze=False, sharex=True)
        cmap = plt.get_cmap("coolwarm")
        for j, w in enumerate(walks):
            tag = f"{w['mode']}_{'c' if w['direction'] == '+c' else 'b'}"
            ks = [st["k"] for st in w["steps"]]
            d0 = tensors[f"{tag}_+0"].numpy()[:, 0]
            for st in w["steps"]:
                k = st["k"]
                col = cmap((k - min(ks)) / max(1, max(ks) - min(ks)))
                d = tensors[f"{tag}_{k:+d}"].numpy()[:, 0]
                lab = f"k={k}" if k in (min(ks), 0, max(ks)) else None
                axes[0][j].plot(np.degrees(phi), d, color=col, lw=1.0, label=lab)
                if k != 0:
                    pred = predicted_profile(d0, w["direction"], st["tau"])
                    axes[1][j].plot(np.degrees(phi), d - d0, color=col, lw=1.2, label=lab)
                    axes[1][j].plot(np.degrees(phi), pred - d0, color="k", lw=0.8, ls="--",
                                    label="predicted" if k == max(ks) else None)
            axes[0][j].set_title(f"{w['mode']} {w['direction']}")
            axes[1][j].set_xlabel("φ (degrees)")
            for ax in axes[:, j]:
                ax.grid(alpha=0.3)
        alpha0 = cfg["probe"]["profile_alphas"][0]
        axes[0][0].set_ylabel(f"d_k(φ) of V (α = {alpha0:g})")
        axes[1][0].set_ylabel("d_k − d_0: measured (colour), predicted (dashed)")
        axes[0][0].legend(fontsize=7)
        axes[1][0].legend(fontsize=7)
        plots.save(fig, run.figures / "ham_profiles.png")
        written.append("ham_profiles.png")

        # walk summary
        fig, axes = plt.subplots(2, 2, figsize=(10, 7))
        for w in walks:
            k = _steps(w, "k")
            nz = k != 0
            lab = f"{w['mode']} {w['direction']}"
            if w["direction"] == "+c":
                (ln,) = axes[0][0].plot(k, _steps(w, "phase_shift"), "o-", label=f"{lab} measured")
                axes[0][0].plot(k, _steps(w, "tau"), "x--", color=ln.get_color(), label=f"{lab} predicted τ")
                axes[0][1].plot(k[nz], (_steps(w, "phase_shift") - _steps(w, "tau"))[nz], "o-", label=lab)
            else:
                d = _steps(w, "delta")
                d0 = d[list(k).index(0)]
                (ln,) = axes[1][0].plot(k, d / d0, "o-", label=f"{lab} measured")
                axes[1][0].plot(k, np.exp(-_steps(w, "tau")), "x--", color=ln.get_color(), label=f"{lab} e^(−τ)")
            axes[1][1].plot(k[nz], _steps(w, "tracking_relative")[nz], "o-", label=lab)
        axes[0][0].set(title="+c: phase shift of the profile (rad)")
        axes[0][1].set(title="+c: phase shift − predicted τ (rad)")
        axes[1][0].set(title="−b: ‖δ‖ / ‖δ₀‖", xlabel="step k")
        axes[1][1].set(title="unrealised motion ‖F_k − F_pred‖ / ‖F_pred − F₀‖", xlabel="step k")
        for ax in axes.flat:
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        plots.save(fig, run.figures / "ham_walk.png")
        written.append("ham_walk.png")

    # potential maps
    if run.has("model.safetensors") and "theta_0" in tensors:
        written += _potential_figure(run, cfg, m, tensors, plt)

    # perturbation sweep
    sw = m["perturbation_sweep"]
    eps = np.array(sw["eps"])
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    c_rows, b_rows = sw["c"]["rows"], sw["b"]["rows"]
    axes[0].plot(eps, [r["phase_shift"] for r in c_rows], "o-", label="measured")
    axes[0].plot(eps, eps * sw["c"]["predicted_rate"], "k--", label="ε/‖c*‖")
    axes[0].set(title="θ + ε ĉ: profile phase shift (rad)", xlabel="ε")
    d0 = m["problem"]["delta_norm"]
    axes[1].plot(eps, [r["delta"] / d0 for r in c_rows], "o-", label="ẑ = ĉ")
    axes[1].plot(eps, [r["delta"] / d0 for r in b_rows], "s-", label="ẑ = b̂")
    axes[1].plot(eps, np.abs(1 - eps * sw["b"]["predicted_rate"]), "k--", label="|1 − ε/‖b*‖|")
    axes[1].set(title="‖δ‖ / ‖δ₀‖", xlabel="ε")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    plots.save(fig, run.figures / "ham_sweep.png")
    written.append("ham_sweep.png")

    # alpha sweep
    rows = sorted(m["alpha_sweep"], key=lambda r: r["alpha"])
    a = [r["alpha"] for r in rows]
    deg = cfg["probe"]["rotation_deg"]
    plots.lines(run.figures / "ham_alpha.png", a, {
        "force error vs truth": [r["force_error"] for r in rows],
        "‖δ_α‖/‖F_α‖": [r["defect_relative"] for r in rows],
        f"rotation error at {deg:g}°": [r["rotation_error"] for r in rows],
        "c* residual (α block)": [r["c_residual"] for r in rows],
        "b* residual (α block)": [r["b_residual"] for r in rows],
        "trajectory error": [r["trajectory_error"] for r in rows],
    }, title="α sweep (relative errors)", xlabel="α", logy=True)
    written.append("ham_alpha.png")

    if run.has("history.json"):
        loss = run.read_json("history.json")["loss"]
        if loss:
            plots.lines(run.figures / "ham_training.png", np.arange(1, len(loss) + 1), {"loss": loss},
                        title="training loss", xlabel="epoch", logy=True)
            written.append("ham_training.png")
    return written


def _potential_figure(run: RunDir, cfg: dict[str, Any], m: dict[str, Any], tensors: dict[str, torch.Tensor],
                      plt) -> list[str]:
    """Trained deviation ``V − mean_φ V`` over the disc, and its change along the resolved walks,
    measured (``V_end − V_0``) against predicted (``V_0 ∘ R_τ − V_0`` along +c,
    ``(e^{−τ} − 1)(V_0 − mean_φ V_0)`` along −b)."""
    from ....attribution.jacobian import ParamLayout
    from ....models.hamiltonian import SeparableHamiltonian

    model = SeparableHamiltonian(cfg["model"]["width"], cfg["model"]["depth"], dtype=torch.float64)
    model.load_state_dict({k: v.double() for k, v in load_tensors(run.file("model.safetensors")).items()})
    pot = model.potential
    layout = ParamLayout.from_params(dict(pot.named_parameters()))
    alpha = cfg["probe"]["profile_alphas"][0]
    r_max = cfg["probe"]["r_max"]
    nr, na = 40, 120
    r = torch.linspace(r_max / nr, r_max, nr, dtype=torch.float64)
    ph = 2 * math.pi * torch.arange(na + 1, dtype=torch.float64) / na
    R, P = torch.meshgrid(r, ph, indexing="ij")

    def dev(theta: torch.Tensor, shift: float = 0.0) -> np.ndarray:
        x = torch.stack([R * torch.cos(P + shift), R * torch.sin(P + shift), torch.full_like(R, alpha)], -1)
        with torch.no_grad():
            v = torch.func.functional_call(pot, layout.unflatten(theta), (x.reshape(-1, 3),)).reshape(nr, na + 1)
        return (v - v[:, :-1].mean(1, keepdim=True)).numpy()

    base = dev(tensors["theta_0"])
    panels = [("trained V − mean_φ V", base, None)]
    taus = {(w["mode"], w["direction"]): w["steps"][-1]["tau"] for w in m["walks"]}
    if "theta_resolved_c_end" in tensors:
        tau = taus[("resolved", "+c")]
        panels += [(f"+c walk: ΔV measured (τ = {tau:.3g})", dev(tensors["theta_resolved_c_end"]) - base, "c"),
                   ("+c walk: ΔV predicted (V₀∘R_τ − V₀)", dev(tensors["theta_0"], tau) - base, "c")]
    if "theta_resolved_b_end" in tensors:
        tau = taus[("resolved", "-b")]
        panels += [(f"−b walk: ΔV measured (τ = {tau:.3g})", dev(tensors["theta_resolved_b_end"]) - base, "b"),
                   ("−b walk: ΔV predicted ((e^−τ − 1)·dev)", math.expm1(-tau) * base, "b")]
    X, Y = (R * torch.cos(P)).numpy(), (R * torch.sin(P)).numpy()
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.4), squeeze=False)
    for ax, (title, mp, group) in zip(axes[0], panels):
        same = [q for _, q, g in panels if g == group] if group else [mp]
        lim = max(float(np.abs(q).max()) for q in same) or 1.0
        cs = ax.contourf(X, Y, mp, levels=np.linspace(-lim, lim, 21), cmap="RdBu_r")
        fig.colorbar(cs, ax=ax, shrink=0.75, format="%.1e")
        ax.set_aspect("equal")
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"learned potential at α = {alpha:g}", fontsize=10)
    plots.save(fig, run.figures / "ham_potential.png")
    return ["ham_potential.png"]


def _fmt(v: Any, spec: str = ".3g") -> str:
    if v is None:
        return "—"
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return format(v, spec) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def report_sections(run: RunDir) -> str:
    """Markdown sections of the ``hamiltonian`` preset (tables, claims beside ours, figures).

    Figures missing from the run directory are regenerated from its files first.
    """
    if not all((run.figures / name).exists() for name, _ in FIGURES[:4]):
        make_figures(run)
    m = run.read_json("metrics.json")
    cfg = run.read_json("config.json")["config"]
    pr, tr = m["problem"], m["train"]
    L: list[str] = ["## Hamiltonian network (Mexican hat)", ""]
    L.append(
        f"Separable learned Hamiltonian, {tr['params_kinetic']} + {tr['params_potential']} parameters, "
        f"{tr['epochs']} epochs on {tr['n_trajectories']} trajectories (final loss {_fmt(tr['final_loss'])}"
        f"{', reused from the run directory' if tr['cached'] else ''}). Analysed function: the learned "
        f"force F_θ(q; α) = −∇_q V_θ on a {cfg['probe']['n_radii']}×{cfg['probe']['n_angles']} polar grid "
        f"for α ∈ {pr['alphas']} stacked into one system of {pr['rows']} rows × {pr['params']} columns; "
        f"SO(2) Reynolds quadrature with {cfg['probe']['n_quadrature']} points; τ = {cfg['probe']['rtol']:g}."
    )
    L += ["", "### Lifts at the trained parameters", "",
          "| direction | residual | resolved rank | ‖target‖ | ‖direction‖ |", "|---|---|---|---|---|"]
    for key, name in (("c", "c* = J⁺η"), ("b", "b* = J⁺(−δ)")):
        s = pr[key]
        L.append(f"| {name} | {_fmt(s['residual'])} | {s['rank']} | {_fmt(s['target_norm'])} | {_fmt(s['direction_norm'])} |")
    L += ["", f"‖δ‖ = {_fmt(pr['delta_norm'])} (‖F‖ = {_fmt(pr['values_norm'])}); rotation error at "
          f"{cfg['probe']['rotation_deg']:g}°: {_fmt(pr['rotation_error'])} (relative); max error over "
          f"{cfg['probe']['n_error_angles']} angles: {_fmt(pr['equivariance_error_40'])}; cos(c*, b*) = "
          f"{_fmt(pr['c_b_cosine'])}."]
    L += ["", "### α sweep", "",
          "| α | train | force error | ‖δ_α‖/‖F_α‖ | rot. error | rot. error (truth) | c* residual | b* residual | trajectory error |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(m["alpha_sweep"], key=lambda r: r["alpha"]):
        L.append(f"| {r['alpha']:g} | {'yes' if r['train'] else 'no'} | {_fmt(r['force_error'])} | "
                 f"{_fmt(r['defect_relative'])} | {_fmt(r['rotation_error'])} | {_fmt(r['rotation_error_truth'])} | "
                 f"{_fmt(r['c_residual'])} | {_fmt(r['b_residual'])} | {_fmt(r['trajectory_error'])} |")
    L += ["", f"### Walks (unit direction, step {cfg['walk']['step']:g}, {cfg['walk']['forward']} forward and "
          f"{cfg['walk']['backward']} backward)", "",
          "| walk | k | τ | ‖δ‖ | predicted ‖δ‖ | phase shift | predicted shift | RMS ratio | predicted RMS ratio "
          "| rot. error | tracking | tracking / change | residual |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for w in m["walks"]:
        plus = w["direction"] == "+c"
        for s in w["steps"]:
            L.append(f"| {w['mode']} {w['direction']} | {s['k']} | {_fmt(s['tau'])} | {_fmt(s['delta'])} | "
                     f"{_fmt(s['delta_predicted'])} | {_fmt(s['phase_shift'])} | {_fmt(s['tau'] if plus else 0.0)} | "
                     f"{_fmt(s['profile_rms_ratio'])} | {_fmt(1.0 if plus else math.exp(-s['tau']))} | "
                     f"{_fmt(s['rotation_error'])} | {_fmt(s['deviation'] / w['f0_norm'])} | "
                     f"{_fmt(s.get('tracking_relative'))} | {_fmt(s['residual'])} |")
    L += ["", "(τ: predicted function-space time Σ ±step/‖z_k‖; tracking: ‖F_k − F_pred‖/‖F_0‖; "
          "tracking / change: ‖F_k − F_pred‖/‖F_pred − F_0‖, the part of the predicted motion not "
          "realised; residual: lifting residual of the direction solved at that step.)"]
    pa = cfg["probe"]["profile_alphas"]
    L += ["", f"Per-α profiles at the last forward step (ring ‖q‖ = {cfg['probe']['profile_radius']:g}): "
          "phase shift for +c (predicted τ), RMS ratio for −b (predicted e^(−τ)).", "",
          "| walk | predicted | " + " | ".join(f"α = {a:g}" for a in pa) + " |",
          "|---|---|" + "---|" * len(pa)]
    for w in m["walks"]:
        end = w["steps"][-1]
        if w["direction"] == "+c":
            vals, pred = end["phase_shift_per_alpha"], end["tau"]
        else:
            vals, pred = end["profile_rms_ratio_per_alpha"], math.exp(-end["tau"])
        L.append(f"| {w['mode']} {w['direction']} | {_fmt(pred, '.4g')} | " + " | ".join(_fmt(v, ".4g") for v in vals) + " |")
    sw = m["perturbation_sweep"]
    L += ["", "### Perturbation sweep θ + ε ẑ", "",
          "| ε | phase shift (ĉ) | ε/‖c*‖ | ‖δ‖ (ĉ) | ‖δ‖ (b̂) | (1 − ε/‖b*‖)‖δ₀‖ | rot. error (ĉ) | rot. error (b̂) |",
          "|---|---|---|---|---|---|---|---|"]
    for rc, rb in zip(sw["c"]["rows"], sw["b"]["rows"]):
        e = rc["eps"]
        L.append(f"| {e:+.2f} | {_fmt(rc['phase_shift'])} | {_fmt(e * sw['c']['predicted_rate'])} | "
                 f"{_fmt(rc['delta'])} | {_fmt(rb['delta'])} | "
                 f"{_fmt(abs(1 - e * sw['b']['predicted_rate']) * pr['delta_norm'])} | "
                 f"{_fmt(rc['rotation_error'])} | {_fmt(rb['rotation_error'])} |")
    L += ["", "### The source's claims beside ours", "",
          "The source gives no numbers for this experiment (Figures 3 and 4 only).", ""]
    claims = m["summary"]["paper"]["claims"]
    ours = _claims_evidence(m)
    L += ["| source (qualitative) | ours |", "|---|---|"]
    L += [f"| {c} | {o} |" for c, o in zip(claims, ours)]
    L += ["", "### Per-tensor attribution (potential network)", "",
          "| tensor | numel | dead | S mean | c* share | b* share |", "|---|---|---|---|---|---|"]
    for r in m["tensor_table"]:
        L.append(f"| {r['tensor']} | {r['numel']} | {r['dead']} | {_fmt(r['S_mean'])} | {_fmt(r['c_share'])} | {_fmt(r['b_share'])} |")
    L += ["", "### Figures", ""]
    for name, caption in FIGURES:
        if (run.figures / name).exists():
            L += [f"![{name}](figures/{name})", "", f"*{caption}*", ""]
    # timing.json since wall times left metrics.json; older runs kept them in metrics.json
    t = run.read_json("timing.json").get("timing_s", {}) if run.has("timing.json") else m.get("timing_s", {})
    L.append("Timing (s): " + ", ".join(f"{k} {v:.1f}" for k, v in t.items()))
    return "\n".join(L) + "\n"


def _claims_evidence(m: dict[str, Any]) -> list[str]:
    by = {(w["mode"], w["direction"]): w for w in m["walks"]}
    out = []
    rc = by.get(("resolved", "+c"))
    out.append("—" if rc is None else
               f"phase shift {rc['steps'][-1]['phase_shift']:.4g} rad after {rc['steps'][-1]['k']} steps "
               f"(predicted τ = {rc['steps'][-1]['tau']:.4g}); ‖δ‖ {rc['steps'][0]['delta']:.4g} → "
               f"{rc['steps'][-1]['delta']:.4g}")
    rb = by.get(("resolved", "-b"))
    out.append("—" if rb is None else
               f"‖δ‖ {_at(rb, 0, 'delta'):.4g} → {rb['steps'][-1]['delta']:.4g} (predicted "
               f"{rb['steps'][-1]['delta_predicted']:.4g}); rotation error {_at(rb, 0, 'rotation_error'):.4g} → "
               f"{rb['steps'][-1]['rotation_error']:.4g}")
    parts = []
    for d in ("+c", "-b"):
        r, f = by.get(("resolved", d)), by.get(("fixed", d))
        if r and f:
            parts.append(f"{d}: unrealised part of the predicted motion after the first step resolved "
                         f"{_at(r, 1, 'tracking_relative'):.3g} / fixed {_at(f, 1, 'tracking_relative'):.3g}, at "
                         f"the end resolved {r['steps'][-1]['tracking_relative']:.3g} / fixed "
                         f"{f['steps'][-1]['tracking_relative']:.3g}")
    out.append("; ".join(parts) if parts else "—")
    return out


def _at(w: dict[str, Any], k: int, key: str) -> float:
    return next(s[key] for s in w["steps"] if s["k"] == k)
