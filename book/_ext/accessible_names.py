"""A Sphinx extension that names the book's folded code cells by what they show.

myst-nb writes every folded cell's toggle as ``<summary aria-label="Toggle hidden content">`` around
the visible words "Show code cell source": a screen reader announces one name while the reader sees
another, and a voice-control user who says what they see is not understood (axe-core:
label-content-name-mismatch, serious). Without the aria-label the summary is named by its visible
words. The theme's colour-mode and search buttons are fixed the same way in book/_templates.
"""

from __future__ import annotations

TOGGLE = '<summary aria-label="Toggle hidden content">'


def _name_toggles_by_their_words(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body")
    if body and TOGGLE in body:
        context["body"] = body.replace(TOGGLE, "<summary>")


def setup(app):
    app.connect("html-page-context", _name_toggles_by_their_words)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
