"""What chapter 16's seeded sweeps share (tools/train_modern_sweep.py, tools/train_length_sweep.py).

Each sweep trains every arm with every seed (``run``: two runs side by side, one PyTorch thread
each), records them in one JSON file (``write``: ``settings``, ``arms``, ``runs``, and the
``timings`` kept apart) and has the same command line (``main``: write every arm, or ``--check``
one arm against the committed record with ``same_arm``). ``--keep DIR`` writes each run to DIR as
it ends and reads the runs already there (same budget) instead of training them again, so a long
sweep on a shared machine can stop and go on. ``--device cuda`` trains each run on a GPU, one at a
time, and records the device and its name (the CPU records name none); GPU kernels need not be
bit-reproducible, so ``--check`` of such a record needs the same GPU and may still differ in the
last digits (not run here: no GPU was lent to these sweeps).
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import torch

from notebooks import check_outcome, regenerate_and_compare

# The poems split the sweeps' records were trained on: poem_split's default, by meaning (near-twins
# on one side), as the shipped poet's.
SPLIT = "meaning"

# The held-out score is taken every EVAL_EVERY steps (and before the first, and after the last):
# the curves that show whether a run has flattened.
EVAL_EVERY = 50

Run = tuple[str, int, dict, float]  # (arm, seed, record, seconds)


def train_scored(
    model, vocab, poems, seed: int, score: Callable[[torch.nn.Module], float], settings: dict, name: str = ""
):
    """``train_lm`` on ``poems``, ``score(model)`` taken every EVAL_EVERY steps: (the training losses,
    the curve [[step, score], ...]). The training steps' throughput (tokens/s, FLOP/s and MFU against
    a float32 peak measured in the same run: tools/throughput.py) is printed under ``name``, not
    recorded: it depends on the machine and its load."""
    from throughput import StepMeter, gpt_step_cost
    from transformer_book import train_lm

    curve: list[list] = []

    def evaluate(step: int, model: torch.nn.Module) -> None:
        curve.append([step, round(score(model), 4)])

    cost = gpt_step_cost(vocab.specials.index("<pad>"))
    with StepMeter(type(model), cost, settings.get("device", "cpu")) as meter:
        losses = train_lm(model, vocab, poems, seed=seed, evaluate=evaluate, eval_every=EVAL_EVERY, **settings)
    print(meter.result().line(name), flush=True)
    return losses, curve


def run(
    train_one: Callable[[str, int, dict], dict],
    arms,
    seeds,
    budget: dict,
    score: str,
    workers: int = 2,
    keep: Path | None = None,
) -> dict[tuple[str, int], tuple[dict, float]]:
    """``train_one(arm, seed, budget)`` (a run's record) for each arm and seed, ``workers`` at a
    time, each on one PyTorch thread, its ``score`` printed as it ends;
    {(arm, seed): (record, seconds)}.

    With ``keep`` (a folder), each finished run is also written there as it ends, and a run
    already kept with the same budget is read instead of trained again: a sweep stopped
    midway goes on where it stopped."""
    kept = {
        job: found for job in ((arm, seed) for seed in seeds for arm in arms) if (found := _kept(keep, *job, budget))
    }
    jobs = [(arm, seed, budget) for seed in seeds for arm in arms if (arm, seed) not in kept]
    timed = functools.partial(_timed, train_one)
    if workers > 1 and len(jobs) > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            results = pool.imap_unordered(timed, jobs)
            return kept | dict(_said(results, score, keep, budget))
    return kept | dict(_said(map(timed, jobs), score, keep, budget))


def _kept_file(keep: Path, arm: str, seed: int) -> Path:
    return keep / f"{arm}-seed{seed}.json"


def _kept(keep: Path | None, arm: str, seed: int, budget: dict) -> tuple[dict, float] | None:
    """A run kept in ``keep`` with this budget: (record, seconds); None if there is none."""
    if keep is None or not _kept_file(keep, arm, seed).exists():
        return None
    kept = json.loads(_kept_file(keep, arm, seed).read_text(encoding="utf-8"))
    if kept["budget"] != budget:
        return None
    print(f"{arm} seed {seed}: kept in {keep}", flush=True)
    return kept["record"], kept["seconds"]


def _timed(train_one: Callable[[str, int, dict], dict], job: tuple[str, int, dict]) -> Run:
    arm, seed, budget = job
    torch.set_num_threads(1)
    started = time.perf_counter()
    record = train_one(arm, seed, budget)
    return arm, seed, record, round(time.perf_counter() - started, 1)


def _said(results, score: str, keep: Path | None = None, budget: dict | None = None):
    for arm, seed, record, seconds in results:
        print(
            f"{arm} seed {seed}: {score.replace('_', ' ')} {record[score]} ({seconds:.0f} s)",
            flush=True,
        )
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            kept = {"budget": budget, "record": record, "seconds": seconds}
            _kept_file(keep, arm, seed).write_text(json.dumps(kept) + "\n", encoding="utf-8")
        yield (arm, seed), (record, seconds)


def write(path: Path, settings: dict, arms: Mapping[str, dict], found: Mapping, seeds) -> dict:
    """The sweep's record (``settings``, ``arms``, ``runs``, ``timings``), written to ``path``."""
    if settings.get("device", "cpu").startswith("cuda"):
        settings = dict(settings, device_name=torch.cuda.get_device_name(torch.device(settings["device"])))
    document = {
        "settings": settings,
        "arms": dict(arms),
        "runs": {arm: {str(seed): found[arm, seed][0] for seed in seeds} for arm in arms},
        "timings": {arm: {str(seed): found[arm, seed][1] for seed in seeds} for arm in arms},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return document


def record_name(record_file: str, lr: float, default_lr: float) -> str:
    """The record's file name: ``record_file`` at the default learning rate, else the
    package's name for a run at another rate (NAME_lrLR.json: ``sweep_record(name, lr)``)."""
    from transformer_book import sweep_file

    return record_file if lr == default_lr else sweep_file(record_file.removesuffix(".json"), lr)


def same_arm(arm: str):
    """Compare a one-arm record with the committed sweep: settings, the arm's configuration and
    runs, exactly (the timings and the other arms left out)."""

    def compare(new: Path, old: Path) -> list[str]:
        mine, theirs = (json.loads(path.read_text(encoding="utf-8")) for path in (new, old))
        same = (
            mine["settings"] == theirs["settings"]
            and arm in theirs["runs"]
            and mine["arms"][arm] == theirs["arms"].get(arm)
            and mine["runs"][arm] == theirs["runs"][arm]
        )
        return [] if same else [f"{new.name} (arm {arm!r})"]

    return compare


def main(
    argv: list[str] | None,
    description: str,
    sweep_and_write: Callable[..., dict],
    arms: Sequence[str],
    default_arm: str,
    seeds: Sequence[int],
    budget: dict,
    out: Path,
    record_file: str,
    summary: Callable[[dict], None] | None = None,
) -> int:
    """The sweeps' command line: every arm and seed, or ``--check --arm`` one arm; exit status."""
    default_lr = budget["lr"]
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="retrain --arm and compare")
    parser.add_argument("--arm", default=default_arm, choices=sorted(arms))
    parser.add_argument("--steps", type=int, default=None, help="another budget (recorded)")
    parser.add_argument(
        "--arms",
        nargs="+",
        default=list(arms),
        choices=sorted(arms),
        help="a subset (recorded)",
    )
    parser.add_argument("--batch-size", type=int, default=None, help="another batch size (recorded)")
    parser.add_argument(
        "--lr",
        type=float,
        default=None,
        help="another peak learning rate (recorded in its own file, NAME_lrLR.json)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=list(seeds))
    parser.add_argument("--workers", type=int, default=2, help="runs side by side")
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument(
        "--device",
        default="cpu",
        help="where each run trains, e.g. cuda (recorded, with the GPU's name; one run at a time)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="a folder: each finished run is kept there, and runs kept with the same budget are not trained again",
    )
    args = parser.parse_args(argv)
    budget = dict(budget, **({"steps": args.steps} if args.steps else {}))
    budget = dict(budget, **({"batch_size": args.batch_size} if args.batch_size else {}))
    if args.lr is not None:
        if not args.lr > 0:
            parser.error(f"--lr must be a positive number; got {args.lr}")
        budget = dict(budget, lr=args.lr)
    record_file = record_name(record_file, budget["lr"], default_lr)
    if args.device != "cpu":  # a CPU record's settings stay as they were
        budget = dict(budget, device=args.device)
        args.workers = 1  # one process holds the GPU
    started = time.perf_counter()
    if not args.check:
        document = sweep_and_write(args.out, list(args.arms), args.seeds, budget, args.workers, args.keep)
        if summary:
            summary(document)
        print(f"{(time.perf_counter() - started) / 60:.1f} min; wrote {args.out / record_file}")
        return 0
    different = regenerate_and_compare(
        lambda folder: sweep_and_write(folder, [args.arm], args.seeds, budget, args.workers),
        args.out,
        {record_file: same_arm(args.arm)},
    )
    print(f"retrained {args.arm} in {(time.perf_counter() - started) / 60:.1f} min")
    return check_outcome(different, args.out)
