"""Teach the shipped poet to rhyme by GRPO or DPO (chapter 20) and record what each arm did.

    python tools/train_grpo.py --arm grpo          # GRPO with the rhyme reward (form as its gate)
    python tools/train_grpo.py --arm dpo           # DPO on pairs of the poet's own poems
    python tools/train_grpo.py --arm grpo --check  # train that arm again; exit 1 unless identical

The recipe is transformer_book.tuned_poet (PREFERENCE_ARMS): seeded, on one CPU thread, from the base
poet. Each arm writes src/transformer_book/weights/tang_poet_ARM.json: its settings, the history of
every step (loss; for GRPO the round's mean reward, form, flat groups, KL and clipped share; for DPO
the rewards and their accuracy) and, measured on the weights as shipped, the shares of 200 seeded poems
(seeds 0-199, T 0.8, top-p 0.9) that rhyme, repeat a rhyme character and keep the regular form, their
distinct verses, and the held-out perplexity of real poems, beside the same measures of the base poet;
and tang_poet_ARM.pt, the weights in half precision as the base poet's. The minutes are printed, not
stored, so that --check compares the files byte for byte. ``--steps`` and ``--out``: a toy budget and
another folder (tests/test_train_grpo.py).
"""

from __future__ import annotations

import argparse
import io
import json
import time
from pathlib import Path

import torch

from notebooks import REPO_ROOT, train_or_check

WEIGHTS_DIR = REPO_ROOT / "src" / "transformer_book" / "weights"
SEEDS = range(200)


def measure(poet) -> dict:
    from transformer_book import VERSE, perplexity, poem_split, regular_form, rhyme_report

    poems = [poet.write(seed=seed) for seed in SEEDS]
    verses = [verse for poem in poems for verse in VERSE.findall(poem)]
    return {
        **rhyme_report(poems),
        "form": sum(map(regular_form, poems)) / len(poems),
        "distinct_verses": len(set(verses)) / max(len(verses), 1),
        "held_out_perplexity": round(perplexity(poet.model, poet.vocab, poem_split("held-out")), 4),
        "samples": poems[:20],
    }


def train_and_write(arm: str, out: Path, steps: int | None = None) -> dict:
    from transformer_book import (
        PREFERENCE_ARMS,
        PREFERENCE_RECORD,
        PREFERENCE_WEIGHTS,
        pretrained_poet,
        tuned_poet,
    )

    torch.set_num_threads(1)
    started, cpu = time.perf_counter(), time.process_time()
    poet, history = tuned_poet(arm, steps=steps, settings=PREFERENCE_ARMS[arm])
    minutes, cpu_minutes = (time.perf_counter() - started) / 60, (time.process_time() - cpu) / 60
    out.mkdir(parents=True, exist_ok=True)
    weights = {name: t.detach().half() for name, t in poet.model.state_dict().items()}
    config = {k: v for k, v in vars(poet.model.config).items() if k != "vocab_size"}
    buffer = io.BytesIO()
    torch.save({"config": config, "characters": poet.vocab.tokens[3:], "weights": weights}, buffer)
    (out / PREFERENCE_WEIGHTS.format(arm=arm)).write_bytes(buffer.getvalue())
    poet.model.load_state_dict({name: t.float() for name, t in weights.items()})  # as shipped
    rounded = [{key: round(value, 6) for key, value in record.items()} for record in history]
    record = {
        "arm": arm,
        "training": {**PREFERENCE_ARMS[arm], **({"steps": steps} if steps else {}), "seed": 0},
        "history": rounded,
        "tuned": measure(poet),
        "base": measure(pretrained_poet()),
    }
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    (out / PREFERENCE_RECORD.format(arm=arm)).write_text(text, "utf-8")
    return {"minutes": minutes, "cpu_minutes": cpu_minutes, **record}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", required=True, choices=["grpo", "dpo"])
    parser.add_argument("--check", action="store_true", help="train again and compare")
    parser.add_argument("--steps", type=int, default=None, help="a toy budget")
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    args = parser.parse_args(argv)

    def summary(result: dict) -> str:
        tuned, base = result["tuned"], result["base"]
        return (
            f"{args.arm}: trained in {result['minutes']:.1f} min ({result['cpu_minutes']:.1f} min of CPU); "
            f"rhyme {base['rhyme']:.1%} -> {tuned['rhyme']:.1%}, repeated {tuned['repeated']:.1%}, "
            f"form {tuned['form']:.1%}, held-out perplexity {base['held_out_perplexity']:.2f} -> "
            f"{tuned['held_out_perplexity']:.2f}"
        )

    return train_or_check(args.check, args.out, lambda out: train_and_write(args.arm, out, args.steps), summary)


if __name__ == "__main__":
    raise SystemExit(main())
