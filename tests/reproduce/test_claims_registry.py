"""The claim registry covers every numbered claim of the seed papers (list fixed here, from the papers),
and each claim's fields are checked against something real: its paper key against docs/papers.md and
the papers' files (shared/seeds), its cited sections against the paper's section map, a measurement's
document against docs/, its run command against the CLI parser and the modules, and its ``measure``
against an empty result (it must not hold)."""

import re
from pathlib import Path

import pytest
from command_checks import check_documented_command

from paramsym.errors import UnknownClaimError
from paramsym.reproduce import CLAIMS, RUNS, Measured, get_claims
from paramsym.reproduce.claims import KINDS

#: Every numbered claim, read off the seed papers (shared/seeds) independently of the registry:
#: [Discovery] §6.2/Table 1 (0.037 %, 0.306 %, their ratio, 12 %, fits), §6.3 (5.8×; Pythia-1B
#: 129×, 49×, 0.069 %, 0.321 % → 0.058 %, also by the closed form of Cor. 4.6), §6.1/App. F
#: (algebras up to 8 dimensions; commuting / non-commuting), [Attribution] §3.1/App. C.2 (annulus
#: ‖δ‖ table: wedge −b and +c, full −b, init −b; fixed drift 321/1237/823), §2.2 lifting
#: criterion, §3.2/App. C.1 (Hamiltonian walk), App. A.5 (Reynolds ~1e-15; App. B is the ASRNN
#: architecture), [Attention] (33 C6-clusterings; D4 counts 4..130; C = 96: 2,000,425 and 1.631e96; Θ(C^64); R[D4]), and the
#: census figures (per head gl(d_k) ⊕ gl(d_v) on MiniLM; 80 on MHA with biases).
PAPER_CLAIMS = {
    "table1-composition-hybrid", "table1-composition-finite", "table1-composition-ratio", "table1-motion",
    "table1-fits", "lifting-subnetwork-ratio",
    "transformer-drift-random-closed-form", "transformer-drift-uncompensated-closed-form",
    "transformer-drift-random-learned", "transformer-drift-uncompensated-learned", "transformer-motion",
    "transformer-composition",
    "affine-dimensions", "affine-commutation",
    "annulus-wedge-resolved-b", "annulus-wedge-resolved-c", "annulus-full-resolved-b", "annulus-init-resolved-b",
    "annulus-fixed-drift-wedge", "annulus-fixed-drift-full", "annulus-eta-lifting-criterion",
    "hamiltonian-walk", "hamiltonian-reynolds",
    "attention-c6-clusterings", "attention-d4-counts", "attention-d4-c96", "attention-d4-growth", "groups-d4-regular",
    "census-minilm-attention", "census-mha-bias",
}


def test_registry_covers_every_paper_claim():
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids)), "duplicate claim ids"
    missing = PAPER_CLAIMS - set(ids)
    assert not missing, f"claims of the papers without a registry entry: {sorted(missing)}"


ROOT = Path(__file__).resolve().parents[2]
#: the papers' files: ``shared/seeds`` inside the checkout or beside it (the project's layout)
SEEDS = next((d for d in (ROOT / "shared" / "seeds", ROOT.parent / "shared" / "seeds") if d.is_dir()), None)
PAPER_KEYS = ("[Discovery]", "[Attribution]", "[Attention]")
#: a location in a paper: section, table, appendix, theorem, definition, example, corollary, figure
_LOCATION = re.compile(r"(§|Table |App\. |Thm\. |Def\. |Ex\. |Cor\. |Figs?\. )([A-Z]?[\d.]*\d|[A-Z])(?:\([a-z]\))?"
                       r"(?:[–-]([A-Z]?[\d.]*\d))?")
#: the result-reading errors the engine reports as "the run's result lacks what the claim reads"
_LACKS = (KeyError, TypeError, ValueError, IndexError, StopIteration, ZeroDivisionError)


def _papers_table() -> dict[str, list[str]]:
    """``key → titles`` from docs/papers.md's table of papers (a title is an ``*italic*`` span)."""
    out = {}
    for line in (ROOT / "docs" / "papers.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] in PAPER_KEYS:
            out[cells[0]] = re.findall(r"\*([^*]+)\*", cells[1])
    return out


def _section_rows(key: str) -> list[str]:
    """The first cells of the "KEY — section → module" table of docs/papers.md."""
    text = (ROOT / "docs" / "papers.md").read_text()
    part = text.split(f"## {key} — section → module", 1)[1].split("\n## ", 1)[0]
    return [ln.strip().strip("|").split("|")[0].strip() for ln in part.splitlines()
            if ln.startswith("|") and not ln.startswith(("| section", "|---"))]


def _locations(text: str) -> list[tuple[str, str]]:
    """``(kind, label)`` of each location in ``text``, a range ``a–b`` expanded (``§5.1–5.3`` gives
    5.1, 5.2, 5.3; ``Ex. 8–9`` gives 8, 9; ``App. D.1–D.2`` gives D.1, D.2); a list after one kind
    (``§3, App. C``) keeps each its own kind."""
    out = []
    for kind, first, last in _LOCATION.findall(text):
        kind = "Fig. " if kind.startswith("Fig") else kind
        out.append((kind, first))
        if last:
            head, _, a = first.rpartition(".")
            last_tail = last.rpartition(".")[2]
            if a.isdigit() and last_tail.isdigit():
                out += [(kind, f"{head}.{i}" if head else str(i)) for i in range(int(a) + 1, int(last_tail) + 1)]
            else:
                out.append((kind, last))
    return out


def _covered(loc: tuple[str, str], mapped: set[tuple[str, str]]) -> bool:
    """``loc`` is a mapped location, or a sub-location of one (``App. C.2`` under ``App. C``), or its parent."""
    kind, label = loc
    return any(k == kind and (m == label or label.startswith(m + ".") or m.startswith(label + ".")) for k, m in mapped)


def test_every_paper_key_names_a_seed_paper():
    """The key of each claim's source is a paper of docs/papers.md whose title is a file of shared/seeds."""
    papers = _papers_table()
    assert set(papers) == set(PAPER_KEYS) and all(papers.values()), papers
    if SEEDS is None:
        pytest.skip("shared/seeds is not in this checkout (the papers' files)")
    readme = (SEEDS / "README.md").read_text()
    for key in sorted({c.source.split()[0] for c in CLAIMS} - {"[Measurement]"}):
        assert key in papers, f"{key} is not a paper of docs/papers.md"
        rows = [ln for ln in readme.splitlines() if any(f"*{t}*" in ln for t in papers[key])]
        assert len(rows) == 1, f"shared/seeds/README.md names no (or several) files for {key}: {papers[key]}"
        files = re.findall(r"`([^`]+\.txt)`", rows[0].split("|")[1])
        assert files, rows[0]
        for name in files:
            head = " ".join((SEEDS / name).read_text()[:3000].split()).lower()
            # the file's opening names the paper (the first six words of one of its titles)
            assert any(" ".join(t.lower().split()[:6]) in head for t in papers[key]), (key, name)


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.kind != "measurement"], ids=lambda c: c.id)
def test_paper_claim_cites_sections_the_paper_has(claim):
    """Every section, table, appendix, theorem, definition or example a claim cites is one that
    docs/papers.md maps for that paper (a figure is cited beside its section)."""
    key = claim.source.split()[0]
    assert key in PAPER_KEYS, claim.source
    cited = _locations(claim.source)
    assert any(kind != "Fig. " for kind, _ in cited), f"{claim.id}: no section cited in {claim.source!r}"
    mapped = {loc for row in _section_rows(key) for loc in _locations(row)}
    unknown = [f"{k}{v}" for k, v in cited if k != "Fig. " and not _covered((k, v), mapped)]
    assert not unknown, f"{claim.id}: {unknown} are not sections of {key} in docs/papers.md"


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.kind == "measurement"], ids=lambda c: c.id)
def test_measurement_claim_names_its_document(claim):
    """A measurement's source is ``[Measurement] docs/AREA.md``: that page exists and shows the claim."""
    words = claim.source.split()
    assert words[0] == "[Measurement]" and len(words) == 2, claim.source
    page = ROOT / words[1]
    assert page.is_file(), f"{claim.id}: {words[1]} does not exist"
    assert claim.id in page.read_text(), f"{claim.id}: {words[1]} does not mention the claim"


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_claim_is_evaluable(claim):
    """Kind matches source; the run exists with a real command; ``measure`` reads the run's result and
    never reports a claim as holding on a result that lacks what it reads (an empty one)."""
    assert claim.kind in KINDS and (claim.kind == "measurement") == claim.source.startswith("[Measurement]")
    assert claim.run in RUNS, f"{claim.id}: no run {claim.run!r}"
    assert not check_documented_command(RUNS[claim.run].command), check_documented_command(RUNS[claim.run].command)
    try:
        measured = claim.measure({})
    except _LACKS:
        return  # the engine reports the row as an error
    assert isinstance(measured, Measured) and measured.holds is not True, \
        f"{claim.id}: an empty result holds ({measured})"


def test_unknown_claim_names_the_closest():
    with pytest.raises(UnknownClaimError) as e:
        get_claims(["attention-c6-clustering"])
    msg = str(e.value)
    assert "closest: attention-c6-clusterings" in msg and "--list" in msg and "\n" not in msg
    # a word shared with several ids lists several of them (not one arbitrary id)
    msg = str(pytest.raises(UnknownClaimError, get_claims, ["annulus"]).value)
    assert msg.count("annulus-") >= 3 and "table1" not in msg
    # nothing close: no unrelated suggestion
    msg = str(pytest.raises(UnknownClaimError, get_claims, ["bogus-claim"]).value)
    assert "no claim id is close" in msg and "closest" not in msg
    assert [c.id for c in get_claims(["all"])] == [c.id for c in CLAIMS]
    assert [c.id for c in get_claims(["all", "table1-fits"])] == [c.id for c in CLAIMS]
    with pytest.raises(UnknownClaimError):
        get_claims(["all", "bogus-claim"])
    with pytest.raises(UnknownClaimError):
        get_claims([])


def test_paper_claims_are_reproductions_or_related():
    paper = [c for c in CLAIMS if not c.source.startswith("[Measurement]")]
    # the numbered claims plus the two known-answer lifting checks of [Attribution] §2.2
    assert {c.id for c in paper} == PAPER_CLAIMS | {"lifting-sanity-trainable", "lifting-sanity-frozen"}
    assert {c.kind for c in paper} == {"reproduction", "related"}
    assert all(c.kind == "measurement" for c in CLAIMS if c.source.startswith("[Measurement]"))
