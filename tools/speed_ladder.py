"""The speed ladder of the poet's training step (issue 44): each rung against the float32 baseline,
measured side by side in one run.

    python tools/speed_ladder.py --plan              # the rungs and what each changes (no training)
    python tools/speed_ladder.py                     # every rung this machine can run (not run yet)
    python tools/speed_ladder.py --rungs bf16 --steps 20

SCAFFOLD: written and its plan tested (tests/test_train_scaling_sweep.py runs ``--plan``), not run:
timings belong to a quiet machine (MAINTAINING.md's plan). On chapter 15's poems, the shipped poet's
configuration and recipe (AdamW at ``LR``, batches of ``BATCH_SIZE`` poems drawn by
``random.Random(SEED)``), each rung and the baseline start from the same seeded weights and take the
same batches, one step each in turn (the order alternating), so a machine that slows down slows both
alike. For each rung it prints the median step time of both, the ratio of their tokens/s (padding
not counted), each one's MFU against a float32 peak measured in the same run (``matmul_peak``; a bf16
rung should also be read against the bf16 peak: to add), and both losses after the last step, whose
difference is to be checked against a tolerance measured over seeds before a rung is called faster
at no cost.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time

import torch

BATCH_SIZE = 64
LR = 3e-3
SEED = 0
# name: what the rung changes against the baseline (float32, AdamW's default implementation,
# the fused attention kernel, eager mode, one thread)
RUNGS = {
    "foreach": "AdamW(foreach=True): one kernel per step for all weights",
    "fused": "AdamW(fused=True): the update fused into one kernel",
    "explicit_attention": "chapter 2's explicit attention (need_weights=True) instead of the fused kernel",
    "bf16": "torch.autocast(bfloat16) around the forward pass and the loss (where has_bf16_matmul)",
    "compile": "torch.compile(model, dynamic=False) with the batches padded to the model's max_len",
    "threads2": "torch.set_num_threads(2) for the rung (the baseline keeps 1)",
    "batch128": "128 poems a step (tokens/s compared, not step time)",
}


def setup(rung: str | None, config, device="cpu"):
    """(model, optimizer, forward context, model options, batch size, pad to) for the rung or the baseline."""
    from transformer_book import GPT, has_bf16_matmul

    torch.manual_seed(SEED)
    model = GPT(config).to(device)
    options = {"foreach": False}
    if rung == "foreach":
        options = {"foreach": True}
    elif rung == "fused":
        options = {"fused": True}
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01, **options)
    context = contextlib.nullcontext
    if rung == "bf16":
        if not has_bf16_matmul(device):
            raise ValueError(f"rung 'bf16' needs bfloat16 matrix instructions; {device} has none")

        def context():
            return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)

    runner = torch.compile(model, dynamic=False) if rung == "compile" else model
    model_options = {"need_weights": True} if rung == "explicit_attention" else {}
    batch_size = 128 if rung == "batch128" else BATCH_SIZE
    pad_to = config.max_len if rung == "compile" else None
    return model, runner, optimizer, context, model_options, batch_size, pad_to


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", action="store_true", help="list the rungs; train nothing")
    parser.add_argument("--rungs", nargs="*", default=list(RUNGS), choices=list(RUNGS))
    parser.add_argument("--steps", type=int, default=20, help="timed steps per rung and baseline")
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    if args.plan:
        for name, change in RUNGS.items():
            print(f"{name:>18}: {change}")
        return 0
    torch.set_num_threads(1)
    from transformer_book import (
        POET_CONFIG,
        GPTConfig,
        PoemVocabulary,
        causal_lm_loss,
        flops_per_token,
        matmul_peak,
        mfu,
        poem_split,
    )

    poems = poem_split("train")
    vocab = PoemVocabulary.from_poems(poems)
    config = GPTConfig(len(vocab), **POET_CONFIG)
    peak = matmul_peak("cpu")
    print(f"float32 peak measured in this run: {peak / 1e9:.1f} GFLOP/s (1 thread)")
    for rung in args.rungs:
        arms = {"baseline": setup(None, config), rung: setup(rung, config)}
        draw = random.Random(SEED)
        seconds = {name: [] for name in arms}
        flops = {name: [] for name in arms}
        real = {name: [] for name in arms}  # tokens that are not padding
        losses = {}
        for step in range(args.warmup + args.steps):
            chosen = draw.sample(poems, max(arm[5] for arm in arms.values()))
            order = list(arms) if step % 2 == 0 else list(reversed(arms))
            for name in order:
                _model, runner, optimizer, context, options, batch_size, pad_to = arms[name]
                tokens = vocab.batch(chosen[:batch_size])
                if pad_to is not None:
                    tokens = torch.nn.functional.pad(tokens, (0, pad_to - tokens.size(1)), value=vocab.pad_id)
                torch.set_num_threads(2 if name == "threads2" else 1)
                started = time.perf_counter()
                optimizer.zero_grad()
                with context():
                    loss = causal_lm_loss(runner(tokens, **options), tokens, vocab.pad_id)
                loss.backward()
                optimizer.step()
                elapsed = time.perf_counter() - started
                torch.set_num_threads(1)
                if step >= args.warmup:
                    seconds[name].append(elapsed)
                    flops[name].append(tokens.numel() * flops_per_token(config, tokens.size(1)))
                    real[name].append(int((tokens != vocab.pad_id).sum()))
                losses[name] = loss.item()
        median = {name: statistics.median(seconds[name]) for name in arms}
        speed = {name: sum(real[name]) / sum(seconds[name]) for name in arms}  # tokens/s
        utilisation = {
            name: statistics.median(map(mfu, flops[name], seconds[name], [peak] * args.steps)) for name in arms
        }
        print(
            f"{rung:>18}: baseline {1000 * median['baseline']:.0f} ms (MFU {utilisation['baseline']:.0%}), "
            f"rung {1000 * median[rung]:.0f} ms (MFU {utilisation[rung]:.0%}), "
            f"{speed[rung] / speed['baseline']:.2f}x the tokens/s; loss after {args.warmup + args.steps} steps "
            f"{losses['baseline']:.4f} vs {losses[rung]:.4f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
