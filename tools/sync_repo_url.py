"""Write the generated cells of every chapter: the Colab badge, the set-up cell, the solutions' titles.

The repository URL and branch are configured once, under ``repository:`` in ``_config.yml`` (the book's
launch buttons read them there too). A chapter carries them in two generated places:

* the *Open in Colab* badge in its first markdown cell. The badge image is inlined (a PNG ``data:``
  URI), so it shows in Colab, in a downloaded notebook and in the offline book alike;
* the set-up cell (the first code cell). In Colab it pip-installs the companion package from the
  repository. Anywhere else, if the package is missing, it stops at once with one message: the exact
  ``%pip install "transformer-book[charts] @ git+URL@BRANCH"`` line to run.

The set-up cell is out of the reader's way everywhere: its first line is a Colab form title
(``# @title ...``) and its metadata make it a collapsed form in Colab (``cellView: form``), a hidden
source in Jupyter (``jupyter.source_hidden``) and a collapsed input in the book (tag ``hide-input``).
Exercise solutions (code cells tagged ``solution``) get the same treatment, titled "Solution", so that
a reader who runs the chapter does not see them by accident either.

This script rewrites all of it in every chapter:

    python tools/sync_repo_url.py          # rewrite badges, set-up cells and solution cells in place
    python tools/sync_repo_url.py --check  # exit 1 if any chapter disagrees

Only the source and metadata of those cells change (the set-up cell prints nothing when the package
is installed), so stored outputs stay valid. tests/test_conventions.py runs the same check.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

import nbformat

from notebooks import chapters

REPO_ROOT = Path(__file__).resolve().parents[1]
# _config.yml's repository has one reader, book/_ext/book_repository.py, beside the Sphinx extensions
# that use it (book/_ext is not a package): load it from its file.
_spec = importlib.util.spec_from_file_location("book_repository", REPO_ROOT / "book" / "_ext" / "book_repository.py")
book_repository = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(book_repository)
# The Colab badge, inlined as a PNG data: URI so that it shows in Colab, in a downloaded notebook and
# in the offline book alike, with no file beside the notebook and no network. (Markdown renderers,
# MyST's markdown-it among them, refuse SVG data: URIs.) It is book/_static/colab-badge.svg rendered
# at 117x20 by headless Chromium:
#   chromium --headless=new --default-background-color=00000000 --window-size=117,20 \
#     --screenshot=badge.png page.html   # page.html: the SVG in a <body style="margin:0">
BADGE_PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAHUAAAAUCAYAAACzrHJDAAAG8klEQVR4nOyaCWwU1R/Hv3PsffaCHiC0Rajyhz/IH/54YaNY"
    "BTxQI0gkMR7BOwpqVBRjiEYEPBIVDzxijEfwwhNv661VK8jRsC3QC1rYHrs7e+/OjL83I9uuW2BRrIr7SZp9fe/Nm/d7v3Nm"
    "V6yuri4WRXG5qqo1HMcNxSGiceyLyDF48Em/Yoy0NBulptmiIAgPUN8FpFDk+OeiiC4+6hhfwXHC2yIpcwZyHDbELOVHiPTp"
    "Qo7DBkWwQtzXYJkrhLHFPq29udONnX5baqzEGMZoW0Bre0JOdMStyPH3IUOp40p6seA4DyoKpbT+7V0OvFM3DCeaujDCEkob"
    "a4nY8OyucnjCTuT460lT6tSRXiw5bYPW7gxYUN+eD1nhUDU0gJFCCPPdLdqYN27Cz5ILisqh0hZEBSn5jspNWNlchfVSPrKF"
    "1WaXVVtw3mQz4kkVVhOHT7fEsfLdEGIJDAqe+wpxzOJuBGPqQV133JEGLJxhhdPCI5pQ0RNS8HRtBF9s3f/Gt64sxKTb9n+/"
    "mnFGXDXditkP+PB7SCnVYYrjupO2aO3axmI8+NlRSMiC9r+dj+PBo+th5hRweTKWfvcf9MZMqUWm5e3GgmHb6K8JN22diJBi"
    "yObeuJo2Pv8EM+av8qNpt4wCO4fnrnQjz8bjxhckDAZXPRNAJHFwCh03XMTTC1xYvEbCa9/HtL4SN48pFdnJ/WeTUur40l44"
    "zQnskUxpCmUcbQ9oClUNCvJGxzCm1Y9vm4ekxj/vGYJzitpQRIZRRbn2R6kgm3vjomkWrHg7pCmU0R1UcfvLdFDXu3Ev9U8c"
    "IWLRDBu8koJ8UriiAEtfD+H77bo3XH0qWfMk3bjaumXc8WoQ7T0Klsy2obxIgNPKw0Ln3Ngp4+aXJMSSmXtYdbEz5alrF7rR"
    "SHupHCLAbuaw9ocoVn0Uybjmmhor3lkfSymU0eFT8Ea9/v8E2vetZ9ngIi9WyF4e+ziMN+tjGeusvsxJMhoQontvaE2Q7EEE"
    "IrqBmQ3MwF0Dyn0g+L2N8oKg9tnU5UpTKGO4Oax9SjzZAA1VFgbTV6E42hzVC6kRljCywW3lUOTg8JUnntZf35zUBDuqVN/D"
    "qGIBy0nBs1b4sPrTCO6Za9f6z5howswJRsx/1I9Tl/Vq1909x5Fap9gt4PKn/Ji10gd2TOdSiM8GnlLC3Id8qKE150w1Y2Sh"
    "kDGHGcz+Dvi+Cx342pPA6ct7ae9BLJ/nQKmbz5j3OCn7f0u66V49SJJdX1vTV3BWkfzPfx3R5H5/YzwldzakPFX9NQLJSuak"
    "vcFJ/fUFhaoONOfgXl4IfHbzduyRsbFNdzFm7SvogBzkRdOqDFqYfvwSvTgz0NmX5vUpoG5bXPN8xq5eGWNKhKzu99GmGBm1"
    "3t7tV1BVJqC5S0a2DHHyGF4gaN7JqG1IwNORxORKA974Md1b2f7vvcCOI4tFys0cOn19h7+d5H5vg27wqz8JawrPt3GUuw+c"
    "KlJK3datW3mlVvWyC/uUxKpbhlNJakONXkfaIjx1llt0790etiEb2IF7JRXHjzZizXfRVD8LuUzAhl2y1h4Io6gb1pt0SMve"
    "Cg04p79xshAo8NkZXf/rWNswwHU7vDImU/586Ztoxhize5Wu6x/qmZH89oXd2DIRd51vx6LnJfzcGsJp442Yd6xlwH1oa6mZ"
    "a+yLlL/UtxVgt2RGqSuCS6c2oc8/gU0hF6K0Ihfn4PVYsL69r8LlaN68kmYUGePYQ8XT5pAb2fLsFxFcTxXkqKG6FzFLvGuO"
    "Ha/UxeAN6FJV0hirBhkLTraglXInM4jahjjOm2LW8hfDSlNOHmvEYLDqwzBmTTDhhplWuKz6SbNC6exjTJp3t1NkuOIUXUEn"
    "jjGQJwqoa0oP10yuNsr/X1GYlqIqTh9vyhgfSO5sSLlCnPLoI59XYems9Tj3vy2YUNaNTZ15EDhVewlRyEcQbDBD7OZwZ8VG"
    "bKWXDjyNjbFJqZz75M5KJNQs4yrxCB1OjCrPhy9ypj3S3L+uz/s8HTIupceem8+0IUwFxeI1ekRYR6FpWH4Yy+bqUaMsn9eM"
    "5JPNcfzZbGhN4pIn/Fg004bz/2/WiiQfPdI8WasXVTeQ97FC6exJZi2isAJoly89r7Ewf+HxZnxwSx66qBDc2UtFaL8gty+5"
    "s4GbPn16mvqnjPBiYfUWrRLuTyBqwNovj0C10QuHmF5GSkkRT7SPwk/9nlEPxbc0f/R57d9KRtKqaynClWuOJe/sRZE9qgXh"
    "rqAZGzvySLFGrBPLUGUNoMAQ08Z6EiY0kNdK8uCEvhwHJsNTDxW571P/OlgC9CPHYQMvh8GrqroOOQ4bTJEdraIsywtFUUwc"
    "6p+z5Bhc9v6cxSA1zf4FAAD//6dIYPsAAAAGSURBVAMAtvDUSKbswEEAAAAASUVORK5CYII="
)
# Any image source (a relative path to _static/colab-badge.svg, say): --fix rewrites the line to badge()'s.
BADGE_LINE = re.compile(r"^\[!\[Open in Colab\]\([^)\s]*\)\]\([^)]*\)$", re.MULTILINE)
SETUP_MARKER = "# @title Set-up"
SETUP_TITLE = f"{SETUP_MARKER}: in Colab, installs the book's companion package"
SOLUTION_TITLE = "# @title Solution"
# A markdown cell of this heading explaining the set-up cell is refused (--fix removes it): the
# collapsed cell's title says what it does.
SETUP_PROSE_HEADING = "## Setup"
HIDDEN = {"cellView": "form", "jupyter": {"source_hidden": True}}  # Colab, Jupyter


def repository() -> tuple[str, str, str]:
    """(URL without trailing slash, branch, path_to_book): _config.yml's repository, read by its one reader."""
    try:
        return book_repository.repository(REPO_ROOT)
    except ValueError as error:
        raise SystemExit(str(error)) from None


def badge_image() -> str:
    """The Colab badge as a data: URI (no file or network needed wherever the notebook is opened)."""
    return "data:image/png;base64," + BADGE_PNG_BASE64


def badge(notebook: Path) -> str:
    url, branch, book_path = repository()
    relative = notebook.resolve().relative_to(REPO_ROOT).as_posix()
    if book_path:
        relative = f"{book_path}/{relative}"
    colab = url.replace("https://github.com/", "https://colab.research.google.com/github/")
    return f"[![Open in Colab]({badge_image()})]({colab}/blob/{branch}/{relative})"


def package_spec() -> str:
    """What pip installs: the companion package with its chart extra, from the configured branch."""
    url, branch, _ = repository()
    return f"transformer-book[charts] @ git+{url}@{branch}"


def companion_modules() -> list[str]:
    """The top-level packages of the companion distribution (src/*/__init__.py)."""
    return sorted(path.parent.name for path in (REPO_ROOT / "src").glob("*/__init__.py"))


def install_line() -> str:
    return f'%pip install "{package_spec()}"'


def setup_source() -> str:
    url, branch, _ = repository()
    ours = ", ".join(f'"{name}"' for name in companion_modules())
    return (
        f"{SETUP_TITLE}\n"
        "# (anywhere else, it stops with the install line if the package is missing)\n"
        "import importlib.util\n"
        "import sys\n"
        "\n"
        "PACKAGE = (\n"
        '    "transformer-book[charts] @ "\n'
        f'    "git+{url}@{branch}"\n'
        ")\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n"
        '    pip = [sys.executable, "-m", "pip", "install", "--quiet", PACKAGE]\n'
        "    subprocess.run(pip, check=True)\n"
        "else:\n"
        f"    needed = [{ours},\n"
        '              "altair", "pandas", "torch"]\n'
        "    missing = [name for name in needed if importlib.util.find_spec(name) is None]\n"
        "    if missing:\n"
        "\n"
        "        class PackageMissing(ModuleNotFoundError):\n"
        "            def _render_traceback_(self):  # Jupyter shows this message, not a traceback\n"
        "                return [str(self)]\n"
        "\n"
        "        raise PackageMissing(\n"
        '            "This chapter needs the book\'s companion package (missing: "\n'
        "            f\"{', '.join(missing)}). Run this line in a cell, then the notebook again:\"\n"
        "            f'\\n%pip install \"{PACKAGE}\"'\n"
        "        )"
    )


def is_hidden(cell) -> bool:
    """Collapsed in Colab (a form), in Jupyter (hidden source) and in the book (tag hide-input)."""
    metadata = cell["metadata"]
    return (
        metadata.get("cellView") == "form"
        and metadata.get("jupyter", {}).get("source_hidden") is True
        and "hide-input" in metadata.get("tags", [])
    )


def hide(cell) -> None:
    cell["metadata"].update(HIDDEN)
    tags = cell["metadata"].setdefault("tags", [])
    if "hide-input" not in tags:
        tags.append("hide-input")


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
        link = badge(notebook).rsplit("](", 1)[1].rstrip(")")
        problems.append(f"{notebook.name}: Colab badge is not the generated one (inline image, link {link})")
        if fix:
            first_markdown["source"] = BADGE_LINE.sub(lambda _: badge(notebook), text)
    setup = [cell for cell in cells if cell["cell_type"] == "code" and "".join(cell["source"]).startswith(SETUP_MARKER)]
    first_code = next(cell for cell in cells if cell["cell_type"] == "code")
    if len(setup) != 1 or setup[0] is not first_code:
        problems.append(f"{notebook.name}: the first code cell must be the one Colab setup cell")
        return problems  # nothing safe to rewrite: the chapter needs its setup cell placed by hand
    if "".join(first_code["source"]) != setup_source():
        problems.append(f"{notebook.name}: setup cell is not the one generated for {package_spec()!r}")
        if fix:
            first_code["source"] = setup_source()
    if not is_hidden(first_code):
        problems.append(f"{notebook.name}: the setup cell is not collapsed (Colab form, Jupyter, book)")
        if fix:
            hide(first_code)
    for cell in cells:
        if cell["cell_type"] == "markdown" and "".join(cell["source"]).startswith(SETUP_PROSE_HEADING):
            problems.append(
                f"{notebook.name}: a '{SETUP_PROSE_HEADING}' cell (the set-up is one collapsed cell, its title says what it does)"
            )
    if fix:
        data.cells = cells = [
            cell
            for cell in cells
            if not (cell["cell_type"] == "markdown" and "".join(cell["source"]).startswith(SETUP_PROSE_HEADING))
        ]
    for cell in cells:
        if cell["cell_type"] != "code" or "solution" not in cell["metadata"].get("tags", []):
            continue
        text = "".join(cell["source"])
        if not text.startswith(SOLUTION_TITLE) or not is_hidden(cell):
            problems.append(f"{notebook.name}: a solution cell without its title or not hidden: {text[:60]!r}")
            if fix:
                if not text.startswith(SOLUTION_TITLE):
                    cell["source"] = f"{SOLUTION_TITLE}\n{text}"
                hide(cell)
    if fix and problems:
        nbformat.write(data, notebook)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report instead of rewriting")
    args = parser.parse_args(argv)
    all_problems = []
    for notebook in chapters():
        all_problems += problems_in(notebook, fix=not args.check)
    for problem in all_problems:
        print(problem)
    if args.check:
        return 1 if all_problems else 0
    remaining = [p for notebook in chapters() for p in problems_in(notebook, fix=False)]
    for problem in remaining:
        print("could not fix:", problem, file=sys.stderr)
    return 1 if remaining else 0


if __name__ == "__main__":
    raise SystemExit(main())
