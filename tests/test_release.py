"""The repository's front door keeps its promises: README, licence, version, lock labels, pinned pages.

* README.md opens with the book's online address (GitHub Pages' address of _config.yml's repository),
  stays under 1,500 words, and speaks to readers only; its light install names packages that cover
  every import of every chapter and that the lock pins, its kernel registration line works, and its
  three snippets print what it shows.
* The version is set in pyproject.toml only; the package reports it, CITATION.cff and CHANGELOG.md
  repeat it. The licence is MIT in SPDX form, with its files; the URLs derive from _config.yml.
* requirements.txt's three labelled parts are the packages' own dependency closures.
* book/_ext/pin_release.py pins every chapter's setup cell to a commit, and refuses a chapter it
  cannot pin.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.metadata
import importlib.util
import io
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pin_release
import pytest
import yaml
from book_repository import repository
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import sync_repo_url
from notebooks import chapters

REPO_ROOT = Path(__file__).resolve().parents[1]

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
MAINTAINING = (REPO_ROOT / "MAINTAINING.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CONFIG = yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))


def section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"no section '## {heading}'"
    return match.group(1)


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


# --- README.md -----------------------------------------------------------------------------------


def test_readme_opens_with_the_online_book():
    opening = README.split("\n## ", 1)[0]
    assert f"<{repository(REPO_ROOT).pages_url}>" in opening, repository(REPO_ROOT).pages_url
    assert "OWNER/REPO" not in README


def test_readme_is_short_and_speaks_to_readers():
    words = len(re.findall(r"\S+", README))
    assert words < 1500, words
    for word in ("nbval", "pytest", "test suite", "scripts/test.sh", " CI ", "tests/"):
        assert word not in README, word


def test_readme_colab_link_is_chapter_ones_badge():
    chapter_one = REPO_ROOT / "book" / "01_positional_encoding.ipynb"
    target = sync_repo_url.badge(chapter_one).rsplit("](", 1)[1].rstrip(")")
    assert f"[chapter 1]({target})" in README


LIGHT_INSTALL = ['.venv/bin/python -m pip install -c requirements.txt -e ".[charts]" ipykernel']
KERNEL_LINE = re.compile(r"^\.venv/bin/python -m ipykernel install --user (.*)$", re.MULTILINE)


def light_install_block() -> str:
    [block] = blocks(section(README, "Run a chapter on your machine"), "bash")
    return block


def test_readme_light_install_is_the_checked_command():
    block = light_install_block()
    url = repository(REPO_ROOT).url
    assert block.splitlines()[:3] == [f"git clone {url}.git", f"cd {url.rsplit('/', 1)[1]}", "python3 -m venv .venv"]
    for line in LIGHT_INSTALL:
        assert line in block.splitlines()
    assert KERNEL_LINE.search(block)


def requirement_closure(roots: list[str]) -> set[str]:
    """Canonical names of ``roots`` and everything they need here (installed metadata, markers of
    this machine; no network)."""
    seen, todo = set(), [Requirement(root) for root in roots]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in seen:
            continue
        try:
            distribution = importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # a dependency of this platform the lock leaves to pip (none on Linux)
        seen.add(name)
        for text in distribution.requires or []:
            needed = Requirement(text)
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in ["", *requirement.extras]
            ):
                todo.append(needed)
    return seen


LIGHT = ["transformer-book[charts]", "ipykernel"]


def locked() -> dict[str, tuple[int, str]]:
    """Canonical name -> (part of requirements.txt, 0 reader / 1 build / 2 tests, the line)."""
    parts, part = {}, -1
    for line in (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("# --- "):
            part += 1
        elif line.strip() and not line.startswith("#"):
            parts[canonicalize_name(Requirement(line).name)] = (part, line)
    return parts


def test_the_light_install_is_pinned_by_the_lock_and_light():
    closure = requirement_closure(LIGHT) - {"transformer-book", "setuptools"}
    lock = locked()
    assert closure - set(lock) == set(), "the light install would take unpinned packages"
    for heavy in ("jupyter-book", "pytest", "playwright", "sphinx", "nbval", "ruff"):
        assert heavy not in closure, heavy


def test_the_light_install_covers_every_import_of_every_chapter():
    provided = importlib.metadata.packages_distributions()
    closure = requirement_closure(LIGHT)
    missing = set()
    for notebook in chapters():
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(source)):
                names = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module]
                    if isinstance(node, ast.ImportFrom) and node.level == 0
                    else []
                )
                for name in names:
                    top = name.split(".")[0]
                    if top in sys.stdlib_module_names:
                        continue
                    distributions = {canonicalize_name(d) for d in provided.get(top, [])}
                    if not distributions & closure:
                        missing.add(f"{notebook.name}: {name}")
    assert missing == set()


def test_the_kernel_registration_line_works(tmp_path):
    arguments = KERNEL_LINE.search(light_install_block()).group(1)
    command = [sys.executable, "-m", "ipykernel", "install", "--user", *re.findall(r'"[^"]*"|\S+', arguments)]
    command = [part.strip('"') for part in command]
    # --user writes to Jupyter's data folder: here a temporary one.
    environment = {"PATH": "/usr/bin:/bin", "JUPYTER_DATA_DIR": str(tmp_path), "HOME": str(tmp_path)}
    subprocess.run(command, check=True, capture_output=True, env=environment)
    name = re.search(r"--name (\S+)", arguments).group(1)
    kernel = json.loads((tmp_path / "kernels" / name / "kernel.json").read_text())
    assert kernel["argv"][0] == sys.executable
    assert f'"{kernel["display_name"]}"' in arguments
    assert f"kernel *{kernel['display_name']}*" in README


SNIPPETS = section(README, "What the trained models do")


def snippet_pairs() -> list[tuple[str, str]]:
    code, shown = blocks(SNIPPETS, "python"), blocks(SNIPPETS, "text")
    assert len(code) == len(shown) == 3, (len(code), len(shown))
    return list(zip(code, shown))


@pytest.mark.parametrize("index", range(3), ids=["dates", "translator", "poet"])
def test_readme_snippet_prints_what_it_shows(index):
    code, shown = snippet_pairs()[index]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"README snippet {index + 1}", "exec"), {})  # noqa: S102
    assert printed.getvalue() == shown


# --- Version, licence, metadata ------------------------------------------------------------------


def test_one_version_everywhere():
    import transformer_book

    version = PYPROJECT["project"]["version"]
    assert transformer_book.__version__ == version == importlib.metadata.version("transformer-book")
    citation = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["version"] == version
    changelog = (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(version)}$", changelog, re.MULTILINE)


def test_licence_is_mit_in_spdx_form_with_its_files():
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert "License ::" not in " ".join(project["classifiers"])  # the SPDX field replaces them
    for name in project["license-files"]:
        assert (REPO_ROOT / name).is_file(), name
    licence = (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License") and "Permission is hereby granted, free of charge" in licence
    citation = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["license"] == "MIT"
    assert "CC BY 4.0" in (REPO_ROOT / "LICENSE-BOOK.md").read_text(encoding="utf-8")
    assert "CC BY 4.0" in section(README, "Licence") and "MIT" in section(README, "Licence")


def test_project_metadata_points_at_the_book():
    project = PYPROJECT["project"]
    url = repository(REPO_ROOT).url
    urls = project["urls"]
    assert urls["Homepage"] == urls["Documentation"] == repository(REPO_ROOT).pages_url
    assert urls["Repository"] == url and urls["Issues"] == f"{url}/issues"
    assert urls["Changelog"].startswith(f"{url}/blob/")
    citation = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["repository-code"] == url and citation["url"] == repository(REPO_ROOT).pages_url
    classifiers = project["classifiers"]
    for prefix in (
        "Framework :: Jupyter",
        "Intended Audience :: Education",
        "Topic :: Education",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ):
        assert prefix in classifiers, prefix
    assert project["authors"] and project["keywords"]


def test_contributing_points_to_the_chapter_guide():
    text = (REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "(book/contributing.md)" in text and "(MAINTAINING.md)" in text
    templates = {path.name for path in (REPO_ROOT / ".github" / "ISSUE_TEMPLATE").glob("*.yml")}
    assert {"erratum.yml", "chapter_fails.yml"} <= templates


def test_maintaining_names_every_tool():
    missing = [path.name for path in sorted((REPO_ROOT / "tools").glob("*.py")) if f"`{path.name}`" not in MAINTAINING]
    assert missing == []


# --- requirements.txt's labelled parts -----------------------------------------------------------


def test_the_lock_is_labelled_by_who_needs_what():
    lock = locked()
    reader = requirement_closure(LIGHT)
    build = requirement_closure(["jupyter-book"]) - reader
    expected = {name: 0 if name in reader else 1 if name in build else 2 for name in lock}
    misplaced = {
        lock[name][1]: ("reader", "build", "tests")[part] for name, part in expected.items() if lock[name][0] != part
    }
    assert misplaced == {}, f"move these lines to the part named: {misplaced}"


# --- The published setup cells --------------------------------------------------------------------

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_every_chapter_setup_cell_is_pinned_to_the_commit(monkeypatch):
    url, branch, _ = repository(REPO_ROOT)
    pinned_spec = f"transformer-book[charts] @ git+{url}@{COMMIT}"
    for notebook in chapters():
        text, count = pin_release.pin(notebook.read_text(encoding="utf-8"), url, branch, COMMIT)
        assert count == 1, notebook.name
        assert pin_release.is_chapter(f"book/{notebook.stem}")
        setup = next(cell for cell in nbformat.reads(text, as_version=4).cells if cell.cell_type == "code")
        assert setup.source == sync_repo_url.setup_source().replace(f'@{branch}"', f'@{COMMIT}"')
    # In Colab the pinned cell installs the commit.
    calls = []
    monkeypatch.setitem(sys.modules, "google.colab", object())
    monkeypatch.setattr(subprocess, "run", lambda command, check: calls.append(command))
    exec(setup.source, {})  # noqa: S102
    assert calls == [[sys.executable, "-m", "pip", "install", "--quiet", pinned_spec]]


def test_pinning_touches_only_the_branch_and_refuses_what_it_cannot_pin(tmp_path):
    url, branch, _ = repository(REPO_ROOT)
    assert pin_release.pin(f"git+{url}@{branch}2 git+{url}@{branch}", url, branch, "v1.0.0") == (
        f"git+{url}@{branch}2 git+{url}@v1.0.0",
        1,
    )
    with pytest.raises(ValueError):
        pin_release.pin("", url, branch, "; rm -rf /")
    sources = tmp_path / "_sources" / "book"
    sources.mkdir(parents=True)
    chapter = REPO_ROOT / "book" / "01_positional_encoding.ipynb"
    (sources / chapter.name).write_text(chapter.read_text(encoding="utf-8"), encoding="utf-8")
    assert pin_release.pin_downloads(tmp_path, url, branch, COMMIT) == [sources / chapter.name]
    assert f"git+{url}@{COMMIT}" in (sources / chapter.name).read_text(encoding="utf-8")
    assert pin_release.pin_downloads(tmp_path, url, branch, COMMIT) == []  # an incremental build
    with pytest.raises(RuntimeError):  # pinned to another ref: nothing left to pin, so the build stops
        pin_release.pin_downloads(tmp_path, url, branch, "another")


def test_the_extension_is_registered():
    extensions = CONFIG["sphinx"]["local_extensions"]
    assert extensions.get("pin_release") == "book/_ext"


# --- CITATION.cff and the issue templates match their schemas (check-jsonschema's offline copies) -----


def schema_complaints(schema: str, path: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    return "" if result.returncode == 0 else result.stdout + result.stderr


SCHEMAS = {
    "CITATION.cff": "vendor.citation-file-format",
    ".github/ISSUE_TEMPLATE/erratum.yml": "vendor.github-issue-forms",
    ".github/ISSUE_TEMPLATE/chapter_fails.yml": "vendor.github-issue-forms",
    ".github/ISSUE_TEMPLATE/config.yml": "vendor.github-issue-config",
}


@pytest.mark.parametrize("name", SCHEMAS)
def test_file_matches_its_schema(name):
    assert schema_complaints(SCHEMAS[name], REPO_ROOT / name) == ""


def test_a_broken_citation_is_caught(tmp_path):
    broken = tmp_path / "CITATION.cff"
    text = (REPO_ROOT / "CITATION.cff").read_text(encoding="utf-8")
    broken.write_text(text.replace("cff-version: 1.2.0", "cff-version: one"), encoding="utf-8")
    assert schema_complaints("vendor.citation-file-format", broken) != ""
