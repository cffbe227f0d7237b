"""Every chapter, the glossary and the bug gallery, as a reader meets them.

Each chapter has one open exercise that changes the model and asks for an explanation, with its
discussion collapsed; its 中文小结 has no line break inside a paragraph (a break renders as a stray
space between characters); the glossary and the gallery name the notes in words, never "seed 00N",
and the glossary has the entries the Chinese reader needs.
"""

import json
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
BOOK = REPO_ROOT / "book"
CHAPTERS = sorted(path for path in BOOK.glob("[0-9][0-9]_*.ipynb"))
OPEN_EXERCISE_START = re.compile(r"^\*\*Exercise \d+ \(open\): [^*]+\*\*")
COLLAPSED = re.compile(r"^:::\{admonition\} (Discussion|Answer)\n:class: dropdown\n\n.+?\n:::$", re.DOTALL | re.MULTILINE)
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def markdown_cells(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"]


def test_the_chapters_are_there():
    assert [path.stem[:2] for path in CHAPTERS] == [f"{n:02d}" for n in range(1, len(CHAPTERS) + 1)]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_one_open_exercise_with_a_collapsed_discussion(chapter):
    """The discussion follows the exercise in its cell, or is the answer of the next cell's question
    (chapter 13 asks its open exercise's question that way)."""
    cells = markdown_cells(chapter)
    found = [i for i, text in enumerate(cells) if OPEN_EXERCISE_START.match(text)]
    assert len(found) == 1, f"{chapter.name}: {len(found)} open exercises"
    here, after = cells[found[0]], cells[found[0] + 1] if found[0] + 1 < len(cells) else ""
    assert COLLAPSED.search(here) or COLLAPSED.search(after), f"{chapter.name}: no collapsed discussion"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_chinese_summary_paragraphs_are_single_lines(chapter):
    summaries = [text for text in markdown_cells(chapter) if text.startswith("## 中文小结")]
    assert len(summaries) == 1, chapter.name
    for paragraph in summaries[0].split("\n\n")[1:]:
        lines = paragraph.split("\n")
        assert len(lines) == 1, f"{chapter.name}: a line break inside a paragraph: {lines[0][-20:]!r}"


def test_glossary_entries_for_the_chinese_reader():
    text = (BOOK / "glossary.md").read_text(encoding="utf-8")
    assert "In the notes?" not in text
    first_column = {
        line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")
    }
    for term in ("词元", "分词, 分词器", "字节对编码", "交叉熵", "困惑度", "随机失活", "嵌入, 词嵌入"):
        assert term in first_column, term
    for english in ("token", "cross-entropy", "dropout", "byte-pair encoding (BPE)", "perplexity"):
        assert english in first_column, english
    # 缩放因子 and 加权和 lead; 因果掩码 stands beside 前瞻掩码
    assert "| 缩放因子 | 放缩因子 |" in text and "| 加权和 | 权重和" in text
    assert "| 因果掩码, 前瞻掩码 |" in text
    assert "| 贪心解码 | 贪婪解码, 贪心搜索 | greedy decoding | [10](10_decoding.ipynb) |" in text


def test_gallery_names_the_measuring_chapter():
    text = (BOOK / "bug_gallery.md").read_text(encoding="utf-8")
    entries = re.split(r"\n(?=\(bug-[a-z0-9-]+\)=\n)", text)[1:]
    assert len(entries) >= 30
    for entry in entries:
        label = entry.split(")=")[0][1:]
        names_chapter = re.search(r"\[[Cc]hapter \d+\]\((\d\d_\w+\.ipynb|#pitfall-)", entry)
        assert names_chapter or "**Measured here:**" in entry, label
