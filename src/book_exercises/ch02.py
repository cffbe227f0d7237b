"""Chapter 2 exercises: scaled dot-product attention.

    from book_exercises import check
    check(attention, device=device)

Each check calls the reader's function on CPU tensors (pass ``device=`` to move the inputs) and
compares its output, moved to the CPU, with transformer_book.scaled_dot_product_attention.
"""

from __future__ import annotations

import math

import torch

from book_exercises.core import Case, Mistake, exercise, randn
from transformer_book import scaled_dot_product_attention

MATMUL_HINT = (
    "the matrix products do not line up: the scores are query @ key.transpose(-2, -1) (swap the last "
    "two axes, which works with any leading axes), and the output is the matrix product "
    "weights @ value, not an element-wise product."
)


def _describe_pair(got, expected, case):
    if isinstance(got, torch.Tensor):
        return "return both the output and the weights, as a tuple: `return weights @ value, weights`."
    return None


def _variant(
    scale_of=lambda d_k, d_v: 1 / math.sqrt(d_k),
    dim=-1,
    fill=float("-inf"),
    invert=False,
    use_mask=True,
    keys_axes=(-2, -1),
    product=torch.matmul,
):
    """Attention as a mistaken solution computes it (NaN where its softmax gives NaN)."""

    def compute(query, key, value, mask=None):
        scores = query @ key.transpose(*keys_axes) * scale_of(query.size(-1), value.size(-1))
        if mask is not None and use_mask:
            scores = scores.masked_fill(mask if invert else ~mask, fill)
        weights = torch.softmax(scores, dim=dim)
        return product(weights, value), weights

    return compute


def _mask_after_softmax(q, k, v, m):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1).masked_fill(~m, 0.0)
    return weights @ v, weights


SCALE_MISTAKES = [
    Mistake(
        "scores are not divided by sqrt(d_k): softmax(Q K^T / sqrt(d_k)) V.", _variant(scale_of=lambda d_k, d_v: 1.0)
    ),
    Mistake(
        "you divided the scores by d_k; divide by its square root, sqrt(d_k).",
        _variant(scale_of=lambda d_k, d_v: 1 / d_k),
    ),
    Mistake(
        "you multiplied the scores by sqrt(d_k); divide by it.", _variant(scale_of=lambda d_k, d_v: math.sqrt(d_k))
    ),
    Mistake(
        "you scaled by sqrt(d_v), the values' size; the scale is 1/sqrt(d_k), the size of the "
        "queries and keys (here d_k != d_v).",
        _variant(scale_of=lambda d_k, d_v: 1 / math.sqrt(d_v)),
    ),
    Mistake(
        "the softmax runs over the queries (dim=-2); each query's weights over the keys must sum "
        "to 1: softmax(dim=-1).",
        _variant(dim=-2),
    ),
    Mistake(MATMUL_HINT, _variant(product=torch.mul)),
]

# ---------------------------------------------------------------------------------------------
# Exercise 1: attention without a mask


def _attention_cases():
    return [
        Case(
            randn(3, 2, 3, 4, seed=2).unbind(0)[:2] + (randn(2, 3, 6, seed=3),),
            "query (2, 3, 4), key (2, 3, 4), value (2, 3, 6)",
        ),
        Case(
            (randn(2, 3, 4, seed=4), randn(2, 5, 4, seed=5), randn(2, 5, 6, seed=6)), "3 queries, 5 keys, d_k=4, d_v=6"
        ),
        Case(
            (randn(1, 2, 4, seed=7), randn(1, 1, 4, seed=8), randn(1, 1, 3, seed=9)),
            "a single key (every weight must be 1)",
        ),
        Case(
            (randn(2, 2, 3, 8, seed=10), randn(2, 2, 4, 8, seed=11), randn(2, 2, 4, 5, seed=12)),
            "4-D inputs (batch, heads, seq, d)",
        ),
    ]


@exercise(
    cases=_attention_cases,
    mistakes=[*SCALE_MISTAKES, Mistake(MATMUL_HINT, _variant(keys_axes=(1, 2)))],
    describe=_describe_pair,
)
def attention(q, k, v):
    """Softmax(Q K^T / sqrt(d_k)) V, returning (output, weights)."""
    return scaled_dot_product_attention(q, k, v)


# ---------------------------------------------------------------------------------------------
# Exercise 2: attention with a boolean mask (True = may attend)


def _masked_cases():
    padding = torch.tensor([[True, True, True, False, False], [True, True, True, True, True]])
    causal = torch.ones(4, 4, dtype=torch.bool).tril().unsqueeze(0)  # (1, 4, 4)
    # Real keys with very negative scores: a finite fill value such as -100 is no longer "minus infinity".
    low_query = torch.full((1, 2, 4), 30.0)
    low_key = torch.cat([torch.full((1, 2, 4), -30.0), randn(1, 2, 4, seed=13)], dim=1)  # (1, 4, 4)
    return [
        Case(
            (randn(2, 3, 4, seed=14), randn(2, 5, 4, seed=15), randn(2, 5, 6, seed=16), padding.unsqueeze(1)),
            "a (batch, 1, keys) padding mask",
        ),
        Case(
            (randn(1, 4, 8, seed=17), randn(1, 4, 8, seed=18), randn(1, 4, 8, seed=19), causal),
            "a (1, 4, 4) look-ahead mask",
        ),
        Case(
            (low_query, low_key, randn(1, 4, 3, seed=20), torch.tensor([[[True, True, False, False]]])),
            "real keys whose scores are about -1800",
        ),
    ]


@exercise(
    cases=_masked_cases,
    mistakes=[
        Mistake(
            "your mask is applied the wrong way round: True means 'may attend', so fill the "
            "scores where the mask is False: scores.masked_fill(~mask, float('-inf')).",
            _variant(invert=True),
        ),
        Mistake(
            "masked with -100 instead of -inf: when the real scores are below -100, the masked "
            "keys win the softmax. Fill with float('-inf') (the source notes' bug).",
            _variant(fill=-100.0),
        ),
        Mistake(
            "the mask is ignored: fill the scores of forbidden keys with -inf before the softmax.",
            _variant(use_mask=False),
        ),
        Mistake(
            "the mask was applied after the softmax (weights set to 0), so the allowed weights "
            "no longer sum to 1: mask the scores, then take the softmax.",
            _mask_after_softmax,
        ),
        Mistake(
            "the mask holds booleans: negate it with ~mask (not 1 - mask), then "
            "scores.masked_fill(~mask, float('-inf')).",
            lambda q, k, v, m: _variant()(q, k, v, 1 - m),
        ),
        *SCALE_MISTAKES,
    ],
    describe=_describe_pair,
)
def masked_attention(q, k, v, m):
    """Attention where a boolean mask (True = may attend) hides keys."""
    return scaled_dot_product_attention(q, k, v, m)


# ---------------------------------------------------------------------------------------------
# Exercise 3: a masked softmax that survives a fully masked row


def _softmax_variant(fill=float("-inf"), invert=False, zero_empty=False):
    def compute(scores, mask):
        weights = torch.softmax(scores.masked_fill(mask if invert else ~mask, fill), dim=-1)
        if zero_empty:
            weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
        return weights

    return compute


def _softmax_cases():
    mask = torch.tensor(
        [[True, True, False, False], [False, False, False, False], [True, True, True, True]]
    )  # row 1: nothing allowed
    return [
        Case((randn(3, 4, seed=21), mask), "3 rows, the middle one fully masked"),
        Case(
            (randn(2, 3, 5, seed=22), torch.ones(3, 5, dtype=torch.bool).tril()), "(2, 3, 5) scores, a look-ahead mask"
        ),
        Case((randn(1, 3, seed=23) - 300.0, torch.tensor([[True, False, True]])), "scores around -300"),
    ]


@exercise(
    cases=_softmax_cases,
    mistakes=[
        Mistake(
            "a row with no allowed key gives NaN: the softmax of all -inf is 0/0. Set such rows to "
            "zero: weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).",
            _softmax_variant(),
        ),
        Mistake(
            "a fully masked row gets uniform weights, which is what a finite fill such as -1e9 "
            "gives; a query with nothing to attend to must get all-zero weights.",
            _softmax_variant(fill=-1e9),
        ),
        Mistake(
            "a fully masked row gets uniform weights, which is what a finite fill such as -1e9 "
            "gives; a query with nothing to attend to must get all-zero weights.",
            _softmax_variant(fill=-1e4),
        ),
        Mistake(
            "your mask is applied the wrong way round: True means 'may attend'; fill where the mask is False (~mask).",
            _softmax_variant(invert=True, zero_empty=True),
        ),
        Mistake(
            "masked with -100 instead of -inf: when the real scores are below -100, the masked "
            "keys win the softmax. Fill with float('-inf').",
            _softmax_variant(fill=-100.0, zero_empty=True),
        ),
    ],
)
def masked_softmax(scores, mask):
    """The softmax over keys where mask is True, with all-zero weights for a row with no True."""
    keys = scores.size(-1)
    identity = torch.eye(keys, dtype=scores.dtype)  # scores @ I = scores: the package does the rest
    return scaled_dot_product_attention(scores, identity, identity, mask, scale=1.0)[1]
