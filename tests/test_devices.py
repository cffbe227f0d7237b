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
differently in the last bits, as another CPU does: nbval (on this CPU's own kernels) and this run
together check that every compared output is the same on two kernel paths (book/contributing.md:
compare exactly only what is the same everywhere).

Only whether a chapter's code runs on the device matters here, so the training-heavy chapters
train a few steps when BOOK_DEVICE_TEST=1 is set (they say so in the cell): the full training is
what nbval runs. For speed, one kernel per device runs its chapters in turn (its namespace and
torch's global settings reset before each), and the two devices run side by side. To run it by
hand, e.g. on a chapter as it was committed:

    .venv/bin/python tests/test_devices.py --device mps book/01_positional_encoding.ipynb
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

TESTS = Path(__file__).resolve().parent
REPO_ROOT = TESTS.parent
BOOK = REPO_ROOT / "book"
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
DEVICES = ("cuda", "mps")
CELL_TIMEOUT = 600
IGNORED_TAGS = {"nbval-ignore-output", "nbval-skip"}

# The numerics of other x86 CPUs, reproduced on this one: PyTorch's own kernels
# (ATEN_CPU_CAPABILITY), MKL's matrix products (MKL_ENABLE_INSTRUCTIONS) and oneDNN's each pick
# their code for the CPU they find. Set before torch loads. "native" is this CPU's own choice.
KERNEL_PATHS = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                "ONEDNN_MAX_CPU_ISA": "SSE41"},
}
KERNELS = "default"  # the kernel path of the simulated-device run


def device_of(chapter: Path) -> str:
    """The simulated device a chapter runs on: MPS where it uses float64, else CUDA."""
    text = chapter.read_text(encoding="utf-8")
    return "mps" if re.search(r"float64|\.double\(\)", text) else "cuda"

# Run in the kernel once, before anything else: the simulation must be in place before the chapter's
# imports and device cell.
INSTALL = """\
import sys
sys.path.insert(0, {tests!r})
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


def sanitizers() -> list[tuple[re.Pattern, str]]:
    """The regexes of tests/nbval_sanitize.cfg, applied to both sides as nbval does."""
    text = (TESTS / "nbval_sanitize.cfg").read_text(encoding="utf-8")
    regexes = re.findall(r"^regex:\s*(.*)$", text, flags=re.MULTILINE)
    replaces = re.findall(r"^replace:\s*(.*)$", text, flags=re.MULTILINE)
    return [(re.compile(regex), replace) for regex, replace in zip(regexes, replaces)]


def compared_text(cell, rules) -> str:
    """What a cell printed (stdout) and returned (text/plain), sanitized."""
    def joined(text):  # nbformat gives a str, the notebook file's JSON a list of lines
        return "".join(text) if isinstance(text, list) else text

    parts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream" and output["name"] == "stdout":
            parts.append(joined(output["text"]))
        elif output["output_type"] == "execute_result":
            parts.append(joined(output["data"].get("text/plain", "")))
    text = "".join(parts)
    for regex, replace in rules:
        text = regex.sub(replace, text)
    return text


def first_difference(expected: str, got: str) -> str:
    for number, (want, have) in enumerate(zip(expected.splitlines(), got.splitlines()), 1):
        if want != have:
            return f"line {number}: expected {want!r}, got {have!r}"
    return f"expected {len(expected.splitlines())} lines, got {len(got.splitlines())}"


def first_line(source: str) -> str:
    lines = [line for line in source.splitlines() if line.strip()]
    return lines[0][:80] if lines else ""


def run_chapters(device: str, chapters: list[Path]) -> dict[str, dict]:
    """Execute ``chapters`` in one kernel on the simulated ``device``; a report per chapter.

    A report holds ``errors`` (outputs that differ from the CPU's, then the exception that stopped
    the chapter, if any), ``operations`` (torch calls that ran on
    the simulated device) and ``seconds``.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    rules = sanitizers()
    setup = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        INSTALL.format(tests=str(TESTS), device=device))])
    client = NotebookClient(setup, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(BOOK)}})
    reports = {}

    def run(cell, index):
        client.execute_cell(cell, index)
        return "".join(output.get("text", "") for output in cell.outputs
                       if output["output_type"] == "stream")

    with client.setup_kernel():
        run(setup.cells[0], 0)
        for path in chapters:
            notebook = nbformat.read(path, as_version=4)
            client.nb = notebook
            run(nbformat.v4.new_code_cell(RESET), 0)
            started = time.perf_counter()
            errors = []
            for index, cell in enumerate(notebook.cells):
                if cell.cell_type != "code":
                    continue
                expected = compared_text(cell, rules)
                where = f"cell {index} ({first_line(cell.source)!r})"
                try:
                    client.execute_cell(cell, index)
                except CellExecutionError as failure:
                    errors.append(f"{where} raised {failure.ename}: {failure.evalue}")
                    break  # the cells after it would fail for want of its results
                if set(cell.metadata.get("tags", [])) & IGNORED_TAGS:
                    continue
                got = compared_text(cell, rules)
                if got != expected:
                    errors.append(f"{where} printed other output than on the CPU: "
                                  f"{first_difference(expected, got)}")
            operations = int(run(nbformat.v4.new_code_cell(COUNT), 0).split()[-1])
            reports[path.name] = {"errors": errors, "operations": operations,
                                  "seconds": round(time.perf_counter() - started, 1)}
    return reports


def run_in_subprocess(device: str, chapters: list[Path], threads: int,
                      kernels: str = KERNELS) -> dict[str, dict]:
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        # BOOK_DEVICE_TEST: the training-heavy chapters (9 and 11) train a few steps and skip
        # their accuracy checks, which only cells whose output is not compared depend on.
        environment = {**os.environ, "OMP_NUM_THREADS": str(threads),
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
