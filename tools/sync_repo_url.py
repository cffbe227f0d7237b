"""Write every chapter's Colab badge and Colab setup cell from the repository URL in _config.yml.

The repository URL and branch are configured once, under ``repository:`` in ``_config.yml`` (the book's
launch buttons read them there too). A chapter carries them twice: in the *Open in Colab* badge of its
first markdown cell, and in its Colab setup cell, which pip-installs the companion package from the
repository. This script rewrites both in every chapter:

    python tools/sync_repo_url.py          # rewrite badges and setup cells in place
    python tools/sync_repo_url.py --check  # exit 1 if any chapter disagrees with _config.yml

Only the source of those two cells changes, so stored outputs stay valid. tests/test_conventions.py
runs the same check.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
BADGE_LINE = re.compile(r"^\[!\[Open in Colab\]\(_static/colab-badge\.svg\)\]\([^)]*\)$", re.MULTILINE)
SETUP_MARKER = "# Colab setup:"


def repository() -> tuple[str, str, str]:
    """(URL without trailing slash, branch, path_to_book) from _config.yml."""
    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]
    url = config["url"].rstrip("/").removesuffix(".git")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url):
        raise SystemExit(f"repository.url in _config.yml must look like https://github.com/OWNER/REPO; got {url!r}")
    return url, config.get("branch", "main"), (config.get("path_to_book") or "").strip("/")


def badge(notebook: Path) -> str:
    url, branch, book_path = repository()
    relative = notebook.resolve().relative_to(REPO_ROOT).as_posix()
    if book_path:
        relative = f"{book_path}/{relative}"
    colab = url.replace("https://github.com/", "https://colab.research.google.com/github/")
    return f"[![Open in Colab](_static/colab-badge.svg)]({colab}/blob/{branch}/{relative})"


def setup_source() -> str:
    url, branch, _ = repository()
    return (
        f"{SETUP_MARKER} install the companion package (model code + chart helpers). Does nothing elsewhere.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n"
        "    subprocess.run(\n"
        '        [sys.executable, "-m", "pip", "install", "--quiet",\n'
        f'         "transformer-book[charts] @ git+{url}@{branch}"],\n'
        "        check=True,\n"
        "    )"
    )


def problems_in(notebook: Path, fix: bool) -> list[str]:
    """What disagrees with _config.yml in one chapter; with ``fix``, rewrite it instead."""
    data = nbformat.read(notebook, as_version=4)
    cells = data.cells
    problems = []
    first_markdown = next((cell for cell in cells if cell["cell_type"] == "markdown"), None)
    text = "".join(first_markdown["source"]) if first_markdown else ""
    if not BADGE_LINE.search(text):
        problems.append(f"{notebook.name}: no Open in Colab badge line in the first markdown cell")
    elif BADGE_LINE.search(text).group(0) != badge(notebook):
        problems.append(f"{notebook.name}: Colab badge does not point at {badge(notebook)}")
        if fix:
            first_markdown["source"] = BADGE_LINE.sub(lambda _: badge(notebook), text)
    setup = [cell for cell in cells if cell["cell_type"] == "code" and "".join(cell["source"]).startswith(SETUP_MARKER)]
    first_code = next(cell for cell in cells if cell["cell_type"] == "code")
    if len(setup) != 1 or setup[0] is not first_code:
        problems.append(f"{notebook.name}: the first code cell must be the one Colab setup cell")
    elif "".join(setup[0]["source"]) != setup_source():
        problems.append(f"{notebook.name}: Colab setup cell does not install from {repository()[0]}")
        if fix:
            setup[0]["source"] = setup_source()
    if fix and problems:
        nbformat.write(data, notebook)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report instead of rewriting")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from export_package import chapter_notebooks

    all_problems = []
    for notebook in chapter_notebooks():
        all_problems += problems_in(notebook, fix=not args.check)
    for problem in all_problems:
        print(problem)
    if args.check:
        return 1 if all_problems else 0
    remaining = [p for notebook in chapter_notebooks() for p in problems_in(notebook, fix=False)]
    for problem in remaining:
        print("could not fix:", problem, file=sys.stderr)
    return 1 if remaining else 0


if __name__ == "__main__":
    raise SystemExit(main())
