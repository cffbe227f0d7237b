"""A Sphinx extension that drops repeated <script> entries from every page, and the chart
scripts from the pages that draw no chart.

sphinx-thebe (0.3.1, which Jupyter Book 1 always loads) registers its inline configuration script
twice under Sphinx 7, so every page declares ``const THEBE_JS_URL`` twice and the browser throws
"Identifier 'THEBE_JS_URL' has already been declared". tests/test_browser.py fails on any JavaScript
error, so we keep the first copy of each script and drop the rest.
"""

from __future__ import annotations

# The chart scripts (_config.yml's html_js_files: Vega, Vega-Lite, vega-embed, 830 KB) are loaded only
# by a page that holds an Altair chart (its container's id starts with "altair-viz-"): not by the
# playground, which draws its maps as plain SVG, nor by the index, search and contributor's pages.
CHART_MARK = 'id="altair-viz-'
CHART_SCRIPTS = ("_static/vendor/vega", "_static/vega-offline.js", "_static/book-charts.js")


def _script_key(script) -> tuple:
    attributes = getattr(script, "attributes", {}) or {}
    # Inline scripts have filename None or "" depending on who registered them: treat both as "".
    return (getattr(script, "filename", str(script)) or "", tuple(sorted((k, str(v)) for k, v in attributes.items())))


def _drop_repeated_scripts(app, pagename, templatename, context, doctree) -> None:
    seen: set[tuple] = set()
    unique = []
    for script in context.get("script_files", []):
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    if CHART_MARK not in (context.get("body") or ""):
        unique = [script for script in unique if not (getattr(script, "filename", "") or "").startswith(CHART_SCRIPTS)]
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", _drop_repeated_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
