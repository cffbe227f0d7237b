"""Every number in a chapter's Chinese text is a tested claim, or a constant that says why it is not.

The 中文小结 (or 中文导读) of every chapter is read, with its math (``$...$``) and code (`` `...` ``) set aside, and
chapter references (第 N 章) and list numbers too. Each number left, an Arabic figure or a Chinese one with a comparison
word (三分之二, 一百倍, 一个百分点, 约一半), must lie inside the prose of a claim registered in
tests/prose_claims/NN_name.json (whose number tests/test_prose_claims.py finds in the computing cell's
output), or inside a piece of tests/chinese_numbers.json, which says why it measures nothing (a date,
a definition, a setting). So a re-execution that changes a figure fails the prose claims, and a new
Chinese figure that no claim or constant covers fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from notebooks import sources

REPO_ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((REPO_ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
CONSTANTS = json.loads((REPO_ROOT / "tests" / "chinese_numbers.json").read_text(encoding="utf-8"))
SET_ASIDE = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`|第 \d+ 章|^\d+\. ", flags=re.DOTALL | re.MULTILINE)
NUMBER = re.compile(
    r"(?<![A-Za-z_\-/.\d])\d[\d,]*(?:\.\d+)?%?(?![A-Za-z_\d])"  # not inside GPT-2, float64, d_model
    r"|[一二两三四五六七八九十百千万]+(?:分之[一二三四五六七八九十]+|倍|个百分点)|约一半"
)


def chinese_summary(chapter: Path) -> str:
    found = [text for text in sources(chapter, "markdown") if text.startswith(("## 中文小结", "## 中文导读"))]
    assert len(found) == 1, f"{chapter.name}: {len(found)} 中文小结 cells"
    return found[0]


def numbers(text: str) -> list[tuple[int, int, str]]:
    """(start, end, number) of each number outside math, code and chapter references."""
    blanked = SET_ASIDE.sub(lambda match: " " * len(match.group()), text)
    return [(match.start(), match.end(), match.group().rstrip(",")) for match in NUMBER.finditer(blanked)]


def covered_spans(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    spans = []
    for piece in pieces:
        start = text.find(piece)
        while start >= 0:
            spans.append((start, start + len(piece)))
            start = text.find(piece, start + 1)
    return spans


def test_numbers_are_found():
    text = "## 中文小结\n占约三分之二，差 493 倍（$d = 512$，`top_k=5`），GPT-2 的 1,024 个词元，见第 10 章。"
    assert [number for _, _, number in numbers(text)] == ["三分之二", "493", "1,024"]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_every_chinese_number_is_a_claim_or_a_constant(chapter):
    text = chinese_summary(chapter)
    claim_file = REPO_ROOT / "tests" / "prose_claims" / f"{chapter.stem}.json"
    claims = json.loads(claim_file.read_text(encoding="utf-8")) if claim_file.exists() else []
    constants = CONSTANTS.get(chapter.stem, [])
    for constant in constants:
        assert constant["text"] in text, f"{chapter.stem}: the constant {constant['text']!r} is not in its 中文小结"
        assert constant["why"].strip(), f"{chapter.stem}: {constant['text']!r} says not why"
    spans = covered_spans(text, [claim["prose"] for claim in claims] + [c["text"] for c in constants])
    loose = [
        f"{number!r} in …{text[max(0, start - 12) : end + 6]}…"
        for start, end, number in numbers(text)
        if not any(low <= start and end <= high for low, high in spans)
    ]
    assert not loose, f"{chapter.stem}: Chinese numbers neither claimed nor constant:\n" + "\n".join(loose)
