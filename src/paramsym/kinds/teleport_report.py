"""``result.json``, ``report.md`` and loss-curve figures of a ``paramsym teleport`` run."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .. import plots
from ..runs.rundir import ensure_dir, write_json

__all__ = ["summary", "render", "write_outputs"]

_TOP = ("preset", "every", "seeds", "seed_values", "steps", "step_ratio", "max_loss_change", "grad_norm_factor", "loss_at_step_9",
        "seconds")


def summary(result: dict) -> dict:
    """The JSON summary (no loss curves): the aggregates, per optimizer, and per seed."""
    out = {k: result[k] for k in _TOP if k in result}
    out["optimizers"] = {o: {k: v for k, v in d.items()} for o, d in result["optimizers"].items()}
    out["target"] = result["target"]
    out["lr"] = result["lr"]
    out["per_seed"] = [
        {"seed": r["seed"], "optimizer": r["optimizer"], "steps_to_target": r.get("steps_to_target"),
         "target": r.get("target", result["target"].get(r["optimizer"])),
         "final_loss": {"baseline": r["baseline"]["losses"][-1], "teleport": r["teleport"]["losses"][-1]},
         **{k: r[k] for k in ("val_acc_baseline", "val_acc_teleport", "val_acc_at_target_baseline",
                              "val_acc_at_target_teleport") if k in r},
         "teleports": [{k: t[k] for k in ("status", "rel_loss_change", "factor", "steps", "seconds")}
                       for t in r["teleport"]["teleports"]]}
        for r in result["runs"]]
    return out


def render(result: dict, figures: list[str]) -> str:
    """Markdown report."""
    lines = [f"# paramsym teleport --preset {result['preset']}", "",
             f"step_ratio (median over seeds, smallest over optimizers): **{result['step_ratio']:.3g}**; "
             f"max_loss_change: **{result['max_loss_change']:.3g}**; grad_norm_factor: **{result['grad_norm_factor']:.3g}**.",
             "", "| optimizer | lr | target | step_ratio | reached (teleport / baseline) | grad-norm factor | max rel. loss change "
             "| teleport time / run | wall-time overhead | val. acc. (base → teleport) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for o, d in result["optimizers"].items():
        tgt = result["target"].get(o)
        acc = (f"{d['val_acc_baseline']:.4f} → {d['val_acc_teleport']:.4f}" if "val_acc_baseline" in d else "–")
        if "val_acc_at_target_baseline" in d and "val_acc_at_target_teleport" in d:
            acc += f" (at target: {d['val_acc_at_target_baseline']:.4f} → {d['val_acc_at_target_teleport']:.4f})"
        lines.append(f"| {o} | {result['lr'][o]:g} | {'per seed' if tgt is None else f'{tgt:g}'} | {d['step_ratio']:.3g} | "
                     f"{d['reached']}/{d['seeds']} / {d['baseline_reached']}/{d['seeds']} | {d['grad_norm_factor']:.3g} | "
                     f"{d['max_loss_change']:.2e} | {d['teleport_time_fraction']:.3f} | {d['wall_time_overhead']:.3f} | {acc} |")
    lines += ["", "Per seed (steps to target: baseline / teleport; final losses):", ""]
    for r in result["runs"]:
        st = r.get("steps_to_target", {})
        lines.append(f"- {r['optimizer']} seed {r['seed']}: {st.get('baseline')} / {st.get('teleport')}; final "
                     f"{r['baseline']['losses'][-1]:.4g} / {r['teleport']['losses'][-1]:.4g}")
    if "loss_at_step_9" in result:
        l9 = result["loss_at_step_9"]
        lines += ["", f"Loss at step 9: baseline {l9['baseline']:.4g}, teleport {l9['teleport']:.4g}."]
    lines += [""] + [f"![{Path(f).stem}]({f})" for f in figures]
    seeds = ",".join(str(x) for x in result.get("seed_values", range(result["seeds"])))
    lines += ["", f"Regenerate: `paramsym teleport --preset {result['preset']}"
              + (f" --every {result['every']}" if result.get("every") else "") + f" --seeds {seeds} --out DIR`", ""]
    return "\n".join(lines)


def _curves(path: Path, runs: list[dict], title: str) -> Path | None:
    """Loss curves of every seed, one colour per seed: solid with teleports, dashed without."""
    plt = plots.pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, r in enumerate(runs):
        colour = f"C{i % 10}"
        for key, style in (("baseline", "--"), ("teleport", "-")):
            y = np.maximum(np.asarray(r[key]["losses"], dtype=float), 1e-300)
            ax.plot(np.arange(len(y)), y, style, color=colour, label=f"seed {r['seed']}" if key == "teleport" else None)
    ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return plots.save(fig, path)


def write_outputs(result: dict, out: str | os.PathLike) -> list[str]:
    """Write ``result.json`` (with curves), ``report.md`` and ``loss_<optimizer>.png``; return the file names."""
    out = ensure_dir(out)
    figures = []
    for o in result["optimizers"]:
        runs = [r for r in result["runs"] if r["optimizer"] == o]
        path = _curves(out / f"loss_{o}.png", runs, f"{result['preset']}: {o} (dashed: no teleport)")
        if path is not None:
            figures.append(path.name)
    write_json(out / "result.json", result)
    from ..runs.rundir import atomic_write_bytes

    atomic_write_bytes(out / "report.md", render(result, figures).encode())
    return ["result.json", "report.md", *figures]
