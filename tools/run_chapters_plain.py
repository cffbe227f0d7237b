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
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))
from test_devices import (
    IGNORED_TAGS,
    KERNEL_PATHS,
    compared_text,
    first_difference,
    first_line,
    sanitizers,
)

SEED_LINE = re.compile(r"^seed = 0\b", flags=re.MULTILINE)


def run_cell(source: str, namespace: dict) -> str:
    """Execute ``source`` as a notebook cell: stdout, then the repr of a last expression."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    if last is not None and source.rstrip().endswith(";"):
        tree.body.append(last)  # a trailing semicolon hides the value, as in Jupyter
        last = None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(tree, "<cell>", "exec"), namespace)  # noqa: S102 - running the chapter is the point
        value = None
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
    text = out.getvalue()
    if value is not None and not hasattr(value, "_ipython_display_"):
        text += repr(value)  # what Jupyter stores as text/plain
    return text


def run_chapter(path: Path, rules, seed: int | None = None) -> dict:
    import torch

    notebook = json.loads(path.read_text(encoding="utf-8"))
    namespace = {"__name__": "__main__", "display": lambda *objects, **options: None}
    errors, differences, outputs, started = [], [], {}, time.perf_counter()
    cwd = os.getcwd()
    os.chdir(path.parent)
    torch.set_default_dtype(torch.float32)
    with contextlib.suppress(ImportError):
        import pandas  # a notebook kernel is no terminal: pandas wraps wide frames at 80 columns

        pandas.set_option("display.max_columns", 20)
        pandas.set_option("display.width", 80)
    try:
        for index, cell in enumerate(notebook["cells"]):
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            if seed is not None:
                source = SEED_LINE.sub(f"seed = {seed}", source)
            where = f"cell {index} ({first_line(source)!r})"
            try:
                got = run_cell(source, namespace)
            except BaseException as failure:  # noqa: BLE001 - report and stop the chapter
                errors.append(f"{where} raised {type(failure).__name__}: {failure}\n"
                              + "".join(traceback.format_exc(limit=-3)))
                break
            for regex, replace in rules:
                got = regex.sub(replace, got)
            outputs[str(index)] = got
            if set(cell.get("metadata", {}).get("tags", [])) & IGNORED_TAGS:
                continue
            expected = compared_text(cell, rules)
            if got.strip() != expected.strip():
                differences.append(f"{where}: {first_difference(expected.strip(), got.strip())}")
    finally:
        os.chdir(cwd)
    device = str(namespace.get("device", "?"))
    return {"device": device, "errors": errors, "differences": differences, "outputs": outputs,
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", type=Path,
                        default=sorted((REPO_ROOT / "book").glob("[0-9][0-9]_*.ipynb")))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--kernels", choices=sorted(KERNEL_PATHS), default="native")
    parser.add_argument("--seed", type=int, help="set each chapter's `seed = 0` to this")
    parser.add_argument("--device", help="fail unless every chapter picks this device (cuda, mps)")
    args = parser.parse_args(argv)
    wanted = KERNEL_PATHS[args.kernels]
    if any(os.environ.get(name) != value for name, value in wanted.items()):
        if "torch" in sys.modules:
            raise SystemExit(f"--kernels {args.kernels}: set {wanted} before torch is imported")
        os.execve(sys.executable, [sys.executable, __file__, *(argv if argv is not None
                                                                else sys.argv[1:])],
                  {**os.environ, **wanted})
    rules, reports = sanitizers(), {}
    for path in args.chapters:
        report = run_chapter(path.resolve(), rules, args.seed)
        reports[path.name] = report
        print(f"{path.name}: {report['device']}, {report['seconds']} s, "
              f"{len(report['errors'])} errors, {len(report['differences'])} outputs differ", flush=True)
        for line in report["errors"] + report["differences"][:5]:
            print("   ", line[:1500], flush=True)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1), encoding="utf-8")
    wrong_device = [name for name, report in reports.items()
                    if args.device and report["device"].split(":")[0] != args.device]
    if wrong_device:
        print(f"not on {args.device}: {', '.join(wrong_device)}", flush=True)
    failed = wrong_device or any(report["errors"] for report in reports.values())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
