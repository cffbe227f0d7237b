# This file is generated from book/02_scaled_dot_product_attention.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Scaled dot-product attention (chapter 2, "Scaled dot-product attention").

softmax(Q K^T / sqrt(d_k)) V, with an optional boolean mask (True = may attend, as in
torch.nn.functional.scaled_dot_product_attention and the opposite of
torch.nn.MultiheadAttention) and optional dropout on the weights. The weights are
returned with the output, for inspection and charts.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from transformer_book.validation import check_tensor


def check_mask(mask: torch.Tensor, scores_shape: torch.Size) -> None:
    """Check that a mask is boolean and broadcasts to the attention scores.

    Raise a ValueError naming the shapes unless ``mask`` is boolean and broadcasts to
    the scores.

    Only boolean masks are accepted: an integer 0/1 mask or an additive float mask
    (0 and -inf) would be read with a meaning we can only guess, and a wrong guess
    silently inverts the mask.
    """
    check_tensor("mask", mask)
    if mask.dtype != torch.bool:
        raise ValueError(
            f"attention masks are boolean (True = may attend); got dtype {mask.dtype}"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != scores_shape:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention "
            f"scores of shape {tuple(scores_shape)} (..., queries, keys)"
        )


def check_dropout_module(dropout: object) -> None:
    """Check that ``dropout`` is a dropout module or None.

    Raise a TypeError unless ``dropout`` is a module (an nn.Dropout) or None; a
    probability such as 0.1 would fail only when called, as "'float' object is not
    callable"."""
    if dropout is not None and not isinstance(dropout, nn.Module):
        raise TypeError(
            "dropout takes a module such as nn.Dropout(0.1) (or None); got "
            f"{type(dropout).__name__} {dropout!r}"
        )


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: nn.Module | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, returning (output, attention weights).

    query (..., queries, d_k), key (..., keys, d_k), value (..., keys, d_v)
    -> output (..., queries, d_v), weights (..., queries, keys).
    ``mask`` is boolean and broadcasts to (..., queries, keys): True means "may attend"
    (as in F.scaled_dot_product_attention; the opposite of nn.MultiheadAttention).
    A query with nothing to attend to gets all-zero weights and a zero output, not NaN.
    ``dropout`` (e.g. an nn.Dropout) is applied to the weights. ``scale`` replaces
    1/sqrt(d_k) (chapter 11's ablation sets it to 1: no scaling).
    """
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        check_tensor(
            name,
            tensor,
            floating=True,
            dtype=None if name == "query" else query.dtype,
            like="the query",
        )
    if query.size(-1) != key.size(-1):
        raise ValueError(
            "queries and keys must have the same feature size d_k; got "
            f"{query.size(-1)} and {key.size(-1)}"
        )
    if key.size(-2) != value.size(-2):
        raise ValueError(
            f"every key needs a value; got {key.size(-2)} keys and {value.size(-2)} "
            "values"
        )
    check_dropout_module(dropout)
    if scale is None:
        scale = 1.0 / math.sqrt(query.size(-1))
    scores = (query * scale) @ key.transpose(-2, -1)  # (..., queries, keys)
    if mask is not None:
        check_mask(mask, scores.shape)
        # forbidden keys: e^-inf = 0 after the softmax
        scores = scores.masked_fill(~mask, float("-inf"))
    # (..., queries, keys), each row sums to 1
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # A fully masked row is the softmax of all -inf, which is NaN.
        # It attends to nothing: weights 0.
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ value, weights  # (..., queries, d_v), (..., queries, keys)
