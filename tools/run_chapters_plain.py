"""Run the chapters on a real accelerator, without Jupyter, and compare their outputs with the stored ones.

    python tools/run_chapters_plain.py [book/NN_name.ipynb ...] [--json report.json]
    python tools/run_chapters_plain.py --kernels default    # another CPU's numerics (KERNEL_PATHS)
    python tools/run_chapters_plain.py --seed 3             # each chapter's `seed = 0` set to 3

For a machine that has a GPU (or Apple's MPS) but no Jupyter kernel: each chapter's code cells are
executed in order in one fresh namespace with plain ``exec`` (the chapter's device cell then picks
the real device), what each cell prints and returns is compared with what the committed notebook
stored on the CPU (after the sanitizing rules of tests/nbval_sanitize.cfg; cells tagged
``nbval-ignore-output`` are run, not compared), and the first exception stops the chapter. Outputs
that differ are listed, not fatal: a GPU computes in another order, so the last printed digit of a
float may differ; an exception is a real failure. Exit status 1 if any chapter raised.
Needs the package importable (``PYTHONPATH=src``) and the chapters' imports (torch, altair, pandas...).

``--kernels NAME`` runs on this CPU with the numerics of another (``KERNEL_PATHS``): PyTorch's own
kernels (``ATEN_CPU_CAPABILITY``) and MKL's matrix products (``MKL_ENABLE_INSTRUCTIONS``) each pick
their code for the CPU they find, and each choice rounds differently in the last bits. ``--seed N``
sets each chapter's seed cell to ``seed = N``: with both, ``tools/measure_spread.py`` measures how
far a figure moves over seeds and machines. The JSON report holds every code cell's output.
The running and comparing are ``notebooks.run_plain`` (tools/notebooks.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from notebooks import KERNEL_PATHS, chapters, run_plain, sanitizers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", type=Path, default=chapters())
    parser.add_argument("--json", type=Path)
    parser.add_argument("--kernels", choices=sorted(KERNEL_PATHS), default="native")
    parser.add_argument("--seed", type=int, help="set each chapter's `seed = 0` to this")
    parser.add_argument("--device", help="fail unless every chapter picks this device (cuda, mps)")
    args = parser.parse_args(argv)
    wanted = KERNEL_PATHS[args.kernels]
    if any(os.environ.get(name) != value for name, value in wanted.items()):
        if "torch" in sys.modules:
            raise SystemExit(f"--kernels {args.kernels}: set {wanted} before torch is imported")
        os.execve(
            sys.executable,
            [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:])],
            {**os.environ, **wanted},
        )
    rules, reports = sanitizers(), {}
    for path in args.chapters:
        report = run_plain(path.resolve(), rules, args.seed)
        reports[path.name] = report
        print(
            f"{path.name}: {report['device']}, {report['seconds']} s, "
            f"{len(report['errors'])} errors, {len(report['differences'])} outputs differ",
            flush=True,
        )
        for line in report["errors"] + report["differences"][:5]:
            print("   ", line[:1500], flush=True)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1), encoding="utf-8")
    wrong_device = [  # "?": a page with no device cell (the introduction) has nothing to put on one
        name
        for name, report in reports.items()
        if args.device and report["device"] != "?" and report["device"].split(":")[0] != args.device
    ]
    if wrong_device:
        print(f"not on {args.device}: {', '.join(wrong_device)}", flush=True)
    failed = wrong_device or any(report["errors"] for report in reports.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
