"""Every chapter, the glossary and the bug gallery, as a reader meets them.

Each chapter has one open exercise that changes the model and asks for an explanation, with its
discussion collapsed; its 中文小结 has no line break inside a paragraph (a break renders as a stray
space between characters). The glossary has the entries the Chinese reader needs, every row names its
chapter, and the glossary's and the gallery's chapter links resolve. The checks read the pages'
structure (table cells, links, labels), not their sentences, so rewording a page does not break them.
"""

import re
from pathlib import Path

import pytest

from notebooks import sources

REPO_ROOT = Path(__file__).resolve().parents[1]
BOOK = REPO_ROOT / "book"
CHAPTERS = sorted(path for path in BOOK.glob("[0-9][0-9]_*.ipynb"))
OPEN_EXERCISE_START = re.compile(r"^\*\*Exercise \d+ \(open\): [^*]+\*\*")
COLLAPSED = re.compile(r"^:::\{admonition\} [^\n]+\n:class: dropdown\n\n.+?\n:::$", re.DOTALL | re.MULTILINE)
CHINESE = re.compile(r"[\u4e00-\u9fff]")


# Numbers held for chapters being written on other branches (18: the cost of training, issue 44).
RESERVED = {18}


def test_the_chapters_are_there():
    numbers = [int(path.stem[:2]) for path in CHAPTERS]
    assert numbers == sorted(set(numbers))
    assert set(numbers) | RESERVED >= set(range(1, max(numbers) + 1)), "a chapter number is missing"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_one_open_exercise_with_a_collapsed_discussion(chapter):
    """The discussion follows the exercise in its cell, or is the answer of the next cell's question
    (chapter 13 asks its open exercise's question that way)."""
    cells = sources(chapter, "markdown")
    found = [i for i, text in enumerate(cells) if OPEN_EXERCISE_START.match(text)]
    assert len(found) == 1, f"{chapter.name}: {len(found)} open exercises"
    here, after = cells[found[0]], cells[found[0] + 1] if found[0] + 1 < len(cells) else ""
    assert COLLAPSED.search(here) or COLLAPSED.search(after), f"{chapter.name}: no collapsed discussion"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_chinese_summary_paragraphs_are_single_lines(chapter):
    summaries = [text for text in sources(chapter, "markdown") if text.startswith("## 中文小结")]
    assert len(summaries) == 1, chapter.name
    for paragraph in summaries[0].split("\n\n")[1:]:
        lines = paragraph.split("\n")
        assert len(lines) == 1, f"{chapter.name}: a line break inside a paragraph: {lines[0][-20:]!r}"


def glossary_tables() -> dict[str, list[dict[str, str]]]:
    """The glossary's tables as rows of {column header: cell}, keyed by their first header."""
    tables: dict[str, list[dict[str, str]]] = {}
    header = None
    for line in (BOOK / "glossary.md").read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            tables[header[0]] = []
        elif set(line) - set("|- "):
            assert len(cells) == len(header), f"glossary row with {len(cells)} cells, not {len(header)}: {line}"
            tables[header[0]].append(dict(zip(header, cells, strict=True)))
    return tables


def names(cell: str) -> set[str]:
    """The terms a cell gives: "因果掩码, 前瞻掩码" gives both; "token (词元)" gives "token" and "词元"."""
    parts = re.split(r"[,;/]\s*|\s*\(|\)", cell)
    return {cell} | {part.strip() for part in parts if part.strip()}


def test_glossary_entries_for_the_chinese_reader():
    english, chinese = glossary_tables().values()
    assert english and chinese
    english_terms = set().union(*(names(row[next(iter(row))]) for row in english))
    for term in ("token", "cross-entropy", "dropout", "byte-pair encoding", "perplexity", "greedy decoding"):
        assert term in english_terms, term
    # The Chinese index: each term the book uses, then the renderings met elsewhere.
    index = {}
    for row in chinese:
        first, others = list(row.values())[:2]
        for term in names(first):
            index[term] = (names(first), names(others))
    for term in ("词元", "分词", "分词器", "字节对编码", "交叉熵", "困惑度", "随机失活", "嵌入", "词嵌入"):
        assert term in index, term
    for used, elsewhere in [("缩放因子", "放缩因子"), ("加权和", "权重和"), ("贪心解码", "贪婪解码")]:
        assert elsewhere in index[used][1], (used, elsewhere)
    assert "前瞻掩码" in index["因果掩码"][0]  # two names of one mask, both the book's


def chapter_links(text: str) -> list[str]:
    return re.findall(r"\]\((\d\d_\w+\.ipynb|#[\w-]+)\)", text)


def resolves(link: str) -> bool:
    if link.startswith("#"):
        label = f"({link[1:]})="
        return any(label in path.read_text(encoding="utf-8") for path in [*CHAPTERS, *BOOK.glob("*.md")])
    return (BOOK / link).exists()


@pytest.mark.parametrize("page", ["glossary.md", "bug_gallery.md"])
def test_the_chapter_links_resolve(page):
    links = chapter_links((BOOK / page).read_text(encoding="utf-8"))
    assert links, page
    broken = [link for link in links if not resolves(link)]
    assert not broken, f"{page}: {broken}"


def test_every_glossary_row_names_its_chapter():
    for table in glossary_tables().values():
        for row in table:
            assert chapter_links(list(row.values())[-1]), row


def test_gallery_names_the_measuring_chapter():
    """Each entry links the chapter that measures it, or measures it on the page (says how)."""
    text = (BOOK / "bug_gallery.md").read_text(encoding="utf-8")
    entries = re.split(r"\n(?=\(bug-[a-z0-9-]+\)=\n)", text)[1:]
    assert len(entries) >= 30
    for entry in entries:
        label = entry.split(")=")[0][1:]
        assert chapter_links(entry) or "**Measured" in entry, label
