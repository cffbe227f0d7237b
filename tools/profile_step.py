"""Where the poet's float32 training step spends its time, and what keeps its MFU low (issue 44).

    python tools/profile_step.py             # the poet's recipe: 2 warm-up steps, 3 timed, then profiled
    python tools/profile_step.py --steps 5 --batch 32
    python tools/profile_step.py --translator  # chapter 14's translator, its recipe's batches

The shipped poet's configuration (chapter 15's ``POET_CONFIG``, its vocabulary from the training poems),
freshly initialised and trained with its recipe's optimizer (AdamW, learning rate 3e-3) on seeded
batches of ``--batch`` training poems, on one CPU thread. ``torch.profiler`` records every operator's
own (self) time and the FLOPs of the matrix products over the profiled steps; the operators are grouped
by what they do (``GROUPS``). Beside the table: the step's time without the profiler, its MFU against a
float32 peak measured in the same run (chapter 18's ``matmul_peak``), the rate the matrix products
themselves reached, and the bound: the MFU the step would have if every matrix product ran at the peak
and everything else took the time it takes. If that bound is below 60% (issue 44's goal), faster
products alone cannot reach it, and the table names what stands in the way. ``--translator``
profiles chapter 14's translator instead (its recipe: the label-smoothed loss, the paper's Adam, length
batches of 1,500 tokens; FLOPs from ``encoder_decoder_flops``). Nothing is stored: the
figures depend on the machine and its load, so run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import itertools
import random
import time

import torch
from torch.profiler import ProfilerActivity, profile

# operator name -> group; the first group whose words the name contains
GROUPS = {
    "matrix products": ("aten::mm", "aten::addmm", "aten::bmm"),
    "fused attention": ("scaled_dot_product", "flash_attention"),
    "loss (log-softmax, NLL)": ("log_softmax", "nll_loss"),
    "AdamW's update": ("_foreach_", "adam"),  # and every operator inside the optimizer's step
    "GELU and layer norms": ("gelu", "layer_norm"),
    "copies, fills and casts": ("copy_", "fill_", "zero_", "clone", "_to_copy", "contiguous"),
}
OTHER = "other elementwise work"
LOGITS = "elementwise work on the logits"  # any operator but a product with a vocabulary-wide input


def on_logits(event, vocab_size: int) -> bool:
    """Whether ``event`` read a tensor as wide as the vocabulary (the logits or their gradient)."""
    return any(shape and shape[-1] == vocab_size for shape in event.input_shapes or [])


def group_of(name: str) -> str:
    for group, words in GROUPS.items():
        if any(word in name for word in words):
            return group
    return OTHER


def in_optimizer(event) -> bool:
    """Whether the profiler's ``event`` ran inside an optimizer's step (its own elementwise operators)."""
    while event is not None:
        if event.name.startswith("Optimizer.step"):
            return True
        event = event.cpu_parent
    return False


def profile_step(steps: int = 3, warmup: int = 2, batch: int = 64, seed: int = 0, config=None) -> dict:
    """Time and profile ``steps`` training steps of the poet (after ``warmup``): the share of each
    group's self time, the step's seconds and model FLOPs, the matrix products' FLOPs and seconds,
    and the float32 peak measured before and after."""
    from transformer_book import (
        GPT,
        POET_CONFIG,
        GPTConfig,
        PoemVocabulary,
        causal_lm_loss,
        flops_per_token,
        poem_split,
    )

    torch.set_num_threads(1)
    poems = poem_split("train")
    vocab = PoemVocabulary.from_poems(poems)
    torch.manual_seed(seed)
    model = GPT(GPTConfig(len(vocab), **(config or POET_CONFIG))).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    draw = random.Random(seed)
    batches = [vocab.batch(draw.sample(poems, batch)) for _ in range(warmup + steps)]

    def loss_of(tokens):
        return causal_lm_loss(model(tokens), tokens, vocab.pad_id)

    def flops_of(tokens) -> int:
        return tokens.numel() * flops_per_token(model.config, tokens.size(1))

    return measure(loss_of, optimizer, batches, warmup, flops_of, len(vocab))


def profile_translator_step(steps: int = 3, warmup: int = 2, max_tokens: int | None = None, seed: int = 0):
    """The same for chapter 14's translator: its recipe's model, label-smoothed loss and the
    paper's Adam, on its length batches of ``max_tokens`` tokens (the recipe's by default)."""
    from transformer_book import (
        TRANSLATION_TRAINING,
        LabelSmoothingLoss,
        Translator,
        encoder_decoder_flops,
        paper_optimizer,
        read_merges,
        sequence_loss,
        tatoeba_split,
    )

    torch.set_num_threads(1)
    pairs = tatoeba_split("train")
    torch.manual_seed(seed)
    translator = Translator.untrained(pairs, read_merges())
    examples = translator.examples(pairs)
    tokens = max_tokens or TRANSLATION_TRAINING["max_tokens"]
    batches = list(itertools.islice(translator.batches(examples, tokens, seed, "cpu"), warmup + steps))
    model, pad = translator.model.train(), translator.target_vocab.pad_id
    vocab_size = len(translator.target_vocab)
    loss_fn = LabelSmoothingLoss(vocab_size, pad, TRANSLATION_TRAINING["smoothing"])
    optimizer, _ = paper_optimizer(model, translator.config["d_model"], TRANSLATION_TRAINING["warmup_steps"])

    def loss_of(batch):
        return sequence_loss(model, *batch, pad, loss_fn)

    def flops_of(batch) -> int:
        source, target = batch  # the decoder reads the target but its last token
        counts = encoder_decoder_flops(translator.config, vocab_size, source.size(1), target.size(1) - 1)
        return source.size(0) * sum(counts.values())

    return measure(loss_of, optimizer, batches, warmup, flops_of, vocab_size)


def measure(loss_of, optimizer, batches: list, warmup: int, flops_of, vocab_size: int) -> dict:
    """Time the steps on ``batches`` after the first ``warmup``, profile the same steps again, and
    group the profiler's operators (``GROUPS``; work on a ``vocab_size``-wide tensor apart)."""
    from transformer_book import matmul_peak

    peaks = [matmul_peak("cpu")]

    def step(batch):
        loss_of(batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for batch in batches[:warmup]:
        step(batch)
    timed = batches[warmup:]
    started = time.perf_counter()
    for batch in timed:
        step(batch)
    seconds = (time.perf_counter() - started) / len(timed)
    model_flops = sum(flops_of(batch) for batch in timed) / len(timed)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        for batch in timed:  # the same batches again, under the profiler
            step(batch)
    peaks.append(matmul_peak("cpu"))
    self_time = {group: 0.0 for group in [LOGITS, *GROUPS, OTHER]}
    product_flops = product_time = 0.0
    for event in prof.events():
        group = "AdamW's update" if in_optimizer(event) else group_of(event.name)
        if group != "matrix products" and on_logits(event, vocab_size):
            group = LOGITS
        self_time[group] += event.self_cpu_time_total / 1e6  # seconds, over the profiled steps
        if group == "matrix products":
            product_flops += event.flops or 0
            product_time += event.self_cpu_time_total / 1e6
    total = sum(self_time.values())
    return {
        "shares": {group: time_ / total for group, time_ in self_time.items()},
        "step_seconds": seconds,
        "model_flops": model_flops,
        "product_flops": product_flops / len(timed),
        "product_share": self_time["matrix products"] / total,
        "product_rate": product_flops / product_time if product_time else 0.0,
        "peaks": peaks,
    }


def report(result: dict) -> str:
    peak = max(result["peaks"])
    step = result["step_seconds"]
    mfu = result["model_flops"] / step / peak
    # every matrix product at the peak, the rest as it is (its share of the step's time unchanged)
    rest = step * (1 - result["product_share"])
    bound = result["model_flops"] / (rest + result["product_flops"] / peak) / peak
    lines = [f"{'where the step time goes':<34}{'share':>7}"]
    for group, share in sorted(result["shares"].items(), key=lambda item: -item[1]):
        if share > 0:
            lines.append(f"{group:<34}{share:>7.1%}")
    rate = result["product_rate"]
    lines.append(
        f"step: {1000 * step:.0f} ms, {result['model_flops'] / 1e9:.2f} GFLOP of model FLOPs; "
        f"float32 peak {peaks_text(result['peaks'])} GFLOP/s (before, after): MFU {mfu:.1%}"
    )
    lines.append(
        f"matrix products: {result['product_share']:.1%} of the time, at {rate / 1e9:.1f} GFLOP/s, "
        f"{rate / peak:.0%} of the peak"
    )
    lines.append(f"every product at the peak, the rest unchanged: MFU at most {bound:.1%}")
    return "\n".join(lines)


def peaks_text(peaks) -> str:
    return ", ".join(f"{peak / 1e9:.0f}" for peak in peaks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="steps timed, and as many profiled")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64, help="poems a step (the poet's recipe: 64)")
    parser.add_argument("--translator", action="store_true", help="chapter 14's translator instead of the poet")
    args = parser.parse_args(argv)
    for name in ("steps", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1; got {getattr(args, name)}")
    if args.warmup < 0:
        parser.error(f"--warmup must be 0 or more; got {args.warmup}")
    if args.translator:
        print(report(profile_translator_step(args.steps, args.warmup)))
    else:
        print(report(profile_step(args.steps, args.warmup, args.batch)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
