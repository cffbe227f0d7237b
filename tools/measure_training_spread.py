"""Measure how far the chapters' in-notebook training runs land over seeds and CPU kernel paths.

    python tools/measure_training_spread.py            # about 15 minutes on 2 cores; writes the record
    python tools/measure_training_spread.py --runs dates --seeds 0 1

Four chapters train models in the notebook, with a fixed seed: chapter 9 the dates model (300
steps), chapter 11 four variants of it (80 steps each), chapter 12 the number-words model (120
steps; 40 of them live), chapter 15 a small GPT on the poems (40 steps). The same seed repeats a run on one machine, but another CPU or a GPU rounds differently, and
training grows the differences; so the figure a reader sees is that run's, and what the chapter
claims about it must hold over machines and seeds. This tool trains each run exactly as its chapter
does, for ``--seeds`` and on each kernel path of ``KERNEL_PATHS`` (tools/notebooks.py: this CPU's own
kernels, AVX2 and the portable ones: other CPUs' numerics on this one), one PyTorch thread per run,
two runs at a time, and writes ``src/transformer_book/weights/training_spread.json``: every run's
figures, and the machine. The chapters print the range beside their own run's figure
(``training_spread(name)``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from notebooks import KERNEL_PATHS, REPO_ROOT, WEIGHTS_DIR

RECORD = WEIGHTS_DIR / "training_spread.json"
SEEDS = (0, 1, 2, 3, 4)


def dates(seed: int) -> dict:
    """Chapter 9: DATES_TRAINING with another seed; the held-out exact match on 1,000 dates."""
    from transformer_book import DATES_TRAINING, dates_task, exact_match_accuracy, train_model

    task = dates_task()
    held_out = dates_task(held_out=True).pairs(1000, seed=1)
    model, history = train_model(task, **(DATES_TRAINING | {"seed": seed}), device="cpu")
    return {
        "held-out exact match %": round(100 * exact_match_accuracy(model, task, held_out, "cpu"), 1),
        "last loss": round(history[-1]["loss"], 4),
    }


def numbers(seed: int) -> dict:
    """Chapter 12: NUMBERS_TRAINING (120 steps) with ``seed``; the first training loss, the loss
    after the 40 steps the chapter trains live (the same seeded run's first 40), and the last."""
    from transformer_book import NUMBERS_CONFIG, NUMBERS_TRAINING, numbers_task, train_model

    _, history = train_model(numbers_task(), seed=seed, device="cpu", config=NUMBERS_CONFIG, **NUMBERS_TRAINING)
    return {
        "first loss": round(history[0]["loss"], 4),
        "loss after 40 steps": round(history[39]["loss"], 4),
        "last loss": round(history[-1]["loss"], 4),
    }


def poems(seed: int) -> dict:
    """Chapter 15: the 40-step GPT; its first and last loss and its held-out perplexity."""
    import torch

    from transformer_book import GPT, GPTConfig, PoemVocabulary, perplexity, poem_split, train_lm

    train, held_out = poem_split("train"), poem_split("held-out")
    vocab = PoemVocabulary.from_poems(train)
    torch.manual_seed(seed)
    model = GPT(GPTConfig(len(vocab), max_len=64, d_model=64, heads=4, layers=2))
    losses = train_lm(model, vocab, train, steps=40, batch_size=32, seed=seed, device="cpu")
    return {
        "first loss": round(losses[0], 4),
        "last loss": round(losses[-1], 4),
        "held-out perplexity": round(perplexity(model, vocab, held_out, device="cpu"), 1),
    }


def ablations(seed: int) -> dict:
    """Chapter 11: the paper's model and three variants, 80 steps each; the mean loss of the last
    25 steps, and the held-out character accuracy of greedy decoding."""
    from transformer_book import DATES_TRAINING, dates_task, greedy_decode, padding_mask, train_model

    task = dates_task()
    source, target = task.batch(dates_task(held_out=True).pairs(1000, seed=1), "cpu")
    mask = padding_mask(source, task.source_vocab.pad_id)
    variants = {
        "paper (post-norm)": {},
        "pre-norm": {"norm_first": True},
        "no positional encoding": {"positional": False},
        "no √d_k scaling": {"attention_scale": 1.0},
    }
    figures = {}
    for name, options in variants.items():
        model, history = train_model(
            task, 80, seed=seed, device="cpu", batch_size=DATES_TRAINING["batch_size"], **options
        )
        output = greedy_decode(model, source, mask, task.target_vocab.start_id, 11)
        figures[f"{name}: final loss"] = round(sum(h["loss"] for h in history[-25:]) / 25, 3)
        figures[f"{name}: character accuracy"] = round((output[:, 1:] == target[:, 1:]).float().mean().item(), 3)
    return figures


RUNS = {"dates": dates, "numbers": numbers, "poems": poems, "ablations": ablations}


def one_run(name: str, path: str, seed: int) -> dict:
    """``RUNS[name](seed)`` in a fresh process on kernel ``path``, one thread."""
    environment = {
        **os.environ,
        **KERNEL_PATHS[path],
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO_ROOT / "src"),
    }
    finished = subprocess.run(
        [sys.executable, __file__, "--one", name, str(seed)],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(finished.stdout.splitlines()[-1])


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), for the record."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=sorted(RUNS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--paths", nargs="+", choices=sorted(KERNEL_PATHS), default=list(KERNEL_PATHS))
    parser.add_argument("--one", nargs=2, metavar=("RUN", "SEED"), help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, default=RECORD)
    args = parser.parse_args(argv)
    if args.one:  # a child process: one run, its figures on the last line
        import torch

        torch.set_num_threads(1)
        print(json.dumps(RUNS[args.one[0]](int(args.one[1]))))
        return 0
    jobs = [(name, path, seed) for name in args.runs for seed in args.seeds for path in args.paths]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda job: one_run(*job), jobs))
    record = json.loads(args.output.read_text(encoding="utf-8")) if args.output.exists() else {}
    record["machine"] = f"{cpu_name()}, {os.cpu_count()} cores"
    record["kernel paths"] = {path: KERNEL_PATHS[path] for path in args.paths}
    for name in args.runs:
        record.setdefault("runs", {})[name] = {
            f"{path}, seed {seed}": figures for (run, path, seed), figures in zip(jobs, results) if run == name
        }
        for figure in next(iter(record["runs"][name].values())):
            values = [figures[figure] for figures in record["runs"][name].values()]
            print(f"{name}: {figure} from {min(values)} to {max(values)} over {len(values)} runs")
    args.output.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
