"""tools/run_chapters_plain.py, the runner for a real GPU without Jupyter, reproduces on the CPU what
the committed chapters stored, and reports a cell that raises and an output that differs."""

import json

import run_chapters_plain as runner

from test_devices import sanitizers


def test_a_chapter_run_without_jupyter_prints_what_it_stored():
    report = runner.run_chapter(runner.REPO_ROOT / "book" / "05_feed_forward.ipynb", sanitizers())
    assert report["device"] == "cpu"
    assert report["errors"] == [] and report["differences"] == [], report


def _notebook(tmp_path, cells):
    path = tmp_path / "99_toy.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}), encoding="utf-8")
    return path


def _code(source, printed="", tags=()):
    outputs = [{"output_type": "stream", "name": "stdout", "text": [printed]}] if printed else []
    return {"cell_type": "code", "source": [source], "metadata": {"tags": list(tags)},
            "outputs": outputs, "execution_count": 1}


def test_an_exception_stops_the_chapter_and_a_difference_is_listed(tmp_path):
    path = _notebook(tmp_path, [
        _code("x = 2\nx + 1", printed=""),          # returns 3: stored nothing -> a difference
        _code("print('kept')", printed="kept\n"),
        _code("print('other')", printed="x\n", tags=["nbval-ignore-output"]),  # not compared
        _code("1 / 0"),
        _code("print('never')", printed="never\n"),
    ])
    report = runner.run_chapter(path, [])
    assert len(report["differences"]) == 1 and "cell 0" in report["differences"][0]
    assert len(report["errors"]) == 1 and "cell 3" in report["errors"][0]
    assert "ZeroDivisionError" in report["errors"][0]
    assert runner.main([str(path)]) == 1
