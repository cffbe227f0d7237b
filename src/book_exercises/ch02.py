"""Chapter 2 exercises: scaled dot-product attention.

    from book_exercises.ch02 import check_attention
    check_attention(attention)

Every checker calls the reader's function on CPU tensors (pass ``device=`` to move the inputs) and
compares its output, moved to the CPU, with transformer_book.scaled_dot_product_attention.
"""

from __future__ import annotations

import math

import torch

from book_exercises.core import Case, Exercise, Mistake, randn, run
from transformer_book import scaled_dot_product_attention

MATMUL_HINT = (
    "the matrix products do not line up: the scores are query @ key.transpose(-2, -1) (swap the last "
    "two axes, which works with any leading axes), and the output is the matrix product "
    "weights @ value, not an element-wise product."
)
ERROR_HINTS = [
    ("cannot be multiplied", MATMUL_HINT),
    ("Expected size for first two dimensions", MATMUL_HINT),
    ("must match the size of tensor", MATMUL_HINT),
    ("Expected batch2_sizes", MATMUL_HINT),
]


def _describe_pair(got, expected, case):
    if isinstance(got, torch.Tensor):
        return "return both the output and the weights, as a tuple: `return weights @ value, weights`."
    return None


def _variant(scale_of=lambda d_k, d_v: 1 / math.sqrt(d_k), dim=-1, fill=float("-inf"),
             invert=False, use_mask=True):
    """Attention as a mistaken solution computes it (NaN where its softmax gives NaN)."""
    def compute(query, key, value, mask=None):
        scores = query @ key.transpose(-2, -1) * scale_of(query.size(-1), value.size(-1))
        if mask is not None and use_mask:
            scores = scores.masked_fill(mask if invert else ~mask, fill)
        weights = torch.softmax(scores, dim=dim)
        return weights @ value, weights
    return compute


def _mask_after_softmax(q, k, v, m):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1).masked_fill(~m, 0.0)
    return weights @ v, weights


SCALE_MISTAKES = [
    Mistake("scores are not divided by sqrt(d_k): softmax(Q K^T / sqrt(d_k)) V.",
            _variant(scale_of=lambda d_k, d_v: 1.0)),
    Mistake("you divided the scores by d_k; divide by its square root, sqrt(d_k).",
            _variant(scale_of=lambda d_k, d_v: 1 / d_k)),
    Mistake("you multiplied the scores by sqrt(d_k); divide by it.",
            _variant(scale_of=lambda d_k, d_v: math.sqrt(d_k))),
    Mistake("you scaled by sqrt(d_v), the values' size; the scale is 1/sqrt(d_k), the size of the "
            "queries and keys (here d_k != d_v).",
            _variant(scale_of=lambda d_k, d_v: 1 / math.sqrt(d_v))),
    Mistake("the softmax runs over the queries (dim=-2); each query's weights over the keys must sum "
            "to 1: softmax(dim=-1).",
            _variant(dim=-2)),
]

# ---------------------------------------------------------------------------------------------
# Exercise 1: attention without a mask


def _attention_cases():
    return [
        Case(randn(3, 2, 3, 4, seed=2).unbind(0)[:2] + (randn(2, 3, 6, seed=3),),
             "query (2, 3, 4), key (2, 3, 4), value (2, 3, 6)"),
        Case((randn(2, 3, 4, seed=4), randn(2, 5, 4, seed=5), randn(2, 5, 6, seed=6)),
             "3 queries, 5 keys, d_k=4, d_v=6"),
        Case((randn(1, 2, 4, seed=7), randn(1, 1, 4, seed=8), randn(1, 1, 3, seed=9)),
             "a single key (every weight must be 1)"),
        Case((randn(2, 2, 3, 8, seed=10), randn(2, 2, 4, 8, seed=11), randn(2, 2, 4, 5, seed=12)),
             "4-D inputs (batch, heads, seq, d)"),
    ]


ATTENTION = Exercise(
    name="attention",
    task="softmax(Q K^T / sqrt(d_k)) V, returning (output, weights).",
    cases=_attention_cases,
    reference=lambda q, k, v: scaled_dot_product_attention(q, k, v),
    mistakes=SCALE_MISTAKES,
    describe=_describe_pair,
    error_hints=ERROR_HINTS,
)


def check_attention(function, device=None):
    """Check ``function(query, key, value) -> (output, weights)``.

    query (..., queries, d_k), key (..., keys, d_k), value (..., keys, d_v). Inputs are made on the
    CPU and moved to ``device`` if given; the outputs are moved to the CPU and compared to 1e-5.
    """
    return run(ATTENTION, function, device)


# ---------------------------------------------------------------------------------------------
# Exercise 2: attention with a boolean mask (True = may attend)


def _masked_cases():
    padding = torch.tensor([[True, True, True, False, False], [True, True, True, True, True]])
    causal = torch.ones(4, 4, dtype=torch.bool).tril().unsqueeze(0)  # (1, 4, 4)
    # Real keys with very negative scores: a finite fill value such as -100 is no longer "minus infinity".
    low_query = torch.full((1, 2, 4), 30.0)
    low_key = torch.cat([torch.full((1, 2, 4), -30.0), randn(1, 2, 4, seed=13)], dim=1)  # (1, 4, 4)
    return [
        Case((randn(2, 3, 4, seed=14), randn(2, 5, 4, seed=15), randn(2, 5, 6, seed=16),
              padding.unsqueeze(1)), "a (batch, 1, keys) padding mask"),
        Case((randn(1, 4, 8, seed=17), randn(1, 4, 8, seed=18), randn(1, 4, 8, seed=19), causal),
             "a (1, 4, 4) look-ahead mask"),
        Case((low_query, low_key, randn(1, 4, 3, seed=20),
              torch.tensor([[[True, True, False, False]]])),
             "real keys whose scores are about -1800"),
    ]


MASKED_ATTENTION = Exercise(
    name="masked_attention",
    task="attention where a boolean mask (True = may attend) hides keys.",
    cases=_masked_cases,
    reference=lambda q, k, v, m: scaled_dot_product_attention(q, k, v, m),
    mistakes=[
        Mistake("your mask is applied the wrong way round: True means 'may attend', so fill the "
                "scores where the mask is False: scores.masked_fill(~mask, float('-inf')).",
                _variant(invert=True)),
        Mistake("masked with -100 instead of -inf: when the real scores are below -100, the masked "
                "keys win the softmax. Fill with float('-inf') (the source notes' bug).",
                _variant(fill=-100.0)),
        Mistake("the mask is ignored: fill the scores of forbidden keys with -inf before the softmax.",
                _variant(use_mask=False)),
        Mistake("the mask was applied after the softmax (weights set to 0), so the allowed weights "
                "no longer sum to 1: mask the scores, then take the softmax.",
                _mask_after_softmax),
        *SCALE_MISTAKES,
    ],
    describe=_describe_pair,
    error_hints=ERROR_HINTS + [("masked_fill_ only supports boolean masks",
                                ("masked_fill needs a boolean mask; the mask is given as booleans "
                                 "already, negate it with ~mask (not 1 - mask)."))],
)


def check_masked_attention(function, device=None):
    """Check a scaled dot-product attention function that takes a mask.

    Check ``function(query, key, value, mask) -> (output, weights)`` with a boolean mask
    (True = may attend) that broadcasts to (..., queries, keys). No row is fully masked here.
    Inputs on the CPU unless ``device`` is given; outputs moved to the CPU, compared to 1e-5."""
    return run(MASKED_ATTENTION, function, device)


# ---------------------------------------------------------------------------------------------
# Exercise 3: a masked softmax that survives a fully masked row


def _reference_masked_softmax(scores, mask):
    keys = scores.size(-1)
    identity = torch.eye(keys, dtype=scores.dtype)  # scores @ I = scores: the package does the rest
    return scaled_dot_product_attention(scores, identity, identity, mask, scale=1.0)[1]


def _softmax_variant(fill=float("-inf"), invert=False, zero_empty=False):
    def compute(scores, mask):
        weights = torch.softmax(scores.masked_fill(mask if invert else ~mask, fill), dim=-1)
        if zero_empty:
            weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
        return weights
    return compute


def _softmax_cases():
    mask = torch.tensor([[True, True, False, False], [False, False, False, False],
                         [True, True, True, True]])  # row 1: nothing allowed
    return [
        Case((randn(3, 4, seed=21), mask), "3 rows, the middle one fully masked"),
        Case((randn(2, 3, 5, seed=22), torch.ones(3, 5, dtype=torch.bool).tril()),
             "(2, 3, 5) scores, a look-ahead mask"),
        Case((randn(1, 3, seed=23) - 300.0, torch.tensor([[True, False, True]])),
             "scores around -300"),
    ]


MASKED_SOFTMAX = Exercise(
    name="masked_softmax",
    task="the softmax over keys where mask is True, with all-zero weights for a row with no True.",
    cases=_softmax_cases,
    reference=_reference_masked_softmax,
    mistakes=[
        Mistake("a row with no allowed key gives NaN: the softmax of all -inf is 0/0. Set such rows to "
                "zero: weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).",
                _softmax_variant()),
        Mistake("a fully masked row gets uniform weights, which is what a finite fill such as -1e9 "
                "gives; a query with nothing to attend to must get all-zero weights.",
                _softmax_variant(fill=-1e9)),
        Mistake("a fully masked row gets uniform weights, which is what a finite fill such as -1e9 "
                "gives; a query with nothing to attend to must get all-zero weights.",
                _softmax_variant(fill=-1e4)),
        Mistake("your mask is applied the wrong way round: True means 'may attend'; fill where the "
                "mask is False (~mask).",
                _softmax_variant(invert=True, zero_empty=True)),
        Mistake("masked with -100 instead of -inf: when the real scores are below -100, the masked "
                "keys win the softmax. Fill with float('-inf').",
                _softmax_variant(fill=-100.0, zero_empty=True)),
    ],
)


def check_masked_softmax(function, device=None):
    """Check a softmax over the last axis restricted to where the mask is True.

    Check ``function(scores, mask) -> weights`` (same shape as scores): the softmax over the last
    axis restricted to mask == True, and all zeros on a row where the mask has no True.
    Inputs on the CPU unless ``device`` is given; the output is moved to the CPU."""
    return run(MASKED_SOFTMAX, function, device)


# ---------------------------------------------------------------------------------------------

STUBS = {
    "attention": '''def attention(query, key, value):
    """query (..., n_q, d_k), key (..., n_k, d_k), value (..., n_k, d_v) -> (output, weights)."""
    # Your code here (3 lines): scores, softmax, weighted sum of the values.
    raise NotImplementedError
''',
    "masked_attention": '''def masked_attention(query, key, value, mask):
    """As attention, but keys where the boolean mask is False get weight 0."""
    # Your code here (4 lines).
    raise NotImplementedError
''',
    "masked_softmax": '''def masked_softmax(scores, mask):
    """Softmax over the last axis where mask is True; a row with no True gets all zeros."""
    # Your code here (3 lines).
    raise NotImplementedError
''',
}

SOLUTIONS = {
    "attention": '''import math

import torch


def attention(query, key, value):
    """query (..., n_q, d_k), key (..., n_k, d_k), value (..., n_k, d_v) -> (output, weights)."""
    # (..., n_q, n_k)
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    weights = torch.softmax(scores, dim=-1)  # each query's weights sum to 1
    return weights @ value, weights  # (..., n_q, d_v), (..., n_q, n_k)
''',
    "masked_attention": '''import math

import torch


def masked_attention(query, key, value, mask):
    """As attention, but keys where the boolean mask is False get weight 0."""
    # (..., n_q, n_k)
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    scores = scores.masked_fill(~mask, float("-inf"))  # forbidden keys: e^-inf = 0
    weights = torch.softmax(scores, dim=-1)  # (..., n_q, n_k)
    return weights @ value, weights  # (..., n_q, d_v), (..., n_q, n_k)
''',
    "masked_softmax": '''import torch


def masked_softmax(scores, mask):
    """Softmax over the last axis where mask is True; a row with no True gets all zeros."""
    # NaN on empty rows
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    nothing_allowed = ~mask.any(dim=-1, keepdim=True)  # (..., 1)
    return weights.masked_fill(nothing_allowed, 0.0)
''',
}

CHECKERS = {
    "attention": check_attention,
    "masked_attention": check_masked_attention,
    "masked_softmax": check_masked_softmax,
}

QUESTION = "Why are the scores divided by sqrt(d_k), and what goes wrong without it when d_k is large?"
ANSWER = (
    "If the components of a query and a key are independent with mean 0 and variance 1, their dot "
    "product is a sum of d_k such products and has variance d_k. Dividing by sqrt(d_k) brings the "
    "scores back to variance 1 whatever the head size. Without it, at d_k = 64 the scores spread about "
    "8 times wider, the softmax puts almost all the weight on one key (it saturates), and its gradient, "
    "which is proportional to the weights times (1 - weights), nearly vanishes, so the queries and keys "
    "learn slowly. The source notes say it balances the variance, too large when q and k are "
    "multiplied: that is the reason."
)
