"""Chapter 16 exercises: undoing a rotary embedding, the size of a grouped-query key/value
cache, the hidden size of a SwiGLU layer within a parameter budget, a sliding-window causal
mask (transformers' semantics: the window includes the query), and the rotary table of position
interpolation (Chen et al., 2023) for a text longer than the training.

    from book_exercises import check
    check(unrotate, device=device)

Each check calls the reader's function on small fixed, seeded inputs and compares it with
transformer_book.apply_rotary (rotating by the opposite angles) or with the count the chapter
writes: the cache's keys and values, and a SwiGLU's three matrices; the window with the
rule transformers' masks use (a key is kept when 0 <= i - j < window); the interpolated table
with transformer_book.rotary_table and its linear rope scaling (Hugging Face's rope_type "linear").
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


# Exercise 5: position interpolation (Chen et al., 2023; Hugging Face's rope_type "linear")


def _interpolation_cases():
    return [
        Case((12, 8, 6), "12 positions read by a model trained on 6, d_k 8"),
        Case((49, 16, 26), "the chapter's eight-verse poems (49) after training on 26 positions, d_k 16"),
        Case((5, 8, 10), "5 positions, trained on 10 (no longer than the training)"),
        Case((30, 8, 10, 500000.0), "30 positions, trained on 10, base 500,000"),
    ]


def _table(positions, d_k, theta=10000.0, pairs=lambda a: torch.cat([a, a], dim=-1), step=2):
    """cos and sin of positions (float) times theta^(-step * i / d_k), i = 0 .. d_k/2 - 1."""
    frequencies = 1.0 / theta ** (torch.arange(0, d_k // 2, dtype=torch.float64) * step / d_k)
    angles = pairs(positions.double()[:, None] * frequencies)
    return angles.cos().float(), angles.sin().float()


def _read_as(seq, trained_len, scaled):
    m = torch.arange(seq, dtype=torch.float64)
    return scaled(m) if seq > trained_len else m


@exercise(
    cases=_interpolation_cases,
    success="matches rotary_table with rope_type 'linear' and the factor seq / trained_len",
    mistakes=[
        Mistake(
            "interpolation squeezes the positions into the trained range: position m reads as "
            "m · trained_len / seq. You stretched them further out (m · seq / trained_len), "
            "onto angles the model never saw.",
            lambda seq, d_k, t, theta=10000.0: _table(_read_as(seq, t, lambda m: m * seq / t), d_k, theta),
        ),
        Mistake(
            "the new positions are fractions: m · trained_len / seq need not be whole. "
            "Integer division gives neighbours the same angle, so the model cannot tell them apart.",
            lambda seq, d_k, t, theta=10000.0: _table(_read_as(seq, t, lambda m: (m * t) // seq), d_k, theta),
        ),
        Mistake(
            "a text no longer than the training needs no interpolation: keep the positions "
            "when seq <= trained_len (a factor below 1 would stretch them).",
            lambda seq, d_k, t, theta=10000.0: _table(torch.arange(seq) * t / seq, d_k, theta),
        ),
        Mistake(
            "a larger base θ slows the pairs unevenly (the fast ones hardly at all): that is "
            "the idea of NTK-aware scaling. Interpolation divides the positions, every pair alike.",
            lambda seq, d_k, t, theta=10000.0: _table(torch.arange(seq), d_k, theta * max(1.0, seq / t)),
        ),
        Mistake(
            "the table is in rotary_table's half-split layout: the d_k/2 angles, then the same "
            "d_k/2 again (torch.cat), not each angle twice in a row.",
            lambda seq, d_k, t, theta=10000.0: _table(
                _read_as(seq, t, lambda m: m * t / seq), d_k, theta, lambda a: a.repeat_interleave(2, dim=-1)
            ),
        ),
        Mistake(
            "pair i turns at θ^(−2i/d_k) for i = 0 .. d_k/2 − 1 (torch.arange(0, d_k, 2) / d_k), not θ^(−i/d_k).",
            lambda seq, d_k, t, theta=10000.0: _table(_read_as(seq, t, lambda m: m * t / seq), d_k, theta, step=1),
        ),
    ],
)
def interpolated_rotary_table(seq, d_k, trained_len, theta=10000.0):
    """cos and sin, (seq, d_k) each in the half-split layout, reading position m as m * trained_len / seq when seq > trained_len."""
    factor = max(1.0, seq / trained_len)
    scaling = {"rope_type": "linear", "factor": factor} if factor > 1 else None
    return rotary_table(torch.arange(seq), d_k, theta, dtype=torch.float32, scaling=scaling)
