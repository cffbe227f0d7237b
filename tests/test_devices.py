"""Every chapter runs on a simulated CUDA GPU or a simulated Apple MPS device, with another CPU's numerics.

The simulation (tests/device_sim.py) makes a chapter's device cell pick "cuda" (or "mps") on this
CPU-only machine and refuses, with the real device's error, what the real device refuses: mixing
devices in one operation, ``.numpy()`` of a device tensor, float64 on MPS, a generator on the wrong
device, and it runs CUDA convolutions in TF32 as cuDNN does by default. Values are computed on the CPU,
so every output the regression tests compare (cells not tagged ``nbval-ignore-output``) must also be
what the chapter printed when it was executed on the CPU.

Each chapter runs on one simulated device: MPS if it uses float64 anywhere (MPS has none, so
that is where a slip shows), CUDA otherwise. And it runs with PyTorch's portable kernels and MKL's
SSE4.2 code (``KERNEL_PATHS["default"]``), which round matrix products, softmax and layer norm
differently in the last bits (and draw float32 random numbers differently), as another CPU does:
nbval (on this CPU's own kernels) and this run together check that every compared output, charts'
data included, is the same on two kernel paths (book/contributing.md: compare exactly only what is
the same everywhere).

Only whether a chapter's code runs on the device matters here, so the training-heavy chapters
train a few steps when BOOK_DEVICE_TEST=1 is set (they say so in the cell): the full training is
what nbval runs. For speed, one kernel per device runs its chapters in turn (its namespace and
torch's global settings reset before each), and the two devices run side by side. To run it by
hand, e.g. on a chapter as it was committed (PYTHONPATH: the toolkit, tools/notebooks.py):

    PYTHONPATH=tools .venv/bin/python tests/test_devices.py --device mps book/01_positional_encoding.ipynb
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from notebooks import BOOK, KERNEL_PATHS, TESTS, TOOLS, Kernel, chapters, sanitizers, with_pythonpath

CHAPTERS = chapters()
DEVICES = ("cuda", "mps")
CELL_TIMEOUT = 600
KERNELS = "default"  # the kernel path of the simulated-device run (KERNEL_PATHS, tools/notebooks.py)


def device_of(chapter: Path) -> str:
    """The simulated device a chapter runs on: MPS where it uses float64, else CUDA."""
    text = chapter.read_text(encoding="utf-8")
    return "mps" if re.search(r"float64|\.double\(\)", text) else "cuda"

# Run in the kernel once, before anything else: the simulation must be in place before the chapter's
# imports and device cell. (The kernel finds device_sim on its PYTHONPATH, tests/.)
INSTALL = """\
import device_sim
device_sim.install({device!r})
import numpy
device_sim.default_numpy_print = numpy.get_printoptions()  # kept across %reset
"""

# Run before each chapter: a clean namespace and torch's defaults, as in a fresh kernel.
RESET = """\
%reset -f
import gc, numpy, torch, device_sim
torch.backends.cudnn.allow_tf32 = True
torch.backends.cuda.matmul.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
torch.set_default_dtype(torch.float32)
torch.set_grad_enabled(True)
torch.set_printoptions(profile="default")
numpy.set_printoptions(**device_sim.default_numpy_print)
device_sim.installed().operations = 0
gc.collect()
"""

COUNT = "print(device_sim.installed().operations)"


def run_chapters(device: str, chapters: list[Path]) -> dict[str, dict]:
    """Execute ``chapters`` in one kernel on the simulated ``device``; a report per chapter.

    A report holds ``errors`` (outputs that differ from the CPU's, then the exception that stopped
    the chapter, if any), ``operations`` (torch calls that ran on
    the simulated device) and ``seconds``.
    """
    rules = sanitizers()
    reports = {}
    with Kernel.started(BOOK, CELL_TIMEOUT, with_pythonpath(TESTS)) as kernel:
        kernel.run(INSTALL.format(device=device))
        for path in chapters:
            kernel.run(RESET)
            started = time.perf_counter()
            errors = kernel.run_chapter(path, rules)
            operations = int(kernel.run(COUNT).split()[-1])
            reports[path.name] = {"errors": errors, "operations": operations,
                                  "seconds": round(time.perf_counter() - started, 1)}
    return reports


def run_in_subprocess(device: str, chapters: list[Path], threads: int,
                      kernels: str = KERNELS) -> dict[str, dict]:
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        # BOOK_DEVICE_TEST: the training-heavy chapters (9 and 11) train a few steps and skip
        # their accuracy checks, which only cells whose output is not compared depend on.
        environment = {**with_pythonpath(TOOLS, TESTS), "OMP_NUM_THREADS": str(threads),
                       "MKL_NUM_THREADS": str(threads), "BOOK_DEVICE_TEST": "1",
                       **KERNEL_PATHS[kernels]}
        command = [sys.executable, __file__, "--device", device, "--json", str(report),
                   *map(str, chapters)]
        finished = subprocess.run(command, env=environment, capture_output=True, text=True,
                                  check=False)  # the report says what failed
        if finished.returncode != 0 or not report.exists():
            raise RuntimeError(f"the {device} run failed:\n{finished.stdout}\n{finished.stderr}")
        return json.loads(report.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def reports():
    """Each chapter on its device; the two devices side by side (one kernel each, one thread
    each on this 2-core machine)."""
    with ThreadPoolExecutor(max_workers=len(DEVICES)) as pool:
        runs = {device: pool.submit(run_in_subprocess, device,
                                    [path for path in CHAPTERS if device_of(path) == device], 1)
                for device in DEVICES}
        return {name: report for run in runs.values() for name, report in run.result().items()}


def test_there_are_chapters_on_each_device():
    assert {device_of(path) for path in CHAPTERS} == set(DEVICES)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.name)
def test_chapter_runs_on_simulated_device(reports, chapter):
    device = device_of(chapter)
    report = reports[chapter.name]
    problems = "\n".join(report["errors"])
    assert not problems, (f"{chapter.name} on a simulated {device} with the "
                          f"{KERNELS!r} kernels:\n{problems}")
    # The device cell picked the simulated device and the chapter's tensors were made on it.
    assert report["operations"] > 100, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", type=Path, default=CHAPTERS)
    parser.add_argument("--device", choices=DEVICES, action="append")
    parser.add_argument("--json", type=Path, help="write the reports here")
    args = parser.parse_args(argv)
    # As the pytest fixture does: the training-heavy chapters train a few steps (chapter 14
    # would otherwise train its full translator on the simulated GPU).
    os.environ.setdefault("BOOK_DEVICE_TEST", "1")
    failed = False
    everything = {}
    for device in args.device or DEVICES:
        reports = run_chapters(device, [path.resolve() for path in args.chapters])
        everything[device] = reports
        for name, report in reports.items():
            failed |= bool(report["errors"])
            status = "FAIL" if report["errors"] else "ok"
            print(f"{device:4} {name}: {status}, {report['operations']} operations on {device} "
                  f"[{report['seconds']} s]", flush=True)
            for error in report["errors"]:
                print(f"     - {error}", flush=True)
    if args.json:
        only = everything[args.device[0]] if args.device and len(args.device) == 1 else everything
        args.json.write_text(json.dumps(only, indent=1), encoding="utf-8")
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
