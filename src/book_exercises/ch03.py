"""Chapter 3 exercises: multi-head attention.

    from book_exercises import check
    check(split_heads, device=device)

Each check calls the reader's function on CPU tensors and modules (pass ``device=`` to move them)
and compares its output, moved to the CPU, with transformer_book.MultiHeadAttention.
"""

from __future__ import annotations

import math

import torch

from book_exercises.core import Case, Mistake, exercise, randn
from transformer_book import MultiHeadAttention, scaled_dot_product_attention

# ---------------------------------------------------------------------------------------------
# Exercise 1: split the features into heads


def _split_cases():
    return [
        Case((randn(2, 5, 8, seed=30), 2), "x (2, 5, 8), 2 heads"),
        Case((randn(1, 3, 12, seed=31), 3), "x (1, 3, 12), 3 heads"),
        Case((randn(3, 4, 6, seed=32), 1), "one head"),
        Case((randn(2, 4, 8, seed=33), 4), "x (2, 4, 8), 4 heads (seq == heads)"),
    ]


@exercise(
    cases=_split_cases,
    mistakes=[
        Mistake(
            "you reshaped straight to (batch, heads, seq, d_k): that cuts the sequence into "
            "pieces instead of the features. View as (batch, seq, heads, d_k), then "
            "transpose(1, 2).",
            lambda x, h: x.reshape(x.size(0), h, x.size(1), x.size(2) // h),
        ),
        Mistake(
            "head i must get the contiguous block of features i*d_k ... (i+1)*d_k - 1, not every "
            "heads-th feature: view as (batch, seq, heads, d_k), not (batch, seq, d_k, heads).",
            lambda x, h: x.reshape(x.size(0), x.size(1), x.size(2) // h, h).permute(0, 3, 1, 2),
        ),
        Mistake(
            "you split the features but left the heads axis after the sequence axis: "
            "add .transpose(1, 2) to get (batch, heads, seq, d_k).",
            lambda x, h: x.reshape(x.size(0), x.size(1), h, x.size(2) // h),
        ),
    ],
)
def split_heads(x, heads):
    """(batch, seq, d_model) -> (batch, heads, seq, d_k)."""
    return MultiHeadAttention(x.size(-1), heads).split_heads(x)  # (batch, heads, seq, d_k)


# ---------------------------------------------------------------------------------------------
# Exercise 2: merge the heads back


def _merge_cases():
    return [
        Case((randn(2, 2, 5, 4, seed=34),), "x (2, 2, 5, 4)"),
        Case((randn(1, 3, 2, 4, seed=35),), "x (1, 3, 2, 4)"),
        Case((randn(2, 4, 4, 2, seed=36),), "x (2, 4, 4, 2) (seq == heads)"),
    ]


@exercise(
    cases=_merge_cases,
    mistakes=[
        Mistake(
            "you reshaped without first moving the heads axis back behind the sequence axis: "
            "transpose(1, 2), then reshape to (batch, seq, heads * d_k).",
            lambda x: x.reshape(x.size(0), x.size(2), x.size(1) * x.size(3)),
        ),
        Mistake(
            "you interleaved the heads feature by feature; the concatenation puts head 0's d_k "
            "features first, then head 1's: transpose(1, 2) (not a permute that moves d_k "
            "before the heads).",
            lambda x: x.permute(0, 2, 3, 1).reshape(x.size(0), x.size(2), -1),
        ),
        Mistake(
            "after transpose(1, 2) the tensor is not contiguous, so .view fails: use "
            ".reshape(...) or .contiguous().view(...).",
            lambda x: x.transpose(1, 2).view(x.size(0), x.size(2), -1),
        ),
    ],
)
def merge_heads(x):
    """(batch, heads, seq, d_k) -> (batch, seq, heads * d_k), the concatenation of the heads."""
    heads, d_k = x.size(1), x.size(3)
    return MultiHeadAttention(heads * d_k, heads).merge_heads(x)  # (batch, seq, d_model)


# ---------------------------------------------------------------------------------------------
# Exercise 3: the whole multi-head attention, with the projections of a given layer


def _layer(d_model, heads, seed):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MultiHeadAttention(d_model, heads).eval()


def _mha_variant(scale="d_k", output_proj=True, unsqueeze_mask=True, split=True, merge="reshape"):
    def compute(layer, query, key, value, mask=None):
        heads = layer.heads if split else 1
        batch, d_model = query.size(0), layer.d_model

        def to_heads(x):  # (batch, seq, d_model) -> (batch, heads, seq, d_model / heads)
            return x.view(batch, x.size(1), heads, d_model // heads).transpose(1, 2)

        queries = to_heads(layer.query_proj(query))
        keys, values = to_heads(layer.key_proj(key)), to_heads(layer.value_proj(value))
        if mask is not None and unsqueeze_mask:
            mask = mask.unsqueeze(1)
        size = d_model if scale == "d_model" else d_model // heads
        attended, _ = scaled_dot_product_attention(queries, keys, values, mask, scale=1 / math.sqrt(size))
        merged = getattr(attended.transpose(1, 2), merge)(batch, query.size(1), d_model)
        return layer.output_proj(merged) if output_proj else merged

    return compute


def _mha_cases():
    padding = torch.ones(4, 1, 6, dtype=torch.bool)
    padding[1, :, 3:] = False  # sentence 1 has 3 real tokens
    padding[3, :, 5:] = False
    source = randn(4, 6, 16, seed=37)
    return [
        Case(
            (_layer(16, 4, 1), randn(2, 5, 16, seed=38), randn(2, 5, 16, seed=38), randn(2, 5, 16, seed=38)),
            "self-attention, 4 heads, no mask",
        ),
        Case(
            (_layer(16, 4, 2), randn(4, 3, 16, seed=39), source, source, padding),
            "cross-attention, batch 4 == heads 4, a (batch, 1, keys) padding mask",
        ),
        Case(
            (_layer(12, 3, 3), randn(2, 4, 12, seed=40), randn(2, 7, 12, seed=41), randn(2, 7, 12, seed=42)),
            "3 heads, 4 queries, 7 keys",
        ),
    ]


@exercise(
    cases=_mha_cases,
    mistakes=[
        Mistake(
            "the output projection W^O is missing: apply layer.output_proj to the merged heads.",
            _mha_variant(output_proj=False),
        ),
        Mistake(
            "your (batch, 1, keys) mask was not given a heads axis: mask.unsqueeze(1) makes it "
            "(batch, 1, 1, keys). Without it broadcasting lines the batch axis up with the heads "
            "axis (the source notes' w_q/w_concat version): an error, or silently wrong when "
            "batch == heads.",
            _mha_variant(unsqueeze_mask=False),
        ),
        Mistake(
            "each head's scores must be divided by sqrt(d_k) = sqrt(d_model / heads), not sqrt(d_model).",
            _mha_variant(scale="d_model"),
        ),
        Mistake(
            "you computed one attention over all d_model features; split the projections into "
            "heads of d_k = d_model / heads features first.",
            _mha_variant(split=False),
        ),
        Mistake(
            "after transpose(1, 2) the tensor is not contiguous, so .view fails: use "
            ".reshape(...) or .contiguous().view(...).",
            _mha_variant(merge="view"),
        ),
    ],
)
def multi_head_attention(layer, query, key, value, mask=None):
    """Project, split into heads, attend, merge, project with W^O."""
    return layer(query, key, value, mask)[0]  # (batch, queries, d_model)
