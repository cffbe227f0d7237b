"""What the browser tests share: Debian's Chromium, a local server, and a tab without the network.

tests/test_browser.py (every page of the built book) and tests/test_playground.py (the playground's
JavaScript model) both drive headless Chromium through Playwright; the ``browser`` fixture in
conftest.py launches it with these flags.
"""

from __future__ import annotations

import functools
import os
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlparse

import pytest

# The built book (`jupyter-book build .`), which the page tests open.
SITE = Path(os.environ.get("BOOK_HTML", Path(__file__).resolve().parents[1] / "_build" / "html"))

CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Offline: every host name but 127.0.0.1 fails to resolve, and no proxy is asked, so a
    # request for anything else fails (local_only_tab records it). Refusing in Chromium, not
    # in a Playwright route, costs no round trip to Python per request (a fifth of a page
    # load's CPU time), and a route would also turn off the HTTP cache.
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--no-proxy-server",
]


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("Chromium not found: install Debian's `chromium` (scripts/test.sh does) or set CHROMIUM")
    return path


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@functools.cache
def serve(directory: str) -> str:
    """Serve ``directory`` on 127.0.0.1 (for the whole session); return its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=directory))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}"


def page_url(page: str) -> str:
    """The URL of ``page`` of the built book, served on 127.0.0.1 (the test fails if it is not built)."""
    if not (SITE / page).exists():
        pytest.fail(f"{SITE / page} is not built: run `jupyter-book build .` first")
    return f"{serve(str(SITE))}/{page}"


def hash_of(tab) -> dict[str, str]:
    """The state a playground page keeps in its URL's hash."""
    return dict(parse_qsl(tab.evaluate("() => location.hash").removeprefix("#")))


def local_only_tab(
    browser,
    width: int = 1280,
    *,
    dark: bool = False,
    console_types: tuple[str, ...] = ("error",),
    motion: bool = False,
):
    """A new tab that records every request that is not for 127.0.0.1 (the browser's
    CHROMIUM_FLAGS make them fail).

    Returns (context, tab, outside requests, errors): uncaught exceptions, and console messages
    of ``console_types``. ``dark`` opens the page in the book theme's dark mode. The tab asks
    for reduced motion (the poem page then shows each poem whole, at once, rather than one
    character every 40 ms), unless ``motion``: the tests that watch the animation ask for it.
    """
    context = browser.new_context(
        viewport={"width": width, "height": 900}, reduced_motion="no-preference" if motion else "reduce"
    )
    if dark:  # pydata-sphinx-theme reads the reader's choice from localStorage
        context.add_init_script("localStorage.setItem('mode', 'dark'); localStorage.setItem('theme', 'dark');")
    outside, errors = [], []
    context.on(
        "request",
        lambda request: outside.append(request.url) if urlparse(request.url).hostname != "127.0.0.1" else None,
    )
    # A failed request is recorded with its URL; the console's "Failed to load resource" line
    # (no URL) is left out, so that the browser's own favicon request, which no page makes and
    # whose 404 reaches the console only when it lands in time, cannot fail a test.
    context.on(
        "response",
        lambda response: (
            errors.append(f"HTTP {response.status}: {response.url}")
            if response.status >= 400 and not response.url.endswith("/favicon.ico")
            else None
        ),
    )
    tab = context.new_page()
    tab.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    tab.on(
        "console",
        lambda message: (
            errors.append(f"console.{message.type}: {message.text}")
            if message.type in console_types and not message.text.startswith("Failed to load resource")
            else None
        ),
    )
    return context, tab, outside, errors


def script_tab(
    browser, directory, modules: dict[str, str], *, console_types: tuple[str, ...] = ("error", "warning"), **options
):
    """A local-only tab (``local_only_tab``) on a blank page of ``directory``, served on
    127.0.0.1, that imports ``modules`` (global name: path under it, e.g. ``{"TransformerBook":
    "playground/transformer.js"}``): each module's exports as one window-level object, a
    harness to call the playground's JavaScript (ES modules) from a test."""
    base = serve(str(directory))
    context, tab, outside, errors = local_only_tab(browser, console_types=console_types, **options)
    imports = "".join(f'import * as {name} from "./{path}";' for name, path in modules.items())
    exposed = ", ".join(modules)
    body = (  # a module script runs before the load event that goto waits for
        '<!doctype html><meta charset="utf-8"><script type="module">'
        f"{imports} Object.assign(window, {{{exposed}}});</script>"
    )
    context.route(f"{base}/harness.html", lambda route: route.fulfill(content_type="text/html", body=body))
    tab.goto(f"{base}/harness.html")
    return context, tab, outside, errors


def wait_for_translation(tab, text: str, *, drawn: bool = True, timeout: int = 60_000) -> None:
    """Wait until the translator page has translated ``text`` (and, if ``drawn``, drawn its
    attention chart)."""
    tab.wait_for_function(
        "([text, drawn]) => document.querySelector('#pg-attention').dataset.input === text "
        "&& (!drawn || document.querySelector('#pg-attention svg.marks') !== null)",
        arg=[text, drawn],
        timeout=timeout,
    )
