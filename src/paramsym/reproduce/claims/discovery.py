"""[Discovery]'s claims, in the order of docs/reproductions.md: Table 1 (§6.2) and subnetwork lifting
(§6.3), which live with their experiments (:mod:`paramsym.experiments.discovery.table1.claims`,
:mod:`~paramsym.experiments.discovery.lifting.claims`); the pretrained transformer (§6.3): the closed
form's drift ratios (run ``compensation``: the ``compensate`` command) here and the learned action's
claims with their experiment (:mod:`paramsym.experiments.discovery.transformer.claims`); the affine
solver's dimensions (§6.1, App. F; run ``affine``: the ``affine`` command) here.
"""

from __future__ import annotations

from ...claims import REL, Claim, D, Measured
from ...experiments.discovery.lifting import claims as lifting
from ...experiments.discovery.table1 import claims as table1
from ...experiments.discovery.transformer import claims as transformer
from ...experiments.discovery.transformer.claims import P_TD_RANDOM, P_TD_UNC

__all__ = ["CLAIMS"]


def _comp_random(r):
    x = float(r["ratio_random"])
    return Measured(f"{x:,.0f}× (closed form, MiniLM L3 unit 7)", P_TD_RANDOM.at_least(x), {"ratio_random": x})


def _comp_unc(r):
    x = float(r["ratio_uncompensated"])
    return Measured(f"{x:,.0f}× (closed form, MiniLM L3 unit 7)", P_TD_UNC.at_least(x), {"ratio_uncompensated": x})


def _affine_dims(r):
    rows = {p: (int(v["dimension"]), int(v["expected"])) for p, v in r.items()}
    text = ", ".join(f"{p} {d}" for p, (d, _) in rows.items())
    detail = {p: {"dimension": v["dimension"], "expected": v["expected"], "gap": v.get("gap"),
                  "unknowns": v.get("unknowns"),
                  "residual_max": v.get("max_residual"), "status": v.get("status"), "seconds": v.get("seconds")} for p, v in r.items()}
    return Measured(text, all(d == e for d, e in rows.values()) and max(d for d, _ in rows.values()) >= 8,
                    {"dimensions": {p: d for p, (d, _) in rows.items()}, "detail": detail})


def _affine_commuting(r):
    lin, relu = float(r["linear2x2"]["commutativity"]), float(r["relu242"]["commutativity"])
    return Measured(f"‖[A_i, A_j]‖: linear2x2 {lin:.2g}, relu242 {relu:.1e}", lin > 1e-3 and relu < 1e-10,
                    {"linear2x2": lin, "relu242": relu})


_CLOSED_FORM: list[Claim] = [
    Claim("transformer-drift-random-closed-form", f"{D} §6.3, Fig. 3(a), Cor. 4.6",
          "compensated drift vs random translation at similar motion", "129× (Pythia-1B, learned)",
          f"{P_TD_RANDOM.ge()}; related: closed form (Cor. 4.6) on all-MiniLM-L6-v2, the paper learned it on Pythia-1B",
          "compensation", _comp_random, REL),
    Claim("transformer-drift-uncompensated-closed-form", f"{D} §6.3, Fig. 3(a), Cor. 4.6",
          "removing compensation raises drift", "49× (Pythia-1B, learned)",
          f"{P_TD_UNC.ge()}; related: closed form on all-MiniLM-L6-v2, the paper learned it on Pythia-1B",
          "compensation", _comp_unc, REL),
]
_AFFINE: list[Claim] = [
    Claim("affine-dimensions", f"{D} §6.1, App. F",
          "affine solver recovers algebras of up to 8 dimensions without being told the dimension",
          "up to 8", "every preset's dimension equals theory's (exact), and one is ≥ 8", "affine", _affine_dims),
    Claim("affine-commutation", f"{D} §6.1, App. F", "linear-network symmetries do not commute; ReLU rescalings do",
          "non-commuting / commuting", "linear2x2 commutator norm > 1e-3, relu242 < 1e-10", "affine", _affine_commuting),
]

CLAIMS: list[Claim] = [*table1.CLAIMS, *lifting.CLAIMS, *_CLOSED_FORM, *transformer.CLAIMS, *_AFFINE]
