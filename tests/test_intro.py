"""The intro's short path and time table describe the chapters as they are.

The short path names sections of chapters: each must be a section (`## ` heading) of its chapter, so
that renaming a section fails here instead of sending a hurried reader to a heading that no longer
exists. The time table has one row per chapter, and its estimates follow from the chapter's length:
reading at about 150 words a minute (within 10 minutes), and the exercises 30 minutes more.
"""

import re
from pathlib import Path

import pytest

from notebooks import sources

REPO_ROOT = Path(__file__).resolve().parents[1]
BOOK = REPO_ROOT / "book"
CHAPTERS = {int(path.name[:2]): path for path in sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))}


def _markdown(path):
    return "\n".join(sources(path, "markdown"))


def _section(intro, title):
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", intro, re.MULTILINE | re.DOTALL)
    assert found, f"the intro has no section '## {title}'"
    return found.group(1)


def _table_rows(section):
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[1:]]  # without the header


def _minutes(text):
    hours = re.search(r"(\d+) h", text)
    minutes = re.search(r"(\d+) min", text)
    assert hours or minutes, text
    return 60 * int(hours.group(1) if hours else 0) + int(minutes.group(1) if minutes else 0)


INTRO = _markdown(BOOK / "intro.ipynb")


def test_the_intro_gives_prerequisites_roadmap_short_path_and_times():
    for title in ("What you need first", "Roadmap", "The short path", "Time per chapter"):
        assert _section(INTRO, title).strip()


@pytest.mark.parametrize("row", _table_rows(_section(INTRO, "The short path")), ids=lambda row: row[0])
def test_short_path_sections_exist(row):
    number, sections = int(row[0]), row[1]
    assert number in CHAPTERS, f"the short path names chapter {number}, which does not exist"
    headings = [line[3:] for line in _markdown(CHAPTERS[number]).splitlines() if line.startswith("## ")]
    for title in sections.split("; "):
        assert any(heading.startswith(title) for heading in headings), (
            f"chapter {number} has no section '{title}': its sections are {headings}"
        )


def test_time_table_has_every_chapter_and_follows_from_its_length():
    rows = _table_rows(_section(INTRO, "Time per chapter"))
    numbers = [int(row[0].split(".")[0]) for row in rows]
    assert numbers == sorted(CHAPTERS), f"time table rows {numbers}, chapters {sorted(CHAPTERS)}"
    for row in rows:
        number, reading, with_exercises = int(row[0].split(".")[0]), _minutes(row[1]), _minutes(row[2])
        words = len(_markdown(CHAPTERS[number]).split())
        assert abs(reading - words / 150) <= 10, (
            f"chapter {number}: {words} words of prose read in about {words / 150:.0f} min, "
            f"the intro says {reading} min"
        )
        assert with_exercises == reading + 30, f"chapter {number}: {row}"
