"""Per-parameter and per-tensor attribution tables.

For a lift ``c`` (``c*`` or ``b*``) and the Jacobian column norms:

* aggregate sensitivity ``S_i = ‖J_{:,i}‖₂ / sqrt(N·dimY)`` — the RMS over probe points and
  output components of ``∂f/∂θ_i`` (magnitude before averaging, so sign changes across the
  probe set do not cancel);
* ``|c_i|`` — the parameter's coefficient in the direction;
* per tensor ``T``: the share of the direction ``‖c_T‖² / ‖c‖²`` (shares sum to 1 over tensors),
  the share of its function-space-weighted form ``‖(S∘c)_T‖² / ‖S∘c‖²`` (how much of the motion
  each tensor's sensitivity-scaled coefficients carry), the mean and max ``S_i``, and the
  dead-column count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .problem import Attribution


def _share(v: np.ndarray, sl: slice) -> float:
    tot = float(np.sum(v**2))
    return float(np.sum(v[sl] ** 2)) / tot if tot > 0 else 0.0


def tensor_table(att: Attribution) -> list[dict[str, Any]]:
    """One row per parameter tensor (layout order): numel, dead, S mean/max, direction shares."""
    c = att.c.direction.numpy()
    b = att.b.direction.numpy()
    S = att.sensitivity.numpy() if att.sensitivity is not None else None
    dead = att.c.dead.numpy()
    cS = c * S if S is not None else None
    bS = b * S if S is not None else None
    rows = []
    for name in att.layout.names:
        sl = att.layout.slice(name)
        rows.append(
            {
                "tensor": name,
                "numel": sl.stop - sl.start,
                "dead": int(dead[sl].sum()),
                "S_mean": None if S is None else float(S[sl].mean()),
                "S_max": None if S is None else float(S[sl].max()),
                "c_norm": float(np.linalg.norm(c[sl])),
                "c_share": _share(c, sl),
                "b_norm": float(np.linalg.norm(b[sl])),
                "b_share": _share(b, sl),
                "Sc_share": None if cS is None else _share(cS, sl),
                "Sb_share": None if bS is None else _share(bS, sl),
            }
        )
    return rows


def parameter_table(att: Attribution, *, top: int = 20, by: str = "c") -> list[dict[str, Any]]:
    """The ``top`` parameters ranked by ``|c_i|`` (``by="c"``), ``|b_i|`` (``"b"``) or ``S_i`` (``"S"``)."""
    c = att.c.direction.numpy()
    b = att.b.direction.numpy()
    S = att.sensitivity.numpy() if att.sensitivity is not None else np.full(c.shape, np.nan)
    key = {"c": np.abs(c), "b": np.abs(b), "S": S}.get(by)
    if key is None:
        raise ValueError(f"by must be 'c', 'b' or 'S', received {by!r}.")
    order = np.argsort(-np.nan_to_num(key, nan=-np.inf))[:top]
    rows = []
    for i in order:
        name, j = att.layout.owner(int(i))
        shape = att.layout.shapes[att.layout.names.index(name)]
        idx = tuple(int(k) for k in np.unravel_index(j, shape)) if shape else ()
        rows.append(
            {"parameter": f"{name}{list(idx)}", "S": float(S[i]), "abs_c": float(abs(c[i])), "abs_b": float(abs(b[i]))}
        )
    return rows


def markdown(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, fmt: str = "{:.3g}") -> str:
    """Render rows of dicts as a GitHub markdown table."""
    if not rows:
        return "_(empty)_\n"
    cols = list(columns or rows[0].keys())

    def cell(v):
        if isinstance(v, float):
            return fmt.format(v)
        return "—" if v is None else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(cell(r.get(k)) for k in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"
