# This file is generated from book/04_add_and_norm.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Layer normalization and the residual sublayer connection.

Written in chapter 4, "Add & Norm".
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from transformer_book.validation import (
    check_dropout,
    check_features,
    check_positive,
    check_tensor,
)


class LayerNorm(nn.Module):
    """Normalize each token's features to mean 0 and variance 1, then scale and shift.

    gamma scales and beta shifts each feature. (..., d_model) -> (..., d_model).
    Biased variance and eps inside the square root, statistics in at least float32:
    the same function as nn.LayerNorm(d_model, eps).
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        check_positive(d_model=d_model)
        if (
            isinstance(eps, bool)
            or not isinstance(eps, (int, float))
            or not 0 <= eps < float("inf")
        ):
            raise ValueError(f"eps must be a non-negative number; got eps={eps!r}")
        self.d_model = d_model
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))  # scale, learned
        self.beta = nn.Parameter(torch.zeros(d_model))  # shift, learned

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # An integer tensor would be normalized in float32, then truncated back to
        # integers: refused, with its dtype named.
        check_features("x", x, self.d_model, self.gamma.dtype)
        # paper_layer_norm's five lines in one fused kernel: the same biased variance
        # and eps inside the root, the statistics kept in float32 for float16 inputs
        # (where eps = 1e-5 is barely representable), one pass over the data instead
        # of nine elementwise operations.
        return F.layer_norm(x, (self.d_model,), self.gamma, self.beta, self.eps)


class SublayerConnection(nn.Module):
    """A residual connection around a sublayer, with a post- or pre-norm.

    A residual connection around a sublayer, with layer norm after it (post-norm)
    or before it (pre-norm).

    post-norm (the paper, norm_first=False):  LayerNorm(x + Dropout(sublayer(x)))
    pre-norm (norm_first=True):               x + Dropout(sublayer(LayerNorm(x)))
    A stack of pre-norm sublayers needs a final LayerNorm; a post-norm stack's output
    is normalized already.
    ``sublayer`` maps a (..., d_model) tensor to a tensor of the same shape.
    """

    def __init__(
        self,
        d_model: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        eps: float = 1e-5,
    ):
        super().__init__()
        check_dropout(dropout)
        self.norm = LayerNorm(d_model, eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(
        self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        check_tensor("x", x, floating=True)
        if self.norm_first:
            # (..., d_model)
            return x + self.dropout(self._checked(sublayer(self.norm(x)), x))
        # (..., d_model)
        return self.norm(x + self.dropout(self._checked(sublayer(x), x)))

    @staticmethod
    def _checked(update, x: torch.Tensor) -> torch.Tensor:
        # The residual addition would silently broadcast a (batch, 1, d_model) update,
        # and a tuple (what MultiHeadAttention returns) would fail with an unhelpful
        # TypeError: name the problem instead.
        if isinstance(update, tuple):
            raise TypeError(
                "the sublayer returned a tuple; pass a function returning one tensor, "
                "e.g. lambda x: attention(x, x, x)[0]"
            )
        if update.shape != x.shape:
            raise ValueError(
                f"the sublayer must return its input's shape {tuple(x.shape)} "
                "for the residual addition; "
                f"got {tuple(update.shape)}"
            )
        return update

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"
