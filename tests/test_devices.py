"""Every chapter runs on a simulated CUDA GPU or a simulated Apple MPS device, with another CPU's numerics.

The simulation (tests/device_sim.py) makes a chapter's device cell pick "cuda" (or "mps") on this
CPU-only machine and refuses, with the real device's error, what the real device refuses: mixing
devices in one operation, ``.numpy()`` of a device tensor, float64 on MPS, a generator on the wrong
device, and it runs CUDA convolutions in TF32 as cuDNN does by default. Values are computed on the CPU,
so every output the regression tests compare (cells not tagged ``nbval-ignore-output``) must also be
what the chapter printed when it was executed on the CPU.

Each chapter runs on one simulated device (``device_of``): MPS if it uses float64 anywhere (MPS has
none, so that is where a slip shows), CUDA otherwise.

The test command does this in its one nbval run of each chapter (tests/simulated_nbval.py, with
``BOOK_NBVAL_KERNELS=default``: PyTorch's portable kernels and MKL's SSE4.2 code, which round as
another CPU does). This file is the same check by hand, one kernel per device running its chapters in
turn (namespace and torch's global settings reset before each), e.g. on a chapter as it was committed
(PYTHONPATH: the toolkit, tools/notebooks.py):

    PYTHONPATH=tools:tests .venv/bin/python tests/test_devices.py --device mps book/01_positional_encoding.ipynb

Set the variables of a kernel path (tools/notebooks.py, ``KERNEL_PATHS``) to run it on that path.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from notebooks import BOOK, TESTS, Kernel, chapters, sanitizers, with_pythonpath

CHAPTERS = chapters()
DEVICES = ("cuda", "mps")
CELL_TIMEOUT = 600


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
            reports[path.name] = {
                "errors": errors,
                "operations": operations,
                "seconds": round(time.perf_counter() - started, 1),
            }
    return reports


def test_there_are_chapters_on_each_device():
    assert {device_of(path) for path in CHAPTERS} == set(DEVICES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", type=Path, default=CHAPTERS)
    parser.add_argument("--device", choices=DEVICES, action="append")
    parser.add_argument("--json", type=Path, help="write the reports here")
    args = parser.parse_args(argv)
    failed = False
    everything = {}
    for device in args.device or DEVICES:
        reports = run_chapters(device, [path.resolve() for path in args.chapters])
        everything[device] = reports
        for name, report in reports.items():
            failed |= bool(report["errors"])
            status = "FAIL" if report["errors"] else "ok"
            print(
                f"{device:4} {name}: {status}, {report['operations']} operations on {device} [{report['seconds']} s]",
                flush=True,
            )
            for error in report["errors"]:
                print(f"     - {error}", flush=True)
    if args.json:
        only = everything[args.device[0]] if args.device and len(args.device) == 1 else everything
        args.json.write_text(json.dumps(only, indent=1), encoding="utf-8")
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
