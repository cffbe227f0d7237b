"""Chapter 18 exercises: the training FLOPs of grouped-query attention, the bytes of a step's
weights, gradients and optimizer state, and the FLOPs of a step with activation checkpointing.

    from book_exercises import check
    check(gqa_flops, device=device)

Each check calls the reader's function on fixed sizes and compares the count with the chapter's
(transformer_book.flop_breakdown for the checkpointed model).
"""

from __future__ import annotations

from book_exercises.core import Case, Mistake, exercise
from transformer_book import GPTConfig, ModernConfig, flop_breakdown

# Exercise 1: the training FLOPs of grouped-query attention


def _gqa_cases():
    return [
        Case(
            (4096, 32, 8, 4096),
            "Llama-3-8B-like: d_model 4096, 32 heads, 8 key/value heads, 4,096 positions",
        ),
        Case(
            (128, 4, 1, 64),
            "multi-query: d_model 128, 4 heads, 1 key/value head, 64 positions",
        ),
        Case(
            (256, 8, 8, 100),
            "multi-head: d_model 256, 8 heads, 8 key/value heads, 100 positions",
        ),
    ]


def _gqa(d, heads, kv, seq, *, kv_width=None, scores_heads=None, passes=3, scores_per=2 * 2):
    kv_width = kv * (d // heads) if kv_width is None else kv_width
    width = d if scores_heads is None else scores_heads * (d // heads)
    return passes * (2 * (2 * d * d + 2 * d * kv_width) + scores_per * seq * width)


@exercise(
    cases=_gqa_cases,
    success="matches the count of flop_breakdown for a ModernConfig",
    mistakes=[
        Mistake(
            "W_K and W_V project to the key/value heads only: kv_heads · d_k = kv_heads · (d_model // heads) "
            "features each, not d_model.",
            lambda d, h, kv, seq: _gqa(d, h, kv, seq, kv_width=d),
        ),
        Mistake(
            "every QUERY head computes its own scores (the key/value heads are shared, not the queries): "
            "the scores cost 2 · 2 · seq_len · d_model, whatever kv_heads.",
            lambda d, h, kv, seq: _gqa(d, h, kv, seq, scores_heads=kv),
        ),
        Mistake(
            "training is forward AND backward: the backward computes two gradients per product (of the input "
            "and of the weight), twice the forward; multiply the forward by 3.",
            lambda d, h, kv, seq: _gqa(d, h, kv, seq, passes=1),
        ),
        Mistake(
            "attention has two products over the keys, Q K^T and weights · V, each 2 · seq_len · d_model "
            "FLOPs a position, counted in full (the causal mask hides half of the scores, but the kernel "
            "computes them all): you counted half of that.",
            lambda d, h, kv, seq: _gqa(d, h, kv, seq, scores_per=2),
        ),
    ],
)
def gqa_flops(d_model, heads, kv_heads, seq_len):
    """The training FLOPs (forward and backward) of one position in one grouped-query attention layer."""
    config = ModernConfig(vocab_size=1, d_model=d_model, heads=heads, kv_heads=kv_heads, layers=1)
    parts = flop_breakdown(config, seq_len)
    return parts["attention projections"] + parts["attention scores"]


# Exercise 2: the bytes of weights, gradients and optimizer state


def _state_cases():
    return [
        Case((1_000_000, "adamw", False), "1,000,000 weights, AdamW, float32"),
        Case((1_000_000, "adamw", True), "1,000,000 weights, AdamW, mixed precision"),
        Case((3_000, "sgd", True), "3,000 weights, SGD, mixed precision"),
        Case((3_000, "sgd", False), "3,000 weights, SGD, float32"),
    ]


def _state(n, optimizer, mixed, *, moments=8, master=4, gradients=True):
    moment = moments if optimizer == "adamw" else 0
    if mixed:
        per = 2 + (2 if gradients else 0) + master + moment
    else:
        per = 4 + (4 if gradients else 0) + moment
    return n * per


@exercise(
    cases=_state_cases,
    success="matches the bytes of weights, gradients and state",
    mistakes=[
        Mistake(
            "mixed precision keeps a float32 MASTER copy of the weights (4 bytes a weight) beside the bfloat16 "
            "ones: the optimizer's small updates would vanish in bfloat16's 8-bit mantissa.",
            lambda n, o, m: _state(n, o, m, master=0),
        ),
        Mistake(
            "AdamW keeps TWO moments a weight (the mean of the gradients and of their squares), 4 bytes each "
            "in float32: 8 bytes, not 4.",
            lambda n, o, m: _state(n, o, m, moments=4),
        ),
        Mistake(
            "a step keeps a gradient for every weight too (4 bytes in float32, 2 in bfloat16).",
            lambda n, o, m: _state(n, o, m, gradients=False),
        ),
        Mistake(
            "mixed precision keeps the moments in float32, not in bfloat16: 8 bytes a weight for AdamW.",
            lambda n, o, m: _state(n, o, m, moments=4 if m else 8),
        ),
    ],
)
def state_bytes(parameters, optimizer, mixed):
    """The bytes a training step keeps for its weights, their gradients and the optimizer's state."""
    moments = 8 if optimizer == "adamw" else 0
    return parameters * ((2 + 2 + 4 + moments) if mixed else (4 + 4 + moments))


# Exercise 3: the FLOPs of a step with activation checkpointing


def _checkpoint_cases():
    return [
        Case(
            (
                GPTConfig(vocab_size=3000, max_len=64, d_model=128, heads=4, layers=4),
                64,
            ),
            "the poet's size, 64 positions",
        ),
        Case(
            (
                GPTConfig(vocab_size=50257, max_len=1024, d_model=768, heads=12, layers=12),
                1024,
            ),
            "GPT-2 small, 1,024 positions",
        ),
        Case(
            (
                GPTConfig(vocab_size=100, max_len=16, d_model=32, heads=2, layers=1, d_ff=48),
                9,
            ),
            "a toy: 1 layer, d_ff 48, 9 positions",
        ),
    ]


def _layer_parts(parts, names=("attention projections", "attention scores", "feed-forward")):
    return sum(parts[name] for name in names)


@exercise(
    cases=_checkpoint_cases,
    success="matches one more forward pass of every layer",
    mistakes=[
        Mistake(
            "checkpointing runs the layers' FORWARD again, once (a third of their training FLOPs), not their "
            "forward and backward.",
            lambda c, t: sum(flop_breakdown(c, t).values()) + _layer_parts(flop_breakdown(c, t)),
        ),
        Mistake(
            "only the checkpointed layers run again: the output layer's logits are not recomputed, so adding "
            "a third of the WHOLE count is too much.",
            lambda c, t: sum(flop_breakdown(c, t).values()) * 4 // 3,
        ),
        Mistake(
            "the recomputed forward includes the attention scores too (Q K^T and weights · V), not only the "
            "weights' products.",
            lambda c, t: (
                sum(flop_breakdown(c, t).values())
                + _layer_parts(flop_breakdown(c, t), ("attention projections", "feed-forward")) // 3
            ),
        ),
        Mistake(
            "checkpointing is not free: it saves memory by computing every layer's forward again, which costs FLOPs.",
            lambda c, t: sum(flop_breakdown(c, t).values()),
        ),
    ],
)
def checkpointed_flops(config, seq_len):
    """The training FLOPs of one position of a GPT whose every layer is checkpointed."""
    parts = flop_breakdown(config, seq_len)
    return sum(parts.values()) + _layer_parts(parts) // 3
