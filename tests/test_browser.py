"""Open every page of the built book in headless Chromium, offline, and check that it works.

The book must be built first (scripts/test.sh does it: `jupyter-book build . -W`). The pages are served
on 127.0.0.1 only, and every request for anything else is refused and reported: the book must not need
a network. A page fails if it logs a JavaScript error, if it asks for an outside URL, if one of its
Altair charts did not draw (Vega renders an ``svg`` or ``canvas`` with class ``marks``), if it shows
fewer charts than its notebook's stored outputs hold, or if its maths did not typeset.

Every page is opened twice: at a laptop width (1280 px) in the light theme, and at a phone width
(390 px) in the dark theme (layout does not depend on the theme, so one visit checks both). The layout checks: no page pans sideways (the document is no wider than the window), no chart
is wider than the page's column, at 1280 px no code box is cut (a ``pre`` whose content is wider than
its box: the notebooks' 88-character lines must fit), every chapter shows at least one diagram (an
element whose aria-label starts with "Diagram:", which Vega writes from a chart's description), and
code hidden with the ``hide-input`` tag is collapsed. In the dark theme every chart must still draw.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest
import yaml
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from browser_support import local_only_tab, serve
from notebooks import cells

REPO_ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("BOOK_HTML", REPO_ROOT / "_build" / "html"))  # BOOK_HTML: test a book built elsewhere
WIDTHS = {"laptop": 1280, "phone": 390}
# The phone view also uses the dark theme: layout does not depend on the theme, so one visit checks both.
VIEWS = [("laptop", "light"), ("phone", "dark")]
AXE = REPO_ROOT / "tests" / "vendor" / "axe.min.js"
# What names the page's controls (axe-core): the theme's buttons, folded cells, the charts' menus.
NAMING_RULES = ["button-name", "label-content-name-mismatch", "summary-name", "link-name"]


def toc_pages() -> list[str]:
    """The pages the build makes: every file of _toc.yml, and Sphinx's own index, search and the
    forwarding index.html (read from the table of contents, so that the tests are known before the
    book is built: scripts/test.sh builds it beside the tests)."""
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"], *(chapter["file"] for part in toc["parts"] for chapter in part["chapters"])]
    return sorted([f"{file}.html" for file in files] + ["genindex.html", "index.html", "search.html"])


def built_pages() -> list[str]:
    return sorted(path.relative_to(SITE).as_posix() for path in SITE.rglob("*.html") if "_static" not in path.parts)


PAGES = toc_pages()


def charts_in_notebook(page: str) -> int:
    """How many Altair charts the page's notebook holds in its stored outputs (0 for non-notebook pages)."""
    notebook = (REPO_ROOT / page).with_suffix(".ipynb")
    if not notebook.exists():
        return 0
    return sum(
        1
        for cell in cells(notebook)
        for output in cell.get("outputs", [])
        if "altair-viz-" in "".join(output.get("data", {}).get("text/html", ""))
    )


@pytest.fixture(scope="module")
def server():
    if not (SITE / "index.html").exists():
        pytest.fail(f"{SITE} has no built book: run `jupyter-book build . -W` first (scripts/test.sh does)")
    return serve(str(SITE))


@pytest.fixture(scope="module")
def view_tab(browser):
    """One tab per view, going from page to page as a reader's tab does (a new tab for each
    page costs a renderer process's start, a seventh of a page's CPU time); each test clears
    the tab's records of outside requests and errors before it opens its page."""
    opened = {}

    def tab_for(width: int, dark: bool):
        if (width, dark) not in opened:
            opened[width, dark] = local_only_tab(browser, width, dark=dark)
        _, tab, outside_requests, errors = opened[width, dark]
        outside_requests.clear()
        errors.clear()
        return tab, outside_requests, errors

    yield tab_for
    for context, *_ in opened.values():
        context.close()


def test_every_page_is_tested():
    assert "book/01_positional_encoding.html" in PAGES, f"_toc.yml lost the first chapter: {PAGES}"
    built = built_pages()
    assert set(PAGES) <= set(built), f"_toc.yml's pages not built: {sorted(set(PAGES) - set(built))}"
    # a built page outside _toc.yml would go untested (one whose source is gone is an older build's)
    untested = [page for page in built if page not in PAGES and any(
        (REPO_ROOT / page).with_suffix(suffix).exists() for suffix in (".ipynb", ".md")
    )]  # fmt: skip
    assert not untested, f"built pages that _toc.yml does not list, so that no test opens them: {untested}"


def is_chapter(page: str) -> bool:
    return re.fullmatch(r"book/\d\d_[a-z0-9_]+\.html", page) is not None


LAYOUT_PROBLEMS = """(checkCode) => {
  const problems = [];
  const viewport = document.documentElement.clientWidth;
  const pageWidth = document.documentElement.scrollWidth;
  if (pageWidth > viewport + 1) {
    const culprits = [...document.querySelectorAll("body *")]
      .filter(e => e.getBoundingClientRect().right > viewport + 1 && !e.closest("pre, .vega-embed, table, div.math") && !(e.parentElement && e.parentElement.getBoundingClientRect().right > viewport + 1))
      .slice(0, 3).map(e => e.tagName.toLowerCase() + "." + [...e.classList].join("."));
    problems.push(`the page pans sideways: ${pageWidth} px wide in a ${viewport} px window (${culprits})`);
  }
  const article = document.querySelector(".bd-article") || document.body;
  const column = article.getBoundingClientRect();
  document.querySelectorAll("div[id^='altair-viz-']").forEach((chart, index) => {
    const drawn = chart.querySelector("svg.marks, canvas.marks");
    const box = (drawn || chart).getBoundingClientRect();
    if (box.right > column.right + 1 || box.width > column.width + 1) {
      problems.push(`chart ${index + 1} is ${Math.round(box.width)} px wide, its column ${Math.round(column.width)} px`);
    }
  });
  if (checkCode) {
    article.querySelectorAll("pre").forEach(pre => {
      if (pre.scrollWidth > pre.clientWidth + 1) {
        const line = [...pre.innerText.split("\\n")].sort((a, b) => b.length - a.length)[0] || "";
        problems.push(`a code box is cut (${pre.scrollWidth} > ${pre.clientWidth} px): "${line.trim().slice(0, 60)}..."`);
      }
    });
  }
  article.querySelectorAll(".cell_output table").forEach(table => {
    if (table.scrollWidth > table.clientWidth + 1 && table.getAttribute("tabindex") !== "0") {
      problems.push(`a table scrolls sideways but a keyboard cannot reach it (${table.scrollWidth} > ${table.clientWidth} px)`);
    }
  });
  article.querySelectorAll(".cell.tag_hide-input").forEach(cell => {
    const details = cell.querySelector("details.hide");
    if (!details || details.open) problems.push("a hide-input cell's code is not collapsed");
  });
  return problems;
}"""


@pytest.mark.parametrize(("device", "theme"), VIEWS, ids=[f"{d}-{t}" for d, t in VIEWS])
@pytest.mark.parametrize("page", PAGES)
def test_page_renders_offline(server, view_tab, page, device, theme):
    width = WIDTHS[device]
    tab, outside_requests, errors = view_tab(width, theme == "dark")
    tab.goto(f"{server}/{page}", wait_until="load")
    redirect = re.search(
        r'http-equiv="refresh"\s+content="\d+;\s*url=([^"]+)"', (SITE / page).read_text(encoding="utf-8"), re.IGNORECASE
    )
    if redirect:  # index.html only forwards to the first page: follow it, then test where it lands
        target = urljoin(f"{server}/{page}", redirect.group(1))
        tab.wait_for_url(target, timeout=10_000)
        tab.wait_for_load_state("load")
        page = urlparse(target).path.lstrip("/")

    expected_charts = charts_in_notebook(page)
    if expected_charts:
        # Vega renders asynchronously: wait until every chart container holds its drawn marks.
        try:
            tab.wait_for_function(
                """() => [...document.querySelectorAll("div[id^='altair-viz-']")]
                         .every(div => div.querySelector("svg.marks, canvas.marks"))""",
                timeout=20_000,
            )
        except PlaywrightTimeout:
            pytest.fail(f"{page}: charts did not draw in 20 s; outside requests {outside_requests}, errors {errors}")
    containers = tab.locator("div[id^='altair-viz-']").count()
    drawn = tab.locator("div[id^='altair-viz-'] :is(svg.marks, canvas.marks)").count()
    failed = tab.locator("div[id^='altair-viz-'] .error").all_inner_texts()

    if tab.locator(".math").count():
        tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20_000)
        tab.evaluate("() => MathJax.startup.promise")
        assert tab.locator("mjx-container").count() >= tab.locator(".math").count(), "maths did not typeset"
        assert tab.locator("mjx-merror").count() == 0, f"MathJax errors: {tab.locator('mjx-merror').all_inner_texts()}"

    problems = tab.evaluate(LAYOUT_PROBLEMS, width >= 1280)
    if device == "laptop":  # every control named by what it shows (once a page: the names do not depend on the view)
        tab.add_script_tag(path=str(AXE))
        unnamed = tab.evaluate(
            """async (rules) => (await axe.run(document, {runOnly: rules})).violations
                 .map(v => v.id + ": " + v.nodes.map(n => n.target.join(" ")).slice(0, 3).join(", "))""",
            NAMING_RULES,
        )
        problems += [f"a control is not named by what it shows ({found})" for found in unnamed]
    diagrams = tab.locator("[aria-label^='Diagram:']").count()
    dark = tab.evaluate("() => document.documentElement.dataset.theme")
    if theme == "dark":
        assert dark == "dark", f"{page}: the dark theme did not apply (data-theme={dark!r})"
    if is_chapter(page) and not diagrams:
        problems.insert(0, "no diagram (no element whose aria-label starts with 'Diagram:')")
    assert not problems, f"{page} at {width} px: " + "; ".join(problems)
    assert not outside_requests, f"{page} asked for outside URLs: {outside_requests}"
    assert not errors, f"{page} logged errors: {errors}"
    assert not failed, f"{page}: charts failed to render: {failed}"
    assert containers == expected_charts, f"{page}: {containers} chart containers, notebook has {expected_charts}"
    assert drawn == expected_charts, f"{page}: {drawn} of {expected_charts} charts drew"
