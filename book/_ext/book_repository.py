"""The book's repository, as ``repository:`` in _config.yml names it: the one reader of it.

The Sphinx extensions import it (jupyter-book puts book/_ext on their path): pin_release pins the
setup cells to a commit of this repository, page_meta gives every page its GitHub Pages address.
tools/sync_repo_url.py, which writes the badges and setup cells from it, loads it from its file
(book/_ext is not a package); the tests import it through pytest's pythonpath.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import yaml

GITHUB = re.compile(r"https://github\.com/([\w.-]+)/([\w.-]+)")


class Repository(NamedTuple):
    """Where the book lives: its GitHub URL (no trailing slash, no .git), branch and folder."""

    url: str
    branch: str
    path_to_book: str  # "" when the book is at the repository's root

    @property
    def pages_url(self) -> str:
        """GitHub Pages' address of the repository: https://OWNER.github.io/REPO/."""
        owner, name = GITHUB.fullmatch(self.url).groups()
        return f"https://{owner.lower()}.github.io/{name}/"


def repository(root: str | Path) -> Repository:
    """The repository named in ``root``/_config.yml; a URL that is not a GitHub repository's is refused."""
    config = yaml.safe_load((Path(root) / "_config.yml").read_text(encoding="utf-8"))["repository"]
    url = config["url"].rstrip("/").removesuffix(".git")
    if not GITHUB.fullmatch(url):
        raise ValueError(
            f"repository.url in _config.yml must look like https://github.com/OWNER/REPO; got {config['url']!r}"
        )
    return Repository(url, config.get("branch", "main"), (config.get("path_to_book") or "").strip("/"))
