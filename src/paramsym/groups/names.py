"""The names in the group grammar of :meth:`paramsym.groups.finite.FiniteGroup.parse`: the accepted
forms (:data:`NAME_FORMS`), "did you mean" suggestions (:func:`closest_group_names`) and the check
of one matrix generator (:func:`matrix_generator`). The grammar itself (names, ``perm:``/``mat:``
generators, ``.json`` files) is ``FiniteGroup.parse`` with :func:`~paramsym.groups.finite.group_by_name`.
"""

from __future__ import annotations

import difflib
import re

import numpy as np

from ..errors import GroupError

__all__ = ["NAME_FORMS", "closest_group_names", "matrix_generator"]

NAME_FORMS = (
    "C<n> or Z<n> (cyclic, order n), D<n> (dihedral, order 2n: D4 = square), S<n> (symmetric), "
    "A<n> (alternating), Q8 (quaternion), V4 (= C2xC2), and direct products joined by 'x', "
    "e.g. C2xC3, D4xC2"
)


_WORDS = {"cyclic": "C", "dihedral": "D", "symmetric": "S", "alternating": "A", "quaternion": "Q", "klein": "V"}


def closest_group_names(name: str, n: int = 3) -> list[str]:
    """Up to ``n`` valid group names closest to ``name`` (for "did you mean" in errors)."""
    text = str(name).strip()
    digits = re.findall(r"\d+", text)
    number = digits[0] if digits else "4"
    word = re.sub(r"[^a-z]", "", text.lower())
    for w, letter in _WORDS.items():
        if word and (w.startswith(word) or word.startswith(w[:4])):
            return [f"{letter}{number}" if letter not in "QV" else {"Q": "Q8", "V": "V4"}[letter]]
    candidates = [f"{k}{number}" for k in "CDSA"] + ["Q8", "V4", "C2xC3", "D4xC2"]
    lowered = {c.lower(): c for c in candidates}
    hits = difflib.get_close_matches(text.lower(), list(lowered), n=n, cutoff=0.3)
    return [lowered[h] for h in hits] or [f"C{number}", f"D{number}"]


def matrix_generator(m, argument: str, spec: str) -> np.ndarray:
    """``m`` as a non-empty square float64 matrix, else a :class:`GroupError` naming ``argument`` and ``spec``."""
    try:
        arr = np.asarray(m, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise GroupError(f"{argument} {spec!r}: every matrix generator must be a non-empty square matrix of numbers; "
                         f"received {m!r}.")
    return arr
