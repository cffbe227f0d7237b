"""A Sphinx extension that pins the chapters' setup cells of a published build to one commit.

Every chapter's setup cell installs the companion package from the branch named in ``_config.yml``
(``git+URL@main``, written by tools/sync_repo_url.py), which keeps moving. When ``BOOK_PIN_REF`` is set
(the publishing workflow sets it to the commit it builds), the built book installs that ref instead,
in the setup cell each page shows and in the notebook its download button gives
(``_sources/book/NN_name.ipynb``), so a chapter read or downloaded from the published book installs
the package it was built with. The notebooks in the repository are not changed. Without
``BOOK_PIN_REF`` (a local build) nothing is rewritten.

A chapter whose setup cell does not carry ``git+URL@BRANCH`` stops the build: a published book
that silently installs the moving branch is what this extension is for.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from book_repository import repository

VARIABLE = "BOOK_PIN_REF"
REF = re.compile(r"[0-9A-Za-z][0-9A-Za-z._/-]*")


def moving_spec(url: str, branch: str) -> re.Pattern:
    """``git+URL@BRANCH`` followed by anything but a character of a ref (so @main never matches @main2)."""
    return re.compile(re.escape(f"git+{url}@{branch}") + r"(?![0-9A-Za-z._/-])")


def pin(text: str, url: str, branch: str, ref: str) -> tuple[str, int]:
    """``text`` with every ``git+URL@BRANCH`` replaced by ``git+URL@REF``, and how many there were."""
    if not REF.fullmatch(ref):
        raise ValueError(f"{VARIABLE}={ref!r} is not a git ref")
    return moving_spec(url, branch).subn(f"git+{url}@{ref}", text)


def is_chapter(docname: str) -> bool:
    return re.fullmatch(r"book/\d\d_\w+", docname) is not None


def _pin_source(app, docname, source) -> None:
    ref = os.environ.get(VARIABLE)
    if not ref or not is_chapter(docname):
        return
    url, branch, _ = repository(app.srcdir)
    source[0], count = pin(source[0], url, branch, ref)
    if count == 0:
        raise RuntimeError(f"{docname}: no 'git+{url}@{branch}' in its setup cell to pin to {ref}")


def pin_downloads(outdir: str | Path, url: str, branch: str, ref: str) -> list[Path]:
    """Pin the notebooks the download button gives (``_sources/book/NN_*.ipynb``); return those
    rewritten (a notebook already pinned to ``ref`` by an earlier build is left as it is)."""
    pinned = []
    for notebook in sorted((Path(outdir) / "_sources" / "book").glob("[0-9][0-9]_*.ipynb")):
        text, count = pin(notebook.read_text(encoding="utf-8"), url, branch, ref)
        if count == 0 and moving_spec(url, ref).search(text):
            continue  # pinned by an earlier build with the same ref, and not copied again since
        if count == 0:
            raise RuntimeError(f"{notebook}: no 'git+{url}@{branch}' in its setup cell to pin to {ref}")
        notebook.write_text(text, encoding="utf-8")
        pinned.append(notebook)
    return pinned


def _pin_downloads(app, exception) -> None:
    ref = os.environ.get(VARIABLE)
    if exception is not None or not ref or app.builder.format != "html":
        return
    url, branch, _ = repository(app.srcdir)
    pin_downloads(app.outdir, url, branch, ref)


def _reread_when_the_ref_changes(app, env, added, changed, removed) -> list[str]:
    """A build kept from a run with another BOOK_PIN_REF (or none) would keep its pages: read the
    chapters again whenever the ref differs from the one the saved environment was built with."""
    ref = os.environ.get(VARIABLE) or ""
    if getattr(env, "pin_release_ref", "") == ref:
        return []
    env.pin_release_ref = ref
    return [docname for docname in env.found_docs if is_chapter(docname)]


def setup(app):
    app.connect("env-get-outdated", _reread_when_the_ref_changes)
    app.connect("source-read", _pin_source)
    app.connect("build-finished", _pin_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
