"""Numbers quoted in a chapter's prose are the numbers its cells print.

Each file ``tests/prose_claims/NN_name.json`` (NN_name: the chapter's notebook) lists claims:

    [{"prose": "an exact piece of a markdown cell, holding the number",
      "number": "0.257",
      "cell": "an exact piece of the source of the code cell that computes it"}]

The test finds the one markdown cell holding ``prose`` and checks that ``number`` is in it; finds the
one code cell whose source holds ``cell``; and checks that ``number`` appears in that cell's stored
output as a whole number (not as part of a longer one: "0.25" does not match "0.257"). Re-executing
a chapter after a change of the model then fails here when the prose still quotes the old figure.
A figure that the prose derives (a ratio, a difference) is printed by the cell that computes it.
"""

import json
import re
from pathlib import Path

import pytest

from notebooks import cells, output_text, source

REPO_ROOT = Path(__file__).resolve().parents[1]
CLAIM_FILES = sorted((REPO_ROOT / "tests" / "prose_claims").glob("*.json"))


def _claims():
    for path in CLAIM_FILES:
        for index, claim in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            yield pytest.param(path.stem, claim, id=f"{path.stem}-{index}")


def printed_as_whole_number(number: str, output: str) -> bool:
    """Whether ``output`` holds ``number`` as a whole number ("0.25" is not in "0.257"); a number the
    prose writes with thousands separators may be printed without them ("1,000" in a table's 1000)."""
    spellings = {number, number.replace(",", "")}
    return any(re.search(rf"(?<![\d.]){re.escape(n)}(?![\d])(?!\.\d)", output) for n in spellings)


def _one(notebook, kind, piece, chapter):
    found = [cell for cell in cells(notebook, kind) if piece in source(cell)]
    assert len(found) == 1, f"{chapter}: {len(found)} {kind} cells hold {piece!r} (expected 1)"
    return found[0]


def test_every_claim_file_names_a_chapter():
    for path in CLAIM_FILES:
        assert (REPO_ROOT / "book" / f"{path.stem}.ipynb").exists(), path.name


@pytest.mark.parametrize("chapter, claim", list(_claims()))
def test_prose_number_is_the_computed_number(chapter, claim):
    assert set(claim) == {"prose", "number", "cell"}, f"{chapter}: keys of {claim}"
    notebook = REPO_ROOT / "book" / f"{chapter}.ipynb"
    number = claim["number"]
    assert number in claim["prose"], f"{chapter}: {number!r} is not in its prose {claim['prose']!r}"
    _one(notebook, "markdown", claim["prose"], chapter)
    code = _one(notebook, "code", claim["cell"], chapter)
    output = output_text(code)
    assert printed_as_whole_number(number, output), (
        f"{chapter}: the prose says {number} ({claim['prose']!r}), but the cell "
        f"{claim['cell']!r} prints:\n{output[:2000]}"
    )
