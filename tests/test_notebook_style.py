"""The notebooks' code fits its box: no code line is longer than MAX_LINE characters.

88 characters is what the book's code box holds at 1280 px (book/_static/book.css sets the code font
so that it does; tests/test_browser.py checks the rendered boxes). ruff reads .ipynb natively; this
test runs only its line-length rule (E501) on every notebook in book/, offline, in about a second.
Lines that are one unbreakable token (a long URL) are allowed by ruff, as usual.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
MAX_LINE = 88
NOTEBOOKS = sorted((REPO_ROOT / "book").glob("*.ipynb"))


def ruff() -> list[str]:
    candidates = [Path(sys.executable).with_name("ruff"), shutil.which("ruff")]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return [str(candidate)]
    pytest.fail("ruff is not installed: it is pinned in requirements.txt (bash scripts/setup.sh installs it)")


def ruff_check(arguments: list[str], cwd=REPO_ROOT) -> list[dict]:
    """The findings of ``ruff check`` with ``arguments`` (options, then paths), as its JSON report."""
    result = subprocess.run(
        [*ruff(), "check", "--no-cache", "--output-format=json", "--exit-zero", *arguments],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
    )
    return json.loads(result.stdout)


def long_lines(paths: list[Path]) -> list[dict]:
    return ruff_check(["--isolated", "--select", "E501", f"--line-length={MAX_LINE}", *map(str, paths)])


def test_there_are_notebooks():
    assert any(path.name.startswith("01_") for path in NOTEBOOKS), NOTEBOOKS


def test_ruff_catches_a_long_line(tmp_path):
    notebook = tmp_path / "long.ipynb"
    cell = {
        "cell_type": "code",
        "metadata": {},
        "execution_count": None,
        "outputs": [],
        "source": ["x = 1\n", "y = '" + "a" * MAX_LINE + "'\n"],
    }
    notebook.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    found = long_lines([notebook])
    assert [item["code"] for item in found] == ["E501"]
    assert found[0]["location"]["row"] == 2


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_code_lines_fit_the_code_box(notebook):
    found = long_lines([notebook])
    per_cell = Counter(item.get("cell", "?") for item in found)
    lines = [f"cell {item.get('cell', '?')}, line {item['location']['row']}: {item['message']}" for item in found]
    assert not found, (
        f"{notebook.name}: {len(found)} code lines longer than {MAX_LINE} characters "
        f"(in {len(per_cell)} cells); wrap them:\n" + "\n".join(lines[:15])
    )
