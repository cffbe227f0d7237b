# This file is generated from book/05_feed_forward.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""The position-wise feed-forward network.

Written in chapter 5, "Position-wise feed-forward network".
"""

from __future__ import annotations

import torch
from torch import nn

from transformer_book.validation import check_dropout, check_features, check_positive


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied to every position alike.

    Each position is transformed separately and identically: (..., d_model) ->
    (..., d_model), through a hidden layer of d_ff features (4 * d_model in the paper).
    ``expand`` holds W1 and b1, ``contract`` holds W2 and b2; dropout acts on the
    hidden activations, as in nn.TransformerEncoderLayer.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        check_dropout(dropout)
        check_positive(d_model=d_model, d_ff=d_ff)
        self.d_model = d_model
        self.d_ff = d_ff
        self.expand = nn.Linear(d_model, d_ff)  # W1, b1
        self.contract = nn.Linear(d_ff, d_model)  # W2, b2
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_features("x", x, self.d_model, self.expand.weight.dtype)
        hidden = torch.relu(self.expand(x))  # (..., d_ff)
        return self.contract(self.dropout(hidden))  # (..., d_model)
