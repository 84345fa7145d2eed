"""The census's known answers ([Discovery] §6.1, App. F): attention dimensions of all-MiniLM-L6-v2
and of a biased MHA.
"""

from __future__ import annotations

from typing import Any

from ...claims import Claim, D, Measured

__all__ = ["CLAIMS"]


def _census_minilm(r):
    c = r["minilm"]
    att = int(c["attention_dimension"])
    expected = 6 * 12 * (32 ** 2 + 32 ** 2)
    return Measured(f"{att:,} attention (total {int(c['total_dimension']):,}; all verified: {c['all_verified']})",
                    att == expected and bool(c["all_verified"]),
                    {**_census_values(c), "presets": {name: _census_values(v) for name, v in r.items()}})


def _census_mha(r):
    c = r["mha-bias"]
    tot = int(c["total_dimension"])
    return Measured(f"{tot} (all verified: {c['all_verified']})", tot == 80 and bool(c["all_verified"]), _census_values(c))


def _census_values(c: dict[str, Any]) -> dict[str, Any]:
    errors = [e.get("verified_error") for e in c.get("symmetries", []) if e.get("verified_error") is not None]
    return {"parameters": c["parameters"], "attention": c["attention_dimension"], "total": c["total_dimension"],
            "key_bias": c.get("key_bias_dimension"), "by_kind": c.get("dimension_by_kind"),
            "worst": max(c.get("symmetries", []), key=lambda e: e.get("verified_error") or 0.0, default={}).get("kind"),
            "fraction": c["symmetric_fraction"], "max_error": max(errors) if errors else None,
            "entries": len(c.get("symmetries", [])), "dtype": c.get("dtype"), "seconds": c.get("seconds"),
            "all_verified": c["all_verified"]}


CLAIMS: list[Claim] = [
    # census ([Discovery] §6.1 known answers: per head gl(d_k) ⊕ gl(d_v))
    Claim("census-minilm-attention", f"{D} §6.1, App. F (known answers)",
          "attention symmetry per head is gl(d_k) ⊕ gl(d_v): all-MiniLM-L6-v2", "6·12·(32²+32²) = 147,456",
          "census attention dimension equals it, every entry verified (a formula on a model the papers do not use: "
          "related)", "census", _census_minilm, "related"),
    Claim("census-mha-bias", f"{D} App. F", "MHA with biases: 64 + 8 key-bias + 8 value-bias", "80",
          "census total = 80 (the affine solver's count, ours, not a number the paper prints: related), every "
          "entry verified", "census", _census_mha, "related"),
]
