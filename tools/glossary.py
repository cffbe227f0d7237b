"""Write book/glossary.md from book/terms.yml, the book's one terminology source.

book/terms.yml lists every term once: its English, the book's Chinese (the first name is the one to
use), d2l-zh's name (动手学深度学习 2.0) where d2l-zh treats the concept, the renderings met elsewhere,
the names the book does not use, a one-sentence meaning and its chapters; and the map of the book's
chapters to d2l-zh's sections. The page shows three views of it: the English glossary, the
中文 → English index, and the chapter map. Neither view is edited by hand, so they cannot drift apart.

    python tools/glossary.py          # rewrite book/glossary.md
    python tools/glossary.py --check  # exit 1 if book/glossary.md is not what terms.yml gives

tests/test_glossary.py runs the check, and refuses the `dropped` names in the book's Chinese text;
``chapter_terms`` gives the 本章术语 line of a chapter's 中文导读, which the test compares too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
TERMS = REPO_ROOT / "book" / "terms.yml"
GLOSSARY = REPO_ROOT / "book" / "glossary.md"
FIELDS = {"en", "zh", "d2l", "other", "dropped", "meaning", "chapters"}
REQUIRED = {"en", "zh", "meaning", "chapters"}

HEAD = """\
# Glossary (术语表)

Each term is given with the Chinese name this book uses, the name of
[d2l-zh](https://zh.d2l.ai) (《动手学深度学习》, 2.0) where that book treats the concept, and the chapter
that explains it; the [中文 → English index](#zh-en-index) below goes the other way, and
[the last table](#d2l-zh-map) maps the chapters to d2l-zh's sections. The glossary grows with the book.

% Written by tools/glossary.py from book/terms.yml: edit that file, then run the tool.

| English | 中文 | d2l-zh | Meaning | Chapter |
| --- | --- | --- | --- | --- |
"""

INDEX_HEAD = """
(zh-en-index)=
## 中文 → English index (中文术语索引)

For readers coming from Chinese texts. Each Chinese term, the one this book uses, is followed by
the other renderings you will meet elsewhere (the source notes, too, often write the English word
instead, `paddingMask` or `layer normal`), by d2l-zh's name, and by the English term used in this
book.

| 中文 | Other renderings | d2l-zh | English | Chapter |
| --- | --- | --- | --- | --- |
"""

MAP_HEAD = """
(d2l-zh-map)=
## Chapters and d2l-zh (与《动手学深度学习》的对应)

Readers who learned from d2l-zh find the same material in these sections; its names differ in places
(层规范化, 暂退法, 强制教学, 掩蔽, 批量, 验证集): the d2l-zh column above gives them.

| d2l-zh section | Chapters |
| --- | --- |
"""


def load_terms(path: Path = TERMS) -> dict:
    """terms.yml, checked: every term has its fields, and no name is both used and dropped."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    used = set()
    for term in data["terms"]:
        if not REQUIRED <= set(term) or set(term) - FIELDS:
            raise ValueError(
                f"{path.name}: term {term.get('en')!r} has fields {sorted(term)}, expected {sorted(FIELDS)}"
            )
        used.update(term["zh"])
    for term in data["terms"]:
        clash = used & set(term.get("dropped", []))
        if clash:
            raise ValueError(f"{path.name}: {sorted(clash)} is both a term of the book and dropped ({term['en']!r})")
    return data


def chapter_links(chapters: list[int]) -> str:
    names = {int(path.name[:2]): path.name for path in (REPO_ROOT / "book").glob("[0-9][0-9]_*.ipynb")}
    return ", ".join(f"[{number}]({names[number]})" for number in chapters)


def section_chapters(text: str) -> str:
    """ "4–9" -> links to 4 and 9 joined by a dash; "14 (BLEU)" -> a link to 14, then "(BLEU)"."""
    numbers, _, rest = text.partition(" ")
    parts = [chapter_links([int(number)]) for number in numbers.split("–")]
    return "–".join(parts) + (f" {rest}" if rest else "")


def table_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |\n"


def render(data: dict) -> str:
    """The glossary page: the terms in English, the same terms by their Chinese, then d2l's map."""
    terms = data["terms"]
    links = [chapter_links(term["chapters"]) for term in terms]
    english = [[t["en"], ", ".join(t["zh"]), t.get("d2l", ""), t["meaning"], link] for t, link in zip(terms, links)]
    chinese = [
        [", ".join(t["zh"]), ", ".join(t.get("other", [])), t.get("d2l", ""), t["en"], link]
        for t, link in zip(terms, links)
    ]
    sections = [[row["section"], section_chapters(row["chapters"])] for row in data["d2l_sections"]]
    lines = [HEAD, *map(table_row, english), INDEX_HEAD, *map(table_row, chinese), MAP_HEAD, *map(table_row, sections)]
    return "".join(lines).replace("|  |", "| |")


def chapter_terms(data: dict, chapter: int) -> str:
    """The 本章术语 line of a chapter's 中文导读: each term the chapter explains, 中文（English）."""
    names = []
    for term in data["terms"]:
        if chapter in term["chapters"]:
            chinese = "、".join(term["zh"])
            names.append(chinese if chinese == term["en"] else f"{chinese}（{term['en']}）")
    return "**本章术语**：" + "；".join(names) + "。"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if book/glossary.md is out of date")
    args = parser.parse_args()
    text = render(load_terms())
    if args.check:
        if GLOSSARY.read_text(encoding="utf-8") != text:
            print("book/glossary.md is not what book/terms.yml gives: run python tools/glossary.py")
            return 1
        print("book/glossary.md matches book/terms.yml")
        return 0
    GLOSSARY.write_text(text, encoding="utf-8")
    print(f"wrote {GLOSSARY.relative_to(REPO_ROOT)} ({len(load_terms()['terms'])} terms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
