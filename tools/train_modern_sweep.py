"""What each of Llama's changes buys on the poems (chapter 16): a seeded sweep, recorded.

    python tools/train_modern_sweep.py                 # the committed record: every arm at the shipped poet's budget
    python tools/train_modern_sweep.py --arms gpt2 modern   # the two blocks only
    python tools/train_modern_sweep.py --check --arm learned   # retrain one arm, compare it with the record
    python tools/train_modern_sweep.py --steps 800 --arms gpt2 modern --workers 1 --keep runs/modern
        # the poet's budget, one run at a time, each kept in runs/modern as it ends (stop and go on)
    python tools/train_modern_sweep.py --device cuda   # every arm on a GPU (one at a time)
    python tools/train_modern_sweep.py --arms gpt2 modern --lr 0.001   # the learning-rate grid:
        # weights/modern_sweep_lr0.001.json (sweep_record("modern_sweep", lr=0.001))

On chapter 15's Tang poems (``poem_split`` and ``PoemVocabulary`` as the package defines them), with
the poet's recipe (``train_lm``: AdamW at 3e-3, warm-up then linear decay) and the same batches for
every arm, it trains chapter 15's GPT-2 block, the modern block (``ModernDecoder``: RMSNorm, rotary
positions, SwiGLU, grouped-query attention with 2 key/value heads for 4 query heads, no biases),
and the modern block with one change undone at a time, each at the poet's size (d_model 128, 4
heads, 4 layers, the output tied to the embedding as in chapter 15, so that the parameter counts
match within a few percent; each arm's count is recorded). Every arm starts from GPT-2's rule
(N(0, 0.02), the projections into the residual stream divided by sqrt(2 layers)): ``GPT`` and
``ModernDecoder`` both initialise so. Every arm is trained with each of ``SEEDS`` (the seed draws
the initial weights and the batches) and scored by its perplexity on the held-out poems, also every
``sweeps.EVAL_EVERY`` steps (the held-out curve).

``SWEEP`` is the shipped poet's budget (800 steps of 64 poems). The committed record is every arm
at that budget, three seeds, made on 2026-11-28 on a 2-core Intel Xeon, two runs side by side: the
two blocks first (10 to 21 minutes a run on the then busy machine), then the four arms that undo
one change at a time, with ``--keep`` reading the blocks' kept runs (9 to 10 minutes a run, 56
minutes of wall time); ``timings`` has each run's seconds. ``--check`` retrains its default arm
(about 10 to 20 minutes). The arms share the poet's learning rate; the two blocks were also
trained at the other rates of ``LR_GRID`` (``--lr``: the same seeds and batches, one record a
rate, ``weights/modern_sweep_lrLR.json``; 2026-11-28, two runs side by side, 10 to 12 minutes
a run, 32 and 33 minutes for 1e-3 and 1e-2).
Writes ``src/transformer_book/weights/modern_sweep.json``: ``settings``, ``arms`` (each arm's
configuration and parameter count), ``runs`` (arm -> seed -> held-out perplexity, the held-out
curve, and the training loss every ``LOSS_EVERY`` steps) and ``timings`` (seconds per run, kept
apart: ``--check`` retrains one arm, ``--arm``, and compares its settings, configuration and runs
exactly, timings left out). ``--steps``, ``--arms``, ``--seeds`` and ``--out`` give another budget,
a subset and another folder (tests/test_train_modern_sweep.py).
"""

from __future__ import annotations

from pathlib import Path

import torch

import sweeps
from notebooks import WEIGHTS_DIR

RECORD_FILE = "modern_sweep.json"
SIZE = dict(d_model=128, heads=4, layers=4)  # the shipped poet's (POET_CONFIG)
MODERN = dict(SIZE, kv_heads=2, tie_embeddings=True, max_len=64)
ARMS = {  # name: (label, the modern block's options changed; None: chapter 15's GPT)
    "gpt2": ("GPT-2 block (chapter 15)", None),
    "modern": ("modern block", {}),
    "layernorm": ("LayerNorm for RMSNorm", {"norm": "layer"}),
    "learned": ("learned positions for RoPE", {"positions": "learned"}),
    "gelu": ("GELU layer for SwiGLU", {"feed_forward": "gelu"}),
    "mha": ("multi-head for grouped-query", {"kv_heads": 4}),
}
SWEEP = dict(steps=800, batch_size=64, lr=3e-3)  # the shipped poet's budget
SEEDS = (0, 1, 2)
LOSS_EVERY = 50  # the training curve: the mean loss of each stretch of this many steps


def build(arm: str, vocab_size: int, max_len: int = 64) -> torch.nn.Module:
    """The arm's model, freshly initialised from the current torch seed."""
    from transformer_book import GPT, GPTConfig, ModernConfig, ModernDecoder

    if arm not in ARMS:
        raise ValueError(f"arm must be one of {sorted(ARMS)}; got {arm!r}")
    changes = ARMS[arm][1]
    if changes is None:
        return GPT(GPTConfig(vocab_size, max_len=max_len, **SIZE))
    return ModernDecoder(ModernConfig(vocab_size, **dict(MODERN, max_len=max_len, **changes)))


def curve(losses: list[float], every: int = LOSS_EVERY) -> list[float]:
    return [
        round(sum(chunk) / len(chunk), 4) for chunk in (losses[i : i + every] for i in range(0, len(losses), every))
    ]


def train_one(arm: str, seed: int, sweep: dict) -> dict:
    """Train one arm with one seed; its record."""
    from transformer_book import PoemVocabulary, perplexity, poem_split

    train = poem_split("train", by=sweeps.SPLIT)
    vocab = PoemVocabulary.from_poems(train)
    held_out = poem_split("held-out", by=sweeps.SPLIT)
    device = sweep.get("device", "cpu")  # train_lm reads it from the budget
    torch.manual_seed(seed)
    model = build(arm, len(vocab)).to(device)
    losses, held_out_curve = sweeps.train_scored(
        model,
        vocab,
        train,
        seed,
        lambda model: perplexity(model, vocab, held_out, device=device),
        sweep,
        f"{arm} seed {seed}",
    )
    return {
        "held_out_perplexity": held_out_curve[-1][1],
        "held_out_curve": held_out_curve,
        "train_loss": curve(losses),
    }


def settings(sweep: dict, seeds) -> dict:
    from transformer_book import HELD_OUT, POEM_SPLIT_SEED

    return {
        **sweep,
        "seeds": list(seeds),
        "loss_every": LOSS_EVERY,
        "eval_every": sweeps.EVAL_EVERY,
        "init": "GPT-2's: N(0, 0.02), residual-stream projections / sqrt(2 * layers), in every arm",
        "data": f"poem_split('train', by={sweeps.SPLIT!r}) / poem_split('held-out', by={sweeps.SPLIT!r}): exact repeats as one poem "
        f"(POEM_SPLIT_SEED={POEM_SPLIT_SEED}, {HELD_OUT} held-out poems)",
        "recipe": "transformer_book.poet.train_lm (AdamW, weight decay 0.01, warm-up over a "
        "tenth, then linear decay); one PyTorch thread a run",
        "torch": torch.__version__,
    }


def arm_record(arm: str, vocab_size: int) -> dict:
    label, changes = ARMS[arm]
    torch.manual_seed(0)
    model = build(arm, vocab_size)
    config = dict(SIZE, max_len=64) if changes is None else dict(MODERN, **changes)
    return {
        "label": label,
        "config": config,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def sweep_and_write(out: Path, arms, seeds, sweep: dict, workers: int = 2, keep: Path | None = None) -> dict:
    from transformer_book import PoemVocabulary, poem_split

    vocab_size = len(PoemVocabulary.from_poems(poem_split("train", by=sweeps.SPLIT)))
    found = sweeps.run(train_one, arms, seeds, sweep, "held_out_perplexity", workers, keep)
    return sweeps.write(
        out / sweeps.record_name(RECORD_FILE, sweep["lr"], SWEEP["lr"]),
        settings(sweep, seeds),
        {arm: arm_record(arm, vocab_size) for arm in arms},
        found,
        seeds,
    )


def summary(document: dict) -> None:
    for arm, runs in document["runs"].items():
        values = [run["held_out_perplexity"] for run in runs.values()]
        print(f"{ARMS[arm][0]:32} mean {sum(values) / len(values):.3f} range {min(values)}..{max(values)}")


def main(argv: list[str] | None = None) -> int:
    return sweeps.main(
        argv,
        __doc__.split("\n\n")[0],
        sweep_and_write,
        ARMS,
        "modern",
        SEEDS,
        SWEEP,
        WEIGHTS_DIR,
        RECORD_FILE,
        summary,
    )


if __name__ == "__main__":
    raise SystemExit(main())
