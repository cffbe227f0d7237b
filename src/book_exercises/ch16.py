"""Chapter 16 exercises: undoing a rotary embedding, the size of a grouped-query key/value
cache, the hidden size of a SwiGLU layer within a parameter budget, and a sliding-window causal
mask (transformers' semantics: the window includes the query).

    from book_exercises import check
    check(unrotate, device=device)

Each check calls the reader's function on small fixed, seeded inputs and compares it with
transformer_book.apply_rotary (rotating by the opposite angles) or with the count the chapter
writes: the cache's keys and values, and a SwiGLU's three matrices; the window with the
rule transformers' masks use (a key is kept when 0 <= i - j < window).
"""

from __future__ import annotations

import torch

from book_exercises.core import Case, Mistake, exercise, seeded
from transformer_book import apply_rotary, rotary_table

# Exercise 1: the inverse of a rotary embedding


def _unrotate_cases():
    g = seeded(16)
    cases = []
    for start, label in ((0, "positions 0 to 5"), (100, "positions 100 to 105")):
        x = torch.randn(2, 3, 6, 8, generator=g, dtype=torch.float32)
        cos, sin = rotary_table(torch.arange(start, start + 6), 8)
        rotated = apply_rotary(x, cos, sin)
        cases.append(Case((rotated, cos, sin), f"2 x 3 heads of 6 queries ({label}), d_k 8"))
    return cases


def _interleaved_turn(x):
    return torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)


@exercise(
    cases=_unrotate_cases,
    mistakes=[
        Mistake(
            "you rotated forwards again: the inverse of a rotation by m·θ is the rotation "
            "by −m·θ, and cos(−a) = cos(a), sin(−a) = −sin(a), so flip the sign of the sin "
            "term.",
            lambda rotated, cos, sin: apply_rotary(rotated, cos, sin),
        ),
        Mistake(
            "the pairs are the halves (feature i with feature i + d_k/2, rotate_half), not "
            "neighbours (2i, 2i + 1): the table's cos and sin are laid out for the halves.",
            lambda rotated, cos, sin: rotated * cos - _interleaved_turn(rotated) * sin,
        ),
        Mistake(
            "dividing by cos does not undo a rotation (and cos can be 0): rotate back, "
            "x = rotated · cos − rotate_half(rotated) · sin.",
            lambda rotated, cos, sin: rotated / cos,
        ),
        Mistake(
            "cos(−a) = cos(a): rotating back flips the sign of the sin only, not of the "
            "cos (negating both turns the vectors half a turn further).",
            lambda rotated, cos, sin: apply_rotary(rotated, -cos, -sin),
        ),
        Mistake(
            "cos multiplies the vector itself and sin its turned copy (rotate_half): you swapped them.",
            lambda rotated, cos, sin: apply_rotary(rotated, sin, -cos),
        ),
    ],
)
def unrotate(rotated, cos, sin):
    """The vectors before the rotation (rotate every pair back by its angle)."""
    return apply_rotary(rotated, cos, -sin)


# Exercise 2: the key/value cache of grouped-query attention


def _cache_cases():
    return [
        Case(
            (32, 32, 8, 4096, 4096, 2),
            "Llama-3-8B-like: 32 layers, 32 heads, 8 key/value heads, d_model 4096, 4,096 tokens, 2 bytes",
        ),
        Case(
            (4, 8, 2, 256, 1024, 4),
            "4 layers, 8 heads, 2 key/value heads, d_model 256, 1,024 tokens, 4 bytes",
        ),
        Case(
            (2, 4, 4, 32, 10, 8),
            "multi-head: 2 layers, 4 heads, d_model 32, 10 tokens, 8 bytes",
        ),
    ]


@exercise(
    cases=_cache_cases,
    success="matches the chapter's count of the cache",
    mistakes=[
        Mistake(
            "the cache holds the key/value heads only: kv_heads of them, each shared by "
            "heads // kv_heads query heads, not one per query head.",
            lambda layers, heads, kv, d, tokens, b: 2 * layers * heads * (d // heads) * tokens * b,
        ),
        Mistake(
            "the cache holds keys AND values: twice the keys' bytes.",
            lambda layers, heads, kv, d, tokens, b: layers * kv * (d // heads) * tokens * b,
        ),
        Mistake(
            "each key/value head has d_k = d_model // heads features, not d_model.",
            lambda layers, heads, kv, d, tokens, b: 2 * layers * kv * d * tokens * b,
        ),
        Mistake(
            "every layer keeps its own keys and values: multiply by layers.",
            lambda layers, heads, kv, d, tokens, b: 2 * kv * (d // heads) * tokens * b,
        ),
        Mistake(
            "count bytes, not values: multiply by bytes_per_value.",
            lambda layers, heads, kv, d, tokens, b: 2 * layers * kv * (d // heads) * tokens,
        ),
    ],
)
def kv_cache_bytes(layers, heads, kv_heads, d_model, tokens, bytes_per_value):
    """The bytes of the key/value cache of one sequence, every layer included."""
    return 2 * layers * kv_heads * (d_model // heads) * tokens * bytes_per_value


# Exercise 3: a SwiGLU within a parameter budget


def _swiglu_cases():
    return [
        Case(
            (4096, 2 * 4096 * 4 * 4096, 256),
            "d_model 4096, the budget of a 4·d_model ReLU layer, multiple of 256",
        ),
        Case((512, 1_000_000, 64), "d_model 512, a budget of 1,000,000, multiple of 64"),
        Case((128, 131_072, 16), "d_model 128, a budget of 131,072, multiple of 16"),
    ]


@exercise(
    cases=_swiglu_cases,
    success="matches the largest multiple within the budget",
    mistakes=[
        Mistake(
            "a SwiGLU layer has THREE d_model × hidden matrices (gate, up, down), not two: "
            "divide the budget by 3 · d_model.",
            lambda d, budget, m: (budget // (2 * d)) - (budget // (2 * d)) % m,
        ),
        Mistake(
            "round DOWN to the multiple: rounding up goes over the budget.",
            lambda d, budget, m: -(-(budget // (3 * d)) // m) * m,
        ),
        Mistake(
            "the hidden size must be a multiple of multiple_of (kernels run faster on "
            "round sizes): round budget // (3 · d_model) down to one.",
            lambda d, budget, m: budget // (3 * d),
        ),
        Mistake(
            "budget // (3 · d_model) // multiple_of counts the multiples: multiply it back "
            "by multiple_of to get the hidden size.",
            lambda d, budget, m: budget // (3 * d) // m,
        ),
        Mistake(
            "8/3 · d_model is the size for a 4 · d_model ReLU layer's budget only: start "
            "from the budget you are given, budget // (3 · d_model).",
            lambda d, budget, m: int(8 * d / 3) - int(8 * d / 3) % m,
        ),
    ],
)
def swiglu_size(d_model, budget, multiple_of):
    """The largest hidden size, a multiple of multiple_of, whose SwiGLU fits the budget."""
    largest = budget // (3 * d_model)
    return largest - largest % multiple_of


# Exercise 4: a sliding-window causal mask (Mistral; transformers' sliding_window)


def _window_cases():
    return [
        Case((6, 3), "6 positions, a window of 3"),
        Case((9, 4), "9 positions, a window of 4"),
        Case((5, 1), "5 positions, a window of 1 (each token sees itself only)"),
        Case((4, 10), "4 positions, a window longer than the text (the causal mask)"),
    ]


def _window(seq, window, reach):
    offset = torch.arange(seq)[:, None] - torch.arange(seq)[None, :]  # i - j
    return reach(offset, window)


@exercise(
    cases=_window_cases,
    success="matches transformers' sliding window: query i sees keys i − window + 1 to i",
    mistakes=[
        Mistake(
            "the window counts the query itself: with window w, query i sees w keys, "
            "i − w + 1 to i (transformers keeps a key when i − j < w), not w + 1 of them.",
            lambda seq, window: _window(seq, window, lambda o, w: (o >= 0) & (o <= w)),
        ),
        Mistake(
            "the mask must stay causal: a key after the query (j > i) is never seen, "
            "whatever the window. Keep 0 ≤ i − j as well as i − j < window.",
            lambda seq, window: _window(seq, window, lambda o, w: o.abs() < w),
        ),
        Mistake(
            "True marks a key the query may see (as chapter 6's look_ahead_mask), not one to hide: invert your mask.",
            lambda seq, window: _window(seq, window, lambda o, w: ~((o >= 0) & (o < w))),
        ),
        Mistake(
            "rows are queries and columns keys: query i (row i) sees the keys just BEFORE it, "
            "so the band lies on and below the diagonal (you built it above).",
            lambda seq, window: _window(seq, window, lambda o, w: (o <= 0) & (o > -w)),
        ),
        Mistake(
            "that is the plain causal mask: the window also drops every key window or more "
            "positions back (i − j ≥ window).",
            lambda seq, window: _window(seq, window, lambda o, w: o >= 0),
        ),
    ],
)
def sliding_window_mask(seq, window):
    """(seq, seq) bool: True where query i may see key j, i − window < j ≤ i."""
    offset = torch.arange(seq)[:, None] - torch.arange(seq)[None, :]
    return (offset >= 0) & (offset < window)
