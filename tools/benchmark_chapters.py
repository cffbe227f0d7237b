"""Time each chapter's execution in a fresh kernel, without saving anything.

    .venv/bin/python tools/benchmark_chapters.py [book/NN_name.ipynb ...] [--repeat N]

Prints the best of N runs per chapter (kernel start-up included) and the total. A benchmark, not a
test: the figures depend on the machine, and the book's target is under 30 s per chapter on 2 cores.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from notebooks import chapters, execute


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    total = 0.0
    for path in args.notebooks or chapters():
        best = min(execute(path, timeout=600, save=False) for _ in range(args.repeat))
        total += best
        print(f"{path.name:45s} {best:6.1f} s")
    print(f"{'total':45s} {total:6.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
