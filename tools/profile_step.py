"""Where the poet's float32 training step spends its time, and what keeps its MFU low (issue 44).

    python tools/profile_step.py             # the poet's recipe: 2 warm-up steps, 3 timed, then profiled
    python tools/profile_step.py --steps 5 --batch 32

The shipped poet's configuration (chapter 15's ``POET_CONFIG``, its vocabulary from the training poems),
freshly initialised and trained with its recipe's optimizer (AdamW, learning rate 3e-3) on seeded
batches of ``--batch`` training poems, on one CPU thread. ``torch.profiler`` records every operator's
own (self) time and the FLOPs of the matrix products over the profiled steps; the operators are grouped
by what they do (``GROUPS``). Beside the table: the step's time without the profiler, its MFU against a
float32 peak measured in the same run (chapter 18's ``matmul_peak``), the rate the matrix products
themselves reached, and the bound: the MFU the step would have if every matrix product ran at the peak
and everything else took the time it takes. If that bound is below 60% (issue 44's goal), faster
products alone cannot reach it, and the table names what stands in the way. Nothing is stored: the
figures depend on the machine and its load, so run it on a quiet machine.
"""

from __future__ import annotations

import argparse
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
        matmul_peak,
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
    peaks = [matmul_peak("cpu")]

    def step(tokens):
        loss = causal_lm_loss(model(tokens), tokens, vocab.pad_id)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for tokens in batches[:warmup]:
        step(tokens)
    timed = batches[warmup : warmup + steps]
    started = time.perf_counter()
    for tokens in timed:
        step(tokens)
    seconds = (time.perf_counter() - started) / steps
    model_flops = sum(t.numel() * flops_per_token(model.config, t.size(1)) for t in timed) / steps
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        for tokens in timed:  # the same batches again, under the profiler
            step(tokens)
    peaks.append(matmul_peak("cpu"))
    self_time = {group: 0.0 for group in [LOGITS, *GROUPS, OTHER]}
    product_flops = product_time = 0.0
    for event in prof.events():
        group = "AdamW's update" if in_optimizer(event) else group_of(event.name)
        if group != "matrix products" and on_logits(event, len(vocab)):
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
        "product_flops": product_flops / steps,
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
    args = parser.parse_args(argv)
    for name in ("steps", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1; got {getattr(args, name)}")
    if args.warmup < 0:
        parser.error(f"--warmup must be 0 or more; got {args.warmup}")
    print(report(profile_step(args.steps, args.warmup, args.batch)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
