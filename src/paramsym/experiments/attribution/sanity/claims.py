"""The lifting sanity claims ([Attribution] §2.2, known answers): a rotation-invariant target is
liftable with the first layer trainable and not with it frozen (runs ``sanity-trainable``,
``sanity-frozen``).
"""

from __future__ import annotations

from ....claims import A, Claim, Measured

__all__ = ["CLAIMS"]


def _sanity(expect_liftable: bool):
    def measure(r):
        rec = next(x for x in r["lifts"] if x["target"] == "eta")
        ok = rec["residual"] <= 1e-8 if expect_liftable else rec["residual"] > 0.1
        return Measured(f"residual {rec['residual']:.3g} ({'liftable' if rec['liftable'] else 'NOT liftable'})", ok,
                        {"residual": rec["residual"]})

    return measure


CLAIMS: list[Claim] = [
    Claim("lifting-sanity-trainable", f"{A} §2.2 (known answer)", "rotation-invariant target, first layer trainable",
          "liftable", "η residual ≤ 1e-8 (a known answer, not a number the paper prints: related)", "sanity-trainable",
          _sanity(True), "related"),
    Claim("lifting-sanity-frozen", f"{A} §2.2 (known answer)", "same, first layer frozen", "not liftable",
          "η residual > 0.1 (a known answer, not a number the paper prints: related)", "sanity-frozen",
          _sanity(False), "related"),
]
