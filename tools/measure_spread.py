"""How far does each printed figure of a chapter move over seeds and CPU kernel paths?

    python tools/measure_spread.py book/12_search_matters.ipynb --seeds 0 1 2 3 4
    python tools/measure_spread.py book/09_full_transformer.ipynb --paths native default --json out.json

Runs the chapter with ``tools/run_chapters_plain.py`` once per (kernel path, seed), two runs at a
time, one PyTorch thread each, and lists every code cell whose output is not the same in all of
them: first over the kernel paths at seed 0 (what another machine would print), then over the seeds
on each path (what another training run would print). A figure the prose quotes, or a test
compares, must be the same over the paths; a claim about training runs states the seeds' range.
The JSON file holds every run's outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from notebooks import KERNEL_PATHS, REPO_ROOT

RUNNER = REPO_ROOT / "tools" / "run_chapters_plain.py"
PATHS = tuple(KERNEL_PATHS)


def run(chapter: Path, path: str, seed: int) -> dict:
    """The runner's report of ``chapter`` on kernel ``path`` with ``seed``."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        environment = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO_ROOT / "src"),
        }
        subprocess.run(
            [sys.executable, str(RUNNER), str(chapter), "--kernels", path, "--seed", str(seed), "--json", str(report)],
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )  # errors: in the report
        if not report.exists():
            return {"errors": [f"the runner wrote no report ({path}, seed {seed})"], "outputs": {}}
        return json.loads(report.read_text(encoding="utf-8"))[chapter.name]


def varying(runs: dict[str, dict]) -> dict[str, dict[str, str]]:
    """{cell: {run: output}} for the cells whose output differs between ``runs``."""
    cells = sorted({cell for report in runs.values() for cell in report["outputs"]}, key=int)
    found = {}
    for cell in cells:
        outputs = {name: report["outputs"].get(cell, "<not run>") for name, report in runs.items()}
        if len(set(outputs.values())) > 1:
            found[cell] = outputs
    return found


def show(found: dict[str, dict[str, str]]) -> None:
    """Each varying cell's lines that differ, as each run printed them."""
    for cell, outputs in found.items():
        print(f"cell {cell}:")
        lines = {name: text.strip().splitlines() for name, text in outputs.items()}
        longest = max(map(len, lines.values()))
        for number in range(longest):
            versions = {name: (text[number] if number < len(text) else "") for name, text in lines.items()}
            if len(set(versions.values())) > 1:
                for name, line in versions.items():
                    print(f"  {name:8} {line[:200]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapter", type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    chapter = args.chapter.resolve()
    jobs = [(path, seed) for seed in args.seeds for path in args.paths]
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = dict(zip(jobs, pool.map(lambda job: run(chapter, *job), jobs)))
    for (path, seed), report in reports.items():
        for error in report["errors"]:
            print(f"{path}, seed {seed}: {error.splitlines()[0]}")
    seed = args.seeds[0]
    print(f"== over the kernel paths (seed {seed})")
    show(varying({path: reports[path, seed] for path in args.paths}))
    if len(args.seeds) > 1:
        for path in args.paths:
            print(f"== over the seeds ({path})")
            show(varying({f"seed {seed}": reports[path, seed] for seed in args.seeds}))
    if args.json:
        args.json.write_text(
            json.dumps(
                {f"{path} seed {seed}": report for (path, seed), report in reports.items()},
                indent=1,
                ensure_ascii=False,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
