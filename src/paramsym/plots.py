"""Figure helpers. matplotlib is an optional extra (``viz``) and is imported lazily.

Every figure function takes plain arrays (read from a run directory by the caller) and a path,
writes a PNG and returns the path, or returns ``None`` when matplotlib is not installed (the
report then says that figures were skipped).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np


def pyplot():
    """Return ``matplotlib.pyplot`` with the headless Agg backend, or ``None`` if unavailable."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save(fig, path: str | os.PathLike) -> Path:
    """Save and close a figure (PNG, 120 dpi, tight bounding box)."""
    from .runs.rundir import atomic_write_bytes

    path = Path(path)
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    pyplot().close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path


def lines(
    path: str | os.PathLike,
    x: Sequence[float] | np.ndarray,
    series: Mapping[str, Sequence[float] | np.ndarray],
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    logy: bool = False,
    bands: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ylim: tuple[float | None, float | None] | None = None,
) -> Path | None:
    """Line plot of several named series over a shared x axis, optional shaded bands."""
    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, y in series.items():
        (ln,) = ax.plot(np.asarray(x), np.asarray(y), label=name)
        if bands and name in bands:
            lo, hi = bands[name]
            ax.fill_between(np.asarray(x), lo, hi, color=ln.get_color(), alpha=0.2)
    if logy:
        ax.set_yscale("log")
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend()
    return save(fig, path)


def heatmap(
    path: str | os.PathLike,
    values: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    log: bool = True,
    threshold: float | None = None,
    fmt: str = "{:.1e}",
) -> Path | None:
    """Annotated heatmap (log colour scale by default); cells above ``threshold`` are boxed."""
    plt = pyplot()
    if plt is None:
        return None
    vals = np.asarray(values, dtype=float)
    shown = np.log10(np.maximum(vals, 1e-16)) if log else vals
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(col_labels), 1.0 + 0.6 * len(row_labels)))
    im = ax.imshow(shown, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(col_labels)), labels=list(col_labels))
    ax.set_yticks(range(len(row_labels)), labels=list(row_labels))
    for i in range(vals.shape[0]):
        for j in range(vals.shape[1]):
            bad = threshold is not None and vals[i, j] > threshold
            ax.text(j, i, fmt.format(vals[i, j]), ha="center", va="center",
                    color="red" if bad else "white", fontsize=8, fontweight="bold" if bad else None)
    cb = fig.colorbar(im, ax=ax)
    cb.set_label("log10" if log else "")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return save(fig, path)
