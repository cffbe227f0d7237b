"""Train chapter 11's four ablations and write their record (their loss curves and figures).

    python tools/train_ablations.py          # train the four variants, write the record (about 20 s)
    python tools/train_ablations.py --check  # train them again; fail unless the record is the same

Chapter 11 compares the paper's dates model with three variants, each changing one thing
(``VARIANTS``: pre-norm, no positional encoding, no sqrt(d_k) scaling), trained for ``STEPS``
steps from the chapter's seed on the same batches: ``train_model(dates_task(), STEPS, seed=SEED,
batch_size=DATES_TRAINING["batch_size"], **options)`` on the CPU, one thread, exactly as the
chapter's cell trains one of them live. For each variant the tool keeps every step's training
loss (rounded to 4 decimals: the chapter's chart), the final loss (the mean of the last 25 steps)
and the held-out character accuracy of greedy decoding on the chapter's 1,000 held-out dates, and
writes ``src/transformer_book/weights/ablations.json`` with the environment that trained them
(``notebooks.environment()``); chapter 11 reads it (``load_record("ablations.json")``). A second run
in the same environment writes the same file, which ``--check`` compares. How far the same
trainings land over seeds and CPU kernel paths is tools/measure_training_spread.py's record.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from notebooks import WEIGHTS_DIR, environment, train_or_check

RECORD_FILE = "ablations.json"
STEPS, SEED = 80, 0  # chapter 11's ABLATION_STEPS and seed
HELD_OUT, HELD_OUT_SEED = 1000, 1  # chapter 11's held-out dates
LAST = 25  # the final loss: the mean of the last 25 steps' losses
VARIANTS = {  # the chapter's ablations: name -> train_model's options
    "paper (post-norm)": {},
    "pre-norm": {"norm_first": True},
    "no positional encoding": {"positional": False},
    "no √d_k scaling": {"attention_scale": 1.0},
}


def final_loss(losses: list[float]) -> float:
    """The mean of the last ``LAST`` losses, rounded to 3 decimals (as the chapter prints it)."""
    return round(sum(losses[-LAST:]) / len(losses[-LAST:]), 3)


def train_all(steps: int = STEPS, held_out: int = HELD_OUT) -> dict:
    """Every variant of ``VARIANTS`` trained for ``steps`` steps: the record."""
    from transformer_book import DATES_TRAINING, dates_task, greedy_decode, padding_mask, train_model

    torch.set_num_threads(1)
    task = dates_task()
    source, target = task.batch(dates_task(held_out=True).pairs(held_out, seed=HELD_OUT_SEED), "cpu")
    mask = padding_mask(source, task.source_vocab.pad_id)
    variants = {}
    for name, options in VARIANTS.items():
        started = time.perf_counter()
        model, history = train_model(
            task, steps, seed=SEED, device="cpu", batch_size=DATES_TRAINING["batch_size"], **options
        )
        output = greedy_decode(model, source, mask, task.target_vocab.start_id, 11)
        losses = [entry["loss"] for entry in history]
        variants[name] = {
            "options": options,
            "final loss": final_loss(losses),
            "character accuracy": round((output[:, 1:] == target[:, 1:]).float().mean().item(), 3),
            "losses": [round(loss, 4) for loss in losses],
        }
        print(f"{name}: {time.perf_counter() - started:.1f} s", flush=True)
    settings = {"steps": steps, "seed": SEED, "batch_size": DATES_TRAINING["batch_size"], "device": "cpu"}
    settings |= {"held_out": held_out, "held_out_seed": HELD_OUT_SEED, "final loss": f"mean of the last {LAST}"}
    return {"settings": settings, "variants": variants, "environment": environment()}


def write(record: dict, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RECORD_FILE
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def summary(record: dict) -> str:
    return "; ".join(
        f"{name}: final loss {figures['final loss']}, character accuracy {figures['character accuracy']}"
        for name, figures in record["variants"].items()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="train again and compare with the record")
    args = parser.parse_args(argv)

    def train(out: Path) -> dict:
        record = train_all()
        write(record, out)
        return record

    return train_or_check(args.check, WEIGHTS_DIR, train, summary)


if __name__ == "__main__":
    raise SystemExit(main())
