"""A Sphinx extension for what a page shows outside itself: its title, its link preview, its search.

* The home page's title. Sphinx titles a page "PAGE — BOOK"; the intro's heading is the book's
  title, so its tab read "The Transformer, from scratch — The Transformer, from scratch". The home
  page is titled with the book's title once.
* A link preview. Every page gets a meta description (its first paragraph of prose, or the book's
  description) and Open Graph tags (title, description, address, site name), and a canonical
  address: GitHub Pages' address of the repository in _config.yml (https://OWNER.github.io/REPO/).
* Chinese in the search box. Sphinx's English index splits text on non-word characters, so a run of
  Chinese characters up to the next punctuation mark is indexed as one "word", and a search for a
  word inside it (注意力 in a sentence of the 中文小结) finds nothing. The index keeps those runs
  and adds every sequence of one to four neighbouring characters, so a query of up to four
  characters (most Chinese words) is found exactly; a longer one is found inside the runs when no
  page holds it as a word of its own (Sphinx's search then matches indexed words that contain it).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from book_repository import repository
from docutils import nodes
from sphinx.search.en import SearchEnglish

DESCRIPTION = (
    "An interactive book that builds the Transformer from scratch in PyTorch, one component per "
    "chapter: every idea derived, coded, checked against PyTorch's own layers and charted."
)
MAX_DESCRIPTION = 200
LONGEST_TERM = 4  # characters
CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def chinese_terms(text: str) -> list[str]:
    """Every sequence of 1 to LONGEST_TERM neighbouring characters in each run of Chinese in ``text``
    (a run itself is already a word of Sphinx's English splitter)."""
    terms = []
    for run in CJK_RUN.findall(text):
        for size in range(1, min(LONGEST_TERM, len(run)) + 1):
            terms.extend(run[i : i + size] for i in range(len(run) - size + 1))
    return terms


class SearchEnglishAndChinese(SearchEnglish):
    """Sphinx's English search, with short sequences of Chinese characters indexed as well."""

    def split(self, input: str) -> list[str]:  # `input`: the name Sphinx gives it
        return super().split(input) + chinese_terms(input)


def shorten(text: str, limit: int = MAX_DESCRIPTION) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def first_paragraph(doctree) -> str:
    """The first paragraph of prose: not the Colab badge (an image), not a code cell's output."""
    if doctree is None:
        return ""
    for paragraph in doctree.findall(nodes.paragraph):
        if any(isinstance(node, nodes.image) for node in paragraph.findall()):
            continue
        if any(
            isinstance(parent, (nodes.literal_block, nodes.container, nodes.table)) for parent in _ancestors(paragraph)
        ):
            continue
        text = paragraph.astext().strip()
        if len(text) > 40:
            return text
    return ""


def _ancestors(node):
    while node.parent is not None:
        node = node.parent
        yield node


def meta_tags(title: str, description: str, url: str, site: str, home: bool) -> str:
    def tag(attribute: str, key: str, value: str) -> str:
        return f'<meta {attribute}="{key}" content="{html.escape(value, quote=True)}" />'

    return (
        "\n".join(
            [
                tag("name", "description", description),
                tag("property", "og:title", title),
                tag("property", "og:description", description),
                tag("property", "og:type", "website" if home else "article"),
                tag("property", "og:url", url),
                tag("property", "og:site_name", site),
                tag("name", "twitter:card", "summary"),
            ]
        )
        + "\n"
    )


def _add_meta(app, pagename, templatename, context, doctree) -> None:
    if "metatags" not in context:
        return
    home = pagename == app.config.master_doc
    site = context.get("docstitle") or app.config.html_title
    title = re.sub(r"<[^>]+>", "", html.unescape(context.get("title") or site))
    description = DESCRIPTION if home else shorten(first_paragraph(doctree)) or DESCRIPTION
    url = repository(app.srcdir).pages_url + ("" if home else f"{pagename}.html")
    context["metatags"] += meta_tags(title, description, url, site, home)


def home_page_title(text: str, book_title: str) -> str:
    """The home page's HTML with "<title>BOOK — BOOK</title>" made "<title>BOOK</title>"."""
    escaped = html.escape(book_title, quote=False)
    return text.replace(f"<title>{escaped} &#8212; {escaped}</title>", f"<title>{escaped}</title>", 1)


def _fix_home_title(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    page = Path(app.outdir) / f"{app.config.master_doc}.html"
    if page.exists():
        page.write_text(home_page_title(page.read_text(encoding="utf-8"), app.config.html_title), encoding="utf-8")


def _canonical_address(app, config) -> None:
    if not config.html_baseurl:
        config.html_baseurl = repository(app.srcdir).pages_url


def setup(app):
    app.add_search_language(SearchEnglishAndChinese)
    app.connect("config-inited", _canonical_address)
    app.connect("html-page-context", _add_meta)
    app.connect("build-finished", _fix_home_title)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
