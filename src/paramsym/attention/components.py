"""Counting components of the equivariance locus: ``c_{G,d}(V)``, Theorem 9, D4 closed forms.

[Attention] Definition 8. For a real G-representation ``V = ⊕_i m_i U_i`` over distinct real
irreducibles ``U_i`` of dimension ``d_i``, a subrepresentation is, up to isomorphism, a
multiplicity vector ``n`` with ``0 ≤ n ≤ m``; ``n ≤ n'`` componentwise iff the first embeds in the
second. ``c_{G,d}(V)`` is the number of vectors ``n ≠ 0`` with ``Σ n_i d_i ≤ d`` that are
**maximal**: no ``i`` with ``n_i < m_i`` and ``Σ n_j d_j + d_i ≤ d``.

Theorem 9. With equal head dimension ``d = dim V / |H|``, a G-complete family of polynomially
parameterised MHSA architectures has at least ``c_{G,d}(V)^{2|H|} / |H|!`` members
(:func:`theorem9_bound`, an exact :class:`fractions.Fraction`).

D4 ([Attention] Example 9): ``V = R^C ⊗ R[D_4]``, ``R[D_4] = A1 ⊕ A2 ⊕ B1 ⊕ B2 ⊕ 2E1``, 8 heads, ``d = C``:
``c = Σ_{e=0}^{⌊C/2⌋} binom(C − 2e + 3, 3)``; even C ``(C+2)(C+4)(C²+6C+6)/48``, odd C
``(C+1)(C+3)²(C+5)/48``.

Two independent algorithms compute ``c``: :func:`maximal_subrepresentations` lists the vectors
(brute force, for checking), :func:`count_components` counts them by slack (fast, exact).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import ShapeError, TooLargeError
from ..groups.memory import check_memory, dense_bytes

__all__ = [
    "maximal_subrepresentations",
    "count_components",
    "theorem9_bound",
    "format_scientific",
    "d4_components_sum",
    "d4_components_closed_form",
    "head_dimension",
    "parse_range",
    "ComponentCount",
    "irreducible_content",
    "component_count",
    "component_table",
    "table_markdown",
]


def _validate(dims: Sequence[int], mults: Sequence[int], d: int) -> tuple[list[int], list[int]]:
    dims = [int(x) for x in dims]
    mults = [int(x) for x in mults]
    if len(dims) != len(mults):
        raise ShapeError(
            f"irreducible dimensions {dims} and multiplicities {mults} must have the same length."
        )
    if any(x <= 0 for x in dims):
        raise ShapeError(f"irreducible dimensions must be positive, received {dims}.")
    if any(x < 0 for x in mults):
        raise ShapeError(f"multiplicities must be non-negative, received {mults}.")
    if int(d) < 0:
        raise ShapeError(f"head dimension d must be non-negative, received {d}.")
    keep = [i for i, m in enumerate(mults) if m > 0]
    return [dims[i] for i in keep], [mults[i] for i in keep]


def maximal_subrepresentations(
    dims: Sequence[int], mults: Sequence[int], d: int, *, limit: int = 2_000_000
) -> Iterator[tuple[int, ...]]:
    """List the maximal subrepresentations of dimension ``≤ d`` as multiplicity vectors.

    Brute force over all ``0 ≤ n ≤ m`` with ``Σ n_i d_i ≤ d`` (pruned by dimension); each ``n ≠ 0``
    is tested for maximality directly. Irreducibles of multiplicity 0 are skipped, and the
    yielded vectors are indexed like the irreducibles with ``m_i > 0``.

    Args:
        dims: dimensions ``d_i`` of the real irreducibles.
        mults: multiplicities ``m_i`` in ``V``.
        d: the dimension bound (the head dimension).
        limit: most candidate vectors visited before :class:`~paramsym.errors.TooLargeError`.
    """
    dims, mults = _validate(dims, mults, d)
    k = len(dims)
    n = [0] * k
    visited = 0

    def rec(i: int, used: int) -> Iterator[tuple[int, ...]]:
        nonlocal visited
        if i == k:
            visited += 1
            if visited > limit:
                raise TooLargeError(
                    f"more than limit={limit} candidate subrepresentations; use count_components "
                    "(which counts without listing) or raise `limit`."
                )
            if used == 0:
                return
            if all(n[j] == mults[j] or used + dims[j] > d for j in range(k)):
                yield tuple(n)
            return
        for a in range(0, mults[i] + 1):
            if used + a * dims[i] > d:
                break
            n[i] = a
            yield from rec(i + 1, used + a * dims[i])
        n[i] = 0

    yield from rec(0, 0)


def _geometric_times(P: np.ndarray, a: int, m: int) -> np.ndarray:
    """``P(t) · (1 + t^a + ... + t^{m a})`` truncated to ``len(P)`` coefficients."""
    N = len(P)
    pad = (-N) % a
    S = np.concatenate([P, np.zeros(pad, dtype=P.dtype)]).reshape(-1, a).cumsum(axis=0).reshape(-1)[:N]
    shift = (m + 1) * a
    if shift < N:
        S[shift:] = S[shift:] - S[: N - shift]
    return S


def count_components(dims: Sequence[int], mults: Sequence[int], d: int) -> int:
    """``c_{G,d}(V)``: the number of maximal subrepresentations ``0 < dim W ≤ d`` up to isomorphism.

    Counting by slack ``r = d − Σ n_i d_i``: ``n`` is maximal iff every irreducible with
    ``d_i ≤ r`` is used fully. For each ``r`` those are forced, the others range freely, so ``c`` is
    ``Σ_r [t^{d-r-F_r}] Π_{free i} (1 + t^{d_i} + ... + t^{m_i d_i})`` with ``F_r`` the dimension of
    the forced part, minus 1 when ``n = 0`` qualifies (every ``d_i > d``). Cost
    ``O(#distinct dims · #irreducibles · d)``; exact (int64 when it cannot overflow, else Python
    integers).

    Args:
        dims: dimensions ``d_i`` of the real irreducibles of ``V``.
        mults: their multiplicities ``m_i``.
        d: the dimension bound.
    """
    dims, mults = _validate(dims, mults, d)
    d = int(d)
    if not dims:
        return 0
    exact_bound = math.prod(m + 1 for m in mults)
    dtype = np.int64 if exact_bound < 2**62 else object
    cuts = sorted({x for x in dims if x <= d})
    edges = [0] + cuts + [d + 1]
    total = 0
    for lo, hi in zip(edges[:-1], edges[1:]):
        if lo >= hi:
            continue
        forced = [i for i in range(len(dims)) if dims[i] <= lo]
        F = sum(mults[i] * dims[i] for i in forced)
        s_hi = d - lo - F  # exponent for r = lo; it decreases by one per unit of slack
        s_lo = max(d - (hi - 1) - F, 0)
        if s_hi < s_lo:
            continue
        P = np.zeros(d + 1, dtype=dtype)
        P[0] = 1
        for i in range(len(dims)):
            if i not in forced:
                P = _geometric_times(P, dims[i], mults[i])
        # slack r in [lo, hi): coefficient of t^(d - r - F) in the free product
        total += int(P[s_lo : s_hi + 1].sum())
    if all(x > d for x in dims):
        total -= 1  # n = 0 satisfied the maximality test but has dimension 0
    return total


def head_dimension(dim_v: int, heads: int) -> int:
    """``d = dim V / |H|``; raises :class:`~paramsym.errors.ShapeError` if ``|H|`` does not divide."""
    if heads <= 0 or dim_v % heads:
        divisors = [k for k in range(1, dim_v + 1) if dim_v % k == 0]
        raise ShapeError(
            f"{heads} heads do not divide dim V = {dim_v}; Theorem 9 needs equal head dimension. "
            f"Use one of {divisors}."
        )
    return dim_v // heads


def _check_bound_digits(c: int, heads: int) -> None:
    """Refuse a Theorem 9 bound ``c^{2H}/H!`` whose numerator or denominator has more decimal digits
    than Python converts to text (``sys.get_int_max_str_digits()``, 4300 by default): the result
    prints both exactly, and the exact fraction costs time quadratic in its digits."""
    import sys

    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    if limit <= 0:
        return
    digits = max(2 * heads * math.log10(max(c, 1)), math.lgamma(heads + 1) / math.log(10)) + 1
    if digits > limit:
        raise TooLargeError(
            f"the exact Theorem 9 bound c^(2H)/H! for c = {c if c < 10**60 else f'~1e{len(str(c)) - 1}'} and H = {heads} "
            f"heads has about {digits:.3g} decimal digits, more than the {limit} that Python converts to text. Use fewer "
            "--heads, or raise the limit (environment variable PYTHONINTMAXSTRDIGITS).")


def theorem9_bound(c: int, heads: int) -> Fraction:
    """Theorem 9: at least ``c^{2|H|} / |H|!`` architectures, as an exact fraction.

    Raises:
        ShapeError: ``c`` not an integer >= 0 or ``heads`` not an integer >= 1.
        TooLargeError: the exact fraction would have more digits than Python converts to text
            (checked from ``log10`` before anything is computed).
    """
    import numbers

    for name, v, low in (("c (the number of components)", c, 0), ("number of heads", heads, 1)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < low:
            raise ShapeError(f"{name} must be an integer >= {low}; received {v!r}.")
    c, heads = int(c), int(heads)
    _check_bound_digits(c, heads)
    return Fraction(c ** (2 * heads), math.factorial(heads))


def format_scientific(value: Fraction | int, digits: int = 4) -> str:
    """``value`` in scientific notation with ``digits`` significant digits, e.g. ``"1.631e96"``.

    Exact for arbitrarily large fractions (no float overflow).
    """
    v = Fraction(value)
    if v == 0:
        return "0"
    sign = "-" if v < 0 else ""
    v = abs(v)
    e = len(str(v.numerator)) - len(str(v.denominator))
    while v >= Fraction(10) ** (e + 1):
        e += 1
    while v < Fraction(10) ** e:
        e -= 1
    mant = v / Fraction(10) ** e  # in [1, 10)
    scaled = math.floor(mant * 10 ** (digits - 1) + Fraction(1, 2))  # round half up
    if scaled >= 10**digits:  # rounding carried into a new digit
        scaled //= 10
        e += 1
    s = str(scaled)
    mantissa = s[0] + ("." + s[1:] if len(s) > 1 else "")
    return f"{sign}{mantissa}e{e}"


def d4_components_sum(C: int) -> int:
    """``c_{D4,C}(R^C ⊗ R[D4]) = Σ_{e=0}^{⌊C/2⌋} binom(C − 2e + 3, 3)`` (solutions of
    ``a1 + a2 + b1 + b2 + 2e = C``)."""
    C = int(C)
    if C < 1:
        raise ShapeError(f"number of copies C must be at least 1, received {C}.")
    return sum(math.comb(C - 2 * e + 3, 3) for e in range(C // 2 + 1))


def d4_components_closed_form(C: int | np.ndarray) -> int | np.ndarray:
    """Closed form of :func:`d4_components_sum`: even C ``(C+2)(C+4)(C²+6C+6)/48``, odd C
    ``(C+1)(C+3)²(C+5)/48``. Vectorised over integer arrays (exact in int64 for C < 10^4)."""
    if isinstance(C, np.ndarray):
        C = C.astype(np.int64)
        even = (C + 2) * (C + 4) * (C * C + 6 * C + 6) // 48
        odd = (C + 1) * (C + 3) ** 2 * (C + 5) // 48
        return np.where(C % 2 == 0, even, odd)
    C = int(C)
    if C < 1:
        raise ShapeError(f"number of copies C must be at least 1, received {C}.")
    if C % 2 == 0:
        return (C + 2) * (C + 4) * (C * C + 6 * C + 6) // 48
    return (C + 1) * (C + 3) ** 2 * (C + 5) // 48


#: the most integers a range like ``1..N`` may name (a table row each)
MAX_RANGE = 10_000


def parse_range(text: str, limit: int = MAX_RANGE) -> list[int]:
    """Parse ``"1..12"``, ``"1,2,5"`` or ``"1..10,96"`` into a list of at most ``limit`` integers."""
    out: list[int] = []
    try:
        for part in str(text).split(","):
            part = part.strip()
            if not part:
                continue
            if ".." in part:
                a, b = part.split("..", 1)
                lo, hi = int(a), int(b)
                if hi - lo + 1 + len(out) > limit:
                    raise ShapeError(f"{text!r} names {hi - lo + 1 + len(out)} integers; at most {limit} are "
                                     "allowed (a table row each). Ask for a smaller range.")
                out.extend(range(lo, hi + 1))
            else:
                out.append(int(part))
    except ShapeError:
        raise
    except ValueError as exc:
        raise ShapeError(
            f"cannot read {text!r} as integers; use forms like '1..12', '1,2,5' or '1..10,96'."
        ) from exc
    if not out:
        raise ShapeError(f"{text!r} names no integers; use forms like '1..12'.")
    return out



@dataclass
class ComponentCount:
    """``c_{G,d}(V)`` for ``V = R^copies ⊗ ρ`` and the Theorem 9 bound.

    Attributes:
        group: group name.
        rep: description of the base representation ``ρ``.
        copies: ``C``.
        heads: ``|H|``.
        dim_v: ``dim V = C · dim ρ``.
        d: head dimension ``dim V / |H|``.
        irreps: ``(name, dim, multiplicity in V)`` for each real irreducible of ``V``.
        c: ``c_{G,d}(V)``.
        bound: ``c^{2|H|} / |H|!`` (exact).
        closed_form: the D4 closed form when ``V ≅ R^d ⊗ R[D4]`` (content ``d(A1+A2+B1+B2+2E1)``,
            i.e. 8 heads on copies of the regular representation), else ``None``.
    """

    group: str
    rep: str
    copies: int
    heads: int
    dim_v: int
    d: int
    irreps: list[tuple[str, int, int]]
    c: int
    bound: Fraction
    closed_form: int | None = None

    def to_dict(self) -> dict[str, Any]:
        b = self.bound
        try:
            bf = float(b)
        except OverflowError:
            bf = None
        return {
            "group": self.group,
            "rep": self.rep,
            "copies": self.copies,
            "heads": self.heads,
            "dim_V": self.dim_v,
            "d": self.d,
            "irreps": [{"name": n, "dim": k, "multiplicity": m} for n, k, m in self.irreps],
            "c": self.c,
            "closed_form": self.closed_form,
            "bound": bf,
            "bound_sci": format_scientific(b),
            "bound_exact": f"{b.numerator}/{b.denominator}" if b.denominator != 1 else str(b.numerator),
            "log10_bound": _log10(b),
        }


def _log10(v: Fraction) -> float | None:
    if v <= 0:
        return None
    return math.log10(v.numerator) - math.log10(v.denominator)


def irreducible_content(rep, *, progress: bool = False) -> list[tuple[str, int, int]]:
    """``(name, dim, multiplicity)`` of the real irreducibles in ``rep`` (multiplicity > 0).

    Multiplicities from characters, ``m_i = <chi_rho, psi_i> / e_i``
    (:func:`paramsym.groups.decompose.multiplicities`): counting needs no change of basis.
    ``progress`` shows a progress bar (stderr, TTY only) while irreducibles are computed.
    """
    from ..groups.decompose import multiplicities
    from ..groups.irreps import real_irreps

    irreps = real_irreps(rep.group, progress=progress)
    mults = multiplicities(rep, irreps)
    return [(ir.name, int(ir.dim), int(m)) for ir, m in zip(irreps, mults) if int(m) > 0]


def _is_d4_regular_copies(content: Sequence[tuple[str, int, int]], C: int) -> bool:
    pairs = sorted((k, m) for _, k, m in content)
    return pairs == [(1, C)] * 4 + [(2, 2 * C)]


def component_count(
    rep, heads: int, *, copies: int = 1, content: Sequence[tuple[str, int, int]] | None = None,
    rep_name: str = "", progress: bool = False, max_memory: int | None = None,
) -> ComponentCount:
    """``c_{G,d}(R^copies ⊗ ρ)`` with ``d = dim V / heads`` and the Theorem 9 bound.

    Args:
        rep: the base representation ``ρ`` (a :class:`paramsym.groups.reps.Representation`).
        heads: number of heads ``|H|`` (must divide ``dim V``).
        copies: ``C``; multiplicities scale by ``C`` (no decomposition of the large space).
        content: precomputed :func:`irreducible_content` of ``ρ`` (reused across ``copies``).
        rep_name: how to describe ``ρ`` in the result.
        progress: progress bar (stderr, TTY only) while the irreducibles are computed.
        max_memory: budget in bytes (default 2 GiB, :mod:`paramsym.groups.memory`) of the counting
            polynomials (``d + 1`` coefficients) and of the exact bound ``c^{2H}/H!``; a larger
            estimate raises :class:`~paramsym.errors.TooLargeError` before allocating.
    """
    import numbers

    from ..groups.reps import Representation

    if not isinstance(rep, Representation):
        raise ShapeError(f"rep must be a paramsym.groups.reps.Representation (e.g. paramsym.groups.reps.regular(group_by_name('D4'))); "
                         f"received {type(rep).__name__}.")
    for name, v in (("number of heads", heads), ("number of copies", copies)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < 1:
            raise ShapeError(f"{name} must be an integer >= 1; received {v!r}.")
    copies = int(copies)
    base = list(content) if content is not None else irreducible_content(rep, progress=progress)
    scaled = [(n, k, m * copies) for n, k, m in base]
    dim_v = sum(k * m for _, k, m in scaled)
    d = head_dimension(dim_v, int(heads))
    wide = math.prod(m + 1 for _, _, m in scaled) >= 2**62  # Python integers instead of int64
    check_memory(3 * dense_bytes(d + 1, itemsize=48 if wide else 8),
                 f"the counting polynomials for head dimension d = {d} (dim V = {dim_v}, {heads} heads, {copies} copies)",
                 max_memory, "Use fewer --copies or more --heads.")
    c = count_components([k for _, k, _ in scaled], [m for _, _, m in scaled], d)
    _check_bound_digits(c, int(heads))
    # the closed form counts a1+a2+b1+b2+2e = d: it applies whenever V ≅ R^d ⊗ R[D4]
    closed = d4_components_closed_form(d) if d >= 1 and _is_d4_regular_copies(scaled, d) else None
    return ComponentCount(
        group=rep.group.name,
        rep=rep_name or "rho",
        copies=copies,
        heads=int(heads),
        dim_v=dim_v,
        d=d,
        irreps=scaled,
        c=c,
        bound=theorem9_bound(c, int(heads)),
        closed_form=closed,
    )


def component_table(rep, copies: Iterable[int], heads: int, *, rep_name: str = "",
                    progress: bool = False, max_memory: int | None = None) -> list[ComponentCount]:
    """:func:`component_count` for each ``C`` in ``copies`` (one character computation of ``ρ``)."""
    content = irreducible_content(rep, progress=progress)
    return [component_count(rep, heads, copies=C, content=content, rep_name=rep_name, max_memory=max_memory)
            for C in copies]


def table_markdown(rows: Sequence[ComponentCount]) -> str:
    """Markdown table: C, dim V, d, c, closed form, bound (≈) and log10 bound."""
    out = [
        "| C | dim V | d | c | closed form | bound c^(2H)/H! | log10 bound |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cf = "" if r.closed_form is None else str(r.closed_form)
        lb = _log10(r.bound)
        out.append(
            f"| {r.copies} | {r.dim_v} | {r.d} | {r.c} | {cf} | {format_scientific(r.bound)} | "
            f"{'' if lb is None else f'{lb:.3f}'} |"
        )
    return "\n".join(out)
