"""ruff (pinned in requirements.txt, configured in pyproject.toml's [tool.ruff]) finds nothing in the
Python sources: the model package (which tools/export_package.py writes from the notebooks' export
cells, so a finding there is fixed in its chapter), the chart and exercise packages, the tests, the
tools and the book's Sphinx extension. (The notebooks' own check is tests/test_notebook_style.py.)"""

from __future__ import annotations

import re
import subprocess

from test_notebook_style import REPO_ROOT, ruff, ruff_check

LINTED = ["src/transformer_book", "src/book_charts", "src/book_exercises", "tests", "tools", "scripts", "book/_ext"]
CONFIG = REPO_ROOT / "pyproject.toml"


def findings(paths: list[str], cwd=REPO_ROOT) -> list[dict]:
    return ruff_check([f"--config={CONFIG}", *paths], cwd=cwd)


def test_the_linted_folders_exist():
    assert all((REPO_ROOT / folder).is_dir() for folder in LINTED), LINTED


def test_ruff_catches_a_mistake(tmp_path):
    # A missing comma between two strings of a list, and an unused import.
    (tmp_path / "bad.py").write_text('import os\n\nNAMES = [\n    "a"\n    "b",\n]\n')
    found = sorted(item["code"] for item in findings(["bad.py"], cwd=tmp_path))
    assert found == ["F401", "ISC004"], found


def test_sources_pass_ruff():
    found = findings(LINTED)
    lines = [f"{item['filename']}:{item['location']['row']}: {item['code']} {item['message']}" for item in found]
    assert not found, f"ruff check {' '.join(LINTED)}: {len(found)} findings:\n" + "\n".join(lines[:30])


FORMATTED = ["src", "tests", "tools", "scripts", "book/_ext"]


def unformatted(paths: list[str], cwd=REPO_ROOT) -> list[str]:
    """The files ``ruff format --check`` would rewrite (each folder's own ruff configuration)."""
    result = subprocess.run(
        [*ruff(), "format", "--check", "--no-cache", *paths], capture_output=True, text=True, cwd=cwd, check=False
    )
    assert result.returncode in (0, 1), result.stderr
    return sorted({match.group(1) for match in re.finditer(r"^\s*--> (.+?):\d+:\d+$", result.stdout, re.MULTILINE)})


def test_ruff_format_finds_an_unformatted_file(tmp_path):
    (tmp_path / "ugly.py").write_text("x = [1,2 ,3]\n")
    assert unformatted(["ugly.py"], cwd=tmp_path) == ["ugly.py"]


def test_sources_are_formatted():
    # The package is formatted in its chapters' export cells, at the code box's 88 characters
    # (src/transformer_book/ruff.toml), so the generated modules come out formatted.
    found = unformatted(FORMATTED)
    assert not found, "ruff format would rewrite: " + ", ".join(found)
