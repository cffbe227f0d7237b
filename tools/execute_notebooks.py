"""Re-execute chapters top to bottom in a fresh kernel and save them in place, with their outputs.

    python tools/execute_notebooks.py                                  # every chapter
    python tools/execute_notebooks.py book/01_positional_encoding.ipynb

The stored outputs are what the book shows and what nbval compares, so a chapter is always committed
straight from this script: never from a kernel that ran cells out of order. Before executing, the
script re-exports the package from the chapters' sources (tools/export_package.py), so a chapter runs
against the package its predecessors define; it prints how long each chapter took.

The kernels run one PyTorch thread, as the tests' do (unless OMP_NUM_THREADS is set): another thread
count adds up in another order, and a chapter that trains would store another run's figures.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import export_package
from notebooks import chapters, execute


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter in book/")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell")
    args = parser.parse_args(argv)
    # the kernels inherit these: one thread, as scripts/test.sh runs the chapters
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

    # Export first: the package is generated from the chapters' sources alone, and a chapter may import
    # what an earlier chapter has just changed.
    status = export_package.main([])
    for path in args.notebooks or chapters():
        seconds = execute(path, args.timeout)
        print(f"{path}: executed in {seconds:.1f} s")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
