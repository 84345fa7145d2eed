"""Census measurement (docs/census.md): the census against MergeKit's hand-written architecture files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...claims import Claim, Measured
from ..runs import RunSpec, kept

__all__ = ["CLAIMS", "RUNS", "render_census_mergekit"]

M = "[Measurement]"
MERGEKIT_QUICK = ("llama", "gpt2", "phi3", "gemma")
MERGEKIT_TIME = ("measured 100 s wall (one thread, the 2 shared cores under load) for the 12 tiny architectures; --quick: "
                 "4 of them")


@kept
def _mergekit(quick: bool, out: Path) -> dict[str, Any]:
    from ...census.mergekit_compare import compare

    return compare(list(MERGEKIT_QUICK) if quick else None)


def _mergekit_claim(r):
    """Every statement agrees; the census's group verified with motion; residual ties settled numerically."""
    a = {k: v for k, v in r["architectures"].items() if not v.get("missing")}
    ok = bool(a) and all(
        not v["disagree"] and v["census_error"] <= v["tolerance"] and v["census_motion"] > 0.5
        and (not v["procedural_residual"] or (v["residual_tied_error"] <= v["tolerance"] and v["residual_untied_error"] > 0.1))
        for v in a.values())
    stated = sum(v["statements"] for v in a.values())
    agree = sum(v["statements_agree"] for v in a.values())
    return Measured(f"{len(a)} architectures (MergeKit {r['mergekit'].get('version')}): {agree}/{stated} statements agree; "
                    f"census group verified on all: {all(v['census_error'] <= v['tolerance'] for v in a.values())}", ok,
                    {"mergekit": r["mergekit"], "architectures": a})


def render_census_mergekit(rows: dict[str, dict[str, Any]]) -> str:
    """The MergeKit agreement table of docs/census.md (block ``census-mergekit``)."""
    v = rows["census-mergekit"]["values"]
    mk = v["mergekit"]
    out = [f"MergeKit {mk.get('version')} (`{mk.get('source')}`, sha256 `{str(mk.get('sha256', '—'))[:16]}…`).", "",
           "| architecture | file | model tensors | listed by both | file only | model only | statements (agree / checked) "
           "| census adds groups to | census group: output change (tolerance) | motion |",
           "|---|---|---:|---:|---:|---:|---|---:|---|---:|"]
    notes = []
    for name, a in v["architectures"].items():
        out.append(f"| {name} | `{a['file']}` | {a['tensors']} | {a['listed_both']} | {len(a['only_mergekit'])} | "
                   f"{len(a['only_model'])} | {a['statements_agree']} / {a['statements']} | {a['census_adds']} | "
                   f"{a['census_error']:.1e} ({a['tolerance']:.0e}) | {a['census_motion']:.2f} |")
        if a["only_mergekit"]:
            notes.append(f"- **{name}**: the file lists {', '.join(f'`{n}`' for n in a['only_mergekit'])}, which the model "
                         "does not have as parameters (the model's `named_parameters` is right: buffers or a renamed "
                         "tensor).")
        if a["only_model"]:
            notes.append(f"- **{name}**: the file leaves out " + ", ".join(
                f"`{n}` (zeroing it changes the output by {c:.2g} relative: the tensor matters, the model is right)"
                for n, c in a["only_model_zeroed_change"].items()) + ".")
        if a["procedural_residual"]:
            notes.append(f"- **{name}**: the file's `procedural_spaces` tie the residual spaces of every layer into one "
                         f"(as the census's one `P_res`): one permutation of the whole stream changes the output by "
                         f"{a['residual_tied_error']:.1e}, independent permutations per layer boundary by "
                         f"{a['residual_untied_error']:.2g} — both sides agree, and the tie is necessary.")
    return "\n".join(out + ([""] + notes if notes else []))


RUNS: tuple[RunSpec, ...] = (
    RunSpec("census-mergekit", "python benchmarks/mergekit_agreement.py --json (needs MergeKit's wheel: pip download "
            "mergekit --no-deps -d ~/.cache/paramsym/mergekit, or an installed mergekit)", _mergekit(False), _mergekit(True), MERGEKIT_TIME,
            exact=True),
)
CLAIMS: tuple[Claim, ...] = (
    Claim("census-mergekit", f"{M} docs/census.md", "the census against MergeKit's hand-written architecture files, "
          "tensor by tensor", "aim: every checkable statement of the files agrees or is settled numerically",
          "every vocabulary-axis and space statement agrees with the census; the census's whole permutation group leaves "
          "every model unchanged to its tolerance (the census's one rule a priori: 10·(L+1)·√D·ε, ε of float32 where the "
          "model computes anything in float32, else of float64) with weight motion "
          "> 0.5; tied residual spaces ≤ the tolerance and untied per layer > 0.1", "census-mergekit", _mergekit_claim),
)
