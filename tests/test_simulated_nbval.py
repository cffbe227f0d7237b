"""The test command's nbval run on a simulated device (tests/simulated_nbval.py) can fail: a
notebook that never uses the device, or that leans on a name the set-up left behind, does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from simulated_nbval import VARIABLE

TESTS = Path(__file__).parent


def notebook(*cells: tuple[str, str]) -> dict:
    """A notebook of code cells, each (source, the text it printed when it was run)."""
    return {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": n,
                "id": f"c{n}",
                "metadata": {},
                "source": source,
                "outputs": [{"name": "stdout", "output_type": "stream", "text": printed}] if printed else [],
            }
            for n, (source, printed) in enumerate(cells, 1)
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


DEVICE_CELL = (
    ('import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nprint(device.type)'),
    "cuda\n",
)
ON_DEVICE = (
    ("x = torch.zeros(3, device=device)\nfor _ in range(120):\n    x = x + 1\nprint(x.cpu().tolist())"),
    "[120.0, 120.0, 120.0]\n",
)


def run_nbval(folder: Path, **notebooks: dict) -> str:
    for name, content in notebooks.items():
        (folder / f"{name}.ipynb").write_text(json.dumps(content), encoding="utf-8")
    # the plugin, as tests/conftest.py registers it
    (folder / "conftest.py").write_text(
        "from simulated_nbval import register\n\ndef pytest_configure(config):\n    register(config)\n",
        encoding="utf-8",
    )
    environment = {
        **os.environ,
        VARIABLE: "native",
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent / "tools")]),
    }
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "-q",
            "--nbval",
            "--nbval-current-env",
            "--rootdir",
            str(folder),
            str(folder),
        ],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return finished.stdout + finished.stderr


def test_the_run_fails_unless_the_device_is_used_and_the_namespace_is_clean(tmp_path):
    report = run_nbval(
        tmp_path,
        uses_the_device=notebook(DEVICE_CELL, ON_DEVICE),
        stays_on_the_cpu=notebook(DEVICE_CELL, ("print(2 + 2)", "4\n")),
        picks_no_device=notebook(("print(2 + 2)", "4\n")),
        forgets_an_import=notebook(DEVICE_CELL, ON_DEVICE, ("print(type(os))", "<class 'module'>\n")),
    )
    # the first passes (its device cell printed "cuda"), the second picked the device but ran
    # nothing on it, the third's `os` is not defined (the set-up left no names behind), the
    # fourth is not simulated and needs no device
    assert "stays_on_the_cpu.ipynb ran 0 torch operations on the simulated cuda" in report, report
    assert "NameError" in report and "forgets_an_import.ipynb::Cell 2" in report, report
    summary = report.split("short test summary")[-1]
    assert "uses_the_device.ipynb" not in summary and "picks_no_device" not in summary, report
    assert "1 failed" in report and "1 error" in report, report
