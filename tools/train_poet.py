"""Train the poet the package ships (chapter 15) and record its history.

    python tools/train_poet.py           # train, write the weights and history (11-12 min)
    python tools/train_poet.py --check   # train again from scratch; exit 1 unless identical

The recipe is transformer_book.poet.train_poet (POET_CONFIG, POET_TRAINING): seeded, on one CPU
thread (two threads give other floating-point sums, and on the shared 2-core development machine were
5 times slower per step). Writes src/transformer_book/weights/tang_poet.pt (the weights in half
precision, the configuration and the vocabulary's characters) and tang_poet_history.json (the loss of
every step, the held-out perplexity of the stored weights, and 200 seeded poems written by them and
by the untrained network). The minutes it took and the training steps' throughput (tokens/s, FLOP/s
and MFU against a float32 peak measured in the same run: tools/throughput.py) are printed, not
stored, so that --check can compare the files byte for byte.
``--steps`` and ``--out`` give a toy budget and another folder (tests/test_train_poet.py).
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import torch

from notebooks import train_or_check, training_parser

SAMPLES = 200


def train_and_write(out: Path, steps: int | None = None) -> dict:
    from throughput import StepMeter, gpt_step_cost
    from transformer_book import (
        GPT,
        HISTORY_FILE,
        POET_CONFIG,
        POET_TRAINING,
        POET_WEIGHTS,
        GPTConfig,
        PoemVocabulary,
        Poet,
        perplexity,
        poem_split,
        train_poet,
    )

    torch.set_num_threads(1)
    started = time.perf_counter()
    with StepMeter(GPT, gpt_step_cost(PoemVocabulary.specials.index("<pad>"))) as meter:
        poet, losses = train_poet(steps=steps)
    minutes = (time.perf_counter() - started) / 60
    weights = {name: t.detach().half() for name, t in poet.model.state_dict().items()}
    stored = {"config": POET_CONFIG, "characters": poet.vocab.tokens[3:], "weights": weights}
    buffer = io.BytesIO()
    torch.save(stored, buffer)
    out.mkdir(parents=True, exist_ok=True)
    (out / POET_WEIGHTS).write_bytes(buffer.getvalue())
    # the held-out perplexity of the weights as shipped (rounded to half precision)
    poet.model.load_state_dict({name: t.float() for name, t in weights.items()})
    # 200 seeded poems at the defaults of Poet.write, by the shipped weights and by the
    # same network before training (the recipe's seed, no steps)
    samples = [poet.write(seed=seed) for seed in range(SAMPLES)]
    torch.manual_seed(POET_TRAINING["seed"])
    untrained = Poet(GPT(GPTConfig(len(poet.vocab), **POET_CONFIG)).eval(), poet.vocab)
    untrained_samples = [untrained.write(seed=seed) for seed in range(SAMPLES)]
    history = {
        "training": {**POET_TRAINING, **({"steps": steps} if steps else {})},
        "samples": samples,
        "untrained_samples": untrained_samples,
        "losses": [round(loss, 5) for loss in losses],
        "held_out_perplexity": round(perplexity(poet.model, poet.vocab, poem_split("held-out")), 4),
    }
    (out / HISTORY_FILE).write_text(json.dumps(history, indent=1) + "\n", encoding="utf-8")
    return {"minutes": minutes, "throughput": meter.result(), **history}


def main(argv: list[str] | None = None) -> int:
    args = training_parser(__doc__).parse_args(argv)

    def summary(result: dict) -> str:
        return (
            f"trained in {result['minutes']:.1f} min; held-out perplexity {result['held_out_perplexity']}\n"
            + result["throughput"].line("training steps")
        )

    return train_or_check(args.check, args.out, lambda out: train_and_write(out, args.steps), summary)


if __name__ == "__main__":
    raise SystemExit(main())
