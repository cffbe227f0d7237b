"""Teach the shipped poet to follow instructions (chapter 19) and record what each arm learnt.

    python tools/train_sft.py --arm full        # full fine-tuning, the prompt masked: the "sft" poet
    python tools/train_sft.py --arm unmasked    # the same with the prompt in the loss (record only)
    python tools/train_sft.py --arm lora        # LoRA of rank 8 on every linear layer: the adapters
    python tools/train_sft.py --arm full_first_verse  # the keyword from the first verse (record only)
    python tools/train_sft.py --arm full_anywhere     # the keyword from anywhere in the poem (record only)
    python tools/train_sft.py --arm full --seed 1  # another training seed, the same pairs: its record only
    python tools/train_sft.py --arm full --check  # train that arm again; exit 1 unless identical

The recipe is transformer_book.sft_poet (SFT_ARMS, SFT_PAIRS, PAIR_SHARES): seeded, on one CPU
thread, from instructable_poet() (the base poet, its vocabulary extended, its position rows moved
past the prompt). Each arm writes src/transformer_book/weights/tang_poet_sft_ARM.json (ARM_seedN for seed N > 0): its
settings, the loss of every step, the number of trained parameters and, measured on the poet as
the package loads it, the share of poems (seeds 0-19 for each keyword, 0-9 for the verse counts
and acrostics, T 0.8, top-p 0.9) that follow each kind of instruction and keep the regular form,
and the rhyme and repeated-rhyme rates of the 200 poems written for a keyword. "full" also writes
tang_poet_sft.pt (the weights in half precision, as the base poet's: pretrained_poet(stage="sft")),
"lora" tang_poet_sft_lora.pt (its adapters in half precision: lora_poet()). The minutes are
printed, not stored, so that --check compares the files byte for byte, and so is the training
steps' throughput (tokens/s, FLOP/s and MFU against a float32 peak measured in the same run on its
one thread: tools/throughput.py). MFU counts the model's FLOPs (the 6N rule and the attention
scores, chapter 18), as everyone counts it: LoRA's steps compute fewer (no gradient for a frozen
weight), so its figure reads higher than the arithmetic its steps did. ``--steps`` and ``--out``:
a toy budget and another folder.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import torch

from notebooks import train_or_check, training_parser

SEEDS, FEW_SEEDS = range(20), range(10)
ACROSTICS = ("春花秋月", "山水清风")


def half_bytes(tensors: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    return buffer.getvalue()


def measure(poet) -> dict:
    from transformer_book import (
        HELD_OUT_KEYWORDS,
        TRAIN_KEYWORDS,
        follow,
        follow_rate,
        follows,
        regular_form,
        rhyme_report,
    )

    def shares(poems: list[str], keywords: str) -> dict:
        return {
            "poems": len(poems),
            "follow": sum(k in p for k, p in zip(keywords, poems)) / len(poems),
            "form": sum(map(regular_form, poems)) / len(poems),
        }

    train = [(k, follow(poet, "keyword", k, seed=seed)) for k in TRAIN_KEYWORDS for seed in SEEDS]
    held_out = [(k, follow(poet, "keyword", k, seed=seed)) for k in HELD_OUT_KEYWORDS for seed in SEEDS]
    asked = [poem for _, poem in train + held_out]
    return {
        "keyword_train": shares([p for _, p in train], [k for k, _ in train]),
        "keyword_held_out": shares([p for _, p in held_out], [k for k, _ in held_out]),
        "verses": follow_rate(poet, "verses", (4, 8), FEW_SEEDS),
        "acrostic": follow_rate(poet, "acrostic", ACROSTICS, FEW_SEEDS),
        "keyword_poems": {**rhyme_report(asked), "form": sum(map(regular_form, asked)) / len(asked)},
        "samples": [(k, p, follows("keyword", k, p)) for k, p in (train + held_out)[::20]],
    }


def train_and_write(arm: str, out: Path, steps: int | None = None, seed: int = 0) -> dict:
    from throughput import StepMeter, gpt_step_cost
    from transformer_book import (
        GPT,
        LORA_ADAPTERS,
        PAIR_SHARES,
        SFT_ARMS,
        SFT_PAIRS,
        SFT_WEIGHTS,
        PoemVocabulary,
        adapters_of,
        instructable_poet,
        load_adapters,
        sft_poet,
        sft_record_name,
        trainable_parameters,
    )

    torch.set_num_threads(1)
    started, cpu = time.perf_counter(), time.process_time()
    with StepMeter(GPT, gpt_step_cost(PoemVocabulary.specials.index("<pad>"))) as meter:
        poet, losses = sft_poet(arm, steps=steps, seed=seed)
    minutes, cpu_minutes = (time.perf_counter() - started) / 60, (time.process_time() - cpu) / 60
    trained = trainable_parameters(poet.model)
    out.mkdir(parents=True, exist_ok=True)
    if arm == "lora":  # measured as lora_poet() loads it: the half-precision adapters
        adapters = {n: {k: t.half() for k, t in pair.items()} for n, pair in adapters_of(poet.model).items()}
        if seed == 0:  # the shipped adapters; another seed writes its record only
            (out / LORA_ADAPTERS).write_bytes(half_bytes(adapters))
        settings = SFT_ARMS["lora"]
        poet = load_adapters(instructable_poet(), adapters, settings["rank"], settings["alpha"])
    else:  # measured as pretrained_poet(stage="sft") loads it: in half precision
        weights = {name: t.detach().half() for name, t in poet.model.state_dict().items()}
        if arm == "full" and seed == 0:  # the shipped "sft" poet
            config = {k: v for k, v in vars(poet.model.config).items() if k != "vocab_size"}
            stored = {"config": config, "characters": poet.vocab.tokens[3:], "weights": weights}
            (out / SFT_WEIGHTS).write_bytes(half_bytes(stored))
        poet.model.load_state_dict({name: t.float() for name, t in weights.items()})
    record = {
        "arm": arm,
        "training": {**SFT_ARMS[arm], **({"steps": steps} if steps else {}), "seed": seed},
        "pairs": {**SFT_PAIRS, "shares": PAIR_SHARES},
        "trained_parameters": trained,
        "parameters": sum(p.numel() for n, p in poet.model.named_parameters() if "lora_" not in n),
        "losses": [round(loss, 5) for loss in losses],
        **measure(poet),
    }
    (out / sft_record_name(arm, seed)).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", "utf-8")
    return {
        "minutes": minutes,
        "cpu_minutes": cpu_minutes,
        "total_minutes": (time.perf_counter() - started) / 60,
        "throughput": meter.result(),
        **record,
    }


def main(argv: list[str] | None = None) -> int:
    from transformer_book import SFT_ARMS

    parser = training_parser(__doc__, SFT_ARMS, "another training seed: its record only")
    args = parser.parse_args(argv)

    def summary(result: dict) -> str:
        return (
            f"{args.arm}: trained in {result['minutes']:.1f} min ({result['cpu_minutes']:.1f} min of CPU), "
            f"measured in {result['total_minutes']:.1f} min in all; keyword "
            f"{result['keyword_train']['follow']:.2f} (held out {result['keyword_held_out']['follow']:.2f})\n"
            + result["throughput"].line("training steps")
        )

    return train_or_check(
        args.check, args.out, lambda out: train_and_write(args.arm, out, args.steps, args.seed), summary
    )


if __name__ == "__main__":
    raise SystemExit(main())
