# This file is generated from book/01_positional_encoding.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Token embeddings and sinusoidal positional encodings.

Written in chapter 1, "Positional encoding".
"""

from __future__ import annotations

import math

import torch
from torch import nn

from transformer_book.validation import (
    check_dropout,
    check_positive,
    check_tensor,
    check_token_ids,
)


def sinusoidal_table(max_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The paper's sinusoidal encodings for positions 0 .. max_len - 1.

    Returns a (max_len, d_model) tensor with PE[pos, 2i] = sin(pos * w_i) and
    PE[pos, 2i + 1] = cos(pos * w_i), where w_i = base ** (-2i / d_model): dimensions
    2i and 2i + 1 share one frequency, and the frequencies fall geometrically from 1
    to 1/base.
    """
    if d_model <= 0 or d_model % 2 != 0:
        raise ValueError(
            "sinusoidal encodings pair each sine with a cosine, so d_model must be "
            f"a positive even number; got d_model={d_model}"
        )
    if max_len <= 0:
        raise ValueError(
            f"max_len must be a positive number of positions; got max_len={max_len}"
        )
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    # (d_model/2,) the values 2i
    pair_start = torch.arange(0, d_model, 2, dtype=torch.float64)
    # (d_model/2,) w_i
    frequency = torch.exp(pair_start * (-math.log(base) / d_model))
    angle = position * frequency  # (max_len, d_model/2)
    table = torch.empty(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)  # even dimensions
    table[:, 1::2] = torch.cos(angle)  # odd dimensions
    return table.float()  # (max_len, d_model)


class PositionalEncoding(nn.Module):
    """Adds sinusoidal position information to embeddings, then applies dropout.

    Input and output: (batch, seq, d_model). The table is a non-persistent buffer: it
    follows ``.to(device)``, is never trained, and is not saved in the state dict.
    """

    def __init__(
        self,
        d_model: int,
        max_len: int = 5000,
        dropout: float = 0.0,
        base: float = 10000.0,
    ):
        super().__init__()
        check_dropout(dropout)
        self.d_model = d_model
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "table", sinusoidal_table(max_len, d_model, base), persistent=False
        )

    def forward(self, embeddings: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Encodes the embeddings as positions offset, offset + 1, ..."""
        self._check_embeddings(embeddings)
        seq_len = embeddings.size(1)
        if offset < 0 or offset + seq_len > self.max_len:
            at = f" at offset {offset}" if offset else ""
            raise ValueError(
                f"a sequence of length {seq_len}{at} does not fit the encoding table "
                f"of max_len={self.max_len}; build PositionalEncoding with a larger "
                "max_len"
            )
        # (seq, d_model)
        positions = self.table[offset : offset + seq_len].to(embeddings.dtype)
        # (batch, seq, d_model): broadcast over the batch
        return self.dropout(embeddings + positions)

    def _check_embeddings(self, embeddings: torch.Tensor) -> None:
        """Raise a ValueError naming the shape unless ``embeddings`` is a floating
        (batch, seq, d_model) tensor."""
        check_tensor("embeddings", embeddings, floating=True)
        if embeddings.dim() != 3 or embeddings.size(-1) != self.d_model:
            raise ValueError(
                f"expected embeddings of shape (batch, seq, d_model={self.d_model}); "
                f"got shape {tuple(embeddings.shape)}"
            )


class Embeddings(nn.Module):
    """Token ids -> vectors, multiplied by sqrt(d_model) as in the paper's section 3.4.

    (batch, seq) integer ids -> (batch, seq, d_model).
    """

    def __init__(self, vocab_size: int, d_model: int, padding_idx: int | None = None):
        super().__init__()
        check_positive(vocab_size=vocab_size, d_model=d_model)
        self.d_model = d_model
        self.vocab_size = vocab_size
        self.lookup = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # An id past the table would be an IndexError on the CPU,
        # and a device-side assert on a GPU.
        check_token_ids("tokens", tokens, self.vocab_size)
        return self.lookup(tokens) * math.sqrt(self.d_model)  # (batch, seq, d_model)
