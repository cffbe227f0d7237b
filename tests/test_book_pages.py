"""What a page shows outside itself: its title, its link preview, its search; and the chapters' titles.

book/_ext/page_meta.py gives the home page its book title once (not "X — X"), every page a meta
description and Open Graph tags, and the search index every sequence of up to four Chinese characters. The
functions are checked here, and the built book (BOOK_HTML, default _build/html, which the test
command builds first) is checked for what they produce. Every chapter's title carries its Chinese
name in parentheses, as the glossary and the 中文小结 do.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import page_meta
import pytest
from book_repository import repository
from docutils.core import publish_doctree

from notebooks import sources

REPO_ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("BOOK_HTML", REPO_ROOT / "_build" / "html"))  # BOOK_HTML: a book built elsewhere
CHAPTERS = sorted((REPO_ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
BOOK_TITLE = "The Transformer, from scratch"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_every_chapter_title_has_its_chinese_name(chapter):
    title = sources(chapter, "markdown")[0].splitlines()[0]
    assert re.fullmatch(r"# \d+\. .+ \([^()]*[\u4e00-\u9fff][^()]*\)", title), title


def test_chinese_terms_are_sequences_of_up_to_four_characters():
    terms = page_meta.chinese_terms("Attention (注意力) and 多头, 位置编码器")
    assert terms == [
        "注",
        "意",
        "力",
        "注意",
        "意力",
        "注意力",
        "多",
        "头",
        "多头",
        "位",
        "置",
        "编",
        "码",
        "器",
        "位置",
        "置编",
        "编码",
        "码器",
        "位置编",
        "置编码",
        "编码器",
        "位置编码",
        "置编码器",
    ]
    assert page_meta.chinese_terms("no Chinese here") == []


def test_the_search_language_keeps_runs_and_adds_chinese_terms():
    language = page_meta.SearchEnglishAndChinese({})
    words = language.split("中文小结：残差连接让梯度通过每一层。 Residual connections")
    assert "残差连接让梯度通过每一层" in words and "residual" not in words and "Residual" in words
    for term in ("残", "残差", "梯度", "层"):
        assert term in words
        assert language.word_filter(language.stem(term)), f"Sphinx would drop {term!r}"


def test_the_home_page_title_is_the_book_title_once():
    page = f"<head><title>{BOOK_TITLE} &#8212; {BOOK_TITLE}</title></head>"
    assert page_meta.home_page_title(page, BOOK_TITLE) == f"<head><title>{BOOK_TITLE}</title></head>"
    other = f"<title>1. Positional encoding &#8212; {BOOK_TITLE}</title>"
    assert page_meta.home_page_title(other, BOOK_TITLE) == other


def test_the_description_is_the_first_paragraph_of_prose():
    doctree = publish_doctree(
        "Title\n=====\n\n.. image:: badge.png\n\n"
        "Attention treats its input as a set: shuffle the words of a sentence and each word's output "
        "stays the same, so this chapter gives every token its place in the sequence before anything "
        "else happens, with sines and cosines of many wavelengths that a model can read positions from.\n"
    )
    description = page_meta.shorten(page_meta.first_paragraph(doctree))
    assert description.startswith("Attention treats its input as a set")
    assert len(description) <= page_meta.MAX_DESCRIPTION + 1 and description.endswith("…")
    tags = page_meta.meta_tags('A "quoted" <title>', description, "https://x.github.io/y/", "Site", False)
    assert '<meta property="og:title" content="A &quot;quoted&quot; &lt;title&gt;" />' in tags
    assert '<meta name="description" content="Attention treats' in tags


def test_the_pages_address_comes_from_the_config():
    assert repository(REPO_ROOT).pages_url == "https://transformer-book.github.io/transformer-from-scratch/"


# --- The built book ------------------------------------------------------------------------------


def built(page: str) -> str:
    path = SITE / page
    if not path.exists():
        pytest.fail(f"{path} is missing: build the book first (`jupyter-book build .`; scripts/test.sh does)")
    return path.read_text(encoding="utf-8")


def test_the_built_home_page_title_and_preview():
    page = built("book/intro.html")
    assert f"<title>{BOOK_TITLE}</title>" in page
    assert '<meta property="og:type" content="website" />' in page
    assert f'<meta property="og:url" content="{repository(REPO_ROOT).pages_url}" />' in page


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_every_built_chapter_has_a_preview_of_its_own(chapter):
    page = built(f"book/{chapter.stem}.html")
    description = re.search(r'<meta name="description" content="([^"]*)" />', page)
    assert description and description.group(1) != page_meta.DESCRIPTION, chapter.name
    assert len(description.group(1)) <= page_meta.MAX_DESCRIPTION + 1
    for tag in ("og:title", "og:description", "og:url", "og:site_name"):
        assert f'<meta property="{tag}"' in page, tag
    assert f'href="{repository(REPO_ROOT).pages_url}book/{chapter.stem}.html"' in page  # canonical


def test_a_page_loads_the_search_index_and_the_chart_scripts_only_if_it_uses_them():
    # book/_templates/layout.html: the search index (1.2 MB) on search.html alone, since the theme's
    # search-as-you-type is off; book/_ext/dedupe_scripts.py: Vega only where an Altair chart is drawn.
    pages = sorted(path for path in SITE.rglob("*.html") if "_static" not in path.parts)
    loads = {
        path.relative_to(SITE).as_posix(): (
            "searchindex.js" in (text := path.read_text(encoding="utf-8")),
            "vendor/vega.min.js" in text,
            'id="altair-viz-' in text,
        )
        for path in pages
    }
    assert {page for page, (index, _, _) in loads.items() if index} == {"search.html"}
    assert {page for page, (_, vega, charts) in loads.items() if vega != charts} == set()
    with_charts = {page for page, (_, _, charts) in loads.items() if charts}
    assert "book/15_writing_poems.html" in with_charts and "book/playground.html" not in with_charts


def search_index() -> dict:
    text = built("searchindex.js")
    return json.loads(text[text.index("(") + 1 : text.rindex(")")])


def found(index: dict, query: str) -> set[str]:
    """The pages Sphinx 7's search (searchtools.js, performTermsSearch) finds for a one-word query: the
    exact word among the body's and the titles' words, and, for a query longer than two characters,
    every word that contains it, among the body's words unless it is one of them, and likewise among
    the titles' words."""
    hits = []
    for terms in (index["terms"], index["titleterms"]):
        if query in terms:
            hits.append(terms[query])
        elif len(query) > 2:
            hits += [files for term, files in terms.items() if query in term]
    pages = set()
    for files in hits:
        for number in [files] if isinstance(files, int) else files:
            pages.add(index["docnames"][number])
    return pages


@pytest.mark.parametrize("query", ["梯度", "残差", "注意力", "位置编码", "词", "束搜索"])
def test_chinese_words_of_the_summaries_are_found(query):
    index = search_index()
    containing = {
        f"book/{chapter.stem}"
        for chapter in CHAPTERS
        if any(
            text.startswith(("## 中文小结", "## 中文导读")) and query in text for text in sources(chapter, "markdown")
        )
    }
    assert containing, f"no 中文小结 contains {query!r}"
    assert containing <= found(index, query)


def test_beam_search_typed_in_chinese_finds_chapter_10():
    assert "book/10_decoding" in found(search_index(), "束搜索")


# --- Log scales in the stored charts ---------------------------------------------------------------

SPEC_START = re.compile(r"\}\)\((?=\{)")


def stored_charts(chapter: Path) -> list[dict]:
    """The Vega-Lite specifications of the chapter's stored Altair outputs."""
    charts = []
    for cell in json.loads(chapter.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            page = "".join(output.get("data", {}).get("text/html", ""))
            for start in SPEC_START.finditer(page):
                spec, _ = json.JSONDecoder().raw_decode(page, start.end())
                charts.append(spec)
    return charts


def log_scale_values(spec: dict) -> list[tuple[str, object]]:
    """(field, value) for every value that a log-scale channel of ``spec`` plots."""
    found = []

    def walk(node, data_name):
        if isinstance(node, dict):
            data_name = node.get("data", {}).get("name", data_name) if isinstance(node.get("data"), dict) else data_name
            for channel in (node.get("encoding") or {}).values():
                if isinstance(channel, dict) and (channel.get("scale") or {}).get("type") == "log":
                    rows = spec.get("datasets", {}).get(data_name, [])
                    found.extend((channel["field"], row.get(channel["field"])) for row in rows)
            for key, value in node.items():
                if key not in ("encoding", "datasets", "data"):
                    walk(value, data_name)
        elif isinstance(node, list):
            for item in node:
                walk(item, data_name)

    walk(spec, None)
    return found


def test_a_zero_on_a_log_scale_is_found():
    spec = {
        "data": {"name": "d"},
        "datasets": {"d": [{"x": 0.0}, {"x": 1.0}]},
        "encoding": {"x": {"field": "x", "scale": {"type": "log"}}},
    }
    assert log_scale_values(spec) == [("x", 0.0), ("x", 1.0)]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_log_scales_plot_only_positive_values(chapter):
    bad = [
        (field, value)
        for spec in stored_charts(chapter)
        for field, value in log_scale_values(spec)
        if not (isinstance(value, (int, float)) and value > 0)
    ]
    assert bad == []
