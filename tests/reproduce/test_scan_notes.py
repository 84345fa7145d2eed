"""The development-notes exemption of the docs scan needs a dated label (issue 16, item 5).

A section is exempt only when its heading says ``Development notes (YYYY-MM[-DD], not
regenerated…)``; an undated or unlabelled "notes" heading is scanned like any other section, and
no docs page has such a heading.
"""

from pathlib import Path

import pytest

from paramsym.reproduce.scan import NOTES, NOTES_LABEL, hand_numbers, unlabelled_notes

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))


@pytest.mark.parametrize("heading, exempt", [
    ("## Development notes (2026-12, not regenerated; superseded by the generated table above)", True),
    ("### Transformer runs — development notes (2026-11-30, not regenerated)", True),
    (f"## Tried ({NOTES})", True),
    ("## Notes from development (2026-12-01, not regenerated)", True),
    ("## Notes from development (not regenerated)", False),  # no date
    ("## Development notes (2026-12)", False),  # no "not regenerated"
    ("## Development notes, not regenerated, 2026-12", False),  # the date not in the label's parenthesis
    ("## Notes", False),
    ("## Results (2026-12, not regenerated)", False),  # not a notes heading
])
def test_only_a_dated_labelled_heading_exempts_its_section(heading, exempt):
    text = "\n".join(["intro", heading, "ratio 271.6 and 0.25%", "#### sub 1.5e-3", "## Next", "back 0.973"])
    found = [tok for _, tok, _ in hand_numbers(text)]
    assert found == (["0.973"] if exempt else ["271.6", "0.25%", "1.5e-3", "0.973"]), heading
    assert bool(NOTES_LABEL.search(heading)) is exempt
    looks = "development" in heading.lower() or "not regenerated" in heading
    assert unlabelled_notes(text) == ([] if exempt or not looks else [(2, heading.lstrip("# "))])


def test_a_heading_in_a_code_block_is_not_a_section():
    text = "\n".join(["```", "## Development notes (2026-12, not regenerated)", "```", "value 0.973"])
    assert [tok for _, tok, _ in hand_numbers(text)] == ["0.973"] and unlabelled_notes(text) == []


@pytest.mark.parametrize("page", PAGES)
def test_every_notes_heading_on_the_docs_pages_is_dated_and_labelled(page):
    assert not unlabelled_notes((DOCS / page).read_text()), page
