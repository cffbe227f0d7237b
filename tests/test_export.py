"""The package modules are exactly the cells their chapters export (tools/export_package.py)."""

import json

import export_package
from notebooks import BOOK, chapters


def test_package_matches_the_chapters(capsys):
    status = export_package.main(["--check"])
    assert status == 0, capsys.readouterr().err


def test_every_chapter_module_is_generated():
    generated = {path.name for path in export_package.generated_files()}
    assert "positional.py" in generated
    assert set(export_package.render_modules(chapters())) == generated


def test_no_hand_written_modules_besides_init():
    # Every model module comes from a chapter; only __init__.py (the re-exports) is written by hand.
    hand_written = {path.name for path in export_package.PACKAGE_DIR.glob("*.py")} - {
        path.name for path in export_package.generated_files()
    }
    assert hand_written == {"__init__.py"}


def test_an_edited_chapter_is_detected(tmp_path):
    # Copy chapter 1, change one exported line, and check that the rendered module does not match.
    original = BOOK / "01_positional_encoding.ipynb"
    notebook = json.loads(original.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if source.startswith("#| export: positional") and "def sinusoidal_table" in source:
            cell["source"] = source.replace("base: float = 10000.0", "base: float = 1000.0")
            break
    else:
        raise AssertionError("chapter 1 no longer exports sinusoidal_table")
    edited = tmp_path / "01_positional_encoding.ipynb"
    edited.write_text(json.dumps(notebook), encoding="utf-8")
    rendered = export_package.render_modules([edited])["positional.py"]
    packaged = (export_package.PACKAGE_DIR / "positional.py").read_text(encoding="utf-8")
    assert rendered != packaged
    assert rendered.replace("base: float = 1000.0", "base: float = 10000.0") == packaged


def test_only_marked_cells_are_exported(tmp_path):
    notebook = {
        "cells": [
            {"cell_type": "code", "source": "#| export: demo\nimport torch\n"},
            {"cell_type": "code", "source": "print('not exported')\n"},
            {"cell_type": "markdown", "source": "#| export: demo\nmarkdown is never exported"},
            {"cell_type": "code", "source": "#| export: demo\n\ndef twice(x):\n    return 2 * x\n"},
        ]
    }
    path = tmp_path / "99_demo.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    assert export_package.exported_cells(path) == [("demo", "import torch"), ("demo", "def twice(x):\n    return 2 * x")]


def test_a_module_belongs_to_one_chapter(tmp_path):
    cell = {"cell_type": "code", "source": "#| export: shared\nX = 1\n"}
    for name in ("01_a.ipynb", "02_b.ipynb"):
        (tmp_path / name).write_text(json.dumps({"cells": [cell]}), encoding="utf-8")
    try:
        export_package.render_modules(sorted(tmp_path.glob("*.ipynb")))
    except SystemExit as error:
        assert "'shared'" in str(error) and "01_a.ipynb" in str(error) and "02_b.ipynb" in str(error)
    else:
        raise AssertionError("two chapters exporting one module must be refused")
