"""Every chapter follows the book's conventions (book/contributing.md)."""

import json
import re

import pytest
import yaml

import sync_repo_url
from notebooks import REPO_ROOT, cells, chapters, printed, source, sources

CHAPTERS = chapters()
MAX_CHART_BYTES = 150_000  # keep pages light: sample or round the data of a chart that is larger


def test_there_are_chapters():
    assert CHAPTERS, "no chapters found in book/"


def test_toc_lists_exactly_the_chapters():
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [entry["file"] for part in toc["parts"] for entry in part["chapters"]]
    chapter_files = [f"book/{notebook.stem}" for notebook in CHAPTERS]
    assert [file for file in files if re.match(r"book/\d\d_", file)] == chapter_files
    for file in files + [toc["root"]]:
        assert any((REPO_ROOT / f"{file}{suffix}").exists() for suffix in (".md", ".ipynb")), file


def test_badges_and_setup_cells_agree_with_config(capsys):
    assert sync_repo_url.main(["--check"]) == 0, capsys.readouterr().out


def test_config_launch_buttons_point_at_colab():
    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert config["repository"]["branch"] == "main"
    assert config["html"]["use_download_button"] is True


def test_badge_url_is_the_colab_launch_url_for_the_notebook():
    url, branch, _ = sync_repo_url.repository()
    owner_repo = url.removeprefix("https://github.com/")
    for notebook in CHAPTERS:
        expected = f"https://colab.research.google.com/github/{owner_repo}/blob/{branch}/book/{notebook.name}"
        assert expected in sync_repo_url.badge(notebook)


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda path: path.stem)
def test_device_cell_prefers_cuda_then_mps_then_cpu(notebook):
    device_cells = [cell for cell in cells(notebook, "code") if "torch.cuda.is_available()" in source(cell)]
    assert len(device_cells) == 1
    text = source(device_cells[0])
    assert text.index("cuda") < text.index("mps") < text.index('torch.device("cpu")')
    assert "nbval-ignore-output" in device_cells[0]["metadata"].get("tags", [])


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda path: path.stem)
def test_seed_is_set_before_anything_random(notebook):
    sources = [source(cell) for cell in cells(notebook, "code")]
    seeded = next(i for i, text in enumerate(sources) if "torch.manual_seed(" in text)
    assert not any(re.search(r"torch\.(rand|randn|randint|randperm)\(", text) for text in sources[:seeded])


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda path: path.stem)
def test_executed_once_top_to_bottom_without_errors(notebook):
    counts = [cell["execution_count"] for cell in cells(notebook, "code") if source(cell).strip()]
    assert counts == list(range(1, len(counts) + 1)), "re-run with tools/execute_notebooks.py"
    errors = [
        output for cell in cells(notebook, "code") for output in cell["outputs"] if output["output_type"] == "error"
    ]
    assert not errors


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda path: path.stem)
def test_ignored_outputs_still_assert_something(notebook):
    # A cell whose output nbval ignores must check what matters itself (the device cell only prints).
    for cell in cells(notebook, "code"):
        if "nbval-ignore-output" in cell["metadata"].get("tags", []) and "torch.cuda.is_available()" not in source(
            cell
        ):
            assert "assert " in source(cell), f"ignored cell without an assertion:\n{source(cell)[:200]}"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda path: path.stem)
def test_charts_are_small(notebook):
    for cell in cells(notebook, "code"):
        for output in cell["outputs"]:
            html = "".join(output.get("data", {}).get("text/html", ""))
            if "altair-viz-" in html:
                assert len(html) < MAX_CHART_BYTES, f"a chart of {len(html)} bytes in:\n{source(cell)[:200]}"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda path: path.stem)
def test_outputs_hold_no_memory_addresses_or_local_paths(notebook):
    for cell in cells(notebook, "code"):
        text = json.dumps(cell["outputs"])
        assert not re.search(r"at 0x[0-9a-f]{6,}", text), f"memory address in the output of:\n{source(cell)[:200]}"
        assert str(REPO_ROOT) not in text and "/tmp/" not in text


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda path: path.stem)
def test_has_exercises_the_reader_attempts_and_checked_solutions(notebook):
    """At least three exercises: a stub tagged `exercise` whose check says "Not attempted yet", and a
    collapsed solution tagged `solution` whose check says "Correct"; plus a conceptual question with a
    collapsed answer."""
    markdown = "\n".join(sources(notebook, "markdown"))
    assert "## Exercises" in markdown
    code = cells(notebook, "code")
    tags = [set(cell["metadata"].get("tags", [])) for cell in code]
    stubs = [index for index, cell_tags in enumerate(tags) if "exercise" in cell_tags]
    solutions = [index for index, cell_tags in enumerate(tags) if "solution" in cell_tags]
    assert len(stubs) >= 3, f"{len(stubs)} cells tagged `exercise`, expected at least 3"
    assert len(solutions) >= len(stubs), "every exercise needs a solution cell tagged `solution`"
    for index in stubs:
        # The stub, run as is, is checked in its own cell or the next one: "not attempted", no error.
        checked = printed(code[index]) + (printed(code[index + 1]) if index + 1 < len(code) else "")
        assert "Not attempted yet" in checked, f"stub without its check:\n{source(code[index])[:200]}"
    for index in solutions:
        assert "hide-input" in tags[index], "a solution cell must be collapsed (tag `hide-input`)"
        assert "Correct" in printed(code[index]), f"solution does not pass:\n{source(code[index])[:200]}"
    assert re.search(r":class: dropdown|\{dropdown\}", markdown), "no conceptual question with a collapsed answer"
    assert "## 中文小结" in markdown or "## 中文导读" in markdown


def test_model_package_does_not_import_plotting_or_notebook_code():
    for module in (REPO_ROOT / "src" / "transformer_book").glob("*.py"):
        text = module.read_text(encoding="utf-8")
        assert not re.search(
            r"^\s*(import|from)\s+(altair|pandas|book_charts|IPython|matplotlib)", text, re.MULTILINE
        ), module


KEY_IDEAS = re.compile(r"^> \*\*Key ideas\*\*\n>\n((?:> .*\n?)+)", re.MULTILINE)
TEST_MACHINERY = re.compile(
    r"nbval|regression tests?|BOOK_DEVICE_TEST|seed 00\d|bit-identical|wall-clock|ignored outputs?"
    r"|\bthe (?:book's )?tests\b|\ba test\b|\btests? (?:compares?|checks?)\b|\bCI\b|headless"
    r"|not compared",
    re.IGNORECASE,
)
READER_PAGES = ["intro.ipynb", "playground.md", "playground_poems.md", "glossary.md", "bug_gallery.md"]


@pytest.mark.parametrize("page", [path.name for path in CHAPTERS] + READER_PAGES)
def test_reader_prose_never_speaks_of_the_test_machinery(page):
    """Tests, CI, nbval and the simulated device belong in contributing.md, not in what readers read."""
    path = REPO_ROOT / "book" / page
    if path.suffix == ".ipynb":
        texts = sources(path, "markdown")
    else:
        texts = [path.read_text(encoding="utf-8")]
    found = [match for text in texts for match in TEST_MACHINERY.findall(text)]
    assert not found, f"{page}: {found}"


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda path: path.stem)
def test_chapter_opens_with_its_idea_then_the_map(notebook):
    """Title, badge, two or three sentences, a key ideas box of 3 to 5 bullets; then the collapsed
    set-up cell and the map; the chapter's longer introduction comes after."""
    first, setup, here, map_cell = cells(notebook)[:4]
    text = source(first)
    number = int(notebook.stem[:2])
    assert text.startswith(f"# {number}. "), text[:60]
    badge = sync_repo_url.BADGE_LINE.search(text)
    key_ideas = KEY_IDEAS.search(text)
    assert badge and key_ideas, "the first cell needs the badge, then the idea, then the key ideas box"
    idea = text[badge.end() : key_ideas.start()].strip()
    sentences = re.findall(r"[.!?](?:\s|$)", idea)
    assert 2 <= len(sentences) <= 3, f"the idea in two or three sentences, not {len(sentences)}:\n{idea}"
    bullets = [line for line in key_ideas.group(1).splitlines() if line.startswith("> * ")]
    assert 3 <= len(bullets) <= 5, f"{len(bullets)} key ideas"
    assert text.rstrip().endswith(key_ideas.group(0).rstrip()), "nothing after the key ideas box"
    assert source(setup).startswith(sync_repo_url.SETUP_MARKER) and sync_repo_url.is_hidden(setup)
    assert source(here).startswith("**You are here.**")
    assert f"architecture(highlight={number})" in source(map_cell)
    assert "hide-input" in map_cell["metadata"].get("tags", [])


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda path: path.stem)
def test_opening_says_in_one_line_where_the_code_runs(notebook):
    """The opening cells (up to the first section) have one one-line paragraph about the `device`.
    (That no prose, the opening included, speaks of the test machinery is
    test_reader_prose_never_speaks_of_the_test_machinery.)"""
    opening = []
    for cell in cells(notebook):
        if cell["cell_type"] == "markdown" and source(cell).startswith("## "):
            break
        if cell["cell_type"] == "markdown":
            opening.append(source(cell))
    device_prose = [text for text in opening if "`device`" in text]
    assert len(device_prose) == 1 and "\n" not in device_prose[0].strip(), "one line about the device"


PRAGMA = re.compile(r"#\s*(noqa|fmt:\s*(skip|off|on)|type:\s*ignore|pragma)\b")


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_reader_code_has_no_tool_pragmas(chapter):
    """A reader's code carries no linter or formatter pragmas (contributing.md: tools stay out of it)."""
    found = [line.strip() for text in sources(chapter, "code") for line in text.splitlines() if PRAGMA.search(line)]
    assert not found, f"{chapter.name}: {found}"
