"""Time our MultiHeadAttention against torch.nn.MultiheadAttention, forward + backward, side by side.

    .venv/bin/python scripts/benchmark_attention.py [--repeats N] [--batch 32 --seq 128 --d-model 256 --heads 8]

Both layers get the same weights (load_torch_attention) and the same input, and run self-attention in
training mode (dropout 0) followed by a backward pass, on the CPU. Two settings are timed:

* need_weights=False: we call PyTorch's fused F.scaled_dot_product_attention; so does nn.MultiheadAttention.
* need_weights=True: both compute the weights explicitly and return them per head
  (average_attn_weights=False for PyTorch, so that the two return the same tensor).

The runs of the two implementations are interleaved (alternating which goes first) so that a change in
the machine's load affects both alike, and the medians are compared. A benchmark, not a test: the
figures depend on the machine and on what else it is doing. The book's target is ours <= 1.2x torch.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from transformer_book import MultiHeadAttention, load_torch_attention


def step(layer: nn.Module, x: torch.Tensor, need_weights: bool, is_ours: bool) -> float:
    """One forward + backward pass; returns its wall-clock time in seconds."""
    layer.zero_grad(set_to_none=True)
    started = time.perf_counter()
    if is_ours:
        output, _ = layer(x, x, x, need_weights=need_weights)
    else:
        output, _ = layer(x, x, x, need_weights=need_weights, average_attn_weights=False)
    output.sum().backward()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30, help="timed steps per implementation and setting")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    args = parser.parse_args()

    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(args.d_model, args.heads, batch_first=True).train()
    ours = load_torch_attention(MultiHeadAttention(args.d_model, args.heads), theirs).train()
    x = torch.randn(args.batch, args.seq, args.d_model, requires_grad=True)

    with torch.no_grad():  # the two compute the same function before we time them
        for need_weights in (False, True):
            expected = theirs(x, x, x, need_weights=need_weights, average_attn_weights=False)[0]
            assert torch.allclose(ours(x, x, x, need_weights=need_weights)[0], expected, atol=1e-4)

    print(
        f"torch {torch.__version__}, CPU, {torch.get_num_threads()} threads; batch {args.batch}, "
        f"seq {args.seq}, d_model {args.d_model}, {args.heads} heads; forward + backward; "
        f"median of {args.repeats} interleaved steps"
    )
    print(f"{'setting':20s} {'ours (ms)':>10s} {'torch (ms)':>11s} {'ratio':>7s}")
    for need_weights in (False, True):
        times = {True: [], False: []}
        for index in range(args.warmup + args.repeats):
            order = (True, False) if index % 2 == 0 else (False, True)  # alternate who goes first
            for is_ours in order:
                elapsed = step(ours if is_ours else theirs, x, need_weights, is_ours)
                if index >= args.warmup:
                    times[is_ours].append(elapsed)
        ours_ms = 1000 * statistics.median(times[True])
        torch_ms = 1000 * statistics.median(times[False])
        print(f"need_weights={need_weights!s:6s} {ours_ms:10.2f} {torch_ms:11.2f} {ours_ms / torch_ms:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
