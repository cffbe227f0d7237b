"""tools/run_chapters_plain.py, the runner for a real GPU without Jupyter, reproduces on the CPU what
the committed chapters stored, and reports a cell that raises and an output that differs."""

import json
import subprocess
import sys

import run_chapters_plain as runner
from notebooks import BOOK, run_plain, sanitizers


def test_a_chapter_run_without_jupyter_prints_what_it_stored():
    report = run_plain(BOOK / "05_feed_forward.ipynb", sanitizers())
    assert report["device"] == "cpu"
    assert report["errors"] == [] and report["differences"] == [], report


def _notebook(tmp_path, cells):
    path = tmp_path / "99_toy.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")
    return path


def _code(source, printed="", tags=()):
    outputs = [{"output_type": "stream", "name": "stdout", "text": [printed]}] if printed else []
    return {
        "cell_type": "code",
        "source": [source],
        "metadata": {"tags": list(tags)},
        "outputs": outputs,
        "execution_count": 1,
    }


def test_an_exception_stops_the_chapter_and_a_difference_is_listed(tmp_path):
    path = _notebook(
        tmp_path,
        [
            _code("x = 2\nx + 1", printed=""),  # returns 3: stored nothing -> a difference
            _code("print('kept')", printed="kept\n"),
            _code("print('other')", printed="x\n", tags=["nbval-ignore-output"]),  # not compared
            _code("1 / 0"),
            _code("print('never')", printed="never\n"),
        ],
    )
    report = run_plain(path, [])
    assert len(report["differences"]) == 1 and "cell 0" in report["differences"][0]
    assert len(report["errors"]) == 1 and "cell 3" in report["errors"][0]
    assert "ZeroDivisionError" in report["errors"][0]
    assert runner.main([str(path)]) == 1


def test_seed_option_sets_the_seed_cell(tmp_path):
    path = _notebook(
        tmp_path, [_code("seed = 0  # every random number below follows from this seed\nprint(seed)", printed="0\n")]
    )
    assert run_plain(path, [])["outputs"] == {"0": "0\n"}
    assert run_plain(path, [], seed=3)["outputs"] == {"0": "3\n"}


def test_device_option_fails_a_chapter_run_elsewhere(tmp_path):
    path = _notebook(tmp_path, [_code("device = 'cpu'")])
    assert runner.main([str(path)]) == 0
    assert runner.main([str(path), "--device", "cpu"]) == 0
    assert runner.main([str(path), "--device", "mps"]) == 1
    no_device = _notebook(tmp_path, [_code("print('a page with no device cell')")])
    assert runner.main([str(no_device), "--device", "cuda"]) == 0  # the introduction: nothing to put on one


def test_kernels_option_runs_with_another_cpus_kernels(tmp_path):
    path = _notebook(
        tmp_path, [_code("import torch\nprint(torch.backends.cpu.get_cpu_capability())", printed="DEFAULT\n")]
    )
    report = tmp_path / "report.json"
    finished = subprocess.run(
        [sys.executable, str(runner.__file__), str(path), "--kernels", "default", "--json", str(report)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert json.loads(report.read_text())["99_toy.ipynb"]["outputs"] == {"0": "DEFAULT\n"}
    assert runner.KERNEL_PATHS["default"]["ATEN_CPU_CAPABILITY"] == "default"


def test_the_simulated_device_run_compares_chart_data_as_nbval_does():
    from notebooks import compared_text, first_difference

    def chart(values):
        html = f'<div id="altair-viz-{"0" * 32}"></div><script>{{"data": {values}}}</script>'
        return {
            "cell_type": "code",
            "source": [],
            "metadata": {},
            "outputs": [
                {
                    "output_type": "execute_result",
                    "data": {"text/plain": ["alt.Chart(...)"], "text/html": [html]},
                    "metadata": {},
                    "execution_count": 1,
                }
            ],
        }

    rules = sanitizers()
    stored, moved = chart("[0.0, 0.3]"), chart("[-0.0, 0.3]")
    assert compared_text(stored, rules) == compared_text(moved, rules) == "alt.Chart(...)"
    assert compared_text(stored, rules, charts=True) != compared_text(moved, rules, charts=True)
    difference = first_difference(compared_text(stored, rules, charts=True), compared_text(moved, rules, charts=True))
    assert "-0.0" in difference and "altair-viz-ID" in compared_text(stored, rules, charts=True)
