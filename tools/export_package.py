"""Export the reusable code written in the chapters into the companion package.

The book's rule is that every reusable component is written once, in the chapter where the reader
meets it. A code cell whose first line is a marker

    #| export: positional

belongs to the module ``src/transformer_book/positional.py``. This script collects, chapter by
chapter in order (book/NN_name.ipynb), every marked cell, strips the marker line and writes the module:
a generated-file header, then the cells in order, separated by two blank lines. The first exported
cell of a module should therefore start with the module docstring and its imports.

    python tools/export_package.py          # (re)write the modules
    python tools/export_package.py --check  # exit 1 if a module differs from its notebook

``tests/test_export.py`` runs the check, so a package edited by hand (or a chapter changed without
re-exporting) fails the tests.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from notebooks import REPO_ROOT, chapters

PACKAGE_DIR = REPO_ROOT / "src" / "transformer_book"
MARKER = re.compile(r"^#\|\s*export:\s*([a-z_][a-z0-9_]*)\s*$")
HEADER = (
    "# This file is generated from {notebook} by tools/export_package.py. Do not edit it by hand:\n"
    "# change the chapter, re-execute it, and run `python tools/export_package.py`.\n\n"
)


def exported_cells(notebook: Path) -> list[tuple[str, str]]:
    """(module name, cell source without its marker line) for each marked code cell, in order."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    found = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        first_line, _, body = source.partition("\n")
        match = MARKER.match(first_line.strip())
        if match:
            found.append((match.group(1), body.strip("\n")))
    return found


def render_modules(notebooks: list[Path]) -> dict[str, str]:
    """Module file name -> full text, built from the marked cells of ``notebooks``."""
    owners: dict[str, Path] = {}
    bodies: dict[str, list[str]] = {}
    for notebook in notebooks:
        for module, body in exported_cells(notebook):
            owner = owners.setdefault(module, notebook)
            if owner != notebook:
                raise SystemExit(
                    f"module {module!r} is exported by both {owner.name} and {notebook.name}; "
                    "a module belongs to exactly one chapter"
                )
            bodies.setdefault(module, []).append(body)
    return {
        f"{module}.py": HEADER.format(notebook=f"book/{owners[module].name}")
        + "\n\n\n".join(parts)
        + "\n"
        for module, parts in bodies.items()
    }


def generated_files() -> list[Path]:
    """Package files that carry the generated header (hand-written ones, like __init__, do not)."""
    return [
        path
        for path in PACKAGE_DIR.glob("*.py")
        if path.read_text(encoding="utf-8").startswith("# This file is generated from ")
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)

    modules = render_modules(chapters())
    stale = [path for path in generated_files() if path.name not in modules]
    if args.check:
        problems = [f"{path.name}: no chapter exports it any more" for path in stale]
        for name, text in modules.items():
            path = PACKAGE_DIR / name
            if not path.exists():
                problems.append(f"{name}: missing from the package")
            elif path.read_text(encoding="utf-8") != text:
                problems.append(f"{name}: differs from the cells its chapter exports")
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("run `python tools/export_package.py` to re-export", file=sys.stderr)
        return 1 if problems else 0

    for path in stale:
        path.unlink()
    for name, text in modules.items():
        (PACKAGE_DIR / name).write_text(text, encoding="utf-8")
        print(f"wrote src/transformer_book/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
