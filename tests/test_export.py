"""The package modules are exactly the cells their chapters export (tools/export_package.py)."""

import importlib
import json
import re
import runpy

import export_package
from notebooks import BOOK, chapters


def test_package_matches_the_chapters(capsys):
    status = export_package.main(["--check"])
    assert status == 0, capsys.readouterr().err


def test_every_chapter_module_is_generated():
    generated = {path.name for path in export_package.generated_files()}
    assert "positional.py" in generated
    assert set(export_package.render_modules(chapters())) == generated


def test_no_hand_written_modules():
    # Every module comes from the chapters' cells, and __init__.py (the top level) is generated too.
    every = {path.name for path in export_package.PACKAGE_DIR.glob("*.py")}
    assert every == {path.name for path in export_package.generated_files()}
    assert "__init__.py" in every


def test_every_region_names_its_cell():
    for path in export_package.generated_files():
        if path.name == "__init__.py":
            continue
        text = path.read_text(encoding="utf-8")
        regions = re.findall(r"^# %% book/(\d\d_\w+\.ipynb), cell (\d+)$", text, flags=re.MULTILINE)
        assert regions, path.name
        for notebook, index in regions:
            cell = json.loads((BOOK / notebook).read_text(encoding="utf-8"))["cells"][int(index)]
            assert "".join(cell["source"]).startswith(f"#| export: {path.stem}"), (path.name, notebook, index)


def test_the_top_level_reaches_every_exported_name():
    import transformer_book

    for path in export_package.generated_files():
        if path.name == "__init__.py":
            continue
        module = importlib.import_module(f"transformer_book.{path.stem}")
        assert module.__all__, path.name
        for name in module.__all__:
            assert getattr(transformer_book, name) is getattr(module, name), (path.name, name)
    every = [
        name
        for path in export_package.generated_files()
        if path.name != "__init__.py"
        for name in importlib.import_module(f"transformer_book.{path.stem}").__all__
    ]
    assert sorted(transformer_book.__all__) == sorted(every)


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
    # positional is appended to by later chapters (chapter 16's rotary tables): render the book with the copy
    book = [edited if chapter == original else chapter for chapter in chapters()]
    rendered = export_package.render_modules(book)["positional.py"]
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
    assert export_package.exported_cells(path) == [
        ("demo", "import torch"),
        ("demo", "def twice(x):\n    return 2 * x"),
    ]


def write_chapters(folder, chapters: dict[str, list[str]]):
    """Notebooks named as chapters in ``folder``, each with the given code cells (and a markdown one)."""
    for name, sources in chapters.items():
        cells = [{"cell_type": "markdown", "source": "# A chapter"}]
        cells += [{"cell_type": "code", "source": source} for source in sources]
        (folder / name).write_text(json.dumps({"cells": cells}), encoding="utf-8")
    return sorted(folder.glob("*.ipynb"))


def test_chapters_append_to_a_module_in_book_order(tmp_path):
    notebooks = write_chapters(
        tmp_path,
        {
            "02_b.ipynb": ["#| export: shared\ndef later():\n    return 2\n"],
            "01_a.ipynb": ['#| export: shared\n"""Shared."""\n\nFIRST = 1\n_hidden = 0\n', "print('not exported')"],
        },
    )
    text = export_package.render_modules(notebooks)["shared.py"]
    first, second = text.index("# %% book/01_a.ipynb, cell 1\n"), text.index("# %% book/02_b.ipynb, cell 1\n")
    assert first < text.index("FIRST = 1") < second < text.index("def later")
    assert text.endswith('__all__ = [\n    "FIRST",\n    "later",\n]\n')
    (tmp_path / "shared.py").write_text(text, encoding="utf-8")
    namespace = runpy.run_path(str(tmp_path / "shared.py"))  # it runs; its __all__ leaves out _hidden
    assert namespace["__all__"] == ["FIRST", "later"] and namespace["__doc__"] == "Shared."


def test_the_top_level_is_generated_and_refuses_a_name_twice(tmp_path):
    notebooks = write_chapters(
        tmp_path,
        {
            "01_a.ipynb": ['#| export: first\n"""First things (chapter 1)."""\n\nSEED = 0\n'],
            "02_b.ipynb": ['#| export: second\n"""Second things: more."""\n\ndef run():\n    pass\n'],
        },
    )
    init = export_package.render_modules(notebooks)["__init__.py"]
    assert "- ``first`` (chapter 1): First things\n- ``second`` (chapter 2): Second things\n" in init
    assert "from transformer_book.first import *\n" in init and "    + second.__all__\n" in init
    write_chapters(tmp_path, {"02_b.ipynb": ["#| export: second\nSEED = 1\n"]})
    try:
        export_package.render_modules(notebooks)
    except SystemExit as error:
        assert "'SEED'" in str(error) and "first.py" in str(error) and "second.py" in str(error)
    else:
        raise AssertionError("one name exported by two modules must be refused")
