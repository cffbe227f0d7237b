"""Length beyond training (chapter 16): five position schemes trained on four-verse poems, recorded.

    python tools/train_length_sweep.py                 # the record: every arm at the shipped poet's budget
    python tools/train_length_sweep.py --check --arm alibi   # retrain one arm, compare it with the record

A small ``ModernDecoder`` (``SIZE``) is trained on the four-verse poems of chapter 15's training
split only (26 tokens: <s>, four verses of six characters, <s>), once for each way of giving it
positions: the sinusoids added to the embeddings (2017), a learned table (GPT-2), rotary positions
(Llama), ALiBi (Press et al., 2022: a penalty on each score, growing with the distance) and none at
all (NoPE: only the causal mask; Kazemnejad et al., 2023). Everything else is the same: the data,
the batches, the steps, the seed (``SEEDS``; ``train_lm``, the poet's recipe).

The held-out four-verse poems are scored every ``sweeps.EVAL_EVERY`` steps (the held-out curve),
and each run keeps the weights of its lowest score (early stopping: 800 steps of 64 poems are
15 passes over the 3,484 four-verse poems, and some schemes overfit them: their held-out
perplexity rises after step 300 to 450). Those weights are then scored on the held-out
eight-verse poems, twice the training length: the mean cross-entropy at every position (49
predictions: 48 characters and the closing <s>); the last step's weights too
(``loss_by_position_end``). A rotary run is scored on the eight-verse poems twice more, its angles stretched by
``RESCALED`` (``rope_frequencies``: position interpolation and the NTK-aware base, factor 2, no
further training). ``TRAINING`` is the shipped poet's budget (800 steps of 64 poems); the
committed record is every arm at that budget, three seeds (2026-11-28, the 2-core Intel Xeon, two
runs side by side: 26.5 minutes; ``timings`` has each run's seconds). A learned table has no row for a position it was never
given: it is built with ``TRAIN_LEN`` rows and scored on the first ``TRAIN_LEN`` tokens only (its
later positions are recorded as null). The vocabulary is the whole training split's, as in chapter
15, so that the eight-verse poems' characters are known.

Writes ``src/transformer_book/weights/length_sweep.json``: ``settings``, ``arms``, ``runs`` (arm ->
seed -> the loss by position, the four-verse perplexity, the training curve) and ``timings`` (kept
apart, so that ``--check`` compares one arm's settings, configuration and runs exactly). ``--steps``,
``--seeds`` and ``--out`` give a toy budget and another folder (tests/test_train_length_sweep.py).
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import torch
import torch.nn.functional as F

import sweeps
from notebooks import WEIGHTS_DIR
from train_modern_sweep import curve

RECORD_FILE = "length_sweep.json"
TRAIN_LEN = 26  # <s>, 4 verses of 5 characters and a mark, <s>
PREDICTIONS = 49  # in an eight-verse poem: 48 characters and the closing <s>
SIZE = dict(d_model=64, heads=4, layers=3, tie_embeddings=True)
ARMS = {  # name: (label, positions)
    "sinusoidal": ("sinusoidal (2017)", "sinusoidal"),
    "learned": ("learned table (GPT-2)", "learned"),
    "rotary": ("rotary (Llama)", "rotary"),
    "alibi": ("ALiBi", "alibi"),
    "none": ("none (NoPE)", "none"),
}
TRAINING = dict(steps=800, batch_size=64, lr=3e-3)  # the shipped poet's budget
RESCALED = {  # rotary angles stretched for twice the trained length (rope_frequencies)
    "interpolated": {"rope_type": "linear", "factor": 2.0},
    "ntk": {"rope_type": "ntk", "factor": 2.0},
}
SEEDS = (0, 1, 2)
MARKS = re.compile("[，。？]")


def verses(poem: str) -> int:
    return len(MARKS.findall(poem))


def build(arm: str, vocab_size: int) -> torch.nn.Module:
    from transformer_book import ModernConfig, ModernDecoder

    if arm not in ARMS:
        raise ValueError(f"arm must be one of {sorted(ARMS)}; got {arm!r}")
    return ModernDecoder(ModernConfig(vocab_size, positions=ARMS[arm][1], max_len=TRAIN_LEN, **SIZE))


@torch.no_grad()
def loss_by_position(model, batch: torch.Tensor, pad_id: int, positions: int) -> list:
    """The mean cross-entropy (nats) of the prediction at each position 0 .. positions - 1
    over the batch's rows (padding left out); null where the model cannot be run."""
    model.eval()
    seen = batch[:, : positions + 1]
    if model.config.positions == "learned":  # no row for a later position
        seen = seen[:, : model.config.max_len]
    logits = model(seen)[:, :-1]  # (batch, seen - 1, vocab)
    targets = seen[:, 1:]
    losses = F.cross_entropy(
        logits.transpose(1, 2), targets, ignore_index=pad_id, reduction="none"
    )  # (batch, seen - 1)
    counts = (targets != pad_id).sum(0)
    means = (losses.sum(0) / counts).tolist()
    return [round(value, 4) for value in means] + [None] * (positions - len(means))


def train_one(arm: str, seed: int, training: dict) -> dict:
    """Train one arm with one seed; its record."""
    from transformer_book import PoemVocabulary, perplexity, poem_split

    everything = poem_split("train", by=sweeps.SPLIT)
    vocab = PoemVocabulary.from_poems(everything)
    train = [poem for poem in everything if verses(poem) == 4]
    held_out = poem_split("held-out", by=sweeps.SPLIT)
    short = [poem for poem in held_out if verses(poem) == 4]
    long = [poem for poem in held_out if verses(poem) == 8]
    device = training.get("device", "cpu")  # train_lm reads it from the budget
    torch.manual_seed(seed)
    model = build(arm, len(vocab)).to(device)
    best = {"perplexity": math.inf}  # early stopping: the weights at the lowest held-out score

    def score(model) -> float:
        value = perplexity(model, vocab, short, device=device)
        if value < best["perplexity"]:
            best.update(perplexity=value, state={k: v.clone() for k, v in model.state_dict().items()})
        return value

    losses, held_out_curve = sweeps.train_scored(model, vocab, train, seed, score, training, f"{arm} seed {seed}")
    eight = vocab.batch(long, device)
    end = loss_by_position(model, eight, vocab.pad_id, PREDICTIONS)
    model.load_state_dict(best["state"])
    record = {
        "loss_by_position": loss_by_position(model, eight, vocab.pad_id, PREDICTIONS),
        "loss_by_position_end": end,
        "best_step": min(held_out_curve, key=lambda point: point[1])[0],
        "four_verse_perplexity": min(value for _, value in held_out_curve),
        "held_out_curve": held_out_curve,
        "train_loss": curve(losses),
    }
    if ARMS[arm][1] == "rotary":
        trained = model.config
        for name, scaling in RESCALED.items():
            model.config = dataclasses.replace(trained, rope_scaling=scaling)
            record[f"loss_by_position_{name}"] = loss_by_position(model, eight, vocab.pad_id, PREDICTIONS)
        model.config = trained
    return record


def settings(training: dict, seeds) -> dict:
    from transformer_book import HELD_OUT, POEM_SPLIT_SEED, poem_split

    held_out = poem_split("held-out", by=sweeps.SPLIT)
    return {
        **training,
        "seeds": list(seeds),
        "train_len": TRAIN_LEN,
        "size": SIZE,
        "data": f"the four-verse poems of poem_split('train', by={sweeps.SPLIT!r}) "
        f"({sum(verses(p) == 4 for p in poem_split('train', by=sweeps.SPLIT))}); scored on the "
        f"{sum(verses(p) == 8 for p in held_out)} eight-verse and "
        f"{sum(verses(p) == 4 for p in held_out)} four-verse poems of "
        f"poem_split('held-out', by={sweeps.SPLIT!r}) (POEM_SPLIT_SEED={POEM_SPLIT_SEED}, {HELD_OUT} held-out poems)",
        "loss_by_position": "mean cross-entropy in nats of the prediction at position t (of token t + 1), t = 0 .. 48",
        "eval_every": sweeps.EVAL_EVERY,
        "kept": "each run's weights at its lowest held-out four-verse perplexity (scored every "
        "eval_every steps: early stopping), best_step; loss_by_position_end: the last step's weights",
        "rescaled": RESCALED,
        "init": "GPT-2's: N(0, 0.02), residual-stream projections / sqrt(2 * layers)",
        "recipe": "transformer_book.poet.train_lm; one PyTorch thread a run",
        "torch": torch.__version__,
    }


def sweep_and_write(out: Path, arms, seeds, training: dict, workers: int = 2, keep: Path | None = None) -> dict:
    from transformer_book import PoemVocabulary, poem_split

    vocab_size = len(PoemVocabulary.from_poems(poem_split("train", by=sweeps.SPLIT)))
    found = sweeps.run(train_one, arms, seeds, training, "four_verse_perplexity", workers, keep)

    def arm_record(arm):
        torch.manual_seed(0)
        parameters = sum(p.numel() for p in build(arm, vocab_size).parameters())
        return {
            "label": ARMS[arm][0],
            "positions": ARMS[arm][1],
            "parameters": parameters,
        }

    return sweeps.write(
        out / sweeps.record_name(RECORD_FILE, training["lr"], TRAINING["lr"]),
        settings(training, seeds),
        {arm: arm_record(arm) for arm in arms},
        found,
        seeds,
    )


def main(argv: list[str] | None = None) -> int:
    return sweeps.main(
        argv,
        __doc__.split("\n\n")[0],
        sweep_and_write,
        ARMS,
        "alibi",
        SEEDS,
        TRAINING,
        WEIGHTS_DIR,
        RECORD_FILE,
    )


if __name__ == "__main__":
    raise SystemExit(main())
