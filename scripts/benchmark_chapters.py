"""Time each chapter's execution in a fresh kernel, without saving anything.

    .venv/bin/python scripts/benchmark_chapters.py [book/NN_name.ipynb ...] [--repeat N]

Prints the best of N runs per chapter (kernel start-up included) and the total. A benchmark, not a
test: the figures depend on the machine, and the book's target is under 30 s per chapter on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tools"))
from export_package import chapter_notebooks  # noqa: E402


def time_once(path: Path) -> float:
    notebook = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    total = 0.0
    for path in args.notebooks or chapter_notebooks():
        best = min(time_once(path) for _ in range(args.repeat))
        total += best
        print(f"{path.name:45s} {best:6.1f} s")
    print(f"{'total':45s} {total:6.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
