"""[Attention]'s claims: clustering counts, Theorem 9's components and growth, and D4's regular
representation (Def. 8, Ex. 8–9, Thm. 9).
"""

from __future__ import annotations

import math

from ...claims import Claim, Measured, Printed, T

__all__ = ["CLAIMS"]


def _c6(r):
    n = int(r["c6"]["count"])
    return Measured(str(n), n == 33, {"count": n})


def _d4_counts(r):
    cs = [int(row["c"]) for row in r["table"]["rows"]]
    return Measured(", ".join(map(str, cs)), cs == [4, 11, 24, 46, 80, 130], {"c": cs})


P_C96 = Printed("1.631e96", exact=True)


def _d4_c96(r):
    c, b = int(r["c96"]["c"]), float(r["c96"]["bound"])
    return Measured(f"c = {c:,}; bound {r['c96']['bound_sci']}", c == 2_000_425 and P_C96.near(b),
                    {"c": c, "bound": b})


def _d4_growth(r):
    rows = r["growth"]["rows"]
    (c1, b1), (c2, b2) = [(row["copies"], row["log10_bound"]) for row in (rows[-2], rows[-1])]
    slope = (b2 - b1) / (math.log10(c2) - math.log10(c1))
    return Measured(f"log–log slope {slope:.2f} (C = {c1}…{c2})", abs(slope - 64) <= 1.0, {"slope": slope})


def _d4_regular(r):
    reg = r["regular"]["representation"]
    ok = reg["decomposition"] == "A1 ⊕ A2 ⊕ B1 ⊕ B2 ⊕ 2E1" and max(reg["orthogonality_error"], reg["equivariance_error"]) < 1e-12
    c16 = r["copies16"]["representation"]
    return Measured(f"{reg['decomposition']}; errors {reg['orthogonality_error']:.2g} / {reg['equivariance_error']:.2g}", ok,
                    {"orthogonality_error": reg["orthogonality_error"], "equivariance_error": reg["equivariance_error"],
                     "copies16": {k: c16[k] for k in ("decomposition", "orthogonality_error", "equivariance_error")}})


CLAIMS: list[Claim] = [
    # [Attention]
    Claim("attention-c6-clusterings", f"{T} Def. 8, Ex. 8", "partial C6-clusterings of 3 heads", "33",
          "exactly 33", "attention", _c6),
    Claim("attention-d4-counts", f"{T} Thm. 9, Ex. 9", "c_{D4,C}(R^C ⊗ R[D4]) for C = 1..6",
          "4, 11, 24, 46, 80, 130", "exactly these", "attention", _d4_counts),
    Claim("attention-d4-c96", f"{T} Ex. 9", "C = 96 (token dimension 768): c and the bound c¹⁶/8!",
          "2,000,425; ≈ 1.631e96", f"c exact, bound within {P_C96.range_text()} (printed precision)", "attention",
          _d4_c96),
    Claim("attention-d4-growth", f"{T} Thm. 9", "eight heads, C regular copies: Ω(C^64) components", "Θ(C^64)",
          "log–log slope of the bound at large C within 64 ± 1 (the exponent is asymptotic: at C = 800…1000 the "
          "slope still approaches 64 from below)", "attention", _d4_growth),
    Claim("groups-d4-regular", f"{T} Ex. 9 (background)", "R[D4] = A1 ⊕ A2 ⊕ B1 ⊕ B2 ⊕ 2E1",
          "A1 ⊕ A2 ⊕ B1 ⊕ B2 ⊕ 2E1", "this decomposition, orthogonality and equivariance errors < 1e-12 (background the paper cites, not a "
          "number it prints: related)", "groups", _d4_regular, "related"),
]
