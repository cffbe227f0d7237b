# This file is generated from book/06_masking.ipynb by tools/export_package.py. Do not edit it by hand:
# change the chapter, re-execute it, and run `python tools/export_package.py`.

"""Padding and look-ahead masks (chapter 6, "Masking").

The convention everywhere in this package: a mask is a boolean tensor, and True means
"may attend" (the same as F.scaled_dot_product_attention, and the opposite of
nn.MultiheadAttention).
"""

from __future__ import annotations

import torch

from transformer_book.validation import check_tensor


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(batch, seq) token ids -> (batch, 1, seq): True at real tokens, False at padding.

    The middle axis of size 1 broadcasts over the queries: every query may look at
    every real key.
    """
    check_tensor("tokens", tokens)
    if tokens.dim() != 2:
        raise ValueError(
            f"tokens must have shape (batch, seq); got shape {tuple(tokens.shape)}"
        )
    if tokens.is_floating_point() or tokens.is_complex():
        raise ValueError(f"tokens must be integer ids; got dtype {tokens.dtype}")
    return (tokens != pad_id).unsqueeze(1)  # (batch, 1, seq)


def subsequent_mask(
    size: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """Build the (1, size, size) mask that hides every later position.

    (1, size, size): True on and below the diagonal, so position i may attend to
    positions 0..i.

    The leading axis of size 1 broadcasts over the batch: every sentence gets the same
    triangle.
    """
    if size < 0:  # 0 is an empty sequence, and gets an empty mask
        raise ValueError(f"size must be a sequence length, 0 or more; got size={size}")
    # (1, size, size)
    return torch.ones(1, size, size, dtype=torch.bool, device=device).tril()


def target_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Build the decoder's mask, hiding padding keys and future positions.

    (batch, seq) target ids -> (batch, seq, seq): no padding keys and no future
    positions.

    (batch, 1, seq) & (1, seq, seq) broadcasts to (batch, seq, seq).
    """
    no_future = subsequent_mask(tokens.size(1), tokens.device)  # (1, seq, seq)
    return padding_mask(tokens, pad_id) & no_future
