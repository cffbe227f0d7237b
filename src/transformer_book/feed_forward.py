# This file is generated from book/05_feed_forward.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""The position-wise feed-forward network.

Written in chapter 5, "Position-wise feed-forward network".
"""

from __future__ import annotations

import torch
from torch import nn

from transformer_book.validation import check_dropout, check_tensor


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
        if d_model <= 0 or d_ff <= 0:
            raise ValueError(
                f"d_model and d_ff must be positive; got d_model={d_model}, d_ff={d_ff}"
            )
        self.d_model = d_model
        self.d_ff = d_ff
        self.expand = nn.Linear(d_model, d_ff)  # W1, b1
        self.contract = nn.Linear(d_ff, d_model)  # W2, b2
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor("x", x, floating=True, dtype=self.expand.weight.dtype)
        if x.dim() == 0 or x.size(-1) != self.d_model:
            raise ValueError(
                f"expected a last dimension of d_model={self.d_model}; "
                f"got shape {tuple(x.shape)}"
            )
        hidden = torch.relu(self.expand(x))  # (..., d_ff)
        return self.contract(self.dropout(hidden))  # (..., d_model)
